"""kaflite's assignors for aiokafka consumers (Range, RoundRobin, Sticky — eager, as aiokafka is).

    from kaflite.clients.aiokafka import kaflite_assignor
    AIOKafkaConsumer(..., partition_assignment_strategy=(kaflite_assignor("sticky"),))

aiokafka calls assignors as classes (classmethods) and keeps their state on the class, so
`kaflite_assignor()` builds a fresh class per consumer: no state is shared between consumers. The
subscription is ConsumerProtocol v0 (aiokafka's format); for "sticky" the user data is Kafka's sticky
user data (previous assignment + generation), so Java, librdkafka and kafka-python sticky members read
it. aiokafka does not tell assignors the group generation: we announce -1 ("unknown") as Kafka does for
a member without one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata

from kaflite.assign import Subscription, TopicPartition, assign_group, get_assignor
from kaflite.assign.userdata import encode_sticky_user_data

__all__ = ["kaflite_assignor", "RangeAssignor", "RoundRobinAssignor", "StickyAssignor"]

_EAGER = ("range", "roundrobin", "sticky")


class KafliteAssignor(AbstractPartitionAssignor):
    strategy: ClassVar[str] = "range"
    name: ClassVar[str] = "range"  # type: ignore[misc]
    version: ClassVar[int] = 0
    member_assignment: ClassVar[list[TopicPartition]] = []

    @classmethod
    def metadata(cls, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        user_data = b""
        if cls.strategy == "sticky" and cls.member_assignment:
            user_data = encode_sticky_user_data(cls.member_assignment, None)
        return ConsumerProtocolMemberMetadata(cls.version, sorted(topics), user_data)

    @classmethod
    def on_assignment(cls, assignment: ConsumerProtocolMemberAssignment) -> None:
        cls.member_assignment = [TopicPartition(tp.topic, tp.partition) for tp in assignment.partitions()]

    @classmethod
    def assign(cls, cluster: Any, members: Mapping[str, Any]) -> dict[str, ConsumerProtocolMemberAssignment]:
        subscriptions = {
            member_id: Subscription(topics=list(md.subscription),
                                    user_data=bytes(md.user_data) if md.user_data else None)
            for member_id, md in members.items()
        }
        partitions_per_topic: dict[str, int] = {}
        for topic in {t for s in subscriptions.values() for t in s.topics}:
            parts = cluster.partitions_for_topic(topic)
            if parts:
                partitions_per_topic[topic] = max(parts) + 1
        result = assign_group(get_assignor(cls.strategy), partitions_per_topic, subscriptions)
        out: dict[str, ConsumerProtocolMemberAssignment] = {}
        for member_id in subscriptions:
            by_topic: dict[str, list[int]] = defaultdict(list)
            for tp in result.get(member_id, []):
                by_topic[tp.topic].append(tp.partition)
            out[member_id] = ConsumerProtocolMemberAssignment(cls.version, sorted(by_topic.items()), b"")
        return out


def kaflite_assignor(strategy: str) -> type[KafliteAssignor]:
    """A fresh assignor class (own state) for one aiokafka consumer: "range", "roundrobin" or "sticky"."""
    if strategy not in _EAGER:
        raise ValueError(f"aiokafka supports eager rebalancing only; strategy must be one of {', '.join(_EAGER)}, "
                         f"got {strategy!r}")
    return type(f"Kaflite{strategy.title()}Assignor", (KafliteAssignor,),
                {"strategy": strategy, "name": strategy, "member_assignment": []})


# Convenience classes for a single consumer per process; prefer kaflite_assignor() per consumer.
RangeAssignor = kaflite_assignor("range")
RoundRobinAssignor = kaflite_assignor("roundrobin")
StickyAssignor = kaflite_assignor("sticky")
