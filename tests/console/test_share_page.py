"""The console's group page of a share group (over HTTP): its members, each share partition's start offset,
the records in flight with their delivery counts, holder and lock expiry, and its rebalance timeline; the
data comes from the coordinator (kaflite.cluster.share_group_view), real confluent-kafka ShareConsumer."""

from __future__ import annotations

import re
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("jinja2")

sys.path.insert(0, str(Path(__file__).parent))

from console_harness import ConsoleServer  # noqa: E402


@pytest.fixture(scope="module")
def console(kaflite_broker: Any) -> Iterator[ConsoleServer]:
    srv = ConsoleServer(kaflite_broker.bootstrap, sample_interval=0).start()
    try:
        yield srv
    finally:
        srv.stop()


def _cells(html: str, table_id: str) -> list[list[str]]:
    m = re.search(rf'<table id="{table_id}"[^>]*>.*?<tbody>(.*?)</tbody>', html, re.S)
    assert m, f"no table {table_id}"
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", m.group(1), re.S)
    return [[re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)] for r in rows]


def test_share_group_page_shows_members_partitions_and_records_in_flight(console: ConsoleServer,
                                                                        kaflite_broker: Any) -> None:
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic

    bs = kaflite_broker.bootstrap
    topic, group = f"sp-{uuid.uuid4().hex[:8]}", f"spg-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(10)
    c = ck.ShareConsumer({"bootstrap.servers": bs, "group.id": group, "client.id": "share-page",
                          "share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])

    def opened() -> bool:
        from kaflite.server.coordinators.share_state import SHARE_COORDINATOR

        coord = kaflite_broker.server.broker.services.get(SHARE_COORDINATOR)
        return coord is not None and all((group, topic, p) in coord.partitions for p in (0, 1))
    end = time.monotonic() + 15
    while time.monotonic() < end and not kaflite_broker.call(opened):
        assert list(c.poll(0.2)) == []
    producer = ck.Producer({"bootstrap.servers": bs, "linger.ms": 0})
    for i in range(4):
        producer.produce(topic, b"v%d" % i, partition=0)
    assert producer.flush(10) == 0
    got: list[Any] = []
    end = time.monotonic() + 15
    while time.monotonic() < end and len(got) < 4:
        got += [m for m in c.poll(0.3) if m.error() is None]
    assert len(got) == 4
    c.acknowledge(got[0], ck.AcknowledgeType.ACCEPT)  # offset 0 done; 1..3 stay acquired (explicit mode)
    c.commit_sync()
    try:
        status, html, _ = console.get(f"/groups/{group}")
        assert status == 200, html
        assert 'id="group-type">share<' in html and 'id="group-state">Stable<' in html
        members = _cells(html, "share-members")
        assert len(members) == 1 and members[0][2] == "share-page" and members[0][4] == topic
        assert members[0][6] == f"{topic}-0, {topic}-1"
        parts = {r[0] + "-" + r[1]: r for r in _cells(html, "share-partitions")}
        # partition 0: offset 0 accepted, so the share start offset is 1; 1..3 in flight, acquired
        assert parts[f"{topic}-0"][2:] == ["1", "4", "3", "3"]
        assert parts[f"{topic}-1"][2:] == ["0", "0", "0", "0"]
        (flight,) = _cells(html, "in-flight")
        assert flight[:6] == [topic, "0", "1-3", "ACQUIRED", "1", flight[5]] and flight[5] != "-"
        expires = float(flight[6].removesuffix(" s"))
        assert 0 < expires <= 30.0  # group.share.record.lock.duration.ms, 30 s by default
        timeline = _cells(html, "timeline")
        assert ("member-joined", "new-member") in [(r[1], r[2]) for r in timeline]
        # the group list has it too (ListGroups of type "share" to each broker: librdkafka's leaves it out)
        status, html, _ = console.get("/groups")
        assert status == 200, html
        row = next(r for r in _cells(html, "groups") if r[0] == group)
        assert row[1:5] == ["share", "stable", "1", "simple"]
    finally:
        c.close()
    # a group that is neither classic nor share: the page still says it does not exist
    status, html, _ = console.get(f"/groups/nope-{uuid.uuid4().hex[:6]}")
    assert status != 200
