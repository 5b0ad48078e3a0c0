"""Share-group state survives a broker restart (`__share_group_state`, docs/share-groups.md): a broker
process is killed (SIGKILL, by its pid) with records accepted, rejected, archived at the delivery limit and
still held, and started again on the same data directory: only the records that were held come back, with
their delivery counts; nothing accepted or archived is delivered again. Group configs survive too."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.read_share_group_state.v0 import request as read_req
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.static.primitive import i32

from groups.test_share_wire import (
    ACCEPT,
    REJECT,
    RELEASE,
    Member,
    _alter_group,
    ack_errors,
    acquired,
    joined_and_started,
    new_topic,
    offsets,
    produce,
)
from helpers import free_port, start_broker_process, stop_process, wait_until
from kaflite.server.embedded import EmbeddedBroker
from server.kwire import WireClient


def _start(data_dir: Path, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "kaflite.server",
           "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
           "--override", f"log.dirs={data_dir}",
           "--override", "group.share.delivery.count.limit=2"]
    return start_broker_process(cmd, port, log_path, 30)


def test_restart_redelivers_only_what_was_in_flight(tmp_path: Path) -> None:
    port, data, log_path = free_port(), tmp_path / "data", tmp_path / "broker.log"
    bootstrap = f"127.0.0.1:{port}"
    proc = _start(data, port, log_path)
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its handle must outlive the future
        admin.create_topics([NewTopic("restart-share", 1, 1)])["restart-share"].result(10)
        m = Member(_Bootstrap(bootstrap), "restart-g", ["restart-share"])  # type: ignore[arg-type]
        m.wait_assigned()
        [(tid, parts)] = m.assignment
        assert parts == [0]
        assert offsets(m.fetch()) == []  # the share partition starts at the log end (latest): 0
        p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        for i in range(10):
            p.produce("restart-share", b"v%d" % i)
        assert p.flush(10) == 0
        assert offsets(m.fetch(max_wait_ms=2000)) == list(range(10))
        r = m.acknowledge({(tid, 0): [(0, 2, ACCEPT), (3, 3, REJECT), (4, 4, RELEASE), (7, 7, ACCEPT)]})
        assert ack_errors(r) == {0: 0}
        assert acquired(m.fetch(max_wait_ms=2000)) == {0: [(4, 4, 2)]}  # the release, delivered again
        r = m.acknowledge({(tid, 0): [(4, 4, RELEASE)]})  # at group.share.delivery.count.limit=2: archived
        assert ack_errors(r) == {0: 0}
        m.close()
        stop_process(proc, signal.SIGKILL)  # 5, 6, 8, 9 still held by the member
        proc = _start(data, port, log_path)
        n = Member(_Bootstrap(bootstrap), "restart-g", ["restart-share"])  # type: ignore[arg-type]
        # assigned at its join: the group's record of its initialized share partitions (key 15 in
        # __consumer_offsets) survived the restart, so nothing is initialized again first
        assert n.assignment == [(tid, [0])]
        got = acquired(n.fetch(max_wait_ms=3000))
        # only what was in flight, delivered a second time; 0..4 and 7 never again
        assert got == {0: [(5, 6, 2), (8, 9, 2)]}, got
        assert ack_errors(n.acknowledge({(tid, 0): [(5, 6, ACCEPT), (8, 9, ACCEPT)]})) == {0: 0}
        assert offsets(n.fetch(max_wait_ms=500)) == []
        n.close()
    finally:
        stop_process(proc)


class _Bootstrap:
    """What Member needs of a broker: its bootstrap address (the broker is another process here)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap


def test_share_partition_start_survives_and_delete_groups_removes_the_state(tmp_path: Path) -> None:
    """A share partition's start offset is durable from its creation (records produced after it and never
    fetched are delivered after a restart, not skipped by a new start at the log end); DeleteGroups of a
    share group whose member left before the restart (empty, as `__consumer_offsets` says) deletes its state."""
    data, port = tmp_path / "data", free_port()
    with EmbeddedBroker(data_dir=data, port=port) as b:
        topic, tid = new_topic(b)
        for group in ("keep-g", "del-g"):
            (m,) = joined_and_started(b, group, topic, 0)
            if group == "del-g":  # membership is durable: a member that did not leave would still be in
                assert m.client.request(ShareGroupHeartbeatRequest(
                    group_id=group, member_id=m.member_id, member_epoch=i32(-1))).error_code == 0
            m.close()
        produce(b, topic, 3)
        (m,) = [Member(b, "keep-g", [topic])]
        assert offsets(m.fetch(max_wait_ms=2000)) == [0, 1, 2]
        assert ack_errors(m.acknowledge({(tid, 0): [(0, 0, ACCEPT)]})) == {0: 0}
        m.close()
    with EmbeddedBroker(data_dir=data, port=port) as b, WireClient(b.bootstrap) as c:
        deleted = c.request(DeleteGroupsRequest(groups_names=("del-g", "nope")))
        assert [(r.group_id, r.error_code) for r in deleted.results] == [("del-g", 0), ("nope", 69)]
        produce(b, topic, 1)  # offset 3
        keep, gone = Member(b, "keep-g", [topic]), Member(b, "del-g", [topic])
        # keep-g: 0 accepted, 1 and 2 were in flight, 3 new; del-g starts again at the log end (latest)
        assert acquired(keep.fetch(max_wait_ms=2000)) == {0: [(1, 2, 2), (3, 3, 1)]}
        assert offsets(gone.fetch(max_wait_ms=300)) == []
        keep.close()
        gone.close()


def test_group_configs_survive_a_restart(tmp_path: Path) -> None:
    """IncrementalAlterConfigs on a GROUP resource is kept in the data directory: after a restart the group
    still has share.auto.offset.reset=earliest (records produced before its first fetch are delivered)."""
    data, port = tmp_path / "data", free_port()
    with EmbeddedBroker(data_dir=data, port=port) as b:
        topic, _tid = new_topic(b)
        produce(b, topic, 2)
        _alter_group(b, "cfg-g", share_auto_offset_reset="earliest")
        _alter_group(b, "cfg-other", share_delivery_count_limit="3")
    assert json.loads((data / "share-group-configs.json").read_text())["groups"] == {
        "cfg-g": {"share.auto.offset.reset": "earliest"}, "cfg-other": {"share.delivery.count.limit": "3"}}
    with EmbeddedBroker(data_dir=data, port=port) as b:
        m = Member(b, "cfg-g", [topic])
        m.wait_assigned()
        assert acquired(m.fetch(max_wait_ms=2000)) == {0: [(0, 1, 1)]}
        m.close()


def test_share_consumer_after_a_restart_gets_only_what_it_did_not_accept(tmp_path: Path) -> None:
    """confluent-kafka's ShareConsumer (explicit acknowledgement) accepts 10 of 20 records and holds the
    others when the broker process is killed; after the restart another ShareConsumer of the group gets
    exactly those 10."""
    port, data, log_path = free_port(), tmp_path / "data", tmp_path / "broker.log"
    bootstrap = f"127.0.0.1:{port}"
    proc = _start(data, port, log_path)
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("restart-sc", 1, 1)])["restart-sc"].result(10)
        tid = admin.describe_topics(ck.TopicCollection(["restart-sc"]))["restart-sc"].result(10).topic_id
        tid = uuid.UUID(bytes=bytes(tid.get_most_significant_bits().to_bytes(8, "big", signed=True)
                                    + tid.get_least_significant_bits().to_bytes(8, "big", signed=True)))
        c = ck.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "restart-scg",
                              "share.acknowledgement.mode": "explicit"})
        c.subscribe(["restart-sc"])
        with WireClient(bootstrap) as w:  # the share partition exists (its start offset is durable)

            def started() -> bool:
                assert list(c.poll(0.2)) == []
                return int(_read_state(w, "restart-scg", tid).start_offset) >= 0
            wait_until("the share partition started", started, timeout=15)
        p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        for i in range(20):
            p.produce("restart-sc", b"%d" % i)
        assert p.flush(10) == 0
        seen: list[int] = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and len(seen) < 20:
            for m in c.poll(0.3):
                if m.error() is None:
                    seen.append(int(m.value()))
                    if seen[-1] < 10:
                        c.acknowledge(m, ck.AcknowledgeType.ACCEPT)
        assert sorted(seen) == list(range(20))
        c.commit_sync()  # the acceptances are answered: durable
        stop_process(proc, signal.SIGKILL)
        proc = _start(data, port, log_path)
        c2 = ck.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "restart-scg"})
        c2.subscribe(["restart-sc"])
        got: list[int] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(got) < 10:
            got += [int(m.value()) for m in c2.poll(0.3) if m.error() is None]
        assert sorted(got) == list(range(10, 20))
        c2.close()
    finally:
        stop_process(proc)


def _read_state(w: WireClient, group: str, tid: uuid.UUID) -> Any:
    r = w.request(read_req.ReadShareGroupStateRequest(group_id=group, topics=(read_req.ReadStateData(
        topic_id=tid, partitions=(read_req.PartitionData(partition=i32(0), leader_epoch=i32(0)),)),)))
    return r.results[0].partitions[0]
