"""`kaflite groups describe GROUP --history`: the rebalance timeline of a group, asked of its coordinator
(a real kaflite broker, real confluent-kafka consumers)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from kaflite.cluster.group_history import HEADER, fetch_group_history

pytestmark = pytest.mark.usefixtures("kaflite_broker")


def _assigned(*consumers: Any, deadline_s: float = 20.0) -> None:
    """Poll every consumer (a rebalance needs each member's poll) until all have partitions."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        for c in consumers:
            c.poll(0.05)
        if all(c.assignment() for c in consumers):
            return
    raise AssertionError("a consumer got no assignment")


def test_describe_history_names_joins_leaves_and_rebalances(cli: Any, kaflite_broker: Any) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    bs = kaflite_broker.bootstrap
    topic, group = f"hist-{uuid.uuid4().hex[:8]}", f"hist-g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bs})  # kept referenced: the future dies with its handle
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(10)
    conf = {"bootstrap.servers": bs, "group.id": group, "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 200}
    first = Consumer({**conf, "client.id": "first"})
    first.subscribe([topic])
    _assigned(first)
    second = Consumer({**conf, "client.id": "second"})
    second.subscribe([topic])
    _assigned(first, second)
    second.close()  # LeaveGroup
    end = time.monotonic() + 20
    host, port = bs.rsplit(":", 1)
    while time.monotonic() < end:  # first rejoins: the rebalance after the leave completes
        first.poll(0.1)
        events = fetch_group_history(host, int(port), group)
        if events and events[-1]["kind"] == "rebalance-completed" and any(e["kind"] == "member-left" for e in events):
            break
    result = cli("groups", "describe", group, "--history", "-b", bs)
    first.close()
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0].split()[:3] == ["TIME", "(UTC)", "EVENT"] and "DURATION" in lines[0] and "MOVED" in lines[0]
    rows = [ln.split() for ln in lines[1:]]
    kinds = [(r[2], r[3]) for r in rows]  # date, time, event, cause
    assert kinds[:2] == [("member-joined", "new-member"), ("rebalance-started", "new-member")]
    assert ("rebalance-completed", "new-member") in kinds
    assert ("member-left", "leave-group") in kinds  # librdkafka's LeaveGroup on close
    completed = [ln for ln in lines[1:] if " rebalance-completed " in ln]
    assert len(completed) >= 2 and all(ln.split()[6].endswith("s") for ln in completed)  # a duration
    # the first completed rebalance gave both partitions to the first member: "2 (topic-0: - -> first-..."
    assert f"2 ({topic}-0: - -> first-" in completed[0]
    assert len(HEADER) == 8


def test_describe_history_of_an_unknown_group_fails(cli: Any, kaflite_broker: Any) -> None:
    result = cli("groups", "describe", f"nobody-{uuid.uuid4().hex[:6]}", "--history", "-b", kaflite_broker.bootstrap)
    assert result.exit_code == 1 and "does not exist" in result.output
