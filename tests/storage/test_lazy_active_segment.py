"""The active segment of a cleanly stopped log opens lazily (Log rules, segment.py rules; issue 28: a start of
10,000 partitions read every active segment's two indexes and tail): its next offset is the recovery point the
clean stop checkpointed, confirmed by the stop's producer snapshot of the same offset. These check that such a
log answers its end offset without reading a segment file, and that appends, reads, truncation, a corrupt
index and an unclean stop after it come out as they do for a log opened the eager way."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from kaflite.storage import Log, LogConfig, LogManager
from kaflite.storage.segment import LogSegment
from storage.storage_util import batch, every_batch_range, fetched_offsets

CFG = LogConfig(segment_bytes=1000, index_interval_bytes=50, retention_ms=-1)
PID = 7


def _stopped(d: Path, n: int = 30) -> tuple[list[tuple[int, int]], int]:
    """A log of `n` idempotent one-record batches (a few segments), closed cleanly: (its batches, its end)."""
    log = Log(d, CFG)
    for i in range(n):
        log.append(batch(1, value=b"x" * 40, ts=1_700_000_000_000 + i, producer_id=PID, producer_epoch=0,
                         base_sequence=i))
    log.update_high_watermark(log.log_end_offset)
    expected, end = every_batch_range(log), log.log_end_offset
    assert len(log.segments) >= 2
    log.close()
    return expected, end


def _lazy(d: Path, end: int) -> Log:
    log = Log(d, CFG, had_clean_shutdown=True, recovery_point=end, high_watermark=end)
    assert log.segments[-1].lazy and log.lazy_at_open == len(log.segments)
    return log


def test_a_clean_load_answers_the_offsets_without_reading_a_segment(tmp_path: Path, index_reads: list[Path]) -> None:
    for p in range(3):
        _stopped(tmp_path / f"t-{p}", 10 + p)
    m = LogManager([tmp_path], CFG)
    for p in range(3):  # the manager's own clean stop: its checkpoints and marker
        m.get_or_create("t", p)
    m.get_or_create("empty", 0)
    m.close()
    index_reads.clear()
    m = LogManager([tmp_path], CFG)
    m.load()
    for (topic, p), log in m.logs().items():
        end = 0 if topic == "empty" else 10 + p
        assert all(s.lazy for s in log.segments) and all(s._fd == -1 for s in log.segments)  # noqa: SLF001
        assert (log.log_end_offset, log.recovery_point, log.log_start_offset) == (end, end, 0)
        assert not log.recovered
        if end:
            assert log.producer_state.producers[PID].retained[-1][3] == end - 1  # from the snapshot
    assert index_reads == []
    assert m.get("t", 1).append(batch(1, producer_id=PID, producer_epoch=0, base_sequence=11)).base_offset == 11
    assert m.get("empty", 0).append(batch(2)).base_offset == 0
    m.close()


@pytest.mark.parametrize("kind", ["one batch", "two batches", "replica", "marker"])
def test_a_lazily_opened_active_segment_appends_reads_and_reopens(tmp_path: Path, kind: str,
                                                                   index_reads: list[Path]) -> None:
    d = tmp_path / "t-0"
    expected, end = _stopped(d)
    log = _lazy(d, end)
    assert log.log_end_offset == end and log.high_watermark == end
    # a read at the end offset, or its position, reads nothing of the active segment
    assert log.read(end, 1 << 20).records == [] and log.position_of(end)[0] == log.segments[-1].base_offset
    assert index_reads == [] and log.segments[-1].lazy
    active_base = log.segments[-1].base_offset
    if kind == "one batch":
        r = log.append(batch(1, producer_id=PID, producer_epoch=0, base_sequence=len(expected)))
        added = [(end, end)]
        # the producer state came from the snapshot: a duplicate of the last batch is recognised
        dup = log.append(batch(1, value=b"x" * 40, producer_id=PID, producer_epoch=0, base_sequence=len(expected) - 1))
        assert dup.duplicate and dup.base_offset == end - 1
    elif kind == "two batches":
        r = log.append(batch(2) + batch(3))
        added = [(end, end + 1), (end + 2, end + 4)]
    elif kind == "replica":
        r = log.append(batch(2, base_offset=end, partition_leader_epoch=3), assign_offsets=False)
        added = [(end, end + 1)]
        assert log.end_offset_for_epoch(3) == (3, end + 2)
    else:
        txn = batch(1, producer_id=PID + 1, producer_epoch=0, base_sequence=0, is_transactional=True)
        log.append(txn)
        r = log.append_marker(PID + 1, 0, False, 0)
        added = [(end, end), (end + 1, end + 1)]
        assert log.aborted_transactions()[0].first_offset == end
    assert r.base_offset == added[-1][0] if kind == "marker" else r.base_offset == end
    assert not log.segments[-1].lazy
    assert {p.name[:20] for p in index_reads} == {f"{active_base:020d}"}  # loaded by the first write only
    new_end = added[-1][1] + 1
    assert log.log_end_offset == new_end and every_batch_range(log) == expected + added
    assert fetched_offsets(log.read(end, 1 << 20).records)[0] == added[0]
    assert log.offset_for_timestamp(1_700_000_000_000 + len(expected) - 1) == (end - 1, 1_700_000_000_000 + end - 1)
    log.close()
    for clean, rp in ((True, new_end), (False, 0)):  # reopened lazily again, and by a full recovery
        again = Log(d, CFG, had_clean_shutdown=clean, recovery_point=rp)
        assert again.segments[-1].lazy == clean and again.recovered != clean
        assert again.log_end_offset == new_end and every_batch_range(again) == expected + added
        again.close()


def test_truncating_a_lazily_opened_active_segment(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    expected, end = _stopped(d)
    log = _lazy(d, end)
    cut = end - 2
    assert log.segments[-1].base_offset < cut
    assert log.truncate_to(cut)
    assert log.log_end_offset == cut and every_batch_range(log) == expected[:-2]
    assert log.append(batch(1)).base_offset == cut
    log.close()
    again = Log(d, CFG, had_clean_shutdown=True, recovery_point=cut + 1)
    assert again.segments[-1].lazy and every_batch_range(again) == expected[:-2] + [(cut, cut)]
    again.close()


def test_an_unclean_stop_after_a_lazy_open_recovers_what_was_written(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    expected, end = _stopped(d)
    log = _lazy(d, end)
    log.append(batch(3))
    log.flush()
    log.append(batch(2))  # not flushed: in the page cache, which a kill -9 keeps
    # kill -9: never closed; the next start has no clean-shutdown marker, the checkpoint says `end`
    again = Log(d, CFG, recovery_point=end)
    assert again.recovered and not again.segments[-1].lazy
    assert again.log_end_offset == end + 5
    assert every_batch_range(again) == expected + [(end, end + 2), (end + 3, end + 4)]
    assert again.append(batch(1)).base_offset == end + 5
    again.close()
    log.close()
    # a crash right after a lazy open, nothing written: the recovery finds the same log
    lazy = _lazy(d, end + 6)
    crashed = Log(d, CFG, recovery_point=0)
    assert crashed.recovered and crashed.log_end_offset == end + 6
    crashed.close()
    lazy.close()


def test_records_that_disagree_open_the_active_segment_at_once(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    expected, end = _stopped(d)
    for rp in (0, end - 1, end + 1):  # a checkpoint that does not name the log, or a wrong one
        log = Log(d, CFG, had_clean_shutdown=True, recovery_point=rp)
        assert not log.segments[-1].lazy and log.log_end_offset == end
        log.close()
    os.unlink(d / f"{end:020d}.snapshot")  # the stop's snapshot missing (its write failed)
    log = Log(d, CFG, had_clean_shutdown=True, recovery_point=end)
    assert not log.segments[-1].lazy and log.log_end_offset == end and every_batch_range(log) == expected
    log.close()


def test_a_corrupt_index_of_the_lazy_active_segment_is_rebuilt_by_the_first_write(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "t-0"
    expected, end = _stopped(d)
    log = _lazy(d, end)
    active = log.segments[-1]
    victim = d / f"{active.base_offset:020d}.index"
    with open(victim, "ab") as f:
        f.write(b"\x01\x02\x03")  # not a multiple of 8
    n = len(log.segments)
    assert log.append(batch(1)).base_offset == end
    assert any("rebuilding the indexes of segment" in r.getMessage() for r in caplog.records)
    assert len(log.segments) == n and log.segments[-1] is active  # still the active segment
    assert log.append(batch(1)).base_offset == end + 1
    assert every_batch_range(log) == expected + [(end, end), (end + 1, end + 1)]
    log.close()
    assert victim.stat().st_size % 8 == 0
    again = Log(d, CFG, had_clean_shutdown=True, recovery_point=end + 2)
    assert every_batch_range(again) == expected + [(end, end), (end + 1, end + 1)]
    again.close()


def test_a_segment_file_changed_after_the_clean_stop_is_reported(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "t-0"
    _expected, end = _stopped(d)
    active = max(d.glob("*.log"))
    with open(active, "ab") as f:  # a batch written behind the broker's back
        f.write(batch(1, base_offset=end))
    log = _lazy(d, end)
    with caplog.at_level(logging.ERROR, logger="kaflite.storage"):
        log.append(batch(1))
    assert any("the clean shutdown recorded" in r.getMessage() for r in caplog.records)
    log.close()
    assert LogSegment.lazy_opened > 0


def test_a_load_in_runs_of_logs_makes_no_mkdir_and_keeps_the_listing_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The load opens its logs in runs (LOAD_CHUNK per worker-thread task) without a mkdir per log; one log
    that fails leaves every other one in the table, in the listing's order, and its error is raised."""
    from kaflite.storage import manager as manager_module

    m = LogManager([tmp_path], CFG)
    for p in range(40):
        m.get_or_create("t", p).append(batch(p % 3 + 1))
    m.close()
    made: list[str] = []
    real_mkdir = os.mkdir

    def mkdir(path: str | Path, *args: object, **kwargs: object) -> None:
        made.append(str(path))
        real_mkdir(path, *args, **kwargs)  # type: ignore[arg-type]

    class FailingLog(Log):
        def __init__(self, directory: Path, *args: object, **kwargs: object) -> None:
            if Path(directory).name == "t-17":
                raise OSError(5, "Input/output error")
            super().__init__(directory, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(manager_module, "Log", FailingLog)
    m = LogManager([tmp_path], CFG, io_threads=2)  # 40 logs in runs of 5
    monkeypatch.setattr(os, "mkdir", mkdir)
    with pytest.raises(OSError, match="Input/output"):
        m.load()
    assert made == []
    assert list(m.logs()) == sorted((("t", p) for p in range(40) if p != 17), key=lambda tp: f"t-{tp[1]}")
    assert {p: lg.log_end_offset for (_t, p), lg in m.logs().items()} == {p: p % 3 + 1 for p in range(40) if p != 17}
    m.close()


def test_close_writes_no_producer_snapshot_when_one_is_at_the_log_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka's takeSnapshot: a log closed without a write since its clean open keeps its snapshot (a restart
    of 10,000 partitions wrote and fsync'd 10,000 identical files at its stop); one written to gets one."""
    from kaflite.storage.producer_state import ProducerStateManager

    d = tmp_path / "t-0"
    expected, end = _stopped(d)
    written: list[int] = []
    real = ProducerStateManager.write_snapshot

    def counting(self: ProducerStateManager, directory: Path, offset: int, *, sync: bool = True) -> Path:
        written.append(offset)
        return real(self, directory, offset, sync=sync)

    monkeypatch.setattr(ProducerStateManager, "write_snapshot", counting)
    log = _lazy(d, end)
    log.close()
    assert written == []
    log = _lazy(d, end)  # the snapshot it kept still vouches for the end offset, and holds the producer
    assert log.producer_state.producers[PID].retained[-1][3] == end - 1
    log.append(batch(1, producer_id=PID, producer_epoch=0, base_sequence=len(expected)))
    log.close()
    assert written == [end + 1]
    log = _lazy(d, end + 1)
    assert log.producer_state.producers[PID].retained[-1][3] == end
    log.close()


def test_a_clean_load_reads_the_producer_snapshot_on_first_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    """Log rules: after a clean stop the stop's producer snapshot (at the log end offset) is read on the first
    use of the producer state, not by the load (10,000 snapshots read and parsed at every start); what it
    then holds is what the load read before: the idempotent producer's last batch is recognised as a
    duplicate, a torn snapshot is replayed from the log instead, and a close without a write keeps the file."""
    from kaflite.storage import log as log_module

    d = tmp_path / "t-0"
    expected, end = _stopped(d)
    snapshot = d / f"{end:020d}.snapshot"
    mtime = snapshot.stat().st_mtime_ns
    read: list[str] = []
    real = log_module.read_small_file

    def counting(path: str | Path) -> bytes:
        read.append(str(path))
        return real(path)

    monkeypatch.setattr(log_module, "read_small_file", counting)
    log = _lazy(d, end)
    assert read == [] and vars(log)["_producer_state"] is None
    log.close()  # nothing written: the snapshot stays as it was, and none was read
    assert read == [] and snapshot.stat().st_mtime_ns == mtime
    log = _lazy(d, end)
    assert log.last_stable_offset == end  # a use: the snapshot is read now, once
    assert read == [str(snapshot)] and log.producer_state.producers[PID].retained[-1][3] == end - 1
    dup = log.append(batch(1, value=b"x" * 40, producer_id=PID, producer_epoch=0, base_sequence=len(expected) - 1))
    assert dup.duplicate and dup.base_offset == end - 1 and len(read) == 1
    log.close()
    snapshot.write_bytes(b"{torn")  # (as a crash after the stop would leave it: replayed from the log)
    log = _lazy(d, end)
    entry = log.producer_state.producers[PID]
    assert entry.retained[-1][3] == end - 1 and not snapshot.exists()
    assert log.append(batch(1, producer_id=PID, producer_epoch=0, base_sequence=len(expected))).base_offset == end
    log.close()
    again = Log(d, CFG, had_clean_shutdown=False, recovery_point=0)  # an unclean load reads it at once
    assert vars(again)["_producer_state"] is not None and again.producer_state.producers[PID].retained[-1][3] == end
    again.close()
