"""Retention decisions (pure, no files) and leader-epoch / checkpoint files."""

from __future__ import annotations

import contextlib
from pathlib import Path

from kaflite.storage.checkpoint import read_offset_checkpoint, write_offset_checkpoint
from kaflite.storage.leader_epoch import LeaderEpochFileCache
from kaflite.storage.retention import SegmentInfo, select_segments_to_delete

NOW = 1_000_000


def _segs(*specs: tuple[int, int, int]) -> list[SegmentInfo]:
    return [SegmentInfo(b, s, t) for b, s, t in specs]


def _sel(segs: list[SegmentInfo], **kw) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    args = dict(now_ms=NOW, retention_ms=-1, retention_bytes=-1, delete_policy=True, high_watermark=10**9,
                log_start_offset=0)
    args.update(kw)
    return select_segments_to_delete(segs, **args)  # type: ignore[arg-type]


SEGS = _segs((0, 100, NOW - 5000), (10, 100, NOW - 4000), (20, 100, NOW - 100), (30, 100, NOW - 3000),
             (40, 50, NOW))


def test_time_retention_stops_at_the_first_young_segment() -> None:
    assert _sel(SEGS, retention_ms=3500) == (2, "retention.ms")
    assert _sel(SEGS, retention_ms=50) == (4, "retention.ms")  # never the active (last) one
    assert _sel(SEGS, retention_ms=10_000) == (0, "")


def test_size_retention() -> None:
    # total 450: keep >= 200 -> delete 2 (450-100-100 = 250 >= 200, a third would leave 150)
    assert _sel(SEGS, retention_bytes=200) == (2, "retention.bytes")
    assert _sel(SEGS, retention_bytes=0) == (4, "retention.bytes")
    assert _sel(SEGS, retention_bytes=1000) == (0, "")


def test_log_start_offset_breach_and_high_watermark_and_policy() -> None:
    assert _sel(SEGS, log_start_offset=25) == (2, "log-start-offset")
    assert _sel(SEGS, log_start_offset=25, delete_policy=False, retention_ms=0) == (2, "log-start-offset")
    assert _sel(SEGS, retention_ms=0, high_watermark=25) == (2, "retention.ms")  # segment [20,30) not committed
    assert _sel(SEGS, retention_ms=0, delete_policy=False) == (0, "")
    assert _sel(_segs((0, 10, 0)), retention_ms=0) == (0, "")


def test_leader_epoch_cache(tmp_path: Path) -> None:
    c = LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint")
    assert c.assign(0, 0) and c.assign(2, 10) and c.assign(5, 30)
    assert not c.assign(4, 40) and not c.assign(6, 20)  # epochs and offsets only grow
    assert c.end_offset_for(0, 50) == (0, 10)
    assert c.end_offset_for(1, 50) == (0, 10)
    assert c.end_offset_for(2, 50) == (2, 30)
    assert c.end_offset_for(5, 50) == (5, 50)  # the latest: up to the log end
    # Kafka's endOffsetFor: an epoch newer than every entry, or -1, is UNDEFINED
    assert c.end_offset_for(7, 50) == (-1, -1) and c.end_offset_for(-1, 50) == (-1, -1)
    assert c.pending_write and not (tmp_path / "leader-epoch-checkpoint").exists()  # assign writes no file
    assert c.write_pending(contextlib.nullcontext())  # (the log's lock in a Log: the flush or housekeeping)
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n2 10\n5 30\n"
    c.truncate_from_end(30)
    assert c.entries == [(0, 0), (2, 10)]
    c.truncate_from_start(15)
    assert c.entries == [(2, 15)]
    assert c.end_offset_for(1, 50) == (1, 15)  # older than every entry: where the log's epochs begin
    assert LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint").entries == [(2, 15)]
    (tmp_path / "leader-epoch-checkpoint").write_text("garbage")
    assert LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint").entries == []


def test_offset_checkpoint_format(tmp_path: Path) -> None:
    p = tmp_path / "recovery-point-offset-checkpoint"
    write_offset_checkpoint(p, {("my-topic", 1): 42, ("a.b", 0): 7})
    assert p.read_text() == "0\n2\na.b 0 7\nmy-topic 1 42\n"
    assert read_offset_checkpoint(p) == {("my-topic", 1): 42, ("a.b", 0): 7}
    for bad in ("", "1\n1\nt 0 1\n", "0\n2\nt 0 1\n", "0\nx\n", "0\n1\nt zero 1\n"):
        p.write_text(bad)
        assert read_offset_checkpoint(p) == {}
    assert read_offset_checkpoint(tmp_path / "missing") == {}
