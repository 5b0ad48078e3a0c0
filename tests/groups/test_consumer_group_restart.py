"""KIP-848 groups survive a broker restart (their records replayed from __consumer_offsets, as Kafka):
three confluent-kafka consumers with group.protocol=consumer keep their member ids, epochs and partitions,
and none of them sees a revocation after the restart."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest

from helpers import free_port
from kaflite.server.embedded import EmbeddedBroker
from server.kwire import WireClient

OVERRIDES = {"group.consumer.heartbeat.interval.ms": "500"}
GROUP = "restart-848"


def _describe(b: EmbeddedBroker) -> Any:
    with WireClient(b.bootstrap) as w:
        [g] = w.request(ConsumerGroupDescribeRequest(group_ids=(GROUP,), include_authorized_operations=False)).groups
    return g


def _view(g: Any) -> dict[str, tuple[int, list[tuple[str, int]]]]:
    return {mb.member_id: (int(mb.member_epoch),
                           sorted((str(tp.topic_name), int(p)) for tp in mb.assignment.topic_partitions
                                  for p in tp.partitions))
            for mb in g.members}


def _poll_until(consumers: list[ck.Consumer], done: Any, timeout: float = 40.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.1)
        if done():
            return True
    return False


def test_three_consumers_keep_assignment_and_epochs_across_restart(tmp_path: Path) -> None:
    data, port = tmp_path / "data", free_port()
    revoked: list[tuple[int, list[int]]] = []
    consumers: list[ck.Consumer] = []

    def on_revoke(i: int) -> Any:
        return lambda _c, parts: revoked.append((i, [p.partition for p in parts])) if parts else None

    try:
        with EmbeddedBroker(data_dir=data, port=port, overrides=OVERRIDES) as b:
            admin = AdminClient({"bootstrap.servers": b.bootstrap})
            admin.create_topics([NewTopic("kip848", 6, 1)])["kip848"].result(10)
            for i in range(3):
                c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": GROUP, "group.protocol": "consumer",
                                 "auto.offset.reset": "earliest"})
                c.subscribe(["kip848"], on_revoke=on_revoke(i))
                consumers.append(c)

            def stable() -> bool:
                g = _describe(b)
                view = _view(g)
                return (g.group_state == "Stable" and len(view) == 3
                        and sorted(len(parts) for _e, parts in view.values()) == [2, 2, 2]
                        and all(len(c.assignment()) == 2 for c in consumers))
            assert _poll_until(consumers, stable), _describe(b)
            before = _describe(b)
            owned_before = [sorted(p.partition for p in c.assignment()) for c in consumers]
            revoked.clear()
        # the broker is down; the consumers stay up and reconnect to the restarted broker on the same port
        with EmbeddedBroker(data_dir=data, port=port, overrides=OVERRIDES) as b:
            loaded = _describe(b)  # before any member heartbeat: straight from __consumer_offsets
            assert (loaded.group_epoch, loaded.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
            assert _view(loaded) == _view(before)
            assert not _poll_until(consumers, lambda: bool(revoked), timeout=6.0), revoked
            after = _describe(b)
            assert after.group_state == "Stable"
            assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
            assert _view(after) == _view(before)
            assert [sorted(p.partition for p in c.assignment()) for c in consumers] == owned_before
    finally:
        for c in consumers:
            c.close()
