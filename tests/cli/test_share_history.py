"""`kaflite groups describe GROUP --history` of a share group: the share coordinator's rebalance timeline
(kaflite.coordinator.share.group), made by real confluent-kafka ShareConsumers, read over the wire."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from kaflite.cluster.group_history import fetch_group_history

pytestmark = pytest.mark.usefixtures("kaflite_broker")


def test_share_group_history_shows_joins_leaves_and_rebalances(cli: Any, kaflite_broker: Any) -> None:
    import confluent_kafka as ck
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
        ResourceType,
    )

    bs = kaflite_broker.bootstrap
    host, port = bs.rsplit(":", 1)
    topic, group = f"shist-{uuid.uuid4().hex[:8]}", f"shist-g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bs})  # kept referenced: the future dies with its handle
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(10)
    # members heartbeat every 300 ms (not 5 s): a rebalance completes at the members' next heartbeats
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
        "share.heartbeat.interval.ms", "300", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(10)
    consumers = [ck.ShareConsumer({"bootstrap.servers": bs, "group.id": group}) for _ in range(2)]
    for c in consumers:
        c.subscribe([topic])

    def history_until(done: Any) -> list[dict[str, Any]]:
        end = time.monotonic() + 20
        events: list[dict[str, Any]] = []
        while time.monotonic() < end:
            for c in consumers:
                c.poll(0.1)
            events = fetch_group_history(host, int(port), group)
            if done(events):
                return events
        raise AssertionError(f"history never got there: {events}")

    def completed(events: list[dict[str, Any]], cause: str) -> bool:
        return any(e["kind"] == "rebalance-completed" and e["cause"] == cause and e["moved_total"] for e in events)

    history_until(lambda ev: sum(e["kind"] == "member-joined" for e in ev) == 2 and
                  ev[-1]["kind"] == "rebalance-completed")
    consumers.pop().close()  # ShareGroupHeartbeat with epoch -1
    events = history_until(lambda ev: completed(ev, "leave-group"))
    assert all(e["protocol"] == "share" for e in events)
    assert [e.to_json() for e in kaflite_broker.rebalance_history(group)][:len(events)] == events  # the test kit's
    result = cli("groups", "describe", group, "--history", "-b", bs)
    consumers[0].close()
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0].split()[:3] == ["TIME", "(UTC)", "EVENT"]
    rows = [ln.split() for ln in lines[1:]]
    kinds = [(r[2], r[3]) for r in rows]  # date, time, event, cause
    assert kinds[:2] == [("member-joined", "new-member"), ("rebalance-started", "new-member")]
    assert kinds.count(("member-joined", "new-member")) == 2
    assert ("member-left", "leave-group") in kinds and ("rebalance-completed", "leave-group") in kinds
    last = rows[-1]
    assert last[2:4] == ["rebalance-completed", "leave-group"] and last[6].endswith("s")  # its duration
    assert f"{topic}-" in lines[-1]  # the partitions the leave moved, named
