"""Lazy open of the segments below the recovery point (storage/segment.py rules, Kafka's LazyIndex): a load
reads nothing of them (no index file, no header, no descriptor), the first use loads one segment, retention
and close load none they do not need, a corrupt index is found and rebuilt on first use. These replace a
timed test ("accepts clients within 3 s"): what they count is what a start that reads every segment would
show, whatever the machine's load."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kaflite.storage import Log, LogConfig
from kaflite.storage.cleaner import compact_log
from kaflite.storage.segment import LogSegment
from storage.storage_util import batch, every_batch_range, fetched_offsets

CFG = LogConfig(segment_bytes=500, index_interval_bytes=50, retention_ms=-1)


def _fill(path: Path, n: int = 60, cfg: LogConfig = CFG, keys: int = 0) -> Log:
    log = Log(path, cfg)
    for i in range(n):
        log.append(batch(1, key=b"k%d" % (i % keys) if keys else b"k", value=b"x" * 40))
    log.update_high_watermark(log.log_end_offset)
    return log


def _crashed(tmp_path: Path) -> tuple[Path, list[tuple[int, int]], int, int]:
    """A log whose rolls were flushed (the recovery point at the active segment's base) and that was never
    closed (as after kill -9): (directory, its batches, recovery point, number of segments)."""
    d = tmp_path / "t-0"
    log = _fill(d)
    log.flush_rolled()
    expected = every_batch_range(log)
    rp = log.segments[-1].base_offset
    assert log.recovery_point == rp
    return d, expected, rp, len(log.segments)


def test_a_crash_recovery_reads_nothing_of_the_segments_below_the_recovery_point(
        tmp_path: Path, index_reads: list[Path]) -> None:
    d, expected, rp, n = _crashed(tmp_path)
    assert n > 5
    loaded_before = LogSegment.lazy_loaded
    log = Log(d, CFG, recovery_point=rp)
    segs = log.segments
    # the active segment is rescanned; every other one is opened lazily: no index read, no descriptor
    assert log.recovered and log.lazy_at_open == n - 1
    assert [s.lazy for s in segs] == [True] * (n - 1) + [False]
    assert index_reads == [] and all(s._fd == -1 for s in segs[:-1])  # noqa: SLF001
    assert LogSegment.lazy_loaded == loaded_before
    assert (log.log_end_offset, log.recovery_point) == (expected[-1][1] + 1, log.log_end_offset)
    # a read loads the one segment it reads (its two index files), and nothing else
    third = segs[3]
    assert fetched_offsets(log.read(third.base_offset, 1 << 20).records)[0][0] == third.base_offset
    assert [s.lazy for s in segs] == [True] * 3 + [False] + [True] * (n - 5) + [False]
    assert sorted(p.name for p in index_reads) == [f"{third.base_offset:020d}.index",
                                                   f"{third.base_offset:020d}.timeindex"]
    assert LogSegment.lazy_loaded == loaded_before + 1
    assert every_batch_range(log) == expected  # the data, through lazily loaded segments
    assert log.append(batch(1)).base_offset == expected[-1][1] + 1
    log.close()


def test_a_clean_start_opens_the_sealed_segments_lazily_and_close_loads_none(
        tmp_path: Path, index_reads: list[Path]) -> None:
    log = _fill(tmp_path / "t-0")
    expected = every_batch_range(log)
    n = len(log.segments)
    log.close()
    index_reads.clear()
    log = Log(tmp_path / "t-0", CFG, had_clean_shutdown=True, recovery_point=expected[-1][1] + 1)
    # the active segment too (its next offset is the clean stop's recovery point: test_lazy_active_segment.py)
    assert not log.recovered and log.lazy_at_open == n
    assert index_reads == [] and log.log_end_offset == expected[-1][1] + 1
    log.close()
    assert index_reads == []
    # without the recovery point (a log the checkpoint does not name) the active segment is read at open
    log = Log(tmp_path / "t-0", CFG, had_clean_shutdown=True)
    assert log.segments[0].lazy and not log.segments[-1].lazy and log.lazy_at_open == n - 1
    assert {p.name[:20] for p in index_reads} == {f"{log.segments[-1].base_offset:020d}"}  # the active one only
    log.close()


def test_retention_reads_only_the_segments_its_rules_look_at(tmp_path: Path, index_reads: list[Path]) -> None:
    d, expected, rp, n = _crashed(tmp_path)
    # time retention that keeps everything: the first segment is looked at (it stays: the scan stops)
    cfg = LogConfig(segment_bytes=500, index_interval_bytes=50, retention_ms=10**15)
    log = Log(d, cfg, recovery_point=rp, high_watermark=expected[-1][1] + 1)
    assert log.delete_old_segments() == 0
    assert [s.lazy for s in log.segments[:-1]] == [False] + [True] * (n - 2)
    log.close()
    # size retention: sizes come from the files' lengths; deleted lazy segments leave no file behind
    cfg = LogConfig(segment_bytes=500, index_interval_bytes=50, retention_ms=-1,
                    retention_bytes=sum(s.stat().st_size for s in d.glob("*.log")) - 1200, file_delete_delay_ms=0)
    log = Log(d, cfg, recovery_point=log.recovery_point, high_watermark=expected[-1][1] + 1)
    index_reads.clear()
    deleted = log.delete_old_segments()
    assert deleted >= 2 and index_reads == [] and all(s.lazy for s in log.segments[:-1])
    log.delete_due_segments(all_of_them=True)
    assert not [p.name for p in d.iterdir() if p.name.endswith(".deleted")]
    start = log.log_start_offset
    assert every_batch_range(log) == [o for o in expected if o[0] >= start]
    log.close()


def test_a_corrupt_index_below_the_recovery_point_is_rebuilt_on_first_use(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d, expected, rp, _n = _crashed(tmp_path)
    victim = sorted(d.glob("*.index"))[2]
    with open(victim, "ab") as f:
        f.write(b"\x01\x02\x03")  # not a multiple of 8
    log = Log(d, CFG, recovery_point=rp)
    assert log.segments[2].lazy
    assert every_batch_range(log) == expected
    assert any("rebuilding the indexes of segment" in r.getMessage() and "on first use: corrupt index" in r.getMessage()
               for r in caplog.records)
    assert victim.stat().st_size % 8 == 0  # rewritten
    log.close()
    log = Log(d, CFG, had_clean_shutdown=True)
    assert every_batch_range(log) == expected
    log.close()


def test_compaction_of_a_log_opened_lazily(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=500, index_interval_bytes=50, retention_ms=-1, cleanup_policy="compact",
                    min_compaction_lag_ms=0)
    log = _fill(tmp_path / "c-0", cfg=cfg, keys=3)
    end = log.log_end_offset
    log.close()
    log = Log(tmp_path / "c-0", cfg, had_clean_shutdown=True, high_watermark=end)
    assert log.segments[0].lazy
    assert compact_log(log, int(time.time() * 1000), force=True).records_removed > 0
    kept = every_batch_range(log)
    assert kept[-1][1] == end - 1 and len(kept) < end
    log.close()


def test_a_loaded_segment_is_a_plain_log_segment_whose_class_has_no_getattr_hook(tmp_path: Path) -> None:
    # CPython 3.11 specialises no attribute read of an instance whose class defines __getattr__: the lazy
    # hook lives on a subclass that a segment leaves when it loads (segment.py, _LazyLogSegment)
    log = _fill(tmp_path / "t-0")
    expected = every_batch_range(log)
    log.close()
    log = Log(tmp_path / "t-0", CFG, had_clean_shutdown=True, recovery_point=expected[-1][1] + 1)
    assert "__getattr__" not in vars(LogSegment)
    first = log.segments[0]
    assert first.lazy and isinstance(first, LogSegment) and type(first) is not LogSegment
    assert every_batch_range(log) == expected  # reads every segment: each loads
    assert not first.lazy and type(first) is LogSegment
    assert first.log_path == tmp_path / "t-0" / f"{first.base_offset:020d}.log"  # made before the class changed
    log.append(batch(1, value=b"y"))  # the active segment loads before its write
    assert all(type(s) is LogSegment for s in log.segments if not s.lazy)
    log.close()
