"""Compaction: latest record per key survives, tombstones after delete.retention.ms, offsets kept
(sparse), reads still work, crash in the middle of a swap is completed or undone on load."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kaflite.protocol.record_batch import Record, build_record_batch, decode_records, iter_batches
from kaflite.storage import Log, LogConfig, LogManager, cleaner
from kaflite.storage.cleaner import (
    build_offset_map,
    cleanable_prefix,
    compact_log,
    record_survives,
    should_clean,
)
from storage.storage_util import ManualClock

DAY = 86_400_000


def _all_records(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    off = log.log_start_offset
    while off < log.log_end_offset:
        info = log.read(off, 1 << 20)
        if not info.records:
            break
        for buf in info.records:
            for v in iter_batches(buf):
                assert v.crc_ok()
                out += [(r.offset, r.key, r.value) for r in decode_records(v) if r.offset >= off]
                off = v.next_offset
    return out


def test_pure_rules() -> None:
    m = build_offset_map([(0, b"a"), (1, b"b"), (2, b"a"), (3, None)])
    assert m == {b"a": 2, b"b": 1}
    assert not record_survives(Record(0, 0, b"a", b"1", []), m, 0, DAY)
    assert record_survives(Record(2, 0, b"a", b"1", []), m, 0, DAY)
    assert not record_survives(Record(3, 0, None, b"1", []), m, 0, DAY)
    assert record_survives(Record(1, 0, b"b", None, []), m, DAY, DAY)  # tombstone, not yet expired
    assert not record_survives(Record(1, 0, b"b", None, []), m, DAY + 1, DAY)
    assert cleanable_prefix([10, 20, 30, 40], 100, 0) == 3
    assert cleanable_prefix([10, 20, 90, 40], 100, 50) == 2
    assert should_clean(50, 100, 0.5) and not should_clean(49, 100, 0.5) and not should_clean(0, 0, 0.5)


def test_compaction_keeps_latest_per_key_and_offsets(tmp_path: Path, clock: ManualClock) -> None:
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=700, delete_retention_ms=DAY)
    log = Log(tmp_path / "__consumer_offsets-0", cfg, now_ms=clock)
    rng = random.Random(5)
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for i in range(120):
        recs = []
        for _ in range(rng.randint(1, 3)):
            key = b"k%d" % rng.randint(0, 9)
            value = None if rng.random() < 0.1 else b"v%d" % i
            recs.append((key, value, []))
        r = log.append(build_record_batch(recs, timestamp_ms=clock.ms))
        for j, (key, value, _h) in enumerate(recs):
            latest[key] = (r.base_offset + j, value)
    end = log.log_end_offset
    before = _all_records(log)
    assert len(log.segments) > 5
    res = compact_log(log, clock.ms, force=True)
    assert res.cleaned and res.records_removed > 0 and res.bytes_after < res.bytes_before
    after = _all_records(log)
    assert log.log_end_offset == end
    # every surviving record is unchanged and at its original offset
    assert set(after) <= set(before)
    # the latest record of every key survives
    for key, (off, value) in latest.items():
        assert (off, key, value) in after
    # in the cleaned segments, nothing but the latest per key
    sealed_end = log.segments[-1].base_offset
    cleaned = [r for r in after if r[0] < sealed_end]
    assert all(latest[key][0] == off for off, key, _v in cleaned)
    # reads from any offset still work (sparse offsets)
    for off in range(0, end, 7):
        info = log.read(off, 1 << 20)
        assert info.records and next(iter_batches(info.records[0])).last_offset >= off
    # survives a reopen (indexes rebuilt / reloaded)
    log.close()
    log2 = Log(tmp_path / "__consumer_offsets-0", cfg, now_ms=clock, had_clean_shutdown=True)
    assert _all_records(log2) == after
    # tombstones go after delete.retention.ms
    clock.advance(DAY + 1)
    log2.append(build_record_batch([(b"filler", b"x", [])], timestamp_ms=clock.ms))
    log2.roll()
    compact_log(log2, clock.ms, force=True)
    remaining = _all_records(log2)
    assert not [r for r in remaining if r[2] is None]
    assert {k for _o, k, _v in remaining} == {k for k, (_o, v) in latest.items() if v is not None} | {b"filler"}


def test_interrupted_swap_is_completed_on_load(tmp_path: Path, clock: ManualClock) -> None:
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=300)
    log = Log(tmp_path / "c-0", cfg, now_ms=clock)
    for i in range(30):
        log.append(build_record_batch([(b"k%d" % (i % 3), b"v%d" % i, [])], timestamp_ms=clock.ms))
    first = log.segments[0]
    original = first.read_all()
    # simulate a crash after the swap file was written: the cleaned copy = last batch of the segment
    batches = list(iter_batches(original))
    swap = Path(str(first.log_path) + ".swap")
    swap.write_bytes(bytes(batches[-1].buffer))
    Path(str(log.segments[1].log_path) + ".cleaned").write_bytes(b"partial")
    log.close()
    log2 = Log(tmp_path / "c-0", cfg, now_ms=clock)
    assert not list((tmp_path / "c-0").glob("*.swap")) and not list((tmp_path / "c-0").glob("*.cleaned"))
    assert log2.segments[0].read_all() == bytes(batches[-1].buffer)
    assert log2.log_end_offset == 30


def test_manager_runs_compaction_by_dirty_ratio(tmp_path: Path, clock: ManualClock) -> None:
    m = LogManager([tmp_path], LogConfig(), now_ms=clock)
    m.load()
    compacted = m.get_or_create("c", 0, LogConfig(cleanup_policy="compact", segment_bytes=200))
    plain = m.get_or_create("p", 0, LogConfig(segment_bytes=200))
    for lg in (compacted, plain):
        for i in range(20):
            lg.append(build_record_batch([(b"same", b"v%d" % i, [])], timestamp_ms=clock.ms))
    assert m.run_compaction(clock.ms) == 1
    assert m.run_compaction(clock.ms) == 0  # nothing dirty any more
    assert compacted.size < plain.size
    m.close()


def _dup_log(path: Path, clock: ManualClock, n: int = 60) -> Log:
    log = Log(path, LogConfig(cleanup_policy="compact", segment_bytes=300, min_compaction_lag_ms=0), now_ms=clock)
    for i in range(n):
        log.append(build_record_batch([(b"k%d" % (i % 3), b"v%d" % i, [])], timestamp_ms=clock.ms))
    log.update_high_watermark(log.log_end_offset)
    return log


def test_truncation_during_the_pass_discards_it(tmp_path: Path, clock: ManualClock,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The copies are computed without the log's lock; a truncation meanwhile may remove the records that
    superseded what the copies dropped, so the swap is refused and the log keeps every record it has."""
    log = _dup_log(tmp_path / "c-0", clock)
    real = cleaner._build_offset_map
    cut = log.segments[-2].base_offset + 1  # inside the last sealed segment: below it, the copies would drop keys

    def truncating(snap):  # type: ignore[no-untyped-def]
        out = real(snap)
        log.truncate_to(cut)  # a follower's truncation, while the pass works without the lock
        return out

    monkeypatch.setattr(cleaner, "_build_offset_map", truncating)
    before = [r for r in _all_records(log) if r[0] < cut]
    res = compact_log(log, clock.ms, force=True)
    assert not res.cleaned
    assert _all_records(log) == before and log.log_end_offset <= cut
    assert not list((tmp_path / "c-0").glob(".cleaning-*"))  # the staging directory is gone
    log.close()


def test_retention_during_the_pass_skips_the_deleted_segment(tmp_path: Path, clock: ManualClock,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    log = _dup_log(tmp_path / "c-0", clock)
    first = log.segments[1].base_offset
    real = cleaner._build_offset_map

    def deleting(snap):  # type: ignore[no-untyped-def]
        out = real(snap)
        log.delete_records(first)  # DeleteRecords deletes the first segment meanwhile
        return out

    monkeypatch.setattr(cleaner, "_build_offset_map", deleting)
    res = compact_log(log, clock.ms, force=True)
    assert res.cleaned and log.log_start_offset == first and log.segments[0].base_offset == first
    after = _all_records(log)
    assert {k for _o, k, _v in after} == {b"k0", b"k1", b"k2"}
    sealed_end = log.segments[-1].base_offset
    assert len([r for r in after if r[0] < sealed_end]) <= 3  # only the latest per key left below the active
    log.close()
    reopened = Log(tmp_path / "c-0", log.config, now_ms=clock, recovery_point=0)
    assert _all_records(reopened) == after
    reopened.close()


def test_appends_during_the_pass_are_kept_and_a_staging_dir_left_by_a_crash_is_removed(
        tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _dup_log(tmp_path / "c-0", clock)
    real = cleaner._build_offset_map
    appended: list[int] = []

    def appending(snap):  # type: ignore[no-untyped-def]
        out = real(snap)
        for i in range(20):  # rolls too (300-byte segments)
            appended.append(log.append(build_record_batch([(b"new%d" % i, b"x", [])], timestamp_ms=clock.ms))
                            .base_offset)
        return out

    monkeypatch.setattr(cleaner, "_build_offset_map", appending)
    assert compact_log(log, clock.ms, force=True).cleaned
    after = _all_records(log)
    assert [o for o, k, _v in after if k.startswith(b"new")] == appended
    (log.dir / ".cleaning-crashed").mkdir()
    (log.dir / ".cleaning-crashed" / f"{0:020d}.log").write_bytes(b"half a copy")
    log.close()
    reopened = Log(tmp_path / "c-0", log.config, now_ms=clock)
    assert not (log.dir / ".cleaning-crashed").exists() and _all_records(reopened) == after
    reopened.close()
