"""The rebalance timeline survives a broker restart: its records are in `__consumer_offsets` on disk and
the restarted coordinator loads them (a real broker, a real confluent-kafka consumer)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from kaflite import EmbeddedBroker


def test_history_survives_a_broker_restart(tmp_path: Path) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = f"restart-{uuid.uuid4().hex[:6]}", f"restart-g-{uuid.uuid4().hex[:6]}"
    with EmbeddedBroker(data_dir=tmp_path) as broker:
        admin = AdminClient(broker.confluent_config())
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(10)
        consumer = Consumer({**broker.confluent_config(), "group.id": group})
        consumer.subscribe([topic])
        deadline = time.monotonic() + 20
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.1)
        consumer.close()  # LeaveGroup: the group rebalances to Empty, which is written
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and broker.rebalance_history(group)[-1].kind != "rebalance-completed":
            time.sleep(0.05)
        before = broker.rebalance_history(group)
    kinds = [(e.kind, e.cause) for e in before]
    assert kinds[0] == ("member-joined", "new-member") and ("member-left", "leave-group") in kinds
    assert kinds[-1] == ("rebalance-completed", "leave-group")
    with EmbeddedBroker(data_dir=tmp_path) as broker:
        assert broker.rebalance_history(group) == before  # an empty group: no coordinator-loaded event
    with EmbeddedBroker(data_dir=tmp_path, overrides={"kaflite.group.rebalance.history.size": "2"}) as broker:
        assert broker.rebalance_history(group) == before[-2:]  # the broker key bounds what is kept
