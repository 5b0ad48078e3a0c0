"""Acceptance: crashes, static members, fencing and durable offsets, with real clients on a real broker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import confluent_kafka as ck
import confluent_kafka.admin as cka

from groups.group_members import SESSION_MS, Member, produce, wait_for, wait_stable
from kaflite.coordinator import GroupState, partition_for
from kaflite.coordinator.records import OffsetCommitKey, decode_record
from kaflite.protocol.errors import ErrorCode
from kaflite.protocol.record_batch import decode_records, iter_batches
from kaflite.server.coordinators.groups import GROUP_SERVICE
from server.kwire import WireClient

HERE = Path(__file__).resolve().parent


def group_state(broker, group: str) -> tuple[GroupState, int]:  # noqa: ANN001
    def read() -> tuple[GroupState, int]:
        g = broker.server.broker.services.get(GROUP_SERVICE).group(group)
        return g.state, g.generation_id
    return broker.call(read)


def heartbeats_seen(broker, group: str, count: int):  # noqa: ANN001, ANN201
    """A probe: has every current member's session timer been reset `count` times since the first call
    (each heartbeat the coordinator accepts moves the member's session deadline forward)?"""
    seen: dict[str, set[int]] = {}

    def deadlines() -> dict[str, int | None]:
        svc = broker.server.broker.services.get(GROUP_SERVICE)
        shard = svc.shard(group)
        return {mid: shard.timer_deadline(("heartbeat", group, mid)) for mid in shard.groups[group].members}

    def probe() -> bool:
        now = broker.call(deadlines)
        for mid, deadline in now.items():
            if deadline is not None:
                seen.setdefault(mid, set()).add(deadline)
        # the first deadline seen is the one before; `count` more are `count` heartbeats
        return all(len(seen.get(mid, ())) > count for mid in now)

    return probe


class Proc:
    """A member subprocess whose stdout lines are collected by a thread."""

    def __init__(self, *args: str) -> None:
        self.p = subprocess.Popen([sys.executable, str(HERE / "member_proc.py"), *args], stdout=subprocess.PIPE,
                                  text=True, bufsize=1)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            self.lines.append(line.strip())

    def reads(self) -> list[tuple[int, int]]:
        return [(int(a), int(b)) for kind, a, b in (ln.split() for ln in list(self.lines) if ln.startswith("R "))]

    def commits(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for ln in list(self.lines):
            if ln.startswith("C "):
                _, p, o = ln.split()
                out[int(p)] = int(o)
        return out

    def kill(self) -> None:
        if self.p.poll() is None:
            os.kill(self.p.pid, signal.SIGKILL)
        self.p.wait(10)
        self.reader.join(5)


def test_sigkilled_member_partitions_move_and_resume_from_commits(broker, topic_factory) -> None:  # noqa: ANN001
    partitions, records = 4, 400
    topic = topic_factory(partitions, records)
    group = f"g-{uuid.uuid4().hex[:8]}"
    victim = Proc(broker.bootstrap, group, topic, "10")
    survivors: list[Member] = []
    try:
        wait_for(lambda: len(victim.reads()) >= 5, 30, "the victim consuming")
        survivors = [Member("confluent", "range", broker.bootstrap, group, topic, commit=True) for _ in range(2)]
        for mb in survivors:
            mb.start()
        # all three share the partitions, and the victim is reading its own share again
        wait_for(lambda: all(mb.snapshot()[0] for mb in survivors)
                 and len({p for mb in survivors for p in mb.snapshot()[0]}) < partitions, 30, "3-member group",
                 survivors)
        before = len(victim.reads())
        wait_for(lambda: len(victim.reads()) >= before + 15, 30, "the victim reading after the rebalance")
        victim.kill()
        killed_at = time.monotonic()
        # after the session timeout the survivors own everything
        wait_for(lambda: {p for mb in survivors for p in mb.snapshot()[0]} == set(range(partitions)),
                 SESSION_MS / 1000 + 15, "survivors taking over", survivors)
        takeover = time.monotonic() - killed_at
        assert takeover >= SESSION_MS / 1000 * 0.8, "partitions moved before the session timeout"
        ends = broker.call(lambda: [broker.server.broker.get_log(topic, p).log_end_offset for p in range(partitions)])
        assert sum(ends) == records
        every = {(p, o) for p in range(partitions) for o in range(ends[p])}
        def covered() -> set[tuple[int, int]]:
            return set(victim.reads()) | {r for mb in survivors for r in mb.snapshot()[1]}
        try:
            wait_for(lambda: every <= covered(), 30, "every record processed", survivors)
        except AssertionError:
            missing = sorted(every - covered())
            raise AssertionError(f"missing {len(missing)}: {missing[:10]}..{missing[-3:]}; victim commits "
                                 f"{victim.commits()}; victim read {sorted(victim.reads())[-5:]}") from None
    finally:
        victim.kill()
        for mb in survivors:
            mb.stop()
    seen = Counter(victim.reads() + [r for mb in survivors for r in mb.snapshot()[1]])
    assert set(seen) == every  # nothing lost
    committed = victim.commits()
    victim_reads = set(victim.reads())
    duplicates = [r for r, n in seen.items() if n > 1]
    for p, o in duplicates:
        # at-least-once: only the dead member's uncommitted tail is read again
        assert (p, o) in victim_reads and o >= committed.get(p, 0), (p, o, committed)
    assert len(duplicates) <= 10 * partitions


def test_static_member_restart_gets_its_partitions_back_without_rebalance(broker, topic_factory) -> None:  # noqa: ANN001
    topic = topic_factory(6)
    group = f"g-{uuid.uuid4().hex[:8]}"
    members = [Member("confluent", "range", broker.bootstrap, group, topic, instance_id=f"static-{i}",
                      session_ms=10_000) for i in range(3)]
    replacement = None
    try:
        for mb in members:
            mb.start()
        wait_stable(members, 6)
        state, generation = group_state(broker, group)
        assert state is GroupState.STABLE
        events = [mb.assign_events for mb in members[:2]]
        owned = [mb.snapshot()[0] for mb in members]
        members[2].stop()  # a static member's close sends no LeaveGroup (KIP-345)
        replacement = Member("confluent", "range", broker.bootstrap, group, topic, instance_id="static-2",
                             session_ms=10_000)
        replacement.start()
        wait_for(lambda: bool(replacement.snapshot()[0]), 8, "the restarted member's partitions", [replacement])
        assert replacement.snapshot()[0] == owned[2]
        # A rebalance, had one started, would show at the members' next heartbeats (REBALANCE_IN_PROGRESS):
        # wait until the coordinator has taken two heartbeats from every member, then look.
        wait_for(heartbeats_seen(broker, group, 2), 15, "two heartbeats from every member")
        assert group_state(broker, group) == (GroupState.STABLE, generation)
        assert [mb.assign_events for mb in members[:2]] == events
        assert [mb.snapshot()[0] for mb in members[:2]] == owned[:2]
    finally:
        for mb in [*members, *([replacement] if replacement else [])]:
            mb.stop()


def _join_request(group: str, member_id: str):  # noqa: ANN202
    from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol

    return JoinGroupRequest(group_id=group, session_timeout=_ms(10_000), rebalance_timeout=_ms(10_000),
                            member_id=member_id, group_instance_id=None, protocol_type="consumer",
                            protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),))


def _join(client: WireClient, group: str, member_id: str = "") -> object:
    resp = client.request(_join_request(group, member_id))
    if resp.error_code == ErrorCode.member_id_required:
        return _join(client, group, resp.member_id)
    return resp


def _ms(n: int):  # noqa: ANN202
    import datetime

    from kio.static.primitive import i32Timedelta
    return i32Timedelta.parse(datetime.timedelta(milliseconds=n))


def _commit(client: WireClient, group: str, topic: str, member_id: str, generation: int) -> ErrorCode:
    from kio.schema.offset_commit.v8.request import (
        OffsetCommitRequest,
        OffsetCommitRequestPartition,
        OffsetCommitRequestTopic,
    )
    from kio.static.primitive import i32, i64

    req = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=i32(generation), member_id=member_id,
                              group_instance_id=None, topics=(OffsetCommitRequestTopic(name=topic, partitions=(
                                  OffsetCommitRequestPartition(partition_index=i32(0), committed_offset=i64(1),
                                                               committed_leader_epoch=i32(-1), committed_metadata=""),)),))
    resp = client.request(req)
    return resp.topics[0].partitions[0].error_code


def test_stale_member_commit_is_fenced(broker, topic_factory) -> None:  # noqa: ANN001
    from kio.schema.sync_group.v3.request import SyncGroupRequest

    topic = topic_factory(1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    with WireClient(broker.bootstrap) as a, WireClient(broker.bootstrap) as b:
        ja = _join(a, group)
        assert ja.error_code == ErrorCode.none and ja.generation_id == 1
        sync = a.request(SyncGroupRequest(group_id=group, generation_id=ja.generation_id, member_id=ja.member_id,
                                          group_instance_id=None, assignments=()))
        assert sync.error_code == ErrorCode.none
        assert _commit(a, group, topic, ja.member_id, 1) == ErrorCode.none
        # a second member joins: generation 2 starts, A's generation 1 is over
        jb_pending = b.request(_join_request(group, ""))
        assert jb_pending.error_code == ErrorCode.member_id_required
        b.send(_join_request(group, jb_pending.member_id))  # parks: A must rejoin first
        wait_for(lambda: group_state(broker, group)[0] is GroupState.PREPARING_REBALANCE, 10, "the rebalance")
        ja2 = _join(a, group, ja.member_id)
        assert ja2.generation_id == 2
        # the stale generation is fenced, as is a member id the group does not know
        assert _commit(a, group, topic, ja.member_id, 1) == ErrorCode.illegal_generation
        assert _commit(a, group, topic, "nobody", 2) == ErrorCode.unknown_member_id
        assert _commit(a, group, topic, ja.member_id, 2) == ErrorCode.rebalance_in_progress  # not synced yet
        b.read_frame()  # B's parked JoinGroup was answered too


def test_committed_offsets_survive_restart_in_partition_48(tmp_path: Path) -> None:
    from kaflite.server.embedded import EmbeddedBroker

    assert partition_for("test") == 48
    data = tmp_path / "data"
    with EmbeddedBroker(data_dir=data) as b1:
        admin = cka.AdminClient({"bootstrap.servers": b1.bootstrap})
        admin.create_topics([cka.NewTopic("rt", 2, 1)])["rt"].result(15)
        produce(b1.bootstrap, "rt", 20)
        consumer = ck.Consumer({"bootstrap.servers": b1.bootstrap, "group.id": "test", "enable.auto.commit": False,
                                "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
        consumer.subscribe(["rt"])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.1)
        consumer.commit(offsets=[ck.TopicPartition("rt", 0, 7), ck.TopicPartition("rt", 1, 3)], asynchronous=False)
        consumer.close()
    # on disk, in Kafka's layout and record format: __consumer_offsets-48 holds group "test"'s commits
    found: dict[int, int] = {}
    for segment in sorted((data / "__consumer_offsets-48").glob("*.log")):
        for batch in iter_batches(segment.read_bytes()):
            for record in decode_records(batch):
                key, value = decode_record(record.key, record.value)
                if isinstance(key, OffsetCommitKey) and key.group == "test" and value is not None:
                    found[key.partition] = value.offset  # type: ignore[union-attr]
    assert found == {0: 7, 1: 3}
    with EmbeddedBroker(data_dir=data) as b2:
        consumer = ck.Consumer({"bootstrap.servers": b2.bootstrap, "group.id": "test"})
        committed = consumer.committed([ck.TopicPartition("rt", 0), ck.TopicPartition("rt", 1)], timeout=15)
        consumer.close()
        assert [(tp.partition, tp.offset) for tp in committed] == [(0, 7), (1, 3)]


def test_stable_group_survives_broker_restart_without_rebalance(tmp_path: Path) -> None:
    """The group's metadata is replayed from __consumer_offsets: members that come back within their
    session timeout carry on in the same generation."""
    from helpers import free_port
    from kaflite.server.embedded import EmbeddedBroker

    data, port = tmp_path / "data", free_port()
    overrides = {"group.min.session.timeout.ms": "1000"}
    b1 = EmbeddedBroker(data_dir=data, port=port, overrides=overrides).start()
    members: list[Member] = []
    try:
        admin = cka.AdminClient({"bootstrap.servers": b1.bootstrap})
        admin.create_topics([cka.NewTopic("live", 2, 1)])["live"].result(15)
        # a session comfortably longer than the restart: librdkafka also times its session out locally
        members = [Member("confluent", "range", b1.bootstrap, "live-group", "live", commit=True, session_ms=10_000)
                   for _ in range(2)]
        for mb in members:
            mb.start()
        wait_stable(members, 2)
        before = group_state(b1, "live-group")
        owned = [mb.snapshot()[0] for mb in members]
        events = [mb.assign_events for mb in members]
        b1.stop()
        b2 = EmbeddedBroker(data_dir=data, port=port, overrides=overrides).start()
        try:
            produce(b2.bootstrap, "live", 40)
            wait_for(lambda: sum(len(mb.snapshot()[1]) for mb in members) >= 40, 30, "records after restart", members)
            assert group_state(b2, "live-group") == before  # same generation: no rebalance
            assert [mb.snapshot()[0] for mb in members] == owned
            assert [mb.assign_events for mb in members] == events
            seen = Counter(r for mb in members for r in mb.snapshot()[1])
            assert len(seen) == 40 and all(n == 1 for n in seen.values())
        finally:
            for mb in members:
                mb.stop()
            b2.stop()
    finally:
        b1.stop()


def test_existing_offsets_topic_partition_count_wins(tmp_path: Path) -> None:
    """Changing offsets.topic.num.partitions after the first start must not strand committed offsets."""
    from kaflite.server.embedded import EmbeddedBroker

    data = tmp_path / "data"
    with EmbeddedBroker(data_dir=data, overrides={"offsets.topic.num.partitions": "5"}) as b1:
        admin = cka.AdminClient({"bootstrap.servers": b1.bootstrap})
        admin.create_topics([cka.NewTopic("rt", 1, 1)])["rt"].result(15)
        consumer = ck.Consumer({"bootstrap.servers": b1.bootstrap, "group.id": "test"})
        consumer.commit(offsets=[ck.TopicPartition("rt", 0, 4)], asynchronous=False)
        consumer.close()
    assert (data / f"__consumer_offsets-{partition_for('test', 5)}").is_dir()
    with EmbeddedBroker(data_dir=data, overrides={"offsets.topic.num.partitions": "50"}) as b2:
        consumer = ck.Consumer({"bootstrap.servers": b2.bootstrap, "group.id": "test"})
        try:
            [tp] = consumer.committed([ck.TopicPartition("rt", 0)], timeout=15)
        finally:
            consumer.close()
        assert tp.offset == 4
