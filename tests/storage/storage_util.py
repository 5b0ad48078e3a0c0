"""Helpers of the storage tests (imported as `storage.storage_util`): batch builders, a manual clock."""

from __future__ import annotations

from collections.abc import Callable

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


Batch = Callable[..., bytes]
