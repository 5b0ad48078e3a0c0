"""Log.read against a brute-force reference over a list of (offset range, position, size): mixed batch
sizes so that the one-pread fast path, the re-read and the slow scan are all taken, for both reads (bytes
in memory, and the FileSlices a fetch answers with: budgets below and above read_slice's one-read size)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kaflite.protocol.record_batch import build_record_batch
from kaflite.storage import Log, LogConfig
from kaflite.storage.file_slice import FileSlice
from storage.storage_util import fetched_offsets


def _reference(batches: list[tuple[int, int, int]], offset: int, max_bytes: int, max_offset: int,
               min_one: bool) -> list[tuple[int, int]]:
    """batches: (base, last, size) of ONE segment, in order."""
    i = next((k for k, b in enumerate(batches) if b[1] >= offset), None)
    if i is None:
        return []
    out: list[tuple[int, int]] = []
    total = 0
    for base, last, size in batches[i:]:
        if last >= max_offset:
            break
        if total + size > max_bytes:
            if not out and min_one:
                out.append((base, last))
            break
        out.append((base, last))
        total += size
    return out


def _bytes(records: list) -> list:  # type: ignore[type-arg]
    return [r.tobytes() if isinstance(r, FileSlice) else r for r in records]


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("interval", [0, 100, 4096])
def test_reads_match_reference(tmp_path: Path, interval: int, lazy: bool) -> None:
    rng = random.Random(interval)
    log = Log(tmp_path / "r-0", LogConfig(index_interval_bytes=interval))
    batches = []
    for _ in range(60):
        n = rng.choice((1, 2, 5))
        pad = rng.choice((0, 50, 3000, 9000))
        raw = build_record_batch([(b"k", b"x" * pad, [])] * n)
        r = log.append(raw)
        batches.append((r.base_offset, r.last_offset, len(raw)))
    end = log.log_end_offset
    for _ in range(400):
        offset = rng.randrange(end)
        max_bytes = rng.choice((1, 100, 3100, 9100, 20_000, 32 * 1024, 40_000, 1 << 20))
        max_offset = rng.choice((end, rng.randrange(offset, end + 1)))
        min_one = rng.random() < 0.7
        if rng.random() < 0.3:  # sometimes continue sequentially (the memo path)
            got_first = fetched_offsets(_bytes(log.read(offset, max_bytes, max_offset=max_offset,
                                                        min_one_message=min_one, lazy=lazy).records))
            if got_first:
                offset = min(got_first[-1][1] + 1, end - 1)
        got = fetched_offsets(_bytes(log.read(offset, max_bytes, max_offset=max_offset, min_one_message=min_one,
                                              lazy=lazy).records))
        assert got == _reference(batches, offset, max_bytes, max_offset, min_one), (offset, max_bytes, max_offset)
