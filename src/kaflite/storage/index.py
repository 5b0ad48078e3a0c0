"""Segment indexes (OffsetIndex, TimeIndex): Kafka's sparse `.index` and `.timeindex` files of one segment.

Rules (as Kafka's AbstractIndex / OffsetIndex / TimeIndex):
- `.index`: 8-byte entries, big-endian (int32 offset relative to the segment base, int32 file position
  of the batch). The offset is the LAST offset of the indexed batch, the position its start. Entries
  strictly increase in both. Lookup: the greatest entry whose offset <= target, then scan forward.
- `.timeindex`: 12-byte entries, big-endian (int64 timestamp, int32 relative offset); a new entry only when
  the segment's max timestamp grew. Lookup: the greatest entry whose timestamp < target.
- An entry is added when more than `index.interval.bytes` were appended since the last entry.
- The file holds exactly the first `_written` entries, whole, whatever a write of pending entries did: a
  short write or ENOSPC halfway (a full disk) counts the whole entries it wrote, cuts the torn rest off
  (shrinking a file needs no space) and raises; the next `write_pending` writes from the next entry, so no
  entry is written twice or skipped, and the file never holds an entry shifted by a torn one (a later load
  would read positions that are not batch starts). Should the cut fail too, `_torn` makes the next write
  cut first. A truncation only shrinks the file (never rewrites it). Lookups use the arrays, never the
  file, so a failed write changes no answer; a load of a torn file (a crash mid-write) fails the size check
  and the segment's indexes are rebuilt from its `.log` (Kafka: an index is a cache recovery rebuilds).

Kafka preallocates these files (mmap) and trims them on roll. kaflite keeps the entries in memory
(`array`), appends new entries to the file with one write per flush/roll/close (the entries not yet
written are packed then), and has nothing to trim. The active segment's index files are never trusted after a crash (the segment
is recovered from the `.log`), so buffering entries costs no durability. The arrays of a sealed segment
are loaded lazily on first lookup.
"""

from __future__ import annotations

import errno
import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

from kaflite.storage.file_cache import open_file

__all__ = ["OffsetIndex", "TimeIndex", "IndexCorrupt"]

_OFF_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class IndexCorrupt(Exception):
    """An index file failed its sanity check; the caller rebuilds it from the log."""


class _IndexFile:
    """Entries live in two parallel arrays (`_keys`, `_values`); the first `_written` are in the file."""

    __slots__ = ("path", "base_offset", "max_entries", "_keys", "_values", "_written", "_fd", "_unsynced",
                 "_torn")
    entry: struct.Struct = _OFF_ENTRY
    key_type = "i"
    value_type = "i"

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry.size)
        self._keys = array(self.key_type)
        self._values = array(self.value_type)
        self._written = 0
        self._fd: int | None = None  # never held between calls: one descriptor per index would grow with segments
        self._unsynced = False  # entries written since the last fsync
        self._torn = False  # the file may end in part of an entry (a failed write whose cut failed): cut first

    @property
    def entries(self) -> int:
        return len(self._keys)

    @property
    def is_full(self) -> bool:
        return len(self._keys) >= self.max_entries

    # file handling -------------------------------------------------------------------------------
    def write_pending(self) -> None:
        """Write the entries not in the file yet, after the `_written` ones (module rules: a failure leaves
        the file holding whole entries only, counted in `_written`, and raises)."""
        n = len(self._keys)
        if self._written >= n and not self._torn:
            return
        size = self.entry.size
        pack = self.entry.pack
        data = b"".join(pack(k, v) for k, v in zip(self._keys[self._written :], self._values[self._written :],
                                                      strict=True))
        fd = open_file(self.path, os.O_RDWR | os.O_CREAT)
        try:
            start = self._written * size
            if self._torn:
                os.ftruncate(fd, start)
                self._torn = False
            done = 0
            try:
                while done < len(data):
                    k = os.pwrite(fd, data[done:] if done else data, start + done)
                    if k <= 0:
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.path))
                    done += k
            finally:
                # (also when a write raised: the whole entries it wrote count, a torn one is cut off)
                whole = done // size
                if whole:
                    self._written += whole
                    self._unsynced = True
                if done % size:
                    self._torn = True
                    os.ftruncate(fd, start + whole * size)
                    self._torn = False
        finally:
            os.close(fd)

    def flush(self) -> None:
        """Write pending entries and fsync (through a descriptor opened for it: an fsync flushes the
        file's pages whichever descriptor wrote them)."""
        self.write_pending()
        if self._unsynced and self.path.exists():
            fd = open_file(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self._unsynced = False

    def take_unsynced(self) -> Path | None:
        """Write pending entries and hand the fsync to the caller: the path to fsync (it is marked synced
        now, so call under the owner's lock and `mark_unsynced` again if the fsync fails), or None."""
        self.write_pending()
        if not self._unsynced:
            return None
        self._unsynced = False
        return self.path

    def mark_unsynced(self) -> None:
        self._unsynced = True

    def close(self) -> None:
        try:
            self.write_pending()
        finally:
            self._close_fd()

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self._close_fd()
        self._written = len(self._keys)
        self._torn = False
        self.path.unlink(missing_ok=True)

    def _read_entries(self) -> list[tuple[int, int]]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        if len(data) % self.entry.size:
            raise IndexCorrupt(f"{self.path}: size {len(data)} is not a multiple of {self.entry.size}")
        return list(self.entry.iter_unpack(data))

    def reset(self) -> None:
        """Empty the index (memory and file): it is about to be rebuilt."""
        self._close_fd()
        with open(self.path, "wb"):
            pass
        self._keys = array(self.key_type)
        self._values = array(self.value_type)
        self._written = 0
        self._torn = False

    def _truncate_entries(self, i: int) -> None:
        """Keep the first i entries, in memory and in the file (cut to the whole entries it keeps: shrinking
        needs no space, and a torn tail goes with it)."""
        if i >= len(self._keys):
            return
        del self._keys[i:]
        del self._values[i:]
        if i < self._written or self._torn:
            self._close_fd()
            self._written = min(i, self._written)
            fd = open_file(self.path, os.O_RDWR | os.O_CREAT)
            try:
                os.ftruncate(fd, self._written * self.entry.size)
            finally:
                os.close(fd)
            self._torn = False


class OffsetIndex(_IndexFile):
    """keys: offsets relative to the base offset; values: file positions."""

    __slots__ = ()

    entry = _OFF_ENTRY

    def load(self, log_size: int) -> None:
        """Read the file and sanity-check it against the segment's log size (Kafka's sanityCheck)."""
        offs = array("i")
        poss = array("i")
        for rel, pos in self._read_entries():
            if offs and (rel <= offs[-1] or pos <= poss[-1]):
                raise IndexCorrupt(f"{self.path}: entries are not increasing")
            if pos >= log_size or rel < 0:
                raise IndexCorrupt(f"{self.path}: entry ({rel}, {pos}) lies outside the log")
            offs.append(rel)
            poss.append(pos)
        self._keys, self._values = offs, poss
        self._written = len(offs)

    def last_entry(self) -> tuple[int, int] | None:
        """(absolute offset, position) of the last entry, or None."""
        if not self._keys:
            return None
        return self.base_offset + self._keys[-1], self._values[-1]

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        keys = self._keys
        if keys and (rel <= keys[-1] or position <= self._values[-1]):
            return  # not increasing: Kafka refuses it too; the index just stays sparser
        keys.append(rel)
        self._values.append(position)

    def lookup(self, offset: int) -> int:
        """File position to start scanning from for `offset` (0 when no entry is <= offset)."""
        i = bisect_right(self._keys, offset - self.base_offset) - 1
        return self._values[i] if i >= 0 else 0

    def ceiling_position(self, offset: int) -> int:
        """Position of the first indexed batch whose last offset >= `offset`, or -1. That batch holds
        `offset` when its base offset <= `offset` (the caller checks); otherwise the batch holding it
        lies between the previous entry and this one."""
        i = bisect_left(self._keys, offset - self.base_offset)
        return self._values[i] if i < len(self._keys) else -1

    def floor_position(self, position: int) -> int:
        """The greatest indexed batch start <= position (0 when none): a batch boundary."""
        i = bisect_right(self._values, position) - 1
        return self._values[i] if i >= 0 else 0

    def truncate_to_position(self, position: int) -> None:
        """Drop entries for batches starting at or after `position`."""
        self._truncate_entries(bisect_left(self._values, position))


class TimeIndex(_IndexFile):
    """keys: timestamps; values: offsets relative to the base offset."""

    __slots__ = ()

    entry = _TIME_ENTRY
    key_type = "q"

    def load(self) -> None:
        tss = array("q")
        offs = array("i")
        for ts, rel in self._read_entries():
            if tss and (ts < tss[-1] or rel < offs[-1]):
                raise IndexCorrupt(f"{self.path}: entries are not increasing")
            if rel < 0:
                raise IndexCorrupt(f"{self.path}: negative relative offset")
            tss.append(ts)
            offs.append(rel)
        self._keys, self._values = tss, offs
        self._written = len(tss)

    @property
    def last_timestamp(self) -> int:
        """Timestamp of the last entry (-2 when empty: below every real or -1 timestamp)."""
        return self._keys[-1] if self._keys else -2

    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, absolute offset) of the last entry, or None."""
        if not self._keys:
            return None
        return self._keys[-1], self.base_offset + self._values[-1]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        keys = self._keys
        if keys and timestamp <= keys[-1]:
            return
        rel = offset - self.base_offset
        if self._values and rel < self._values[-1]:
            return
        keys.append(timestamp)
        self._values.append(rel)

    def lookup(self, timestamp: int) -> int:
        """Absolute offset to start scanning from: of the greatest entry with timestamp < target, so
        every record before it is known to be older than the target; base offset when none."""
        i = bisect_left(self._keys, timestamp) - 1
        return self.base_offset + self._values[i] if i >= 0 else self.base_offset

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries whose offset >= `offset`."""
        self._truncate_entries(bisect_left(self._values, offset - self.base_offset))
