"""Helpers of the storage tests (imported as `storage.storage_util`): batch builders, a manual clock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kaflite.protocol.record_batch import build_record_batch, iter_batches


class ManualClock:
    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.ms = start_ms

    def __call__(self) -> int:
        return self.ms

    def advance(self, ms: int) -> None:
        self.ms += ms


def batch(n: int = 1, *, value: bytes = b"v", key: bytes | None = b"k", ts: int = 1_700_000_000_000,
          **kw) -> bytes:  # type: ignore[no-untyped-def]
    return build_record_batch([(key, value, [])] * n, timestamp_ms=ts, **kw)


def fetched_offsets(records: list) -> list[tuple[int, int]]:  # type: ignore[type-arg]
    out = []
    for buf in records:
        out += [(b.base_offset, b.last_offset) for b in iter_batches(buf)]
    return out


def every_batch_range(log: Any) -> list[tuple[int, int]]:
    """(base, last) offsets of every batch from the log start to its end, read a fetch at a time."""
    out: list[tuple[int, int]] = []
    off = log.log_start_offset
    while off < log.log_end_offset:
        got = fetched_offsets(log.read(off, 1 << 20).records)
        out += got
        off = got[-1][1] + 1
    return out


Batch = Callable[..., bytes]
