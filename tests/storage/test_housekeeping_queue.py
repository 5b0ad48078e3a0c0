"""The housekeeping queue (issue 28, an idle broker of 10,000 partitions): the pass visits only the logs that
queued themselves (Log rules, LogManager rules), and every piece of housekeeping happens no later than when
the pass visited every log: a flush by flush.ms or flush.messages, the flush of a roll (size or segment.ms),
retention.ms, the removal of deleted segments after file.delete.delay.ms. Clocks are injected."""

from __future__ import annotations

import errno
import threading
from pathlib import Path

import pytest

import kaflite.storage.log as log_module
from kaflite.storage import Log, LogConfig, LogManager
from kaflite.storage.checkpoint import read_offset_checkpoint
from storage.storage_util import ManualClock, batch


class _Forbidden:
    """A lock (or a method) the pass must not touch for an idle log."""

    def __enter__(self) -> None:
        raise AssertionError("the housekeeping pass took an idle log's lock")

    def __exit__(self, *exc: object) -> None:
        return None


def _manager(tmp_path: Path, clock: ManualClock, **cfg: int) -> LogManager:
    m = LogManager([tmp_path], LogConfig(**cfg), now_ms=clock)  # type: ignore[arg-type]
    m.load()
    return m


def _pass(m: LogManager, now: int) -> int:
    """One broker housekeeping pass as server/broker.py's `_storage_pass` runs it (without the schedules)."""
    flushed = m.flush_due(now)
    m.delete_due_segments(now)
    return flushed


def test_an_idle_log_is_not_visited_by_the_pass(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After one pass, logs with nothing to do (empty, or unflushed data that no pass would flush under the
    default flush settings) leave the queue: the next passes read nothing of them, not even
    `housekeeping_idle` (the base visited all 10,000 every second)."""
    m = _manager(tmp_path, clock)
    logs = [m.get_or_create("t", p) for p in range(50)]
    for lg in logs[:25]:
        lg.append(batch(2, ts=clock.ms))
    _pass(m, clock.ms)
    assert m.queued_for_housekeeping == 0
    visited: list[Log] = []
    real = Log.housekeeping_idle

    def counting(self: Log, now_ms: int) -> bool:
        visited.append(self)
        return real(self, now_ms)

    monkeypatch.setattr(Log, "housekeeping_idle", counting)
    for lg in logs:
        lg._lock = lg._flush_lock = _Forbidden()  # type: ignore[assignment]
    for _ in range(3):
        clock.advance(1000)
        assert _pass(m, clock.ms) == 0
    assert visited == []
    for lg in logs:
        lg._lock, lg._flush_lock = threading.RLock(), threading.Lock()  # type: ignore[assignment]
    m.close()


def test_unflushed_data_under_flush_ms_stays_queued_and_is_flushed_when_due(
    tmp_path: Path, clock: ManualClock
) -> None:
    m = _manager(tmp_path, clock, flush_interval_ms=1000)
    lg = m.get_or_create("t", 0)
    _pass(m, clock.ms)  # the new log's epoch file etc.; nothing unflushed yet
    lg.append(batch(1, ts=clock.ms))
    for step in (300, 300, 300):  # 900 ms after the last flush: not due, still queued
        clock.advance(step)
        assert _pass(m, clock.ms) == 0
        assert m.queued_for_housekeeping == 1 and lg.recovery_point == 0
    clock.advance(100)
    assert _pass(m, clock.ms) == 1  # flush.ms elapsed: flushed at this pass, as before
    assert lg.recovery_point == 1
    assert read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {("t", 0): 1}
    _pass(m, clock.ms)
    assert m.queued_for_housekeeping == 0  # nothing unflushed: it leaves the queue
    m.close()


def test_flush_messages_reached_is_flushed_by_the_next_pass(tmp_path: Path, clock: ManualClock) -> None:
    """Appends nobody flushed (a follower's, a coordinator's) past flush.messages."""
    m = _manager(tmp_path, clock, flush_interval_messages=3)
    lg = m.get_or_create("t", 0)
    lg.append(batch(2, ts=clock.ms))
    _pass(m, clock.ms)
    assert lg.recovery_point == 0 and m.queued_for_housekeeping == 0  # 2 < 3: no pass would flush it
    lg.append(batch(1, ts=clock.ms))  # 3 unflushed: the append queued the log
    assert m.queued_for_housekeeping == 1
    assert _pass(m, clock.ms) == 1 and lg.recovery_point == 3
    m.close()


def test_a_config_change_queues_the_log(tmp_path: Path, clock: ManualClock) -> None:
    """Unflushed data under the default settings is left unqueued; an AlterConfigs of flush.ms queues it and
    the pass flushes it, as the pass that visited every log did."""
    m = _manager(tmp_path, clock)
    lg = m.get_or_create("t", 0)
    lg.append(batch(1, ts=clock.ms))
    clock.advance(1000)
    _pass(m, clock.ms)
    assert m.queued_for_housekeeping == 0 and lg.recovery_point == 0
    lg.update_config(LogConfig(flush_interval_ms=500))
    assert m.queued_for_housekeeping == 1
    assert _pass(m, clock.ms) == 1 and lg.recovery_point == 1  # 1 s since the last flush (the open) >= 500 ms
    m.close()


def test_a_roll_by_segment_ms_is_flushed_at_the_next_pass(tmp_path: Path, clock: ManualClock) -> None:
    """segment.ms rolls at the first append after it elapsed (Kafka's, never by the pass); that append queues
    the log and the next pass flushes the rolled segment (the recovery point moves to the new base)."""
    m = _manager(tmp_path, clock, segment_ms=10_000)
    lg = m.get_or_create("t", 0)
    lg.append(batch(1, ts=clock.ms))
    _pass(m, clock.ms)
    assert m.queued_for_housekeeping == 0
    clock.advance(10_001)
    lg.append(batch(1, ts=clock.ms))
    assert [s.base_offset for s in lg.segments] == [0, 1]  # rolled by time
    assert m.queued_for_housekeeping == 1
    assert _pass(m, clock.ms) == 1 and lg.recovery_point == 1
    assert lg.unsynced_snapshots == 0  # the roll's producer snapshot fsync'd by the same pass
    _pass(m, clock.ms)
    assert m.queued_for_housekeeping == 0
    m.close()


def test_retention_ms_deletes_as_before_and_skips_one_segment_logs(
    tmp_path: Path, clock: ManualClock
) -> None:
    one = len(batch(1))
    m = _manager(tmp_path, clock, segment_bytes=one * 2, retention_ms=10_000)
    lg = m.get_or_create("t", 0)
    for i in range(6):
        lg.append(batch(1, ts=clock.ms + i * 1000))
    lg.update_high_watermark(lg.log_end_offset)
    single = m.get_or_create("t", 1)
    single.append(batch(1, ts=clock.ms))
    single.update_high_watermark(1)
    _pass(m, clock.ms)
    single._lock = _Forbidden()  # type: ignore[assignment]  # one segment: never the active one to delete
    assert m.run_retention(clock.ms + 11_000) == 0  # the first segment's newest record is 10 s old
    assert m.run_retention(clock.ms + 11_001) == 1  # 10.001 s: past retention.ms, at the first check after
    assert lg.log_start_offset == 2
    single._lock = threading.RLock()  # type: ignore[assignment]
    m.close()


@pytest.mark.parametrize("how", ["retention", "delete_records", "truncation"])
def test_deleted_segments_go_at_the_first_pass_after_the_delay(
    tmp_path: Path, clock: ManualClock, how: str
) -> None:
    one = len(batch(1))
    delay = 60_000
    m = _manager(tmp_path, clock, segment_bytes=one * 2, retention_ms=5_000, file_delete_delay_ms=delay)
    lg = m.get_or_create("t", 0)
    for _ in range(8):
        lg.append(batch(1, ts=clock.ms))
    lg.update_high_watermark(lg.log_end_offset)
    lg.flush()
    _pass(m, clock.ms)
    assert m.queued_for_housekeeping == 0
    if how == "retention":
        clock.advance(10_000)
        m.run_retention(clock.ms)
    elif how == "delete_records":
        lg.delete_records(4)
    else:
        lg.truncate_to(4)
    assert lg.doomed_segments >= 1 and m.queued_for_housekeeping == 1
    doomed = sorted(p.name for p in lg.dir.iterdir() if p.name.endswith(".deleted"))
    assert doomed
    clock.advance(delay - 1)
    _pass(m, clock.ms)
    assert sorted(p.name for p in lg.dir.iterdir() if p.name.endswith(".deleted")) == doomed
    assert m.queued_for_housekeeping == 1  # waiting for the delay: still queued
    clock.advance(1)
    _pass(m, clock.ms)
    assert [p.name for p in lg.dir.iterdir() if p.name.endswith(".deleted")] == []
    _pass(m, clock.ms)
    assert m.queued_for_housekeeping == 0
    m.close()


def test_an_append_just_after_the_pass_read_the_log_queues_it_again(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race the flag protocol covers: the pass found the log with nothing to do, and an append (the
    event loop's) rolls a segment right after that read. The append must queue the log again, or the roll's
    flush would wait for the next append (a partition that then stays idle: for ever)."""
    m = _manager(tmp_path, clock, segment_bytes=len(batch(1)) * 2)
    lg = m.get_or_create("t", 0)
    lg.append(batch(1, ts=clock.ms))
    _pass(m, clock.ms)
    real = Log.housekeeping_wanted
    raced: list[bool] = []

    def wanted_then_append(self: Log) -> bool:
        answer = real(self)
        if not raced:
            raced.append(answer)
            self.append(batch(2, ts=clock.ms))  # rolls
        return answer

    lg.append(batch(1, ts=clock.ms))  # queued, not due (no flush.ms)
    monkeypatch.setattr(Log, "housekeeping_wanted", wanted_then_append)
    _pass(m, clock.ms)
    monkeypatch.undo()
    assert raced == [False] and len(lg.segments) == 2
    assert m.queued_for_housekeeping == 1
    _pass(m, clock.ms)
    assert lg.recovery_point == lg.active_segment.base_offset == 2
    m.close()


def test_a_failed_flush_of_a_roll_is_retried_at_the_next_pass(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = _manager(tmp_path, clock, segment_bytes=len(batch(1)) * 2)
    lg = m.get_or_create("t", 0)
    _pass(m, clock.ms)
    for _ in range(3):
        lg.append(batch(1, ts=clock.ms))  # rolls
    real = log_module._fdatasync_path

    def full(path: Path) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(log_module, "_fdatasync_path", full)
    _pass(m, clock.ms)
    assert lg.recovery_point == 0 and m.queued_for_housekeeping == 1
    monkeypatch.setattr(log_module, "_fdatasync_path", real)
    _pass(m, clock.ms)
    assert lg.recovery_point == lg.active_segment.base_offset > 0
    m.close()


def test_close_flushes_and_checkpoints_every_log_queued_or_not(tmp_path: Path, clock: ManualClock) -> None:
    """Unflushed data with no flush.ms leaves the queue (no pass would flush it): the stop flushes it, with
    every other log, and the clean-shutdown marker vouches for all of them."""
    m = _manager(tmp_path, clock)
    logs = [m.get_or_create("t", p) for p in range(20)]
    for i, lg in enumerate(logs):
        lg.append(batch(i + 1, ts=clock.ms))
        lg.update_high_watermark(lg.log_end_offset)
    _pass(m, clock.ms)
    assert m.queued_for_housekeeping == 0 and all(lg.recovery_point == 0 for lg in logs)
    m.close()
    assert m.close_problems == []
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    assert read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {
        ("t", p): p + 1 for p in range(20)
    }


def test_a_deleted_partition_leaves_the_queue(tmp_path: Path, clock: ManualClock) -> None:
    m = _manager(tmp_path, clock, flush_interval_ms=0)
    lg = m.get_or_create("t", 0)
    lg.append(batch(1, ts=clock.ms))
    assert m.queued_for_housekeeping == 1
    m.delete("t", 0)
    assert _pass(m, clock.ms) == 0  # not flushed: its files are the deletion's
    assert m.queued_for_housekeeping == 0
    m.close()


def test_the_periodic_checkpoint_is_skipped_while_no_offset_moved(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every 5 s the pass rewrote the checkpoints if their content changed, building all three from every
    log to find out (31 ms for 10,000 idle logs). Now only after a high watermark or recovery point moved;
    a move is still written within the same 5 s."""
    m = _manager(tmp_path, clock)
    logs = [m.get_or_create("t", p) for p in range(5)]
    for lg in logs:
        lg.append(batch(1, ts=clock.ms))
        lg.update_high_watermark(1)
    clock.advance(5000)
    _pass(m, clock.ms)  # writes the moves so far
    assert read_offset_checkpoint(tmp_path / "replication-offset-checkpoint") == {
        ("t", p): 1 for p in range(5)
    }
    built: list[int] = []
    real = LogManager.checkpoint

    def counting(self: LogManager, *, force: bool = False) -> None:
        built.append(clock.ms)
        real(self, force=force)

    monkeypatch.setattr(LogManager, "checkpoint", counting)
    for _ in range(3):  # 15 s idle: nothing moved, nothing built
        clock.advance(5000)
        _pass(m, clock.ms)
    assert built == []
    logs[2].append(batch(1, ts=clock.ms))
    logs[2].update_high_watermark(2)
    clock.advance(1000)
    _pass(m, clock.ms)  # the last write was 16 s ago: written at this pass (before: at the next 5 s tick)
    assert built == [clock.ms]
    assert read_offset_checkpoint(tmp_path / "replication-offset-checkpoint")[("t", 2)] == 2
    logs[3].append(batch(1, ts=clock.ms))
    logs[3].update_high_watermark(2)
    clock.advance(4999)
    _pass(m, clock.ms)
    assert len(built) == 1  # within the 5 s interval, as before
    clock.advance(1)
    _pass(m, clock.ms)
    assert built[1:] == [clock.ms]
    assert read_offset_checkpoint(tmp_path / "replication-offset-checkpoint")[("t", 3)] == 2
    m.close()
