"""KIP-848: librdkafka consumers with `group.protocol=consumer` (ConsumerGroupHeartbeat, broker-side
assignment) against a real kaflite broker."""

from __future__ import annotations

import uuid
from collections import Counter

from groups.group_members import Member, produce, wait_for, wait_stable

PARTITIONS = 6


def _fast_heartbeats(broker) -> None:  # noqa: ANN001
    # group.consumer.heartbeat.interval.ms is 5 s by default; reconciliation takes a few heartbeats
    from kaflite.server.coordinators.groups import GroupService

    def poke() -> None:
        for _, shard in GroupService.of(broker.server.broker).runtime.active_shards():
            shard.consumer.heartbeat_interval_ms = 250
    broker.call(poke)


def test_three_members_share_partitions_and_a_leaver_hands_over(broker, topic_factory) -> None:  # noqa: ANN001
    _fast_heartbeats(broker)
    topic = topic_factory(PARTITIONS)
    group = f"g-{uuid.uuid4().hex[:8]}"
    members = [Member("confluent-kip848", "uniform", broker.bootstrap, group, topic, commit=True) for _ in range(3)]
    try:
        for mb in members:
            mb.start()
        wait_stable(members, PARTITIONS)
        produce(broker.bootstrap, topic, 120)
        wait_for(lambda: sum(len(mb.snapshot()[1]) for mb in members) >= 120, 30, "all records", members)
        seen = Counter(r for mb in members for r in mb.snapshot()[1])
        assert len(seen) == 120 and all(n == 1 for n in seen.values())
        for mb in members:
            assignment, records = mb.snapshot()
            assert {p for p, _ in records} <= assignment
        members[0].stop()  # close() leaves the group (member epoch -1)
        survivors = members[1:]
        wait_stable(survivors, PARTITIONS)
        produce(broker.bootstrap, topic, 60, start=120)
        wait_for(lambda: sum(len(mb.snapshot()[1]) for mb in members) >= 180, 30, "records after the leave",
                 survivors)
        seen = Counter(r for mb in members for r in mb.snapshot()[1])
        assert len(seen) == 180 and all(n == 1 for n in seen.values())  # committed: nothing read twice
    finally:
        for mb in members:
            mb.stop()
    for mb in members:
        assert mb.error is None, mb.error
