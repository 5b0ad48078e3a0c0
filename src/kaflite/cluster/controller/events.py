"""What the controller is told (events) and what it decides (decisions), as plain values.

Events come from ZooKeeper watches (translated by the shell), from brokers (AlterPartition, controlled
shutdown), from admin requests (ElectLeaders) and from timers; decisions are znode writes for the shell
to perform with the controller's epoch guard, plus answers and log lines. Every decision carries the
controller epoch it was made under.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from kaflite.cluster.zkdata import LeaderAndIsr, TopicAssignment
from kaflite.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]


# --- events ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ControllerStartup:
    """This broker won the election with `epoch`: the cluster as read from ZooKeeper (Kafka's
    initializeControllerContext). `states[tp]` is None for a partition without a state znode yet."""

    epoch: int
    live_brokers: Mapping[int, int]  # broker id -> broker epoch (czxid of its registration)
    topics: Mapping[str, TopicAssignment]
    states: Mapping[TopicPartition, LeaderAndIsr | None]
    topics_to_delete: frozenset[str] = frozenset()
    reassignments: Mapping[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    preferred_elections: frozenset[TopicPartition] = frozenset()
    topic_unclean: Mapping[str, bool] = field(
        default_factory=dict
    )  # unclean.leader.election.enable overrides


@dataclass(frozen=True)
class BrokerChange:
    """The live brokers now (children of /brokers/ids with their epochs); a new epoch is a bounce."""

    live_brokers: Mapping[int, int]


@dataclass(frozen=True)
class TopicChange:
    """The topics now in /brokers/topics, with the assignment of each topic new to the controller, and the
    unclean.leader.election.enable override each new topic was created with (its config znode is written
    before its topic znode, and no config-change notification follows a creation)."""

    topics: frozenset[str]
    new_assignments: Mapping[str, TopicAssignment]
    new_unclean: Mapping[str, bool] = field(default_factory=dict)


@dataclass(frozen=True)
class PartitionModifications:
    """A topic's znode changed: its assignment now (partitions added by CreatePartitions)."""

    assignment: TopicAssignment


@dataclass(frozen=True)
class TopicDeletion:
    """Children of /admin/delete_topics."""

    topics: frozenset[str]


@dataclass(frozen=True)
class PartitionReassignment:
    """Target replicas per partition: /admin/reassign_partitions (`from_api` False: every target given,
    refusals are logged and taken out of the znode) or AlterPartitionReassignments (`from_api` True: a
    None target cancels the partition's reassignment; answered with ReassignmentResults, and the
    partitions it names leave the znode, the latest request winning). `allow_replication_factor_change`
    False (AlterPartitionReassignments v1, KIP-860): a target of another size than the partition's
    replica set is refused."""

    moves: Mapping[TopicPartition, tuple[int, ...] | None]
    from_api: bool = False
    allow_replication_factor_change: bool = True


@dataclass(frozen=True)
class ListReassignments:
    """ListPartitionReassignments: the ongoing reassignments of these partitions (None: all of them)."""

    partitions: frozenset[TopicPartition] | None = None


class ElectionType(Enum):
    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True)
class ElectLeaders:
    """ElectLeaders (or /admin/preferred_replica_election when `from_znode`); None: every partition."""

    partitions: frozenset[TopicPartition] | None
    election_type: ElectionType = ElectionType.PREFERRED
    from_znode: bool = False


@dataclass(frozen=True)
class AlterPartition:
    """A leader asks to change its partition's ISR (Kafka's AlterPartition, KIP-497)."""

    broker_id: int
    broker_epoch: int
    partition: TopicPartition
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int  # the state znode version the leader last saw


@dataclass(frozen=True)
class ControlledShutdown:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class TopicUncleanElectionChange:
    """A topic's unclean.leader.election.enable override changed (None: the override was removed)."""

    topic: str
    enabled: bool | None


@dataclass(frozen=True)
class AutoLeaderRebalance:
    """The leader.imbalance.check.interval.seconds timer fired."""


@dataclass(frozen=True)
class WriteOutcome:
    """Partition state writes that found another version (someone else wrote first): their state now."""

    stale: Mapping[TopicPartition, LeaderAndIsr | None]


ControllerEvent = (
    ControllerStartup
    | BrokerChange
    | TopicChange
    | PartitionModifications
    | TopicDeletion
    | PartitionReassignment
    | ListReassignments
    | ElectLeaders
    | AlterPartition
    | ControlledShutdown
    | TopicUncleanElectionChange
    | AutoLeaderRebalance
    | WriteOutcome
)


# --- decisions ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CreatePartitionStates:
    """Create the state znodes of new partitions (they do not exist yet)."""

    controller_epoch: int
    states: Mapping[TopicPartition, LeaderAndIsr]


@dataclass(frozen=True)
class UpdatePartitionStates:
    """Compare-and-set the state znodes: each value's `zk_version` is the version expected NOW;
    a mismatch comes back as a WriteOutcome event."""

    controller_epoch: int
    states: Mapping[TopicPartition, LeaderAndIsr]


@dataclass(frozen=True)
class WriteTopicAssignment:
    """Rewrite /brokers/topics/<t> (a reassignment started or finished)."""

    controller_epoch: int
    assignment: TopicAssignment


@dataclass(frozen=True)
class DeleteTopic:
    """Remove every znode of the topic (assignment, partition states, configs, the deletion marker).
    Brokers delete their logs when they see the topic znode vanish."""

    controller_epoch: int
    topic: str


@dataclass(frozen=True)
class CancelTopicDeletions:
    """Remove these /admin/delete_topics markers only (unknown topics, or delete.topic.enable=false)."""

    controller_epoch: int
    topics: frozenset[str]


@dataclass(frozen=True)
class CompleteReassignments:
    """These partitions' moves are done (or were refused): remove them from /admin/reassign_partitions."""

    controller_epoch: int
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class CompletePreferredElection:
    """Delete /admin/preferred_replica_election."""

    controller_epoch: int


@dataclass(frozen=True)
class ElectionResults:
    """The answer to ElectLeaders: per partition None (elected, or already led by the preferred replica
    for a preferred election) or the error."""

    controller_epoch: int
    results: Mapping[TopicPartition, ErrorCode | None]


@dataclass(frozen=True)
class ReassignmentResults:
    """The answer to AlterPartitionReassignments: per partition (error or None, message or None);
    `error` is a top-level error (NOT_CONTROLLER) that answers for every partition."""

    controller_epoch: int
    results: Mapping[TopicPartition, tuple[ErrorCode | None, str | None]]
    error: ErrorCode | None = None


@dataclass(frozen=True)
class OngoingReassignments:
    """The answer to ListPartitionReassignments: per partition being reassigned (replicas, adding,
    removing), as Kafka lists them; `error` is a top-level error (NOT_CONTROLLER)."""

    controller_epoch: int
    reassignments: Mapping[TopicPartition, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]
    error: ErrorCode | None = None


@dataclass(frozen=True)
class AlterPartitionResult:
    controller_epoch: int
    partition: TopicPartition
    error: ErrorCode | None
    state: LeaderAndIsr | None


@dataclass(frozen=True)
class ControlledShutdownResult:
    """Partitions of several replicas the broker still leads (no other live in-sync replica to take over;
    those of one replica or of a topic being deleted are not counted, as in Kafka)."""

    controller_epoch: int
    broker_id: int
    remaining: frozenset[TopicPartition]


@dataclass(frozen=True)
class Log:
    """A line for the controller's log (unclean elections, partitions left offline, refused requests)."""

    controller_epoch: int
    level: str  # "info" | "warning" | "error"
    message: str


Decision = (
    CreatePartitionStates
    | UpdatePartitionStates
    | WriteTopicAssignment
    | DeleteTopic
    | CancelTopicDeletions
    | CompleteReassignments
    | CompletePreferredElection
    | ElectionResults
    | ReassignmentResults
    | OngoingReassignments
    | AlterPartitionResult
    | ControlledShutdownResult
    | Log
)
