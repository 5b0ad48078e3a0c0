"""The client plug-ins' adapters (no broker): what they announce and what they hand back."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from kaflite.assign import Subscription, TopicPartition, assign_group, get_assignor, partition_for_key
from kaflite.assign.userdata import decode_sticky_user_data
from kaflite.clients import aiokafka as aio
from kaflite.clients import kafka_python as kp
from kaflite.protocol.consumer_protocol import decode_subscription


class Cluster:
    """The two ClusterMetadata queries the adapters make."""

    def __init__(self, topics: dict[str, int], unavailable: set[tuple[str, int]] | None = None) -> None:
        self.topics, self.unavailable = topics, unavailable or set()

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return set(range(self.topics[topic])) if topic in self.topics else None

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return {p for p in range(self.topics[topic]) if (topic, p) not in self.unavailable}


def test_cooperative_metadata_carries_owned_partitions_generation_and_rack() -> None:
    cls = kp.kaflite_assignor("cooperative-sticky", rack="r1")
    a = cls()
    a.on_assignment(ConsumerProtocolAssignment(3, [("t", [0, 2])], b""), 7)
    sub = decode_subscription(bytes(a.metadata({"t", "u"}).encode()))
    assert sub.version == 3 and sub.topics == ["t", "u"]
    assert sub.owned_partitions == [TopicPartition("t", 0), TopicPartition("t", 2)]
    assert sub.generation_id == 7 and sub.rack_id == "r1"
    assert a.supported_protocols()[0].name == "COOPERATIVE"


def test_sticky_metadata_carries_kafka_user_data() -> None:
    a = kp.StickyAssignor()
    assert decode_subscription(bytes(a.metadata({"t"}).encode())).user_data is None
    a.on_assignment(ConsumerProtocolAssignment(3, [("t", [1])], b""), 4)
    md = decode_sticky_user_data(decode_subscription(bytes(a.metadata({"t"}).encode())).user_data)
    assert md.partitions == [TopicPartition("t", 1)] and md.generation == 4


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_leader_assignment_is_kaflite_assign(strategy: str) -> None:
    cls = kp.kaflite_assignor(strategy)
    topics = {"t0": 3, "t1": 2}
    subs = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1"]}
    members = [SimpleNamespace(member_id=m, group_instance_id=None,
                               metadata=ConsumerProtocolSubscription.decode(cls().metadata(set(t)).encode()))
               for m, t in subs.items()]
    out = cls().assign(Cluster(topics), members)
    want = assign_group(get_assignor(strategy), topics, {m: Subscription(t) for m, t in subs.items()})
    assert {m: out[m].partitions() for m in subs} == {m: [(tp.topic, tp.partition) for tp in want[m]] for m in subs}


def test_java_partitioner_for_kafka_python() -> None:
    part = kp.JavaPartitioner()
    cluster = Cluster({"t": 12}, unavailable={("t", 5)})
    for key in (b"a", b"hello", b"key-1"):
        assert part.partition("t", None, key, None, None, cluster) == partition_for_key(key, 12)
    first = part.partition("t", None, None, None, None, cluster)
    assert all(part.partition("t", None, None, None, None, cluster) == first for _ in range(5))
    part.on_new_batch("t", cluster, first)
    second = part.partition("t", None, None, None, None, cluster)
    assert second != first and second != 5
    with pytest.raises(ValueError, match="not found"):
        part.partition("nope", None, b"k", None, None, cluster)


def test_aiokafka_assignor_classes_do_not_share_state() -> None:
    a, b = aio.kaflite_assignor("sticky"), aio.kaflite_assignor("sticky")
    assert a is not b and a.name == b.name == "sticky"
    from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment

    a.on_assignment(ConsumerProtocolMemberAssignment(0, [("t", [0])], b""))
    assert a.member_assignment == [TopicPartition("t", 0)] and b.member_assignment == []
    assert decode_sticky_user_data(a.metadata({"t"}).user_data).partitions == [TopicPartition("t", 0)]
    with pytest.raises(ValueError, match="eager"):
        aio.kaflite_assignor("cooperative-sticky")
