"""The state of KIP-848 consumer groups: groups, members and their assignments (plain data).

It has its own module so that both the group logic (consumer_group) and the record codec
(consumer_group_records) use it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "LEAVE_EPOCH",
    "SERVER_ASSIGNORS",
    "STABLE",
    "STATIC_LEAVE_EPOCH",
    "UNRELEASED",
    "UNREVOKED",
    "Assignment",
    "ClassicMemberMetadata",
    "ConsumerGroup",
    "ConsumerMember",
]

Assignment = dict[str, frozenset[int]]  # topic -> partitions

SERVER_ASSIGNORS = ("uniform", "range")  # group.remote.assignor names (kaflite.assign.get_server_assignor)
STABLE, UNREVOKED, UNRELEASED = "STABLE", "UNREVOKED_PARTITIONS", "UNRELEASED_PARTITIONS"
LEAVE_EPOCH, STATIC_LEAVE_EPOCH = -1, -2


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a member that still speaks the classic protocol (JoinGroup / SyncGroup / Heartbeat) brought
    with its JoinGroup (Kafka's ConsumerGroupMemberMetadataValue.ClassicMemberMetadata)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (name, subscription metadata), in the member's order


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    subscribed: tuple[str, ...] = ()
    rack_id: str | None = None  # the client's client.rack (ConsumerGroupDescribe shows it)
    server_assignor: str | None = None  # the assignor the member asked for (persisted with it)
    subscribed_regex: str | None = None  # SubscribedTopicRegex (None: no expression)
    member_epoch: int = 0
    previous_epoch: int = -1
    state: str = STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    last_sent: Assignment | None = None
    classic: ClassicMemberMetadata | None = None  # set: the member uses the classic protocol

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    owners: dict[tuple[str, int], str] = field(default_factory=dict)  # who holds a partition now
    topic_snapshot: dict[str, int] = field(default_factory=dict)  # partition counts the target used
    assignor: str = "uniform"

    @property
    def state(self) -> str:
        """Kafka's ConsumerGroup states: Empty, Assigning, Reconciling, Stable."""
        if not self.members:
            return "Empty"
        if self.assignment_epoch < self.group_epoch:
            return "Assigning"
        if any(mb.member_epoch != self.assignment_epoch or mb.state != STABLE for mb in self.members.values()):
            return "Reconciling"
        return "Stable"
