"""Which compacted logs the cleaner picks (LogManager.run_compaction, Kafka's LogCleanerManager): dirty
enough by min.cleanable.dirty.ratio, or overdue by max.compaction.lag.ms whatever the ratio."""

from __future__ import annotations

from pathlib import Path

from kaflite.protocol.record_batch import build_record_batch
from kaflite.storage import LogConfig, LogManager
from kaflite.storage.manager import compaction_overdue
from storage.storage_util import ManualClock


def test_compaction_overdue_rule() -> None:
    assert not compaction_overdue([], 10_000, 1000)
    assert not compaction_overdue([9_500, 9_800], 10_000, 1000)
    assert compaction_overdue([8_999, 9_800], 10_000, 1000)
    assert not compaction_overdue([-1, 0], 10_000, 1000)  # no timestamps: Kafka's filter(_ > 0)
    assert not compaction_overdue([1], 10_000, 2**63 - 1)


def _scenario(tmp_path: Path, clock: ManualClock, max_lag: int) -> list[int]:
    """A compacted log cleaned once, then a little more appended (dirty ratio well under 0.5): how many
    logs run_compaction cleans 1 s later and 61 s later."""
    m = LogManager([tmp_path], LogConfig(), now_ms=clock)
    m.load()
    log = m.get_or_create("c", 0, LogConfig(cleanup_policy="compact", segment_bytes=200,
                                            max_compaction_lag_ms=max_lag))
    for i in range(20):
        log.append(build_record_batch([(b"k%d" % i, b"v", [])], timestamp_ms=clock.ms))
    assert m.run_compaction(clock.ms) == 1  # all dirty: ratio 1 >= 0.5
    checkpoint = log.cleaner_checkpoint
    for i in range(20, 28):
        log.append(build_record_batch([(b"k%d" % i, b"v", [])], timestamp_ms=clock.ms))
    dirty = sum(s.size for s in log.segments[:-1] if s.next_offset > checkpoint)
    assert 0 < dirty < 0.5 * sum(s.size for s in log.segments[:-1])
    got = []
    for advance in (1000, 60_000):
        clock.advance(advance)
        got.append(m.run_compaction(clock.ms))
    assert (log.cleaner_checkpoint > checkpoint) == (got[-1] == 1)
    m.close()
    return got


def test_max_compaction_lag_cleans_a_log_under_the_dirty_ratio(tmp_path: Path, clock: ManualClock) -> None:
    assert _scenario(tmp_path / "a", clock, max_lag=60_000) == [0, 1]


def test_without_max_compaction_lag_the_ratio_decides(tmp_path: Path, clock: ManualClock) -> None:
    assert _scenario(tmp_path / "b", clock, max_lag=2**63 - 1) == [0, 0]
