"""LogManager: layout, placement, checkpoints, clean shutdown marker, delete, retention schedule."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import pytest

from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.storage import LogConfig, LogManager
from kaflite.storage.checkpoint import read_offset_checkpoint
from storage.storage_util import ManualClock, batch


def test_create_load_and_checkpoints(tmp_path: Path, clock: ManualClock) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    m = LogManager(dirs, LogConfig(), now_ms=clock)
    m.load()
    logs = [m.get_or_create("orders", p) for p in range(4)]
    assert m.get_or_create("orders", 0) is logs[0]
    assert {lg.dir.parent.name for lg in logs} == {"d1", "d2"}  # spread over the log dirs
    for i, lg in enumerate(logs):
        for _ in range(i + 1):
            lg.append(batch(2, ts=clock.ms))
        lg.update_high_watermark(lg.log_end_offset)
    assert m.get("orders", 9) is None and set(m.logs()) == {("orders", p) for p in range(4)}
    m.close()
    for d in dirs:
        assert (d / ".kafka_cleanshutdown").exists()
    hw = {**read_offset_checkpoint(dirs[0] / "replication-offset-checkpoint"),
          **read_offset_checkpoint(dirs[1] / "replication-offset-checkpoint")}
    assert hw == {("orders", p): 2 * (p + 1) for p in range(4)}

    m2 = LogManager(dirs, LogConfig(), now_ms=clock)
    m2.load()
    assert not any((d / ".kafka_cleanshutdown").exists() for d in dirs)
    got = m2.logs()
    assert {k: (lg.log_end_offset, lg.high_watermark) for k, lg in got.items()} == {
        ("orders", p): (2 * (p + 1), 2 * (p + 1)) for p in range(4)
    }
    m2.close()


def test_unclean_stop_recovers_from_the_checkpointed_recovery_point(tmp_path: Path, clock: ManualClock) -> None:
    m = LogManager([tmp_path], LogConfig(segment_bytes=200), now_ms=clock)
    m.load()
    lg = m.get_or_create("t", 0)
    for _ in range(10):
        lg.append(batch(1, ts=clock.ms))
    lg.flush()
    m.checkpoint()
    for _ in range(3):
        lg.append(batch(1, ts=clock.ms))
    # no close(): simulate a crash by abandoning the objects, and tear the tail
    tail = lg.active_segment.log_path
    with open(tail, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x0d\x00\x00\x01\x00garbage")
    m.close(clean=False)  # what dying does to the directory lock; no checkpoint, no clean-shutdown marker
    m2 = LogManager([tmp_path], LogConfig(segment_bytes=200), now_ms=clock)
    m2.load()
    lg2 = m2.get("t", 0)
    assert lg2 is not None and lg2.log_end_offset == 13 and lg2.recovered_bytes_truncated > 0
    assert lg2.recovery_point == 13
    assert lg2.append(batch(1, ts=clock.ms)).base_offset == 13
    m2.close()


def test_delete_removes_the_directory(tmp_path: Path, clock: ManualClock) -> None:
    m = LogManager([tmp_path], now_ms=clock)
    m.load()
    lg = m.get_or_create("gone", 0)
    lg.append(batch(1))
    m.delete("gone", 0)
    assert m.get("gone", 0) is None
    # renamed at once, removed after file.delete.delay.ms (tests/storage/test_delete_delay.py)
    assert [p.name.endswith("-delete") for p in tmp_path.iterdir() if p.name.startswith("gone")] == [True]
    assert m.get_or_create("gone", 0).log_end_offset == 0  # recreated empty
    clock.advance(LogConfig().file_delete_delay_ms)
    assert m.delete_due_segments(clock.ms) == 1
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("gone")] == ["gone-0"]
    m.close()


@pytest.mark.parametrize("topic", ["", "a/b", "x" * 250, "..", "sp ace"])
def test_bad_topic_names(tmp_path: Path, topic: str) -> None:
    m = LogManager([tmp_path])
    with pytest.raises(KafkaError) as e:
        m.get_or_create(topic, 0)
    assert e.value.code == ErrorCode.invalid_topic_exception


def test_run_retention_and_lso_checkpoint(tmp_path: Path, clock: ManualClock) -> None:
    one = len(batch(1))
    m = LogManager([tmp_path], LogConfig(segment_bytes=one * 2, retention_ms=10_000), now_ms=clock)
    m.load()
    lg = m.get_or_create("t", 0)
    for i in range(6):
        lg.append(batch(1, ts=clock.ms + i * 1000))
    lg.update_high_watermark(lg.log_end_offset)
    assert m.run_retention(clock.ms + 10_500) == 0
    assert m.run_retention(clock.ms + 12_500) == 1  # segment [0,1] max ts +1000 is 11.5 s old
    assert lg.log_start_offset == 2
    assert read_offset_checkpoint(tmp_path / "log-start-offset-checkpoint") == {("t", 0): 2}
    assert m.run_retention(clock.ms + 100_000) == 1  # never the active segment
    assert [s.base_offset for s in lg.segments] == [4]
    m.close()


def test_flush_due_flushes_by_flush_ms(tmp_path: Path, clock: ManualClock) -> None:
    m = LogManager([tmp_path], LogConfig(flush_interval_ms=100), now_ms=clock)
    m.load()
    lg = m.get_or_create("t", 0)
    lg.append(batch(1))
    assert m.flush_due(clock.ms + 50) == 0
    assert m.flush_due(clock.ms + 150) == 1
    assert read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {("t", 0): 1}
    m.close()


def test_config_from_topic_and_broker_names() -> None:
    cfg = LogConfig.from_topic_configs({"retention.ms": "1000", "cleanup.policy": "delete,compact",
                                        "flush.messages": "1", "min.insync.replicas": "2",
                                        "segment.bytes": "1048576"})
    assert (cfg.retention_ms, cfg.cleanup_policy, cfg.flush_interval_messages) == (1000, "compact,delete", 1)
    assert cfg.compact and cfg.delete and cfg.segment_bytes == 1048576
    with pytest.raises(KafkaError) as e:
        LogConfig.from_topic_configs({"retention.mss": "1"})
    assert e.value.code == ErrorCode.invalid_config and "retention.mss" in e.value.message
    with pytest.raises(KafkaError) as e:
        LogConfig.from_topic_configs({"cleanup.policy": "forever"})
    assert "cleanup.policy" in e.value.message
    with pytest.raises(KafkaError) as e:
        LogConfig.from_topic_configs({"segment.bytes": "big"})
    assert "segment.bytes" in e.value.message
    b = LogConfig.from_broker_configs({"log.retention.hours": "1", "log.retention.minutes": "2",
                                       "log.roll.hours": "3", "log.flush.interval.messages": "1"})
    assert (b.retention_ms, b.segment_ms, b.flush_interval_messages) == (120_000, 3 * 3600_000, 1)
    assert LogConfig.from_broker_configs({"log.retention.hours": "-1"}).retention_ms == -1


def test_truncation_lowers_the_checkpointed_recovery_point(tmp_path: Path) -> None:
    m = LogManager([tmp_path], LogConfig())
    m.load()
    lg = m.get_or_create("t", 0)
    for _ in range(5):
        lg.append(batch(2))
    lg.flush()
    m.checkpoint()
    assert read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {("t", 0): 10}
    lg.truncate_to(4)
    assert read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {("t", 0): 4}
    m.close()


def test_a_data_directory_is_locked_while_open(tmp_path: Path) -> None:
    from kaflite.storage.manager import LogDirLockedError

    m = LogManager([tmp_path])
    m.load()
    with pytest.raises(LogDirLockedError) as err:
        LogManager([tmp_path])  # a second broker on the same directory (in-process here)
    assert str(tmp_path / ".lock") in str(err.value)
    m.close()
    m2 = LogManager([tmp_path])  # released on close
    m2.load()
    m2.close()


def test_a_new_partition_directory_is_not_scanned_but_an_existing_one_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory the log just created is empty: listing it four times (temporary files, segments,
    snapshots, transaction indexes) was most of the cost of a new partition. One that already existed
    (a leftover of a crash, of a deletion) is still scanned and cleaned as before."""
    listed: list[str] = []
    real_iterdir = Path.iterdir
    real_listdir = os.listdir

    def counting_iterdir(self: Path):  # type: ignore[no-untyped-def]
        listed.append(self.name)
        return real_iterdir(self)

    def counting_listdir(path):  # type: ignore[no-untyped-def]
        listed.append(Path(path).name)
        return real_listdir(path)

    monkeypatch.setattr(Path, "iterdir", counting_iterdir)
    monkeypatch.setattr(os, "listdir", counting_listdir)  # (the load lists a directory once, with os.listdir)
    m = LogManager([tmp_path], LogConfig())
    m.load()
    leftover = tmp_path / "old-0"  # appears after load(): get_or_create opens it
    leftover.mkdir()
    (leftover / "00000000000000000000.log.deleted").write_bytes(b"junk")
    listed.clear()
    new = m.get_or_create("new", 0)
    assert "new-0" not in listed
    assert (new.log_end_offset, new.log_start_offset, new.high_watermark, new.recovery_point) == (0, 0, 0, 0)
    assert new.leader_epoch_cache.entries == [] and not new.recovered
    old = m.get_or_create("old", 0)
    assert "old-0" in listed and not (leftover / "00000000000000000000.log.deleted").exists()
    new.append(batch(3))
    assert new.log_end_offset == 3 and old.log_end_offset == 0
    m.close()


def test_roll_is_flushed_by_the_housekeeping_thread_and_moves_the_recovery_point(
        tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Kafka's flush on roll, under the default flush settings (no flush.ms, flush.messages Long.MAX): the
    rolled segments and their indexes are fsync'd by the housekeeping thread, never by the appending one,
    and the recovery point reaches the active segment's base, so a crash rescans only that segment."""
    synced: list[tuple[str, str]] = []
    real_fsync, real_fdatasync = os.fsync, os.fdatasync

    def fsync(fd: int) -> None:
        synced.append((threading.current_thread().name, os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def fdatasync(fd: int) -> None:
        synced.append((threading.current_thread().name, os.readlink(f"/proc/self/fd/{fd}")))
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "fdatasync", fdatasync)
    cfg = LogConfig(segment_bytes=300, index_interval_bytes=50)
    m = LogManager([tmp_path], cfg, now_ms=clock)
    m.load()
    lg = m.get_or_create("t", 0)
    synced.clear()
    for _ in range(60):
        lg.append(batch(1, value=b"x" * 40, ts=clock.ms))
    segments = lg.segments
    assert len(segments) >= 10 and lg.recovery_point == 0
    assert synced == []  # appending and rolling fsync nothing on the appending thread (the event loop)
    worker = threading.Thread(target=m.flush_due, name="housekeeping")
    worker.start()
    worker.join(30)
    active = lg.active_segment.base_offset
    assert lg.recovery_point == active
    assert synced and {name for name, _ in synced} == {"housekeeping"}
    paths = {p for _, p in synced}
    for seg in segments[:-1]:  # every rolled segment, with its indexes
        assert {str(seg.log_path), str(seg.index.path), str(seg.time_index.path)} <= paths
    assert str(segments[-1].log_path) not in paths  # the active one is not part of the roll's flush
    assert read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {("t", 0): active}
    lg.append(batch(1, ts=clock.ms))
    m.close(clean=False)  # a crash: no clean-shutdown marker
    caplog.set_level(logging.INFO, logger="kaflite.storage")
    m2 = LogManager([tmp_path], cfg, now_ms=clock)
    m2.load()
    assert m2.get("t", 0).log_end_offset == 61  # type: ignore[union-attr]
    recovered = [r.getMessage() for r in caplog.records if "recovered" in r.getMessage()]
    assert any(f"recovered 1 segment(s) [{active}] from recovery point {active}" in msg for msg in recovered), recovered
    m2.close()


def _logs_with_segments(mgr: LogManager, n: int) -> list:  # type: ignore[type-arg]
    logs = []
    for p in range(n):
        log = mgr.get_or_create("t", p, LogConfig(segment_bytes=300))
        for _ in range(6):
            log.append(batch(3))
        log.flush()
        logs.append(log)
    mgr.checkpoint(force=True)
    return logs


def test_truncation_writes_its_checkpoint_outside_the_log_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lowered recovery point of a truncation (and a moved log start offset) is checkpointed after the
    Log's lock is released: the checkpoint fsyncs, and under the lock every append, read and high-watermark
    update of the partition (on the event loop) waited for them."""
    mgr = LogManager([tmp_path])
    (log,) = _logs_with_segments(mgr, 1)
    under_lock: list[bool] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        under_lock.append(log.lock._is_owned())  # type: ignore[attr-defined]
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    assert log.truncate_to(4)
    assert read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint")[("t", 0)] == log.recovery_point
    log.update_high_watermark(log.log_end_offset)
    log.delete_records(3)
    assert read_offset_checkpoint(tmp_path / "log-start-offset-checkpoint")[("t", 0)] == 3
    assert under_lock and not any(under_lock)
    mgr.close()


def test_truncating_many_logs_writes_the_checkpoints_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka's LogManager.truncateTo: a failover truncating N partitions rewrites each checkpoint file once,
    not N times (each rewrite holds every partition: O(N^2) bytes and 3N fsyncs)."""
    import kaflite.storage.manager as manager_module

    mgr = LogManager([tmp_path])
    logs = _logs_with_segments(mgr, 20)
    writes: list[str] = []
    real_write = manager_module.write_offset_checkpoint

    def counting(path: Path, offsets: dict) -> None:  # type: ignore[type-arg]
        writes.append(path.name)
        real_write(path, offsets)

    monkeypatch.setattr(manager_module, "write_offset_checkpoint", counting)
    truncated = mgr.truncate_logs([(log, 4) for log in logs])
    assert truncated == logs
    assert sorted(writes) == sorted(set(writes)) and len(writes) <= 3  # each file at most once
    recovery = read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint")
    assert all(recovery[("t", p)] <= 4 for p in range(20))
    mgr.close()


def test_close_closes_the_logs_in_parallel_worker_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A clean stop's fsyncs overlap: `io_threads` logs are closed at once (each log by one thread only),
    and the checkpoints and the clean-shutdown marker come after every log has closed."""
    from kaflite.storage.log import Log

    m = LogManager([tmp_path], LogConfig(), io_threads=4)
    m.load()
    logs = [m.get_or_create("t", p) for p in range(8)]
    for lg in logs:
        lg.append(batch(2))
    together = threading.Barrier(4, timeout=2)  # passes only when 4 closes are in flight at once
    real_close = Log.close
    seen: list[tuple[str, str, bool]] = []
    lock = threading.Lock()

    def close(self: Log) -> list[str]:
        try:
            together.wait()
            met = True
        except threading.BrokenBarrierError:
            met = False
        with lock:
            seen.append((self.dir.name, threading.current_thread().name, met))
        assert not (tmp_path / ".kafka_cleanshutdown").exists()
        return real_close(self)

    monkeypatch.setattr(Log, "close", close)
    m.close()
    assert sorted(name for name, _t, _m in seen) == sorted(lg.dir.name for lg in logs)  # each log once
    assert all(met for _n, _t, met in seen)
    assert {t for _n, t, _m in seen} != {threading.current_thread().name}
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    assert all(lg.closed for lg in logs)
    assert read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {("t", p): 2 for p in range(8)}


def test_io_threads_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="io_threads"):
        LogManager([tmp_path], io_threads=0)


def _filled(tmp_path: Path, n: int) -> None:
    m = LogManager([tmp_path], LogConfig())
    m.load()
    for p in range(n):
        m.get_or_create("t", p).append(batch(p + 1))
    m.close()


def test_load_opens_the_logs_in_parallel_worker_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A start's log opens (small reads that wait on the disk) overlap: `io_threads` at once; the table
    comes out in the listing's order with every log's offsets, as a one-thread load gives."""
    from kaflite.storage import manager as manager_module
    from kaflite.storage.log import Log

    _filled(tmp_path, 8)
    together = threading.Barrier(4, timeout=2)  # passes only when 4 opens are in flight at once
    met: list[bool] = []

    class WaitingLog(Log):
        def __init__(self, *args: object, **kwargs: object) -> None:
            try:
                together.wait()
                met.append(True)
            except threading.BrokenBarrierError:
                met.append(False)
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(manager_module, "Log", WaitingLog)
    m = LogManager([tmp_path], LogConfig(), io_threads=4)
    m.load()
    assert met == [True] * 8
    assert list(m.logs()) == sorted(m.logs(), key=lambda tp: f"{tp[0]}-{tp[1]}")  # the listing's order
    assert {tp: lg.log_end_offset for tp, lg in m.logs().items()} == {("t", p): p + 1 for p in range(8)}
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    m.close()
    assert (tmp_path / ".kafka_cleanshutdown").exists()


def test_a_log_that_fails_to_open_leaves_the_others_in_the_table(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from kaflite.storage import manager as manager_module
    from kaflite.storage.log import Log

    _filled(tmp_path, 6)

    class FailingLog(Log):
        def __init__(self, directory: Path, *args: object, **kwargs: object) -> None:
            if Path(directory).name == "t-3":
                raise OSError(5, "Input/output error")
            super().__init__(directory, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(manager_module, "Log", FailingLog)
    m = LogManager([tmp_path], LogConfig(), io_threads=4)
    with pytest.raises(OSError, match="Input/output"):
        m.load()
    assert set(m.logs()) == {("t", p) for p in range(6) if p != 3}  # opened: closed by close() below
    m.close()
    assert all(lg.closed for lg in m.logs().values())


class _Forbidden:
    """A lock the housekeeping pass must not take."""

    def __enter__(self) -> None:
        raise AssertionError("the housekeeping pass took an idle log's lock")

    def __exit__(self, *exc: object) -> None:
        return None


def test_the_housekeeping_pass_skips_idle_logs_without_their_locks(tmp_path: Path, clock: ManualClock) -> None:
    """10,000 partitions: a pass (every second) takes no lock of a log with nothing due, and still flushes
    the one whose flush.ms elapsed."""
    m = LogManager([tmp_path], LogConfig(flush_interval_ms=1000), now_ms=clock)
    m.load()
    due, idle, empty = (m.get_or_create("t", p) for p in range(3))
    due.append(batch(1, ts=clock.ms))
    idle.append(batch(1, ts=clock.ms))
    clock.advance(2000)
    assert m.flush_due(clock.ms) == 2  # both flushed: nothing left unflushed in `idle`
    due.append(batch(1, ts=clock.ms))
    idle.append(batch(1, ts=clock.ms))
    idle.flush()  # flushed by itself: the pass has nothing to do for it
    clock.advance(2000)
    for lg in (idle, empty):
        lg._lock = lg._flush_lock = _Forbidden()  # type: ignore[assignment]
    assert m.flush_due(clock.ms) == 1
    assert idle.housekeeping_idle(clock.ms) and empty.housekeeping_idle(clock.ms)
    assert due.recovery_point == due.log_end_offset == 2
    assert due.housekeeping_idle(clock.ms)  # and idle from then on
    for lg in (idle, empty):
        lg._lock = lg._flush_lock = threading.RLock()  # type: ignore[assignment]
    m.close()


def test_a_clean_load_makes_no_leader_epoch_syscall_per_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """10,000 partitions at start: with no epoch change pending, opening a log does not try to remove a
    `leader-epoch-checkpoint.tmp` (the load's own sweep of `.tmp` files already did)."""
    _filled(tmp_path, 3)
    (tmp_path / "t-1" / "leader-epoch-checkpoint.tmp").write_bytes(b"torn")  # a crash's leftover: still swept
    tried: list[str] = []
    real_unlink = Path.unlink

    def unlink(self: Path, missing_ok: bool = False) -> None:
        tried.append(self.name)
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink)
    m = LogManager([tmp_path], LogConfig())
    m.load()
    assert tried.count("leader-epoch-checkpoint.tmp") == 1  # the leftover, by the sweep; none for the others
    assert not (tmp_path / "t-1" / "leader-epoch-checkpoint.tmp").exists()
    m.close()


def test_a_clean_load_reads_each_small_file_once_and_joins_one_path_per_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """10,000 partitions at start (issue 28): a clean load's cost is per log, so per log it reads each small
    file it needs (leader-epoch checkpoint, producer snapshot) with one `read` (a short read is the end of a
    regular file: no second read to find it) and builds one Path, its directory's (the files it reads are
    named by strings, a lazy segment's path is made on first use)."""
    from pathlib import PurePath

    _filled(tmp_path, 5)
    small_files = sum(1 for f in tmp_path.glob("t-*/*") if f.name.endswith((".snapshot", "leader-epoch-checkpoint")))
    assert small_files >= 5  # (every log has its stop's producer snapshot)
    reads: list[int] = []
    joins: list[str] = []
    real_read, real_div = os.read, PurePath.__truediv__

    def read(fd: int, n: int) -> bytes:
        reads.append(fd)
        return real_read(fd, n)

    def div(self: PurePath, key: str) -> PurePath:
        joins.append(str(key))
        return real_div(self, key)

    monkeypatch.setattr(os, "read", read)
    monkeypatch.setattr(PurePath, "__truediv__", div)
    m = LogManager([tmp_path], LogConfig(), io_threads=1)
    joins.clear()  # (the manager's own files: its lock, the checkpoints)
    m.load()
    monkeypatch.undo()
    assert len(m.logs()) == 5
    assert len(reads) <= small_files + 3  # + the three offset checkpoints of the log dir
    per_log = [j for j in joins if j.startswith("t-") or j.endswith((".log", "leader-epoch-checkpoint", ".snapshot"))]
    assert len(per_log) <= 5, per_log
    logs = sorted(m.logs().values(), key=lambda lg: lg.partition)
    assert all(seg.lazy for lg in logs for seg in lg.segments)
    assert [lg.log_end_offset for lg in logs] == [1, 2, 3, 4, 5]
    m.close()


def test_a_clean_load_rewrites_no_offset_checkpoint_but_a_changed_one(tmp_path: Path) -> None:
    """The load's closing checkpoint writes only the files whose offsets it changed: after a clean stop
    none (three files of 10,000 lines and their fsyncs at every start of 10,000 partitions); a partition
    gone since (its directory removed) changes all three, which are rewritten without it."""
    import shutil

    from kaflite.storage.checkpoint import (
        HIGH_WATERMARK_CHECKPOINT,
        LOG_START_OFFSET_CHECKPOINT,
        RECOVERY_POINT_CHECKPOINT,
    )

    names = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, HIGH_WATERMARK_CHECKPOINT)
    _filled(tmp_path, 3)

    def inodes() -> list[int]:
        return [os.stat(tmp_path / n).st_ino for n in names]

    before = inodes()
    m = LogManager([tmp_path], LogConfig())
    m.load()
    assert inodes() == before  # (an atomic rewrite replaces the file: a new inode)
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {("t", 0): 1, ("t", 1): 2, ("t", 2): 3}
    m.close()
    shutil.rmtree(tmp_path / "t-1")
    before = inodes()
    m = LogManager([tmp_path], LogConfig())
    m.load()
    assert all(a != b for a, b in zip(inodes(), before, strict=True))
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {("t", 0): 1, ("t", 2): 3}
    m.close()


def test_a_failed_load_closes_without_the_clean_shutdown_marker(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """After an unclean stop, a start whose load fails (one log does not open) must not leave a
    clean-shutdown marker behind when it closes: the next start would trust the logs that were never
    recovered. (A broker's failed start closes its LogManager with the default clean=True.)"""
    from kaflite.storage import manager as manager_module
    from kaflite.storage.checkpoint import CLEAN_SHUTDOWN_FILE
    from kaflite.storage.log import Log

    _filled(tmp_path, 3)
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()  # the last stop was a crash: every log needs its recovery

    class FailingLog(Log):
        def __init__(self, directory: Path, *args: object, **kwargs: object) -> None:
            if Path(directory).name == "t-1":
                raise OSError(5, "Input/output error")
            super().__init__(directory, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(manager_module, "Log", FailingLog)
    m = LogManager([tmp_path], LogConfig())
    with pytest.raises(OSError, match="Input/output"):
        m.load()
    m.close()
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
