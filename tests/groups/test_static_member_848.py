"""KIP-848 static membership with a real client: a confluent-kafka consumer with `group.instance.id` and
`group.protocol=consumer` that closes leaves with member epoch -2 and keeps its partitions; its next
incarnation (a new member id, the same instance id) gets the same partitions back with no rebalance, as
Kafka's consumerGroupStaticMemberGroupLeave / consumerGroupJoin do (tests/coordinator/test_consumer_group.py
has the rules without sockets)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from kaflite.server.embedded import EmbeddedBroker


def test_a_restarted_static_member_gets_its_partitions_back_without_a_rebalance() -> None:
    with EmbeddedBroker(overrides={"group.consumer.heartbeat.interval.ms": "300"}) as broker:
        topic = f"static-{uuid.uuid4().hex[:6]}"
        group = f"g-{topic}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(10)
        common = {"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest"}

        def static() -> Any:
            c = ck.Consumer({**common, "group.instance.id": "instance-1"})
            c.subscribe([topic])
            return c

        def parts(c: Any) -> list[int]:
            return sorted(p.partition for p in c.assignment())

        first, other = static(), ck.Consumer(common)
        other.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (len(parts(first)) == 2 and len(parts(other)) == 2):
            first.poll(0.1)
            other.poll(0.1)
        mine, theirs = parts(first), parts(other)
        assert len(mine) == 2 and len(theirs) == 2, (mine, theirs)
        first.close()  # leaves with member epoch -2: its partitions stay with the instance
        events_before = len(broker.rebalance_history(group))
        second = static()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not second.assignment():
            second.poll(0.1)
            other.poll(0.1)
        assert parts(second) == mine and parts(other) == theirs
        events = broker.rebalance_history(group)[events_before:]
        kinds = [e.kind for e in events if e.kind != "member-left"]  # the -2 leave may land after the count
        assert kinds == ["member-replaced"], events  # no rebalance started
        assert [e.cause for e in events if e.kind == "member-replaced"] == ["static-member-replaced"]
        second.close()
        other.close()
        del admin
