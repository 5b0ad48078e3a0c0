"""kaflite's assignors and partitioners for kafka-python (>= 2.0; cooperative needs kafka-python 3).

    from kaflite.clients.kafka_python import StickyAssignor, CooperativeStickyAssignor, JavaPartitioner
    KafkaConsumer(..., partition_assignment_strategy=[CooperativeStickyAssignor])
    KafkaProducer(..., partitioner=JavaPartitioner())

The assignors announce Kafka's protocol names ("range", "roundrobin", "sticky", "cooperative-sticky"),
send ConsumerProtocolSubscription v3 (owned partitions, generation, rack) and, for "sticky", Kafka's
sticky user data — so they can share a group with Java and librdkafka members. The leader's assignment
is computed by `kaflite.assign`, exact to Apache Kafka.

State: each consumer holds its own assignor instance (kafka-python instantiates the class per
consumer); it remembers only this member's last assignment and generation, as Kafka's assignors do.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, ClassVar

from kafka.coordinator.assignors.abstract import AbstractPartitionAssignor, RebalanceProtocol
from kafka.partitioner.abc import Partitioner
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from kaflite.assign import Subscription, TopicPartition, assign_group, get_assignor, partition_for_key
from kaflite.assign.partitioners import PartitionMeta, StickyPartitionCache
from kaflite.assign.userdata import encode_cooperative_user_data, encode_sticky_user_data

__all__ = [
    "RangeAssignor",
    "RoundRobinAssignor",
    "StickyAssignor",
    "CooperativeStickyAssignor",
    "JavaPartitioner",
    "kaflite_assignor",
]

SUBSCRIPTION_VERSION = 3


def _grouped(tps: list[TopicPartition]) -> list[tuple[str, list[int]]]:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in tps:
        by_topic[tp.topic].append(tp.partition)
    return list(by_topic.items())


class KafliteAssignor(AbstractPartitionAssignor):
    """kafka-python assignor backed by `kaflite.assign.get_assignor(strategy)`."""

    strategy: ClassVar[str] = "range"
    name: ClassVar[str] = "range"  # type: ignore[misc]
    rack_id: ClassVar[str | None] = None
    version = SUBSCRIPTION_VERSION

    def __init__(self) -> None:
        self._owned: list[TopicPartition] = []
        self._generation = -1

    def supported_protocols(self) -> list[RebalanceProtocol]:
        if self.strategy == "cooperative-sticky":
            return [RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER]
        return [RebalanceProtocol.EAGER]

    # -- member side: what this member sends in JoinGroup --------------------------------------------
    def metadata(self, topics: Any) -> Any:
        owned = self._owned if self.strategy == "cooperative-sticky" else []
        if self.strategy == "sticky":
            user_data: bytes | None = encode_sticky_user_data(self._owned, self._generation) if self._owned else None
        elif self.strategy == "cooperative-sticky":
            user_data = encode_cooperative_user_data(self._generation)
        else:
            user_data = None
        sub_tp = ConsumerProtocolSubscription.TopicPartition
        return ConsumerProtocolSubscription(
            version=self.version,
            topics=sorted(topics),
            user_data=user_data,
            owned_partitions=[sub_tp(topic=t, partitions=ps) for t, ps in _grouped(owned)],
            generation_id=self._generation if self.strategy == "cooperative-sticky" else -1,
            rack_id=self.rack_id,
        )

    def on_assignment(self, assignment: Any, generation: int) -> None:
        self._owned = [TopicPartition(tp.topic, tp.partition) for tp in assignment.partitions()]
        self._generation = generation

    # -- leader side: the group's assignment --------------------------------------------------------
    def assign(self, cluster: Any, members: Any) -> dict[str, Any]:
        subscriptions: dict[str, Subscription] = {}
        for member in members:
            md = member.metadata
            owned = [TopicPartition(tp.topic, p) for tp in (getattr(md, "owned_partitions", None) or ())
                     for p in tp.partitions]
            generation = getattr(md, "generation_id", -1)
            subscriptions[member.member_id] = Subscription(
                topics=list(md.topics),
                owned_partitions=owned,
                generation_id=None if generation is None or generation < 0 else generation,
                group_instance_id=getattr(member, "group_instance_id", None),
                rack_id=getattr(md, "rack_id", None) or None,
                user_data=bytes(md.user_data) if md.user_data else None,
            )
        partitions_per_topic: dict[str, int] = {}
        for topic in {t for s in subscriptions.values() for t in s.topics}:
            parts = cluster.partitions_for_topic(topic)
            if parts:
                partitions_per_topic[topic] = max(parts) + 1
        result = assign_group(get_assignor(self.strategy), partitions_per_topic, subscriptions)
        return {
            member_id: ConsumerProtocolAssignment(self.version, _grouped(result.get(member_id, [])), b"")
            for member_id in subscriptions
        }


def kaflite_assignor(strategy: str, rack: str | None = None) -> type[KafliteAssignor]:
    """An assignor class for `partition_assignment_strategy` (optionally announcing this member's rack)."""
    get_assignor(strategy)  # validates the name
    protocol = {"server-range": "range"}.get(strategy, strategy)
    return type(f"Kaflite{strategy.title().replace('-', '')}Assignor", (KafliteAssignor,),
                {"strategy": strategy, "name": protocol, "rack_id": rack})


RangeAssignor = kaflite_assignor("range")
RoundRobinAssignor = kaflite_assignor("roundrobin")
StickyAssignor = kaflite_assignor("sticky")
CooperativeStickyAssignor = kaflite_assignor("cooperative-sticky")


class JavaPartitioner(Partitioner):
    """The Java client's default partitioning for kafka-python producers: a keyed record goes to
    toPositive(murmur2(key)) % numPartitions over ALL partitions (exactly like Java and the Spark sink);
    an unkeyed record sticks to one available partition until the producer starts a new batch (KIP-480)."""

    def __init__(self) -> None:
        self._sticky = StickyPartitionCache()

    @staticmethod
    def _metas(topic: str, cluster: Any) -> list[PartitionMeta]:
        parts = cluster.partitions_for_topic(topic)
        if not parts:
            raise ValueError(f"Topic {topic} not found in ClusterMetadata")
        available = cluster.available_partitions_for_topic(topic) or set()
        return [PartitionMeta(p, 0 if p in available else None) for p in sorted(parts)]

    def partition(self, topic: str, key: Any, serialized_key: bytes | None, value: Any,
                  serialized_value: bytes | None, cluster: Any) -> int:
        metas = self._metas(topic, cluster)
        if serialized_key is not None:
            return metas[partition_for_key(serialized_key, len(metas))].partition
        return self._sticky.partition(topic, metas)

    def on_new_batch(self, topic: str, cluster: Any, prev_partition: int) -> None:
        self._sticky.next_partition(topic, self._metas(topic, cluster), prev_partition)
