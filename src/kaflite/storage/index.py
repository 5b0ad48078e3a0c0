"""Segment indexes (OffsetIndex, TimeIndex): Kafka's sparse `.index` and `.timeindex` files of one segment.

Rules (as Kafka's AbstractIndex / OffsetIndex / TimeIndex):
- `.index`: 8-byte entries, big-endian (int32 offset relative to the segment base, int32 file position
  of the batch). The offset is the LAST offset of the indexed batch, the position its start. Entries
  strictly increase in both. Lookup: the greatest entry whose offset <= target, then scan forward.
- `.timeindex`: 12-byte entries, big-endian (int64 timestamp, int32 relative offset); a new entry only when
  the segment's max timestamp grew. Lookup: the greatest entry whose timestamp < target.
- An entry is added when more than `index.interval.bytes` were appended since the last entry.

Kafka preallocates these files (mmap) and trims them on roll. kaflite keeps the entries in memory
(`array`), appends new entries to the file with plain writes batched until the next flush/roll/close,
and has nothing to trim. The active segment's index files are never trusted after a crash (the segment
is recovered from the `.log`), so buffering entries costs no durability. The arrays of a sealed segment
are loaded lazily on first lookup.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

__all__ = ["OffsetIndex", "TimeIndex", "IndexCorrupt"]

_OFF_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class IndexCorrupt(Exception):
    """An index file failed its sanity check; the caller rebuilds it from the log."""


class _IndexFile:
    entry_size = 8

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry_size)
        self._pending = bytearray()
        self._loaded = False
        self._fd: int | None = None

    # file handling -------------------------------------------------------------------------------
    def _open_fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        return self._fd

    def write_pending(self) -> None:
        if self._pending:
            fd = self._open_fd()
            os.write(fd, self._pending)
            self._pending.clear()

    def flush(self) -> None:
        self.write_pending()
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        self.write_pending()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self._pending.clear()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def rename(self, new_path: Path) -> None:
        self.write_pending()
        if self.path.exists():
            os.replace(self.path, new_path)
        self.path = new_path

    def _read_file(self) -> bytes:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return b""
        if len(data) % self.entry_size:
            raise IndexCorrupt(f"{self.path}: size {len(data)} is not a multiple of {self.entry_size}")
        return data

    def reset(self) -> None:
        """Empty the index (memory and file): it is about to be rebuilt."""
        self._pending.clear()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        with open(self.path, "wb"):
            pass
        self._clear_arrays()
        self._loaded = True

    def _clear_arrays(self) -> None:
        raise NotImplementedError


class OffsetIndex(_IndexFile):
    entry_size = 8

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._offsets = array("i")  # relative offsets
        self._positions = array("i")

    def _clear_arrays(self) -> None:
        self._offsets = array("i")
        self._positions = array("i")

    def load(self, log_size: int) -> None:
        """Read the file and sanity-check it against the segment's log size (Kafka's sanityCheck)."""
        data = self._read_file()
        offs = array("i")
        poss = array("i")
        for rel, pos in _OFF_ENTRY.iter_unpack(data):
            if offs and (rel <= offs[-1] or pos <= poss[-1]):
                raise IndexCorrupt(f"{self.path}: entries are not increasing")
            if pos >= log_size or rel < 0:
                raise IndexCorrupt(f"{self.path}: entry ({rel}, {pos}) lies outside the log")
            offs.append(rel)
            poss.append(pos)
        self._offsets, self._positions = offs, poss
        self._loaded = True

    def ensure_loaded(self, log_size: int) -> None:
        if not self._loaded:
            self.load(log_size)

    @property
    def entries(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    def last_entry(self) -> tuple[int, int] | None:
        """(absolute offset, position) of the last entry, or None."""
        if not self._offsets:
            return None
        return self.base_offset + self._offsets[-1], self._positions[-1]

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self._offsets and (rel <= self._offsets[-1] or position <= self._positions[-1]):
            return  # not increasing (e.g. a rebuilt entry): Kafka refuses it too; the index stays sparse
        self._offsets.append(rel)
        self._positions.append(position)
        self._pending += _OFF_ENTRY.pack(rel, position)

    def lookup(self, offset: int) -> int:
        """File position to start scanning from for `offset` (0 when no entry is <= offset)."""
        i = bisect_right(self._offsets, offset - self.base_offset) - 1
        return self._positions[i] if i >= 0 else 0

    def lookup_entry(self, offset: int) -> tuple[int, int]:
        """(absolute offset, position) of the greatest entry <= offset, or (base_offset, 0)."""
        i = bisect_right(self._offsets, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._offsets[i], self._positions[i]

    def floor_position(self, position: int) -> int:
        """The greatest indexed batch start <= position (0 when none): a batch boundary."""
        i = bisect_right(self._positions, position) - 1
        return self._positions[i] if i >= 0 else 0

    def truncate_to_position(self, position: int) -> None:
        """Drop entries for batches starting at or after `position` and rewrite the file."""
        i = bisect_left(self._positions, position)
        if i == len(self._positions):
            return
        del self._offsets[i:]
        del self._positions[i:]
        self._rewrite()

    def _rewrite(self) -> None:
        self._pending.clear()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        buf = bytearray()
        for rel, pos in zip(self._offsets, self._positions, strict=True):
            buf += _OFF_ENTRY.pack(rel, pos)
        with open(self.path, "wb") as f:
            f.write(buf)


class TimeIndex(_IndexFile):
    entry_size = 12

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._timestamps = array("q")
        self._offsets = array("i")

    def _clear_arrays(self) -> None:
        self._timestamps = array("q")
        self._offsets = array("i")

    def load(self) -> None:
        data = self._read_file()
        tss = array("q")
        offs = array("i")
        for ts, rel in _TIME_ENTRY.iter_unpack(data):
            if tss and (ts < tss[-1] or rel < offs[-1]):
                raise IndexCorrupt(f"{self.path}: entries are not increasing")
            if rel < 0:
                raise IndexCorrupt(f"{self.path}: negative relative offset")
            tss.append(ts)
            offs.append(rel)
        self._timestamps, self._offsets = tss, offs
        self._loaded = True

    def ensure_loaded(self) -> None:
        if not self._loaded:
            self.load()

    @property
    def entries(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, absolute offset) of the last entry, or None."""
        if not self._offsets:
            return None
        return self._timestamps[-1], self.base_offset + self._offsets[-1]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return
        rel = offset - self.base_offset
        if self._offsets and rel < self._offsets[-1]:
            return
        self._timestamps.append(timestamp)
        self._offsets.append(rel)
        self._pending += _TIME_ENTRY.pack(timestamp, rel)

    def lookup(self, timestamp: int) -> int:
        """Absolute offset to start scanning from: of the greatest entry with timestamp < target, so
        every record before it is known to be older than the target; base offset when none."""
        i = bisect_left(self._timestamps, timestamp) - 1
        return self.base_offset + self._offsets[i] if i >= 0 else self.base_offset

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries whose offset >= `offset` and rewrite the file."""
        i = bisect_left(self._offsets, offset - self.base_offset)
        if i == len(self._offsets):
            return
        del self._timestamps[i:]
        del self._offsets[i:]
        self._pending.clear()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        buf = bytearray()
        for ts, rel in zip(self._timestamps, self._offsets, strict=True):
            buf += _TIME_ENTRY.pack(ts, rel)
        with open(self.path, "wb") as f:
            f.write(buf)
