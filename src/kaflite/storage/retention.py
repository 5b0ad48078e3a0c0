"""Retention decisions (pure): which leading segments of a log may be deleted.

Rules (Kafka's UnifiedLog.deleteOldSegments), applied in this order, each removing a prefix:
1. log start offset breach: a segment whose successor starts at or below the log start offset;
2. `retention.bytes` (>= 0): oldest segments while the log stays >= retention.bytes without them;
3. `retention.ms` (>= 0): oldest segments whose largest timestamp (or mtime when no timestamp) is
   older than now - retention.ms.
2 and 3 only for `cleanup.policy` containing `delete`. A segment is deletable only if it is not the
last (active) one and all its offsets are below the high watermark (successor base <= high watermark).
A non-deletable segment stops the scan: retention never leaves holes.
4. A segment's largest timestamp is read only for segments rule 3 looks at (oldest first, up to the first
   that stays): the log's lazily opened segments (segment.py) are not loaded for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["SegmentInfo", "SegmentLike", "select_segments_to_delete"]


class SegmentLike(Protocol):
    """What retention reads of a segment (SegmentInfo, or the Log's view that reads the timestamp on use)."""

    @property
    def base_offset(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def largest_timestamp(self) -> int: ...


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    base_offset: int
    size: int
    largest_timestamp: int  # max record timestamp, or the file's mtime when it has none


def _prefix(segments: Sequence[SegmentLike], start: int, high_watermark: int, pred) -> int:  # type: ignore[no-untyped-def]
    i = start
    while i < len(segments) - 1:  # never the last (active) segment
        nxt = segments[i + 1]
        if nxt.base_offset > high_watermark or not pred(i):
            break
        i += 1
    return i


def select_segments_to_delete(
    segments: Sequence[SegmentLike],
    *,
    now_ms: int,
    retention_ms: int,
    retention_bytes: int,
    delete_policy: bool,
    high_watermark: int,
    log_start_offset: int,
) -> tuple[int, str]:
    """Number of leading segments to delete and the reason ("" when none)."""
    n = _prefix(segments, 0, high_watermark, lambda i: segments[i + 1].base_offset <= log_start_offset)
    reason = "log-start-offset" if n else ""
    if not delete_policy:
        return n, reason
    if retention_bytes >= 0:
        diff = sum(s.size for s in segments[n:]) - retention_bytes
        remaining = [diff]

        def size_pred(i: int) -> bool:
            if remaining[0] - segments[i].size >= 0:
                remaining[0] -= segments[i].size
                return True
            return False

        m = _prefix(segments, n, high_watermark, size_pred)
        if m > n:
            n, reason = m, "retention.bytes"
    if retention_ms >= 0:
        m = _prefix(segments, n, high_watermark, lambda i: now_ms - segments[i].largest_timestamp > retention_ms)
        if m > n:
            n, reason = m, "retention.ms"
    return n, reason
