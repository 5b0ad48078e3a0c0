"""file.delete.delay.ms (Kafka's asynchronous segment deletion): a segment deleted by retention,
DeleteRecords or truncation is renamed `.deleted` at once, stays readable by what was already reading it
(a FileSlice being sent), and its files are removed by the housekeeping pass once the delay has passed;
the next load removes leftover `.deleted` files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kaflite.storage import Log, LogConfig, LogManager
from kaflite.storage.file_slice import FileSlice
from storage.storage_util import ManualClock, batch

DELAY = 60_000


def _files(d: Path, suffix: str) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.endswith(suffix))


def _log(d: Path, clock: ManualClock, **cfg: int) -> Log:
    one = len(batch(1))
    log = Log(d, LogConfig(segment_bytes=one * 2, file_delete_delay_ms=DELAY, **cfg), now_ms=clock)
    for _ in range(8):
        log.append(batch(1, ts=clock.ms))
    log.update_high_watermark(log.log_end_offset)
    assert len(log.segments) == 4
    return log


DELETIONS: dict[str, Callable[[Log, ManualClock], None]] = {
    "retention": lambda log, clock: (clock.advance(10_000), log.delete_old_segments(clock.ms)),  # type: ignore[dict-item]
    "delete_records": lambda log, clock: log.delete_records(4),  # type: ignore[dict-item]
    "truncation": lambda log, clock: log.truncate_to(4),  # type: ignore[dict-item]
    "full_truncation": lambda log, clock: log.truncate_fully_and_start_at(0),  # type: ignore[dict-item]
}


@pytest.mark.parametrize("how", list(DELETIONS))
def test_deleted_segments_wait_for_the_delay(tmp_path: Path, clock: ManualClock, how: str) -> None:
    d = tmp_path / "t-0"
    log = _log(d, clock, retention_ms=5_000)
    first = log.segments[0] if how != "truncation" else log.segments[-1]
    whole = first.read_all()
    in_flight = FileSlice(first, 0, len(whole))  # a fetch answer not sent yet
    DELETIONS[how](log, clock)
    assert log.doomed_segments >= 1
    doomed = _files(d, ".log.deleted")
    assert f"{first.base_offset:020d}.log.deleted" in doomed
    assert in_flight.tobytes() == whole  # the answer in flight is still served, from the renamed file
    clock.advance(DELAY - 1)
    assert log.delete_due_segments(clock.ms) == 0 and _files(d, ".log.deleted") == doomed
    clock.advance(1)
    assert log.delete_due_segments(clock.ms) == len(doomed)
    assert _files(d, ".deleted") == [] and log.doomed_segments == 0
    assert in_flight.tobytes() == b""  # now the segment is gone: the connection would be closed
    log.close()


def test_a_shed_descriptor_reopens_the_renamed_file(tmp_path: Path, clock: ManualClock) -> None:
    from kaflite.storage.file_cache import file_cache

    log = _log(tmp_path / "t-0", clock)
    first = log.segments[0]
    whole = first.read_all()
    log.delete_records(4)
    file_cache.shed(len(file_cache) * 2)  # every idle descriptor closed: the next read reopens by name
    assert first.read_all() == whole
    log.close()


def test_zero_delay_removes_at_the_next_pass(tmp_path: Path, clock: ManualClock) -> None:
    m = LogManager([tmp_path], LogConfig(), now_ms=clock)
    m.load()
    one = len(batch(1))
    log = m.get_or_create("t", 0, LogConfig(segment_bytes=one * 2, file_delete_delay_ms=0))
    for _ in range(6):
        log.append(batch(1, ts=clock.ms))
    log.update_high_watermark(log.log_end_offset)
    log.delete_records(4)
    assert _files(log.dir, ".log.deleted")  # not on the caller's thread
    assert m.delete_due_segments(clock.ms) == 2
    assert not _files(log.dir, ".deleted")
    m.close()


def test_load_removes_leftover_deleted_files(tmp_path: Path, clock: ManualClock) -> None:
    d = tmp_path / "t-0"
    log = _log(d, clock)
    log.delete_records(4)
    assert _files(d, ".deleted")
    # a crash before the delay passed: the renamed files stay on disk
    (d / "00000000000000000000.log.deleted").write_bytes(b"left by a crash")
    (d / "00000000000000000000.index.deleted").write_bytes(b"")
    log.close()  # (a clean close removes them itself)
    assert not _files(d, ".deleted")
    (d / "00000000000000000000.log.deleted").write_bytes(b"left by a crash")
    (d / "00000000000000000000.timeindex.deleted").write_bytes(b"")
    log2 = Log(d, LogConfig(), now_ms=clock)
    assert not _files(d, ".deleted") and log2.log_start_offset == 4
    log2.close()


def test_a_deleted_partition_stays_readable_until_the_delay(tmp_path: Path, clock: ManualClock) -> None:
    from kaflite.storage.file_cache import file_cache

    m = LogManager([tmp_path], LogConfig(file_delete_delay_ms=DELAY), now_ms=clock)
    m.load()
    log = m.get_or_create("t", 0)
    for _ in range(4):
        log.append(batch(1, ts=clock.ms))
    seg = log.segments[0]
    whole = seg.read_all()
    in_flight = FileSlice(seg, 0, len(whole))
    m.delete("t", 0, tag="tag1")
    assert log.closed and not (tmp_path / "t-0").exists()
    (doomed,) = [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    file_cache.shed(len(file_cache) * 2)  # the read reopens the file under the renamed directory
    assert in_flight.tobytes() == whole
    m.forget_deletions("tag1")  # the deletion was recorded: the marker goes with the files
    assert doomed.exists()
    clock.advance(DELAY - 1)
    assert m.delete_due_segments(clock.ms) == 0 and doomed.exists()
    clock.advance(1)
    assert m.delete_due_segments(clock.ms) == 1
    assert not doomed.exists() and in_flight.tobytes() == b""
    m.close()


def test_a_pending_partition_deletion_completes_at_close_and_load(tmp_path: Path, clock: ManualClock) -> None:
    m = LogManager([tmp_path], LogConfig(file_delete_delay_ms=DELAY), now_ms=clock)
    m.load()
    m.get_or_create("t", 0).append(batch(1, ts=clock.ms))
    m.delete("t", 0, tag="tag2")
    m.close()  # files removed now; the marker stays until the deletion is recorded
    (doomed,) = [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    assert list(doomed.iterdir()) == []
    m2 = LogManager([tmp_path], LogConfig(), now_ms=clock)
    m2.load()
    assert m2.pending_deletions == {"tag2": [doomed]} and m2.get("t", 0) is None
    m2.forget_deletions("tag2")
    assert not doomed.exists()
    m2.close()


def test_a_segment_replaced_by_compaction_waits_for_the_delay(tmp_path: Path, clock: ManualClock) -> None:
    """Kafka renames a cleaned-away segment `.deleted` like any deleted one: a fetch answer being sent from
    it completes with the old bytes (before, the swap retired its descriptor: the answer read b"" and the
    connection was closed); its files go once file.delete.delay.ms has passed."""
    from kaflite.storage.cleaner import compact_log
    from kaflite.storage.file_cache import file_cache

    d = tmp_path / "t-0"
    one = len(batch(1))
    log = Log(d, LogConfig(segment_bytes=one * 2, file_delete_delay_ms=DELAY, cleanup_policy="compact",
                           min_compaction_lag_ms=0), now_ms=clock)
    for _ in range(8):  # one key: every record but the last is superseded
        log.append(batch(1, ts=clock.ms))
    log.update_high_watermark(log.log_end_offset)
    first = log.segments[0]
    whole = first.read_all()
    in_flight = FileSlice(first, 0, len(whole))
    assert compact_log(log, clock.ms, force=True).cleaned
    assert log.segments[0] is not first and log.segments[0].read_all() != whole  # the copy is in place
    assert "00000000000000000000.log.deleted" in _files(d, ".log.deleted")
    assert in_flight.tobytes() == whole  # served from the replaced file
    file_cache.shed(len(file_cache) * 2)  # a reopen after a shed finds the old bytes under `.deleted`
    assert in_flight.tobytes() == whole
    clock.advance(DELAY - 1)
    assert log.delete_due_segments(clock.ms) == 0
    clock.advance(1)
    assert log.delete_due_segments(clock.ms) >= 1
    assert _files(d, ".deleted") == [] and in_flight.tobytes() == b""
    assert log.read(log.log_start_offset, 1 << 20).records  # the live log reads the cleaned copies
    log.close()
    reopened = Log(d, LogConfig(cleanup_policy="compact"), now_ms=clock)  # a clean reopen: indexes check out
    assert reopened.log_end_offset == 8
    reopened.close()
