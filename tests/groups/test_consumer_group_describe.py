"""ConsumerGroupDescribe (API 69) with librdkafka's AdminClient: a KIP-848 group is described as a
CONSUMER group with its members' partitions; a classic group is still described (librdkafka falls back
to DescribeGroups on GROUP_ID_NOT_FOUND, as with a Kafka broker)."""

from __future__ import annotations

import time

import confluent_kafka as ck
from confluent_kafka import ConsumerGroupType
from confluent_kafka.admin import AdminClient, NewTopic

from kaflite.server.embedded import EmbeddedBroker


def _first_record(c: ck.Consumer) -> bytes | None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            return m.value()
    return None


def test_describe_consumer_and_classic_groups() -> None:
    with EmbeddedBroker() as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("cgd", 3, 1)])["cgd"].result(10)
        p = ck.Producer({"bootstrap.servers": b.bootstrap})
        for i in range(30):
            p.produce("cgd", b"v%d" % i, partition=i % 3)
        assert p.flush(10) == 0
        new = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g-new", "group.protocol": "consumer",
                           "auto.offset.reset": "earliest"})
        old = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g-old", "auto.offset.reset": "earliest"})
        try:
            new.subscribe(["cgd"])
            old.subscribe(["cgd"])
            assert _first_record(new) is not None and _first_record(old) is not None
            described = {g: f.result(10) for g, f in admin.describe_consumer_groups(["g-new", "g-old"]).items()}
        finally:
            new.close()
            old.close()
    d_new, d_old = described["g-new"], described["g-old"]
    assert d_new.type == ConsumerGroupType.CONSUMER and d_old.type == ConsumerGroupType.CLASSIC
    for d in (d_new, d_old):
        (member,) = d.members
        assert sorted(tp.partition for tp in member.assignment.topic_partitions) == [0, 1, 2]
