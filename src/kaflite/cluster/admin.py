"""Topic administration on ZooKeeper (Kafka's AdminZkClient + ZkAdminManager): what CreateTopics,
CreatePartitions, DeleteTopics and AlterConfigs write in a cluster. The controller then acts on it.

Rules:
- a new topic is placed over the LIVE brokers (/brokers/ids) with Kafka's assignReplicasToBrokers:
  rack-aware when every broker has a rack, unaware when none has, refused for a mix; -1 partitions or
  replication factor mean `num.partitions` / `default.replication.factor`;
- an explicit replica assignment must number partitions 0..n-1, give each the same number of distinct
  replicas, on live brokers; counts and an assignment together are INVALID_REQUEST (as Kafka);
- a topic name must be legal and must not collide with an existing one once '.' and '_' are confused
  (Kafka's Topic.hasCollision, metrics names);
- the topic's configs are written before its assignment znode, whose creation is what the controller
  acts on (so leaders are elected with the configs in place);
- new partitions start placing at the broker that holds partition 0's first replica, continuing the
  partition ids (Kafka's addPartitions), with partition 0's replication factor; refused while a
  reassignment of the topic runs or when the count does not grow;
- deletion only writes /admin/delete_topics/<t> (a second request for the same topic is not an error);
- `validate_only` checks everything and writes nothing.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kaflite.cluster.metadata import validate_topic_name
from kaflite.cluster.placement import assign_replicas_to_brokers
from kaflite.cluster.zk import KafkaZkClient, StaleZkVersionError, TopicExistsError
from kaflite.cluster.zkdata import TopicAssignment
from kaflite.protocol.errors import ErrorCode, KafkaError

__all__ = ["ZkAdmin", "plan_new_partitions", "plan_new_topic", "validate_replica_assignment"]

Assignment = dict[int, tuple[int, ...]]


def _collides(a: str, b: str) -> bool:
    return a != b and a.replace(".", "_") == b.replace(".", "_")


def validate_replica_assignment(
    assignment: Mapping[int, Sequence[int]], expected_rf: int | None, live: set[int]
) -> None:
    """Kafka's AdminZkClient.validateReplicaAssignment (plus the same replication factor everywhere)."""
    for p, replicas in sorted(assignment.items()):
        if not replicas:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"Cannot have replication factor of 0 for partition id {p}.",
            )
        if len(set(replicas)) != len(replicas):
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"Duplicate brokers not allowed in replica assignment: {', '.join(map(str, replicas))} "
                f"for partition id {p}.",
            )
        if not set(replicas) <= live:
            raise KafkaError(
                ErrorCode.broker_not_available,
                f"Some brokers specified for partition id {p} are not available. Specified brokers: "
                f"{', '.join(map(str, replicas))}, available brokers: {', '.join(map(str, sorted(live)))}.",
            )
    if expected_rf is None:
        sizes = {len(r) for r in assignment.values()}
        if len(sizes) > 1:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment, "All partitions should have the same number of replicas"
            )
        return
    bad = sorted((p, len(r)) for p, r in assignment.items() if len(r) != expected_rf)
    if bad:
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            f"Inconsistent replication factor between partitions, partition 0 has {expected_rf} while partitions "
            f"[{', '.join(str(p) for p, _ in bad)}] have replication factors [{', '.join(str(n) for _, n in bad)}], "
            "respectively.",
        )


def plan_new_topic(
    name: str,
    num_partitions: int,
    replication_factor: int | None,
    assignment: Sequence[Sequence[int]] | Mapping[int, Sequence[int]] | None,
    brokers: Mapping[int, str | None],
    existing_topics: set[str],
    default_partitions: int = 1,
    default_replication_factor: int = 1,
    rng: random.Random | None = None,
) -> Assignment:
    """Where a new topic's replicas go (pure). KafkaError with Kafka's code when it cannot be created."""
    validate_topic_name(name)
    if name in existing_topics:
        raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
    for other in sorted(existing_topics):
        if _collides(name, other):
            raise KafkaError(
                ErrorCode.invalid_topic_exception, f"Topic '{name}' collides with existing topic: {other}"
            )
    if assignment is not None and len(assignment) > 0:
        if num_partitions != -1 or (replication_factor is not None and replication_factor != -1):
            raise KafkaError(
                ErrorCode.invalid_request,
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time.",
            )
        explicit = (
            dict(assignment.items()) if isinstance(assignment, Mapping) else dict(enumerate(assignment))
        )
        if sorted(explicit) != list(range(len(explicit))):
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                "partitions should be a consecutive 0-based integer sequence",
            )
        validate_replica_assignment(explicit, None, set(brokers))
        return {p: tuple(r) for p, r in sorted(explicit.items())}
    n = default_partitions if num_partitions == -1 else num_partitions
    rf = default_replication_factor if replication_factor in (None, -1) else replication_factor
    assert rf is not None
    placed = assign_replicas_to_brokers(n, rf, brokers, rng=rng)
    return {p: tuple(r) for p, r in placed.items()}


def plan_new_partitions(
    name: str,
    existing: Mapping[int, Sequence[int]],
    count: int,
    assignment: Sequence[Sequence[int]] | None,
    brokers: Mapping[int, str | None],
    rng: random.Random | None = None,
) -> Assignment:
    """The replicas of the partitions that grow a topic to `count` (pure; the new ones only)."""
    current = len(existing)
    if count <= current:
        raise KafkaError(
            ErrorCode.invalid_partitions,
            f"The number of partitions for a topic can only be increased. Topic {name} currently has "
            f"{current} partitions, {count} would not be an increase.",
        )
    to_add = count - current
    rf = len(existing[0])
    if assignment is not None:
        if len(assignment) != to_add:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"Increasing the number of partitions by {to_add} but {len(assignment)} assignments provided.",
            )
        proposed = {current + i: tuple(r) for i, r in enumerate(assignment)}
        validate_replica_assignment(proposed, rf, set(brokers))
        return proposed
    ids = sorted(brokers)
    first = existing[0][0]
    start = next((i for i, b in enumerate(ids) if b >= first), 0)
    placed = assign_replicas_to_brokers(
        to_add, rf, brokers, fixed_start_index=start, start_partition_id=current, rng=rng
    )
    return {p: tuple(r) for p, r in placed.items()}


@dataclass(frozen=True)
class TopicSpec:
    """One topic of a CreateTopics request, as `ZkAdmin.create_topics` takes it."""

    name: str
    num_partitions: int
    replication_factor: int | None
    configs: Mapping[str, str]
    assignment: Sequence[Sequence[int]] | None = None
    refusal: KafkaError | None = None  # answered instead of creating, once the placement is valid


class ZkAdmin:
    """CreateTopics / CreatePartitions / DeleteTopics / AlterConfigs for a ZooKeeper cluster."""

    def __init__(
        self,
        zk: KafkaZkClient,
        default_partitions: int = 1,
        default_replication_factor: int = 1,
        rng: random.Random | None = None,
    ) -> None:
        self.zk = zk
        self.default_partitions = default_partitions
        self.default_replication_factor = default_replication_factor
        self.rng = rng

    def _brokers(self) -> dict[int, str | None]:
        return {b: info.rack for b, info in self.zk.get_all_brokers().items()}

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int | None,
        configs: Mapping[str, str],
        assignment: Sequence[Sequence[int]] | None = None,
        *,
        validate_only: bool = False,
        topic_id: uuid.UUID | None = None,
    ) -> TopicAssignment:
        placed = plan_new_topic(
            name,
            num_partitions,
            replication_factor,
            assignment,
            self._brokers(),
            self.zk.get_all_topics(),
            self.default_partitions,
            self.default_replication_factor,
            self.rng,
        )
        result = TopicAssignment(name, placed, topic_id or uuid.uuid4())
        if validate_only:
            return result
        try:
            self.zk.create_topic(result, configs)
        except TopicExistsError:
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.") from None
        return result

    def create_topics(
        self, specs: Sequence[TopicSpec], *, validate_only: bool = False
    ) -> list[TopicAssignment | KafkaError]:
        """CreateTopics of many topics with one read of the brokers, the topics and the topics marked for
        deletion, and one pipelined write for all (`KafkaZkClient.create_topics`): per spec, its assignment
        or its KafkaError, in order. A topic marked for deletion is TOPIC_ALREADY_EXISTS (Kafka's
        AdminZkClient.validateTopicCreate: the name is free only once the controller has deleted it). A
        spec's `refusal` (a config error found by the caller) is answered once its placement is valid, the
        order Kafka checks them in."""
        brokers = self._brokers()
        existing = self.zk.get_all_topics()
        marked = self.zk.get_topics_marked_for_deletion()
        out: list[TopicAssignment | KafkaError] = []
        for spec in specs:
            try:
                if spec.name in marked:
                    raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{spec.name}' is marked for deletion.")
                n = -1 if spec.assignment else spec.num_partitions
                rf = -1 if spec.assignment else spec.replication_factor
                placed = plan_new_topic(spec.name, n, rf, spec.assignment, brokers, existing,
                                        self.default_partitions, self.default_replication_factor, self.rng)
                if spec.refusal is not None:
                    raise spec.refusal
                out.append(TopicAssignment(spec.name, placed, uuid.uuid4()))
                existing = existing | {spec.name}  # a later topic of the same request collides with this one
            except KafkaError as e:
                out.append(e)
        if validate_only:
            return out
        writes = [(a, specs[i].configs) for i, a in enumerate(out) if isinstance(a, TopicAssignment)]
        failed = self.zk.create_topics(writes)
        return [
            KafkaError(ErrorCode.topic_already_exists, f"Topic '{a.topic}' already exists.")
            if isinstance(a, TopicAssignment) and failed.get(a.topic) is not None else a
            for a in out
        ]

    def create_partitions(
        self,
        name: str,
        count: int,
        assignment: Sequence[Sequence[int]] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicAssignment:
        got = self.zk.get_topic_assignment(name)
        if got is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
        current, version = got
        if name in self.zk.get_topics_marked_for_deletion():
            raise KafkaError(ErrorCode.invalid_topic_exception, f"The topic '{name}' is queued for deletion.")
        if current.adding_replicas or current.removing_replicas:
            raise KafkaError(
                ErrorCode.reassignment_in_progress,
                f"A partition reassignment is in progress for the topic '{name}'.",
            )
        new = plan_new_partitions(name, current.partitions, count, assignment, self._brokers(), self.rng)
        result = TopicAssignment(name, {**current.partitions, **new}, current.topic_id)
        if validate_only:
            return result
        try:
            self.zk.set_topic_assignment(result, version)
        except StaleZkVersionError:
            raise KafkaError(
                ErrorCode.invalid_partitions, f"The partitions of '{name}' changed meanwhile; try again."
            ) from None
        return result

    def delete_topic(self, name: str) -> TopicAssignment:
        got = self.zk.get_topic_assignment(name)
        if got is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
        self.zk.mark_topic_for_deletion(name)
        return got[0]

    def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        if self.zk.get_topic_assignment(name) is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
        self.zk.set_entity_config("topics", name, dict(configs))
