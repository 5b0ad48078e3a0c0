"""Blocking storage work runs off the event loop: the housekeeping passes (flush, retention, compaction)
and the `__consumer_offsets` replay run in worker threads, and the loop keeps answering meanwhile."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from helpers import longest_loop_turn
from kaflite.coordinator import OFFSETS_TOPIC
from kaflite.protocol.record_batch import build_record_batch
from kaflite.server.coordinators.groups import GroupService
from kaflite.server.coordinators.writer import OffsetsTopicWriter
from kaflite.server.embedded import EmbeddedBroker
from kaflite.storage import Log, LogConfig
from kaflite.storage.cleaner import CleanResult, compact_log


def test_housekeeping_compaction_runs_in_a_worker_thread(tmp_path: Path) -> None:
    overrides = {"log.flush.scheduler.interval.ms": "20", "log.cleaner.backoff.ms": "100"}
    with EmbeddedBroker(data_dir=tmp_path, overrides=overrides) as b:
        loop_thread = b.call(threading.get_ident)
        manager = b.server.broker.log_manager
        seen: list[int] = []
        ran = threading.Event()
        real = manager.run_compaction

        def recording_compaction(now_ms: int | None = None) -> int:
            seen.append(threading.get_ident())
            ran.set()
            return real(now_ms)

        manager.run_compaction = recording_compaction
        try:
            assert ran.wait(30), "no compaction pass ran"
        finally:
            manager.run_compaction = real
        assert seen and all(ident != loop_thread for ident in seen)


def _compacted_log(directory: Path, megabytes: int) -> Log:
    """A compacted log of about `megabytes` MB in 1 MiB segments: 100-record batches over 5,000 keys, so
    most records are superseded and most batches are rewritten by a pass."""
    cfg = LogConfig(segment_bytes=1 << 20, cleanup_policy="compact", min_compaction_lag_ms=0)
    log = Log(directory, cfg)
    value = b"v" * 60
    n = 0
    while log.size < megabytes << 20:
        log.append(build_record_batch([(b"key-%d" % ((n + i) % 5000), value, []) for i in range(100)]))
        n += 100
    log.update_high_watermark(log.log_end_offset)
    return log


def test_compaction_does_not_hold_the_log_lock_while_it_reads_and_writes(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A real pass over 8 MB runs in a thread. Its two unlocked phases (the offset map's read of the
    segments, and each cleaned copy's read and write) are each stopped at their start until a probe has
    appended, moved the high watermark and read from another thread: with the log's lock held there, the
    probe would wait for the whole pass and the phase's wait would time out. (The pass held the lock from
    start to end, so an append waited for all of it: on `__consumer_offsets`, every group commit.) No
    timing is asserted: the order of events is."""
    from kaflite.storage import cleaner

    log = _compacted_log(tmp_path / "c-0", 8)
    segments_before = len(log.segments)
    entered = {name: threading.Event() for name in ("_build_offset_map", "_clean_segment")}
    probed = {name: threading.Event() for name in entered}
    probe_first: dict[str, bool] = {}

    def gated(name: str) -> Any:
        real = getattr(cleaner, name)

        def phase(*args: Any, **kwargs: Any) -> Any:
            if name not in probe_first:
                entered[name].set()
                probe_first[name] = probed[name].wait(10)  # the probe appends meanwhile, or the lock is held
            return real(*args, **kwargs)
        return phase

    for name in entered:
        monkeypatch.setattr(cleaner, name, gated(name))
    result: list[CleanResult] = []
    worker = threading.Thread(target=lambda: result.append(compact_log(log, int(time.time() * 1000), force=True)))
    probe = build_record_batch([(b"probe", b"x", [])])
    worker.start()
    for name in entered:  # in the pass's order
        assert entered[name].wait(30), f"the pass never reached {name}"
        r = log.append(probe)
        log.update_high_watermark(log.log_end_offset)
        assert log.read(r.base_offset, 1 << 16).size > 0
        probed[name].set()
    worker.join(60)
    assert not worker.is_alive()
    assert probe_first == {"_build_offset_map": True, "_clean_segment": True}, probe_first
    assert result and result[0].cleaned and result[0].records_removed > 0
    # nothing the probes wrote was lost by the swap
    assert len(log.segments) >= segments_before
    last = log.read(log.log_end_offset - 1, 1 << 16)
    assert last.size > 0
    log.close()


def test_offsets_replay_reads_in_a_worker_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readers: list[int] = []
    sizes: set[int] = set()
    real = OffsetsTopicWriter.loaded_records

    def records(lg: Any, read_bytes: int) -> Any:
        readers.append(threading.get_ident())
        sizes.add(read_bytes)
        return real(lg, read_bytes)

    monkeypatch.setattr(OffsetsTopicWriter, "loaded_records", staticmethod(records))
    monkeypatch.setattr(OffsetsTopicWriter, "THREAD_MIN_BYTES", 0)  # as if the partition were big
    with EmbeddedBroker(data_dir=tmp_path, overrides={"offsets.load.buffer.size": "4096"}) as b:
        broker = b.server.broker
        loop_thread = b.call(threading.get_ident)
        # __consumer_offsets created (in a worker thread) and loaded, as the first FindCoordinator does
        asyncio.run_coroutine_threadsafe(GroupService.of_async(broker), b._loop).result(30)  # noqa: SLF001

        def setup() -> Any:
            service = GroupService.of(broker)
            readers.clear()  # the start-up loads of the (empty) partitions
            # a key the replay cannot read (it skips it, logged): the partition is no longer empty
            broker.append(OFFSETS_TOPIC, 0, build_record_batch([(b"\xff\xff", b"x", [])]))
            return service.writer.read(0), service.writer.read(1)

        nonempty, empty = b.call(setup)
        assert list(empty) == [] and readers == [loop_thread]  # an empty partition is read at once
        readers.clear()

        async def replay() -> Any:
            return await nonempty

        records_read = asyncio.run_coroutine_threadsafe(replay(), b._loop).result(30)  # noqa: SLF001
        assert records_read == [(b"\xff\xff", b"x")]
        assert readers and all(ident != loop_thread for ident in readers)
        assert sizes == {4096}  # offsets.load.buffer.size is the read size of the replay


def test_flush_before_acknowledge_fsyncs_off_the_loop_before_the_answer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """flush.messages=1: the produce is answered after its fdatasync, which runs in a worker thread (an
    fsync on the loop made every connection wait for every fsync)."""
    from confluent_kafka import Producer

    syncs: list[int] = []
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        syncs.append(threading.get_ident())
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    with EmbeddedBroker(data_dir=tmp_path, overrides={"log.flush.interval.messages": "1"}) as b:
        loop_thread = b.call(threading.get_ident)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "acks": 1})
        durable_at_ack: list[tuple[int, int]] = []
        log_ = None
        for i in range(5):
            syncs.clear()

            def delivered(err: Any, msg: Any) -> None:
                assert err is None, err
                lg = b.server.broker.log_manager.get("durable", 0)
                durable_at_ack.append((msg.offset(), lg.recovery_point))

            p.produce("durable", value=b"v%d" % i, partition=0, on_delivery=delivered)
            assert p.flush(30) == 0
            assert syncs and loop_thread not in syncs, "fdatasync ran on the event loop"
        log_ = b.server.broker.log_manager.get("durable", 0)
        assert log_ is not None
        # each answer came after the fsync that covered its record
        assert all(rp > offset for offset, rp in durable_at_ack), durable_at_ack


def test_flush_before_acknowledge_covers_offset_commits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """flush.messages=1 holds for the group coordinator's writes too: a synchronous offset commit is
    answered after the fdatasync that covered its record in __consumer_offsets, run in a worker thread
    (the coordinator's appends go through the same Log, which never fsyncs inside an append)."""
    from confluent_kafka import Consumer, TopicPartition

    syncs: list[int] = []
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        syncs.append(threading.get_ident())
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    overrides = {"log.flush.interval.messages": "1", "log.flush.scheduler.interval.ms": "3600000"}
    with EmbeddedBroker(data_dir=tmp_path, overrides=overrides) as b:
        loop_thread = b.call(threading.get_ident)
        b.call(lambda: b.server.broker.create_topic("t", 1, None))
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g-durable", "enable.auto.commit": False})
        try:
            for i in range(1, 4):
                syncs.clear()
                c.commit(offsets=[TopicPartition("t", 0, i)], asynchronous=False)
                logs = [lg for p in range(50) if (lg := b.server.broker.log_manager.get(OFFSETS_TOPIC, p))
                        is not None and lg.log_end_offset > 0]
                assert len(logs) == 1
                assert logs[0].recovery_point == logs[0].log_end_offset, "commit answered before its fsync"
                assert syncs and loop_thread not in syncs, "fdatasync ran on the event loop"
        finally:
            c.close()


def test_delete_records_renames_and_checkpoints_off_the_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DeleteRecords on the leader moves the log start offset, renames the segments below it and rewrites
    the log-start-offset checkpoint with fsyncs: in a worker thread (it ran on the event loop, under the
    log's lock), and the answer still carries the new low watermark."""
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    threads: dict[str, list[int]] = {"fsync": [], "rename": []}
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        threads["fsync"].append(threading.get_ident())
        real_fsync(fd)

    def replace(src: Any, dst: Any) -> None:
        threads["rename"].append(threading.get_ident())
        real_replace(src, dst)

    with EmbeddedBroker(data_dir=tmp_path) as b:
        loop_thread = b.call(threading.get_ident)
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("dr-off", 1, 1, config={"segment.bytes": "1024"})])["dr-off"].result(10)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
        for _ in range(20):
            p.produce("dr-off", b"x" * 200, partition=0)
            p.flush(10)  # one batch each: several segments of 1 KiB
        log_ = b.server.broker.log_manager.get("dr-off", 0)
        assert log_ is not None and len(log_.segments) > 3
        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "replace", replace)
        (f,) = admin.delete_records([TopicPartition("dr-off", 0, 15)]).values()
        assert f.result(timeout=10).low_watermark == 15
        monkeypatch.setattr(os, "fsync", real_fsync)
        monkeypatch.setattr(os, "replace", real_replace)
    assert threads["fsync"] and threads["rename"]
    assert loop_thread not in threads["fsync"] and loop_thread not in threads["rename"]


def test_single_node_topic_deletion_renames_off_the_loop_before_the_metadata(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DeleteTopics on a single node renames each partition directory in a worker thread (it ran on the
    event loop: one rename per partition), and writes the metadata file only after the renames (logs first:
    a crash in between leaves markers the next start completes)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    events: list[tuple[str, int]] = []
    real_rename = os.rename

    def rename(src: Any, dst: Any) -> None:
        events.append(("rename", threading.get_ident()))
        real_rename(src, dst)

    with EmbeddedBroker(data_dir=tmp_path) as b:
        loop_thread = b.call(threading.get_ident)
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("del-off", 20, 1)])["del-off"].result(10)
        writer = b.server.broker.topic_admin
        real_delete = writer.delete_topic

        def recording_delete(name: str) -> Any:
            events.append(("metadata", threading.get_ident()))
            return real_delete(name)

        monkeypatch.setattr(writer, "delete_topic", recording_delete)
        monkeypatch.setattr(os, "rename", rename)
        admin.delete_topics(["del-off"])["del-off"].result(10)
        monkeypatch.setattr(os, "rename", real_rename)
        assert b.server.broker.log_manager.get("del-off", 0) is None
    renames = [t for what, t in events if what == "rename"]
    assert len(renames) == 20 and loop_thread not in renames
    assert [what for what, _t in events][-1] == "metadata"  # after every rename


def _recording_log_class(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Make every Log the LogManager creates record (its directory's name, the creating thread)."""
    import kaflite.storage.manager as manager_module

    created: list[tuple[str, int]] = []

    class RecordingLog(Log):
        def __init__(self, directory: Path, *args: Any, **kwargs: Any) -> None:
            created.append((Path(directory).name, threading.get_ident()))
            super().__init__(directory, *args, **kwargs)

    monkeypatch.setattr(manager_module, "Log", RecordingLog)
    return created


def test_single_node_topic_creation_creates_the_logs_off_the_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CreateTopics and Metadata's auto-creation on a single node create the partitions' logs in a worker
    thread (they were created on the event loop: a topic of 30 partitions stalled it for about 0.5 s), and
    still answer only once the topic is in the metadata and writable."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from kaflite.server.handlers.metadata import resolve_topic

    created = _recording_log_class(monkeypatch)
    with EmbeddedBroker(data_dir=tmp_path, overrides={"num.partitions": "12"}) as b:
        loop_thread = b.call(threading.get_ident)
        broker = b.server.broker
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("big-off", 30, 1)])["big-off"].result(10)
        # answered: every partition hosted with its log, and a produce to the last one is acknowledged
        assert b.call(lambda: broker.metadata.topics["big-off"].num_partitions) == 30
        assert all(b.call(broker.get_log, "big-off", p) is not None for p in range(30))
        producer = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
        delivered: list[Any] = []
        producer.produce("big-off", b"v", partition=29, on_delivery=lambda err, _m: delivered.append(err))
        producer.flush(10)
        assert delivered == [None]

        async def auto_create() -> Any:
            return await resolve_topic(broker, "auto-off", True)

        topic, code = asyncio.run_coroutine_threadsafe(auto_create(), b._loop).result(30)  # noqa: SLF001
        assert code == 0 and topic.num_partitions == 12
        assert b.call(lambda: broker.log_manager.get("auto-off", 11)) is not None
        del producer, admin  # their threads stop before the broker does (no reconnect noise)
    for name in ("big-off", "auto-off"):
        threads = [t for d, t in created if d.rpartition("-")[0] == name]
        assert len(threads) == (30 if name == "big-off" else 12)
        assert loop_thread not in threads, f"{name}: a log was created on the event loop thread"


def test_single_node_concurrent_creations_keep_their_guarantees(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the file work in a worker thread: of two concurrent creations of one name exactly one
    succeeds (the other TOPIC_ALREADY_EXISTS), and a topic created (or deleted) on the loop after another
    creation wrote the metadata file but before it published its image is not lost from the file, nor a
    deleted one brought back."""
    from kaflite.protocol.errors import ErrorCode, KafkaError

    with EmbeddedBroker(data_dir=tmp_path) as b:
        broker = b.server.broker
        loop = b._loop  # noqa: SLF001
        assert loop is not None
        writer = broker.topic_admin
        b.call(broker.create_topic, "doomed-off", 3)
        real_persist = writer.persist_topic
        changed_meanwhile = threading.Event()

        def changes_on_the_loop() -> None:
            broker.create_topic("sync-off", 2)
            broker.delete_topic("doomed-off")
            changed_meanwhile.set()

        def persist_then_change(topic: Any) -> Any:
            base = real_persist(topic)
            if not changed_meanwhile.is_set():  # the first creation: the loop changes the image now
                loop.call_soon_threadsafe(changes_on_the_loop)
                assert changed_meanwhile.wait(10)
            return base

        monkeypatch.setattr(writer, "persist_topic", persist_then_change)

        async def race() -> list[Any]:
            return await asyncio.gather(broker.create_topic_async("same-off", 40),
                                        broker.create_topic_async("same-off", 40), return_exceptions=True)

        first, second = asyncio.run_coroutine_threadsafe(race(), loop).result(30)
        assert changed_meanwhile.is_set()
        outcomes = [first, second]
        refused = [o for o in outcomes if isinstance(o, KafkaError)]
        assert len(refused) == 1 and refused[0].code == ErrorCode.topic_already_exists
        assert sum(1 for o in outcomes if not isinstance(o, BaseException)) == 1
        # the file itself (a restart would adopt the logs of a topic missing from it, hiding the loss)
        saved = json.loads(writer.path.read_text())["topics"]
    assert {n: t["num_partitions"] for n, t in saved.items() if n.endswith("-off")} == {
        "same-off": 40, "sync-off": 2}


def test_single_node_internal_topics_are_created_off_the_loop_by_find_coordinator(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first FindCoordinator of a group and of a transactional id on a fresh single node creates
    `__consumer_offsets` and `__transaction_state` with their logs in a worker thread (they were created on
    the event loop: 50 partitions each), and still answers with this broker as the coordinator."""
    from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
    from kio.static.primitive import i8
    from kwire import WireClient

    created = _recording_log_class(monkeypatch)
    overrides = {"offsets.topic.num.partitions": "7", "transaction.state.log.num.partitions": "6"}
    with EmbeddedBroker(data_dir=tmp_path, overrides=overrides) as b, WireClient(b.bootstrap) as c:
        loop_thread = b.call(threading.get_ident)
        for key_type in (0, 1):
            r = c.request(FindCoordinatorRequest(key_type=i8(key_type), coordinator_keys=("k",)))
            assert [(x.error_code, x.node_id) for x in r.coordinators] == [(0, b.server.broker.node_id)]
    for name, count in (("__consumer_offsets", 7), ("__transaction_state", 6)):
        threads = [t for d, t in created if d.rpartition("-")[0] == name]
        assert len(threads) == count
        assert loop_thread not in threads, f"{name}: a log was created on the event loop thread"


def test_single_node_share_state_topic_is_created_off_the_loop_by_the_first_heartbeat(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A share consumer's first ShareGroupHeartbeat on a fresh single node creates `__share_group_state`
    with its logs in a worker thread (the first ShareFetch created them on the event loop: 50 partitions)."""
    import uuid

    from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
    from kio.static.primitive import i32
    from kwire import WireClient

    created = _recording_log_class(monkeypatch)
    overrides = {"group.share.enable": "true", "share.coordinator.state.topic.num.partitions": "4"}
    with EmbeddedBroker(data_dir=tmp_path, overrides=overrides) as b, WireClient(b.bootstrap) as c:
        loop_thread = b.call(threading.get_ident)
        r = c.request(ShareGroupHeartbeatRequest(group_id="sg", member_id=str(uuid.uuid4()), member_epoch=i32(0),
                                                 rack_id=None, subscribed_topic_names=("t",)))
        assert r.error_code == 0
        assert b.call(lambda: "__share_group_state" in b.server.broker.metadata.topics)
    threads = [t for d, t in created if d.rpartition("-")[0] == "__share_group_state"]
    assert len(threads) == 4 and loop_thread not in threads


def test_single_node_ensure_internal_topic_does_not_hold_the_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a single node a coordinator that needs its internal topic where nothing can wait for its creation
    (`GroupService.of`, as a tool or the broker's own paths call it -> `Broker.ensure_internal_topic`) starts
    the creation off the event loop and is not available meanwhile: ensure_internal_topic answers None at
    once (FindCoordinator would answer COORDINATOR_NOT_AVAILABLE; on a single node it waits instead), a group
    step NOT_COORDINATOR (Kafka's answer for a partition not loaded: the client looks the coordinator up
    again); the logs are created in a worker thread, the shards load once the topic is in the image, and the
    loop thread's longest turn meanwhile (its CPU time, garbage collection off) is under half of creating a
    topic of as many partitions on the loop."""
    created = _recording_log_class(monkeypatch)
    n = 50
    overrides = {"offsets.topic.num.partitions": str(n)}
    with EmbeddedBroker(data_dir=tmp_path, overrides=overrides) as b:
        broker = b.server.broker

        async def scenario() -> tuple[float, float, int, Any]:
            loop_thread = threading.get_ident()
            answers: list[Any] = []

            def describe(shard: Any, now: int) -> Any:
                return shard.handle_describe_groups(["g"], now)

            def inline(name: str) -> Callable[[], Awaitable[None]]:
                async def create() -> None:  # what ensure_internal_topic did on a single node
                    broker.create_topic(name, n, {"cleanup.policy": "compact"}, replication_factor=1)
                return create

            async def off_loop() -> None:
                svc = GroupService.of(broker)  # -> ensure_internal_topic: the creation started, not awaited
                assert OFFSETS_TOPIC not in broker.metadata.topics
                assert svc.ensure_topic() is None  # still being created: one creation, not two
                answers.append(await svc.call("g", describe, lambda code: code))
                deadline = time.monotonic() + 20
                while len(svc.runtime.partitions()) < n:
                    assert time.monotonic() < deadline, "the shards were not loaded within 20 s"
                    await asyncio.sleep(0.005)
                answers.append(await svc.call("g", describe, lambda code: code))

            # the slower of two inline creations: one measured fast by chance made the ratio flaky
            inline_s = max([await longest_loop_turn(inline(f"inline-{i}")) for i in range(2)])
            off_s = await longest_loop_turn(off_loop)
            return inline_s, off_s, loop_thread, answers

        inline_s, off_s, loop_thread, answers = asyncio.run_coroutine_threadsafe(
            scenario(), b._loop).result(60)  # noqa: SLF001
        from kaflite.protocol.errors import ErrorCode
        assert answers[0] is ErrorCode.not_coordinator
        assert [(g.group_id, g.error) for g in answers[1]] == [("g", ErrorCode.none)]  # served once loaded
        topic = b.call(lambda: broker.metadata.topics[OFFSETS_TOPIC])
        assert [p.replicas for p in topic.partitions] == [(broker.node_id,)] * n
    threads = [t for d, t in created if d.rpartition("-")[0] == OFFSETS_TOPIC]
    assert len(threads) == n and loop_thread not in threads, "a __consumer_offsets log was created on the loop"
    assert off_s < inline_s / 2, f"longest turn {off_s * 1000:.1f} ms of CPU vs {inline_s * 1000:.1f} ms inline"
