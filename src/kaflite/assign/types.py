"""The values assignors work on: TopicPartition, a member's Subscription, partition replica racks.

Mapping order matters: where Kafka iterates a Java map it received (partitionsPerTopic, subscriptions),
kaflite iterates the Python mapping in its insertion order, so a caller reproducing a Java run passes
its maps in Java's iteration order (the reference vectors store them that way). `assign_group` builds
that order itself from members in join order, as Kafka's group leader does (kaflite.assign.javautil).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import NamedTuple

from kaflite.assign.javautil import java_string_hashcode, to_int32


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def parse(cls, text: str) -> TopicPartition:
        """"topic-N" -> TopicPartition (topic names may contain '-': split on the last one)."""
        topic, sep, num = text.rpartition("-")
        if not sep or not topic or not num.lstrip("-").isdigit():
            raise ValueError(f"not a topic partition (expected 'topic-N'): {text!r}")
        return cls(topic, int(num))


@cache
def string_hash(s: str) -> int:
    return java_string_hashcode(s)


def tp_hash(tp: TopicPartition) -> int:
    """Kafka's TopicPartition.hashCode: 31 * (31 + partition) + topic.hashCode()."""
    return to_int32(31 * (31 + tp[1]) + string_hash(tp[0]))


@dataclass(slots=True)
class Subscription:
    """A member's ConsumerProtocol subscription, as an assignor sees it."""

    topics: list[str]
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int | None = None
    group_instance_id: str | None = None
    rack_id: str | None = None
    user_data: bytes | None = None


Assignment = dict[str, list[TopicPartition]]
#: replica racks of each partition (in replica order; None for a broker without rack)
PartitionRacks = Mapping[TopicPartition, Sequence[str | None]]


class PartitionAssignorError(ValueError):
    """The assignor cannot assign this input (Kafka's PartitionAssignorException / IllegalStateException)."""


def member_sort_key(member_id: str, group_instance_id: str | None) -> tuple[int, str]:
    """AbstractPartitionAssignor.MemberInfo order: static members by instance id, then dynamic by member id."""
    return (0, group_instance_id) if group_instance_id is not None else (1, member_id)


def use_rack_aware_assignment(consumer_racks: set[str], partition_racks: set[str],
                              racks_per_partition: Mapping[TopicPartition, set[str]],
                              prefer_rack_aware_logic: bool = False) -> bool:
    """AbstractPartitionAssignor.useRackAwareAssignment: only if racks overlap and some partition is not
    replicated on every rack (or the test-only preference is on)."""
    if not consumer_racks or consumer_racks.isdisjoint(partition_racks):
        return False
    if prefer_rack_aware_logic:
        return True
    return not all(r == partition_racks for r in racks_per_partition.values())
