"""Acceptance: a 3-member group of each real client and assignor, against a real kaflite broker.

Every partition ends up owned by exactly one member and every record is consumed exactly once."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from groups.group_members import Member, produce, wait_for, wait_stable
from helpers import missing_program, require

PARTITIONS = 6
RECORDS = 240

CASES = [
    ("confluent", "range"),
    ("confluent", "roundrobin"),
    ("confluent", "cooperative-sticky"),
    ("kafka-python", "range"),
    ("kafka-python", "roundrobin"),
    ("kafka-python", "sticky"),
    ("aiokafka", "range"),
    ("aiokafka", "roundrobin"),
]


@pytest.mark.parametrize(("client", "strategy"), CASES, ids=[f"{c}-{s}" for c, s in CASES])
def test_three_member_group(broker, topic_factory, client: str, strategy: str) -> None:  # noqa: ANN001
    topic = topic_factory(PARTITIONS)
    group = f"g-{uuid.uuid4().hex[:8]}"
    members = [Member(client, strategy, broker.bootstrap, group, topic) for _ in range(3)]
    try:
        for mb in members:
            mb.start()
        wait_stable(members, PARTITIONS)
        produce(broker.bootstrap, topic, RECORDS)
        wait_for(lambda: sum(len(mb.snapshot()[1]) for mb in members) >= RECORDS, 30, "all records", members)
        owned = {mb.name + str(i): mb.snapshot()[0] for i, mb in enumerate(members)}
        seen = Counter(r for mb in members for r in mb.snapshot()[1])
        assert sum(seen.values()) == RECORDS and all(n == 1 for n in seen.values()), "a record was read twice"
        assert {p for p, _ in seen} == set(range(PARTITIONS))
        # each record came from the member that owns its partition
        for mb in members:
            assignment, records = mb.snapshot()
            assert {p for p, _ in records} <= assignment
        assert sorted(p for ps in owned.values() for p in ps) == list(range(PARTITIONS))
    finally:
        for mb in members:
            mb.stop()
    for mb in members:
        assert mb.error is None, mb.error


def test_kcat_balanced_consumer_commits_where_it_stopped(broker, topic_factory) -> None:  # noqa: ANN001
    """Debian's kcat (librdkafka 2.0, an older group client) consumes as a group member and commits."""
    import subprocess

    import confluent_kafka as ck

    require(missing_program("kcat"))
    topic = topic_factory(2, 20)
    group = f"g-{uuid.uuid4().hex[:8]}"
    out = subprocess.run(["kcat", "-b", broker.bootstrap, "-G", group, "-e", "-f", "%p %o\\n",
                          "-X", "auto.offset.reset=earliest", topic], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    seen = Counter(tuple(map(int, ln.split())) for ln in out.stdout.splitlines())
    assert len(seen) == 20 and all(n == 1 for n in seen.values())
    ends = {p: 1 + max(o for q, o in seen if q == p) for p, _ in seen}
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        committed = consumer.committed([ck.TopicPartition(topic, p) for p in sorted(ends)], timeout=15)
    finally:
        consumer.close()
    assert {tp.partition: tp.offset for tp in committed} == ends
