"""LogSegment: one `<20-digit base offset>.log` file of verbatim magic-2 batches plus its two indexes.

Rules:
- Batches are appended at the end of the `.log` file exactly as they will be served (offsets already
  assigned); positions and sizes are byte-exact, so a fetch is a byte range of the file.
- Base offsets of consecutive batches strictly increase (compaction may leave gaps, never overlaps).
- An index entry (last offset of the batch -> batch start position) is written when more than
  `index.interval.bytes` were appended since the previous entry (Kafka's rule).
- The segment is never trusted blindly after an unclean stop: `recover()` rescans the file, checks each
  batch's structure and CRC-32C, truncates at the first bad byte and rebuilds both indexes.
- A sealed segment below the recovery point opens lazily (`LogSegment.lazy`, Kafka's LazyIndex): its size is
  the file's length (one stat), nothing is opened or read (its `log_path` is made on first use, too); its
  descriptor is opened by the FileCache on first use, and its indexes are read and sanity-checked (`load`)
  on the first access to any of the `_DEFERRED` attributes, under `_lazy_lock`, the results assigned only
  once complete (a thread never sees half a load). A failed check then rebuilds that segment's indexes from its `.log` (`recover`), and only
  that segment's: the later ones were flushed before the crash and stay. A lazy segment closed, flushed or
  deleted is never loaded for it (nothing of it is pending).
- The active segment of a cleanly stopped log opens lazily too when its Log knows its next offset from the
  clean shutdown (`known_next_offset`, Log rules): `next_offset` is set at open, the rest is deferred as
  above. A write (`append`, `append_one`) loads a lazy segment before it writes a byte, so the load reads
  the file as the stop left it; a failed check of an active segment rebuilds its indexes without sealing
  it (no `on_become_inactive`), and a loaded next offset other than the known one is logged as an error.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from kaflite.protocol.errors import KafkaError
from kaflite.protocol.record_batch import (
    BATCH_HEADER_SIZE,
    CRC_START,
    LOG_OVERHEAD,
    MAGIC_V2,
    RecordBatchView,
    crc32c,
    decode_records,
)
from kaflite.storage.checkpoint import fsync_dir
from kaflite.storage.file_cache import FileRetired, file_cache, open_file
from kaflite.storage.file_slice import FileSlice
from kaflite.storage.index import IndexCorrupt, OffsetIndex, TimeIndex

__all__ = ["LogSegment", "RecoveryNote", "segment_file_name", "HeaderFields", "SegmentRetired"]

_T = TypeVar("_T")
DELETED_SUFFIX = ".deleted"  # a deleted segment's files until file.delete.delay.ms passed (Kafka's suffix)


_log = logging.getLogger("kaflite.storage")
# the attributes a lazy segment leaves unset until its load (an unset slot raises AttributeError, so the
# first access goes to _LazyLogSegment.__getattr__: a loaded segment is a plain LogSegment again)
_DEFERRED = frozenset({"index", "time_index", "next_offset", "max_timestamp", "offset_of_max_timestamp",
                       "rolling_based_timestamp", "bytes_since_last_index_entry"})
# serialises deferred loads: a segment may be first used by the event loop (a fetch, under its Log's lock)
# and the housekeeping thread (compaction scheduling reads segments under the same lock; the cleaner does not)
_lazy_lock = threading.RLock()


# a read or write on a segment closed or deleted for good (EBADF, as the closed descriptor was)
SegmentRetired = FileRetired

_HEADER = struct.Struct(">qiibIhiqqqhii")
_MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD  # 49
_IOV_MAX = 1000

# indexes into the header tuple
# read_slice reads the headers up to the cut along with the start when the budget is at most this (one
# pread instead of three for a consumer's small partition budget); above it, reading the data to find
# the cut would cost more than the two small reads
_ONE_READ_BYTES = 32 * 1024
H_BASE, H_LEN, H_PLE, H_MAGIC, H_CRC, H_ATTR, H_LOD, H_FIRST_TS, H_MAX_TS, H_PID, H_EPOCH, H_SEQ, H_COUNT = range(13)
HeaderFields = tuple[int, int, int, int, int, int, int, int, int, int, int, int, int]


@dataclass(frozen=True, slots=True)
class RecoveryNote:
    """What one segment's recovery scan found: valid batches and records, and where and why it stopped
    short of the end of the file (reason "" when the whole file was valid)."""

    batches: int
    records: int
    valid_bytes: int
    file_bytes: int
    truncated_at_offset: int  # the first offset not kept (the segment's next offset)
    reason: str


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def _pwrite_all(fd: int, pieces: list[bytes | bytearray | memoryview], pos: int) -> int:
    total = 0
    for i in range(0, len(pieces), _IOV_MAX):
        chunk = pieces[i : i + _IOV_MAX]
        want = sum(len(p) for p in chunk)
        n = os.pwritev(fd, chunk, pos + total)
        if n != want:  # a short write (rare: disk full, signal); finish piece by piece
            data = memoryview(b"".join(bytes(p) for p in chunk))
            while n < want:
                n += os.pwrite(fd, data[n:], pos + total + n)
        total += want
    return total


class LogSegment:
    """One segment. Not thread-safe on its own: the owning Log serialises access."""

    __slots__ = (
        "dir",
        "base_offset",
        "log_path",
        "_fd",
        "_pins",
        "_used",
        "_retired",
        "size",
        "index_interval_bytes",
        "index",
        "time_index",
        "next_offset",
        "max_timestamp",
        "offset_of_max_timestamp",
        "rolling_based_timestamp",
        "created_ms",
        "bytes_since_last_index_entry",
        "dirty",
        "indexes_full",
        "_next_read_offset",
        "_next_read_position",
        "recovery",
        "load_problem",
        "_lazy",
        "_max_index_size",
        "_idx_suffix",
        "_known_next",
    )

    # how many segments were opened lazily / loaded on first use since the process started (observable by
    # tests and the load's log line: a start that rescans or reads every segment shows here)
    lazy_opened = 0
    lazy_loaded = 0

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        created_ms: int,
        suffix: str = ".log",
        lazy: bool = False,
        size: int | None = None,
        known_next_offset: int | None = None,
    ) -> None:
        """`lazy`: an existing sealed segment below the recovery point (module rules): its size from the
        file's length (`size`: the caller's stat of it), its descriptor, indexes and state on first use.
        `known_next_offset` (with `lazy`): the active segment of a cleanly stopped log, whose next offset
        the clean shutdown recorded (module rules)."""
        self.dir = directory
        self.base_offset = base_offset
        if not lazy or suffix != ".log":  # a lazy segment's path is made on first use (__getattr__)
            self.log_path = directory / segment_file_name(base_offset, suffix)
        self._retired = False  # closed or deleted for good: no descriptor from then on
        self._pins = 0  # calls using the descriptor now (the FileCache does not close it meanwhile)
        self._fd = -1
        self._used = True
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        self.dirty = False  # bytes written since the last fsync
        self.indexes_full = False  # an index reached segment.index.bytes: roll
        self._next_read_offset = -1  # where the last read ended (offset, position): sequential reads
        self._next_read_position = 0
        self.recovery: RecoveryNote | None = None  # what the last recover() found (for the log)
        self.load_problem = ""  # why the last load() refused the segment
        self._lazy = lazy
        self._max_index_size = max_index_size
        self._idx_suffix = ""  # ".deleted" once a lazy segment's index files were renamed (rename_deleted)
        self._known_next = -1  # a lazy active segment's next offset as its Log knew it at open (-1: sealed)
        if lazy:
            # the deferred attributes are read through _LazyLogSegment.__getattr__ until the load
            self.__class__ = _LazyLogSegment
            # the FileCache opens the descriptor on first use
            if size is None:
                size = os.stat(f"{directory}/{segment_file_name(base_offset, suffix)}").st_size
            self.size = size
            if known_next_offset is not None:
                self.next_offset = self._known_next = known_next_offset
            LogSegment.lazy_opened += 1
            return
        fd = open_file(self.log_path, os.O_RDWR | os.O_CREAT)
        self.size = os.fstat(fd).st_size
        file_cache.add(self, fd)
        self._init_state()

    def _index_path(self, suffix: str) -> Path:
        return self.dir / (segment_file_name(self.base_offset, suffix) + self._idx_suffix)

    def _init_state(self) -> None:
        """The state of an empty segment: what recover() starts from."""
        self.index = OffsetIndex(self._index_path(".index"), self.base_offset, self._max_index_size)
        self.time_index = TimeIndex(self._index_path(".timeindex"), self.base_offset, self._max_index_size)
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.rolling_based_timestamp: int | None = None  # max timestamp of the first batch (Kafka's rule)
        self.bytes_since_last_index_entry = 0

    # ------------------------------------------------------------------------------------------
    # lazy open (module rules; the deferred attributes are read through _LazyLogSegment.__getattr__)
    @property
    def lazy(self) -> bool:
        """Opened lazily and not loaded yet: no index read, no descriptor opened for it."""
        return self._lazy

    def ensure_loaded(self) -> None:
        """Load a lazy segment now (read and sanity-check its indexes, read its tail); a failed check
        rebuilds its indexes from the `.log` (recover)."""
        if not self._lazy:
            return
        with _lazy_lock:
            if not self._lazy:
                return
            ok = self.load()
            active = self._known_next >= 0
            if not ok:
                # (the rebuild's state is visible as it is made: a rare path, and a reader under the Log's
                # lock, as every fetch is, cannot be here at the same time)
                problem = self.load_problem
                self._init_state()
                _log.warning("%s: rebuilding the indexes of segment %d on first use: %s", self.dir.name,
                             self.base_offset, problem)
                truncated = self.recover()
                if not active:  # a sealed segment's final time index entry; the active one stays open
                    self.on_become_inactive()
                note = self.recovery
                if truncated and note is not None:
                    _log.warning("%s: segment %d (%s) cut at offset %d, byte %d (%d bytes discarded): %s%s",
                                 self.dir.name, self.base_offset,
                                 "the active one" if active else "below the recovery point",
                                 note.truncated_at_offset, note.valid_bytes, truncated, note.reason,
                                 "" if active else "; the later segments are kept")
            if active and self.next_offset != self._known_next:
                # the clean shutdown's records (checkpoint and snapshot) disagree with the file: the file
                # was changed after the stop. Nothing here can make the log's offsets right again.
                _log.error("%s: the active segment %d ends at offset %d, but the clean shutdown recorded %d "
                           "(the file was changed after the stop)", self.dir.name, self.base_offset,
                           self.next_offset, self._known_next)
            try:
                object.__getattribute__(self, "log_path")
            except AttributeError:  # (still deferred: the plain class below has no __getattr__ to make it)
                self.log_path = self.dir / segment_file_name(self.base_offset, ".log")
            self._lazy = False
            # a loaded segment is a plain LogSegment again: no __getattr__ on its class (see _LazyLogSegment)
            self.__class__ = LogSegment
            LogSegment.lazy_loaded += 1

    # ------------------------------------------------------------------------------------------
    # the descriptor: opened on use, closed by the FileCache when idle (storage/file_cache.py). Every
    # system call on it is pinned by the cache (`file_cache.call`, or `acquire`/`release` around it), so a
    # shed from another thread never closes it in the middle of a pread/pwritev; there is deliberately no
    # unpinned accessor. The pins are the cache's code only (its rules live there, in one place).
    def _open_fd(self) -> int:
        """Called by the FileCache, under its lock, to reopen a closed descriptor."""
        return open_file(self.log_path, os.O_RDWR)

    def pread(self, n: int, pos: int) -> bytes:
        """os.pread on the segment's file, the descriptor pinned for the call; SegmentRetired (an OSError)
        once the segment is closed or deleted."""
        return file_cache.call(self, os.pread, n, pos)

    def _fd_call(self, fn: Callable[[int], _T]) -> _T:
        fd = file_cache.acquire(self)
        try:
            return fn(fd)
        finally:
            file_cache.release(self)

    @property
    def retired(self) -> bool:
        return self._retired

    def retire_fd(self) -> None:
        """Close the descriptor for good (close, delete, replaced by compaction); a call in flight on it
        finishes first (the close happens at its release)."""
        file_cache.retire(self)

    # ------------------------------------------------------------------------------------------
    # scanning
    def iter_headers(self, start: int = 0, end: int | None = None, chunk: int = 8192) -> Iterator[tuple[int, HeaderFields]]:
        """(position, header tuple) of each batch from `start` (a batch boundary) to `end`.
        Stops silently at a structurally impossible or truncated header."""
        end = self.size if end is None else end
        pos = start
        buf = b""
        buf_start = pos
        while pos + BATCH_HEADER_SIZE <= end:
            rel = pos - buf_start
            if rel + BATCH_HEADER_SIZE > len(buf):
                buf = self.pread(max(chunk, BATCH_HEADER_SIZE), pos)
                buf_start = pos
                rel = 0
                if len(buf) < BATCH_HEADER_SIZE:
                    return
            fields: HeaderFields = _HEADER.unpack_from(buf, rel)  # type: ignore[assignment]
            length = fields[H_LEN]
            if length < _MIN_BATCH_LENGTH or pos + length + LOG_OVERHEAD > end:
                return
            yield pos, fields
            pos += length + LOG_OVERHEAD

    def iter_batches(self, start: int = 0, end: int | None = None, chunk: int = 1 << 20) -> Iterator[tuple[int, HeaderFields, memoryview]]:
        """Like iter_headers, with a memoryview of each whole batch (read in large chunks)."""
        end = self.size if end is None else end
        pos = start
        buf = memoryview(b"")
        buf_start = pos
        while pos + BATCH_HEADER_SIZE <= end:
            rel = pos - buf_start
            if rel + BATCH_HEADER_SIZE > len(buf):
                buf = memoryview(self.pread(min(max(chunk, BATCH_HEADER_SIZE), end - pos), pos))
                buf_start = pos
                rel = 0
                if len(buf) < BATCH_HEADER_SIZE:
                    return
            fields: HeaderFields = _HEADER.unpack_from(buf, rel)  # type: ignore[assignment]
            size = fields[H_LEN] + LOG_OVERHEAD
            if fields[H_LEN] < _MIN_BATCH_LENGTH or pos + size > end:
                return
            if rel + size > len(buf):
                buf = memoryview(self.pread(max(chunk, size), pos))
                buf_start = pos
                rel = 0
                if len(buf) < size:
                    return
            yield pos, fields, buf[rel : rel + size]
            pos += size

    # ------------------------------------------------------------------------------------------
    # append
    def append(
        self,
        pieces: list[bytes | bytearray | memoryview],
        batches: list[tuple[int, int, int, int]],
    ) -> int:
        """Write pre-patched batch bytes at the end. `batches` = (size, last_offset, max_timestamp,
        first_offset) per batch, in order, describing `pieces`. Returns the start position."""
        if self._lazy:  # (module rules: loaded before the write)
            self.ensure_loaded()
        start = self.size
        try:
            file_cache.call(self, _pwrite_all, pieces, start)
        except OSError:
            self._undo_write(start)
            raise
        # _account_batch inline (one call per batch less: a follower's set holds hundreds of batches)
        pos = start
        interval = self.index_interval_bytes
        if self.rolling_based_timestamp is None:
            self.rolling_based_timestamp = batches[0][2]
        for size, last_offset, max_ts, _first in batches:
            if max_ts > self.max_timestamp:
                self.max_timestamp = max_ts
                self.offset_of_max_timestamp = last_offset
            if self.bytes_since_last_index_entry > interval:
                self._add_index_entry(last_offset, pos)
            self.bytes_since_last_index_entry += size
            pos += size
        self.next_offset = batches[-1][1] + 1
        self.size = pos
        self.dirty = True
        return start

    def append_one(
        self, header: bytes | bytearray, body: memoryview, size: int, last_offset: int, max_ts: int
    ) -> None:
        """Hot path of append for one batch: a patched header prefix + the rest of the caller's buffer,
        one pwritev."""
        if self._lazy:  # (module rules: loaded before the write)
            self.ensure_loaded()
        pos = self.size
        try:
            n = file_cache.call(self, os.pwritev, (header, body), pos)
            if n != size:  # a short write: the rest (positional, so a second pin changes nothing)
                rest: list[bytes | bytearray | memoryview] = [memoryview(bytes(header) + bytes(body))[n:]]
                file_cache.call(self, _pwrite_all, rest, pos + n)
        except OSError:
            self._undo_write(pos)
            raise
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.offset_of_max_timestamp = last_offset
        if self.rolling_based_timestamp is None:
            self.rolling_based_timestamp = max_ts
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self._add_index_entry(last_offset, pos)
        self.bytes_since_last_index_entry += size
        self.next_offset = last_offset + 1
        self.size = pos + size
        self.dirty = True

    def _undo_write(self, pos: int) -> None:
        """A failed write (disk full) may have left part of a batch after `pos`: cut it off so the file
        ends at the last whole batch and the next append (when space returns) starts there. Shrinking a
        file never needs space."""
        try:
            self._fd_call(lambda fd: os.ftruncate(fd, pos))
        except OSError:
            pass  # the next append overwrites from `pos` anyway; recovery would truncate the rest

    def _account_batch(self, pos: int, size: int, last_offset: int, max_ts: int) -> None:
        if self.rolling_based_timestamp is None:
            self.rolling_based_timestamp = max_ts
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self._add_index_entry(last_offset, pos)
        self.bytes_since_last_index_entry += size
        self.next_offset = last_offset + 1

    def _add_index_entry(self, last_offset: int, pos: int) -> None:
        index = self.index
        keys = index._keys  # noqa: SLF001 - OffsetIndex.append inlined on the hot path
        rel = last_offset - self.base_offset
        if not keys or (rel > keys[-1] and pos > index._values[-1]):  # noqa: SLF001
            keys.append(rel)
            index._values.append(pos)  # noqa: SLF001
        time_index = self.time_index
        if self.max_timestamp > time_index.last_timestamp:
            time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.bytes_since_last_index_entry = 0
        if len(index._keys) >= index.max_entries or len(time_index._keys) >= time_index.max_entries:  # noqa: SLF001
            self.indexes_full = True

    # ------------------------------------------------------------------------------------------
    # roll conditions (Kafka's LogSegment.shouldRoll)
    def should_roll(self, append_size: int, max_ts_in_append: int, last_offset: int, now_ms: int,
                    segment_bytes: int, roll_ms: int) -> bool:
        if self.size == 0:
            return False
        if self.size > segment_bytes - append_size:
            return True
        # Kafka's timeWaitedForRoll: the incoming batch's timestamp minus the first batch's timestamp,
        # or wall time since creation when the segment's batches carry no timestamp
        based = self.rolling_based_timestamp
        waited = max_ts_in_append - based if based is not None and based >= 0 else now_ms - self.created_ms
        if waited > roll_ms:
            return True
        if self.indexes_full:
            return True
        return last_offset - self.base_offset > 0x7FFFFFFF

    def on_become_inactive(self) -> None:
        """Called on roll: the final time index entry makes the max timestamp readable on reload."""
        if self.size:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.index.write_pending()
        self.time_index.write_pending()

    # ------------------------------------------------------------------------------------------
    # read
    def translate_offset(self, offset: int, start_position: int | None = None) -> int | None:
        """Position of the first batch whose last offset >= `offset`, or None if there is none here."""
        pos = self.index.lookup(offset) if start_position is None else start_position
        for p, fields in self.iter_headers(pos, chunk=min(self.index_interval_bytes, 1 << 16) + 2 * BATCH_HEADER_SIZE):
            if fields[H_BASE] + fields[H_LOD] >= offset:
                return p
        return None

    def read_slice(
        self, fetch_offset: int, max_bytes: int, max_offset: int | None, min_one_message: bool
    ) -> FileSlice | bytes | None:
        """What `read` answers, as a FileSlice of the file instead of bytes in memory (b"" when nothing
        fits, None when this segment holds nothing at or after `fetch_offset`). The cut at a batch
        boundary is found by walking headers from the index entry nearest to the limit; the data itself
        is read later, in chunks, by whoever sends it.

        Reads (the hot path of every fetch, per partition): the headers come from one pread that starts
        at the index entry (or where the last read ended) and, for a small budget (<= _ONE_READ_BYTES,
        e.g. a 16 KiB partition budget), also covers the cut, so a fetch usually costs one pread per
        partition; a bigger budget walks headers near the cut in small reads instead of reading the data."""
        size_now = self.size
        max_bytes = max(max_bytes, 0)
        unpack = _HEADER.unpack_from
        extra = max_bytes if max_bytes <= _ONE_READ_BYTES else 0
        if fetch_offset == self._next_read_offset:
            start = self._next_read_position
            if start >= size_now:
                return None
            buf = self.pread(max(BATCH_HEADER_SIZE, min(BATCH_HEADER_SIZE + extra, size_now - start)), start)
            if len(buf) < BATCH_HEADER_SIZE:
                return None
            buf_start = start
            f = unpack(buf, 0)
        else:
            located = self._locate(fetch_offset, size_now, extra)
            if located is None:
                return None
            start, f, buf, buf_start = located
        if max_offset is not None and max_offset < self.next_offset:
            m = self.translate_offset(max_offset, start)
            max_pos = size_now if m is None else m
        else:
            max_pos = size_now
        if start >= max_pos:
            return b""
        limit = min(max_pos, start + max_bytes)
        first_end = start + f[H_LEN] + LOG_OVERHEAD
        if first_end > limit:
            if not min_one_message or first_end > max_pos:
                return b""
            self._next_read_offset, self._next_read_position = f[H_BASE] + f[H_LOD] + 1, first_end
            return self._slice(start, first_end - start)
        pos = max(self.index.floor_position(limit), start)
        memo = (f[H_BASE] + f[H_LOD] + 1, first_end)
        end = pos
        # the headers up to the cut: from `buf` while it holds them, else 4 KiB reads (iter_headers' rules:
        # stop silently at an impossible or truncated header)
        n = len(buf)
        while pos + BATCH_HEADER_SIZE <= max_pos:
            rel = pos - buf_start
            if rel + BATCH_HEADER_SIZE > n:
                buf = self.pread(4096, pos)
                buf_start, rel, n = pos, 0, len(buf)
                if n < BATCH_HEADER_SIZE:
                    break
            g = unpack(buf, rel)
            batch_end = pos + g[H_LEN] + LOG_OVERHEAD
            if g[H_LEN] < _MIN_BATCH_LENGTH or batch_end > max_pos:
                break
            if batch_end > limit:
                memo = (g[H_BASE], pos)
                break
            end = batch_end
            memo = (g[H_BASE] + g[H_LOD] + 1, batch_end)
            pos = batch_end
        self._next_read_offset, self._next_read_position = memo
        return self._slice(start, end - start) if end > start else b""

    def _locate(self, offset: int, size_now: int, extra: int) -> tuple[int, HeaderFields, bytes, int] | None:
        """translate_offset for read_slice: (position, header, the bytes read, their file position) of the
        first batch whose last offset >= `offset`, or None. One read from the index entry of about one
        index interval (+ `extra` bytes, the caller's next headers) usually holds it; past that the scan
        goes on as translate_offset's."""
        pos = self.index.lookup(offset)
        want = min(self.index_interval_bytes, 1 << 16) + 2 * BATCH_HEADER_SIZE + extra
        buf = self.pread(max(0, min(want, size_now - pos)), pos)
        n = len(buf)
        r = 0
        unpack = _HEADER.unpack_from
        while r + BATCH_HEADER_SIZE <= n:
            f: HeaderFields = unpack(buf, r)  # type: ignore[assignment]
            length = f[H_LEN]
            if length < _MIN_BATCH_LENGTH or pos + r + length + LOG_OVERHEAD > size_now:
                return None
            if f[H_BASE] + f[H_LOD] >= offset:
                return pos + r, f, buf, pos
            r += length + LOG_OVERHEAD
        found = self.translate_offset(offset, pos + r)
        if found is None:
            return None
        head = self.pread(BATCH_HEADER_SIZE, found)
        if len(head) < BATCH_HEADER_SIZE:
            return None
        return found, unpack(head, 0), head, found  # type: ignore[return-value]

    def _slice(self, start: int, length: int) -> FileSlice:
        # always a slice, even a small one: a fetch naming 2,000 partitions of 30 KiB each would otherwise
        # hold 55 MiB in memory per connection that does not read
        return FileSlice(self, start, length)

    def read(
        self, fetch_offset: int, max_bytes: int, max_offset: int | None, min_one_message: bool
    ) -> bytes | memoryview | None:
        """Whole batches from the one containing `fetch_offset`, below `max_offset` (exclusive), at most
        `max_bytes` (or exactly one batch when the first is bigger and `min_one_message`).
        None when this segment holds no batch at or after `fetch_offset`.

        The start is where the previous sequential read ended (remembered: no lookup), else the index
        entry plus a short header scan. Then ONE pread of the budget (+ one header); the cut at a batch
        boundary is found by walking headers from the index entry nearest to the limit; the result is
        a zero-copy memoryview of the bytes read. The header just after the cut tells where the next
        sequential read starts."""
        size_now = self.size
        guessed = False
        if fetch_offset == self._next_read_offset:
            start = self._next_read_position
            if start >= size_now:
                return None  # nothing at or after fetch_offset here (compaction may leave a gap)
        else:
            start = self.index.ceiling_position(fetch_offset)
            if start >= 0:
                guessed = True  # right when that batch's base offset <= fetch_offset (checked below)
            else:
                found = self.translate_offset(fetch_offset)
                if found is None:
                    return None
                start = found
        max_bytes = max(max_bytes, 0)
        data = self.pread(min(max_bytes + BATCH_HEADER_SIZE, size_now - start), start)
        n = len(data)
        unpack = _HEADER.unpack_from
        f = unpack(data, 0)
        if guessed and f[H_BASE] > fetch_offset:
            # the batch holding fetch_offset lies before the guessed one: scan from the entry before
            found = self.translate_offset(fetch_offset)
            if found is None:  # pragma: no cover - the guessed batch itself qualifies
                return None
            self._next_read_offset, self._next_read_position = fetch_offset, found
            return self.read(fetch_offset, max_bytes, max_offset, min_one_message)
        if max_offset is not None and max_offset < self.next_offset:
            m = self.translate_offset(max_offset, start)
            max_pos = size_now if m is None else m
        else:
            max_pos = size_now
        if start >= max_pos:
            return b""
        limit = min(max_pos, start + max_bytes)
        first_end = start + f[H_LEN] + LOG_OVERHEAD
        if first_end > limit:  # the first batch alone is over the budget
            if not min_one_message or first_end > max_pos:
                return b""
            self._next_read_offset, self._next_read_position = f[H_BASE] + f[H_LOD] + 1, first_end
            return self.pread(first_end - start, start)
        r = max(self.index.floor_position(limit), start) - start  # a batch boundary <= limit
        rel_limit = limit - start
        memo = (-1, 0)
        while r + BATCH_HEADER_SIZE <= n:
            f = unpack(data, r)
            end = r + f[H_LEN] + LOG_OVERHEAD
            if end > rel_limit:
                memo = (f[H_BASE], start + r)  # the batch after the cut: where the next read starts
                break
            r = end
            memo = (f[H_BASE] + f[H_LOD] + 1, start + r)
        self._next_read_offset, self._next_read_position = memo
        return memoryview(data)[:r]

    def _forget_read_position(self) -> None:
        self._next_read_offset, self._next_read_position = -1, 0

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= target and offset >= start_offset."""
        from_offset = max(self.time_index.lookup(timestamp), start_offset)
        pos = self.index.lookup(from_offset)
        for p, fields in self.iter_headers(pos):
            if fields[H_MAX_TS] < timestamp or fields[H_BASE] + fields[H_LOD] < start_offset:
                continue
            raw = self.pread(fields[H_LEN] + LOG_OVERHEAD, p)
            view = RecordBatchView.parse(raw)
            try:
                records = decode_records(view)
            except KafkaError:
                # does not decode (corrupt on disk): answer at batch granularity
                return max(view.base_offset, start_offset), view.max_timestamp
            for rec in records:
                if rec.timestamp >= timestamp and rec.offset >= start_offset:
                    return rec.offset, rec.timestamp
        return None

    # ------------------------------------------------------------------------------------------
    # load / recover
    def load(self) -> bool:
        """Load a segment that was cleanly written (before the recovery point). Returns False when its
        indexes fail the sanity check or the tail does not parse, so the caller recovers it instead. The
        state is built aside and assigned only when the check passed (a lazy segment's load: module rules)."""
        base = self.base_offset
        index = OffsetIndex(self._index_path(".index"), base, self._max_index_size)
        time_index = TimeIndex(self._index_path(".timeindex"), base, self._max_index_size)
        try:
            index.load(max(self.size, 1))
            time_index.load()
        except IndexCorrupt as e:
            self.load_problem = f"corrupt index: {e}"
            return False
        if self.size > 0 and not time_index.entries and not time_index.path.exists():
            self.load_problem = f"missing time index {time_index.path.name}"
            return False
        last = index.last_entry()
        start = last[1] if last is not None else 0
        end = start
        next_offset, max_ts, max_ts_offset = base, -1, base
        for pos, fields in self.iter_headers(start, chunk=1 << 16):
            last_offset = fields[H_BASE] + fields[H_LOD]
            next_offset = last_offset + 1
            if fields[H_MAX_TS] > max_ts:
                max_ts, max_ts_offset = fields[H_MAX_TS], last_offset
            end = pos + fields[H_LEN] + LOG_OVERHEAD
        if end != self.size:
            self.load_problem = f"the batches after the last index entry end at byte {end}, the file at {self.size}"
            return False
        rolling_based: int | None = None
        if self.size > 0:
            first = self.pread(BATCH_HEADER_SIZE, 0)
            rolling_based = _HEADER.unpack_from(first)[H_MAX_TS]
            te = time_index.last_entry()
            if te is None and max_ts < 0:
                self.load_problem = "empty time index"
                return False
            if te is not None and te[0] > max_ts:
                max_ts, max_ts_offset = te
        self.index, self.time_index = index, time_index
        self.next_offset, self.max_timestamp, self.offset_of_max_timestamp = next_offset, max_ts, max_ts_offset
        self.rolling_based_timestamp = rolling_based
        self.bytes_since_last_index_entry = self.size - start
        return True

    def _note_header(self, fields: HeaderFields) -> None:
        last = fields[H_BASE] + fields[H_LOD]
        self.next_offset = last + 1
        if fields[H_MAX_TS] > self.max_timestamp:
            self.max_timestamp = fields[H_MAX_TS]
            self.offset_of_max_timestamp = last

    def recover(
        self,
        on_batch: Callable[[HeaderFields], None] | None = None,
        max_batch_size: int | None = None,
    ) -> int:
        """Rescan the whole `.log`: validate each batch (structure, magic, increasing offsets, CRC-32C),
        truncate at the first invalid byte, rebuild both indexes. Returns the number of bytes truncated."""
        self._forget_read_position()
        self.index.reset()
        self.time_index.reset()
        file_size = self._fd_call(lambda fd: os.fstat(fd).st_size)
        self.size = file_size
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.rolling_based_timestamp = None
        self.bytes_since_last_index_entry = 0
        valid = 0
        batches = records = 0
        reason = ""
        expected_min_base = self.base_offset
        for pos, fields, data in self.iter_batches(0, file_size):
            size = fields[H_LEN] + LOG_OVERHEAD
            if fields[H_MAGIC] != MAGIC_V2:
                reason = f"magic {fields[H_MAGIC]} at byte {pos} (only v2 batches are stored)"
                break
            if fields[H_BASE] < expected_min_base or fields[H_LOD] < 0:
                reason = f"batch at byte {pos} has base offset {fields[H_BASE]}, expected >= {expected_min_base}"
                break
            if max_batch_size is not None and size > max_batch_size:
                reason = f"batch at byte {pos} of {size} bytes is over the maximum {max_batch_size}"
                break
            if crc32c(data[CRC_START:]) != fields[H_CRC]:
                reason = f"CRC-32C mismatch in the batch at byte {pos}"
                break
            last = fields[H_BASE] + fields[H_LOD]
            self._account_batch(pos, size, last, fields[H_MAX_TS])
            if on_batch is not None:
                on_batch(fields)
            expected_min_base = last + 1
            valid = pos + size
            batches += 1
            records += max(fields[H_COUNT], 0)
        truncated = file_size - valid
        if truncated and not reason:
            reason = f"incomplete or unreadable batch at byte {valid} ({truncated} bytes to the end of the file: a torn write)"
        if truncated:
            self._fd_call(lambda fd: os.ftruncate(fd, valid))
        self.size = valid
        if self.size == 0:
            self.next_offset = self.base_offset
        try:
            self.index.write_pending()
            self.time_index.write_pending()
        except OSError:  # disk full: the entries stay in memory and are written by a later flush
            pass
        self.dirty = True
        self.recovery = RecoveryNote(batches, records, valid, file_size, self.next_offset, reason)
        return truncated

    # ------------------------------------------------------------------------------------------
    # truncate / flush / close / delete
    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset >= `offset` (a batch containing `offset` goes whole).
        Returns the number of bytes removed."""
        self._forget_read_position()
        pos = self.translate_offset(offset)
        if pos is None:
            return 0
        removed = self.size - pos
        self._fd_call(lambda fd: os.ftruncate(fd, pos))
        self.size = pos
        self.index.truncate_to_position(pos)
        self.time_index.truncate_to_offset(offset)
        self._rescan_state()
        self.dirty = True
        return removed

    def _rescan_state(self) -> None:
        """Recompute next offset / max timestamp / roll timestamp from the headers (rare operations)."""
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.rolling_based_timestamp = None
        for _pos, fields in self.iter_headers(0, chunk=1 << 20):
            if self.rolling_based_timestamp is None:
                self.rolling_based_timestamp = fields[H_MAX_TS]
            self._note_header(fields)
        last = self.index.last_entry()
        self.bytes_since_last_index_entry = self.size - (last[1] if last else 0) if self.size else 0

    def flush(self, *, indexes: bool = True) -> None:
        if self.dirty:
            self._fd_call(os.fdatasync)
            self.dirty = False
        if indexes and not self._lazy:  # (a lazy segment has nothing unwritten)
            self.index.flush()
            self.time_index.flush()

    def close(self) -> None:
        """Write the pending index entries and close the files; the descriptors are closed even when
        the index writes fail (disk full), and then the error is raised."""
        if self._lazy:  # nothing of it was written or read since the load: nothing to write
            self.retire_fd()
            return
        try:
            if self.size:  # the final entry makes the max timestamp readable on reload
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.index.close()
            self.time_index.close()
        finally:
            self.index._close_fd()  # noqa: SLF001
            self.time_index._close_fd()  # noqa: SLF001
            self.retire_fd()

    def rename_deleted(self) -> None:
        """Kafka's changeFileSuffixes("", ".deleted"): the segment is out of the log and its files wait for
        file.delete.delay.ms. The descriptor stays open and readable (a rename does not touch it), and a
        reopen after a shed finds the new name: the rename and the path change happen under the FileCache's
        lock, which every reopen takes."""
        with file_cache.lock:
            if self._lazy:  # its index files are renamed by name; a later load finds them by the suffix
                for suffix in (".index", ".timeindex"):
                    try:
                        os.replace(self._index_path(suffix), self._index_path(suffix).with_name(
                            segment_file_name(self.base_offset, suffix) + DELETED_SUFFIX))
                    except FileNotFoundError:
                        pass
                self._idx_suffix = DELETED_SUFFIX
            for idx in (() if self._lazy else (self.index, self.time_index)):
                idx._close_fd()  # noqa: SLF001
                target = idx.path.with_name(idx.path.name + DELETED_SUFFIX)
                try:
                    os.replace(idx.path, target)
                except FileNotFoundError:  # an index is written lazily: there may be none yet
                    pass
                idx.path = target
            target = self.log_path.with_name(self.log_path.name + DELETED_SUFFIX)
            os.replace(self.log_path, target)
            self.log_path = target

    def link_deleted(self) -> None:
        """A segment replaced by compaction (Log.swap_cleaned_segments): its indexes are renamed `.deleted`
        and its `.log` gets a second name `.log.deleted` (a hard link to the same inode), so that the
        cleaned copy can then be renamed over the live name atomically while this segment, doomed for
        file.delete.delay.ms, goes on reading the old bytes: through its open descriptor, or a reopen by
        the `.deleted` name after a shed (the path changes under the FileCache's lock, as rename_deleted).
        A crash after the link leaves both names of one file; the load removes the `.deleted` one.
        Raises OSError where hard links are not supported (the caller then retires the segment at once)."""
        self.ensure_loaded()
        with file_cache.lock:
            target = self.log_path.with_name(self.log_path.name + DELETED_SUFFIX)
            target.unlink(missing_ok=True)  # (a leftover of a crash at this very point)
            os.link(self.log_path, target)
            self.log_path = target
            for idx in (self.index, self.time_index):
                idx._close_fd()  # noqa: SLF001
                idx_target = idx.path.with_name(idx.path.name + DELETED_SUFFIX)
                try:
                    os.replace(idx.path, idx_target)
                except FileNotFoundError:
                    pass
                idx.path = idx_target

    def moved_to(self, directory: Path) -> None:
        """The segment's directory was renamed (partition deletion): its paths follow. Called under the
        FileCache's lock, with the rename, so a reopen never looks under the old name."""
        self.dir = directory
        self.log_path = directory / self.log_path.name
        if self._lazy:  # (its index paths are made from `dir` when it loads)
            return
        for idx in (self.index, self.time_index):
            idx._close_fd()  # noqa: SLF001
            idx.path = directory / idx.path.name

    def delete(self) -> None:
        if self._lazy:
            for suffix in (".index", ".timeindex"):
                self._index_path(suffix).unlink(missing_ok=True)
        else:
            self.index.delete()
            self.time_index.delete()
        self.retire_fd()
        try:
            self.log_path.unlink()
        except FileNotFoundError:
            pass

    @property
    def last_modified_ms(self) -> int:
        if self._retired:
            return 0
        try:
            return int(os.stat(self.log_path).st_mtime * 1000)
        except FileNotFoundError:
            return 0

    def read_all(self) -> bytes:
        return self.pread(self.size, 0) if self.size else b""

    def __repr__(self) -> str:
        if self._lazy:
            return f"LogSegment(base={self.base_offset}, size={self.size}, lazy)"
        return f"LogSegment(base={self.base_offset}, size={self.size}, next={self.next_offset})"


def write_swap_file(seg: LogSegment, pieces: Sequence[bytes | memoryview]) -> str:
    """Write the cleaned copy of `seg` as `.cleaned`, fsync, rename to `.swap`; returns the swap path."""
    cleaned = str(seg.log_path) + ".cleaned"
    swap = str(seg.log_path) + ".swap"
    fd = os.open(cleaned, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for p in pieces:
            view = memoryview(p)
            while view:
                view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(cleaned, swap)
    fsync_dir(seg.dir)
    return swap


class _LazyLogSegment(LogSegment):
    """A LogSegment opened lazily and not loaded yet (module rules). Its unset slots (the `_DEFERRED` state,
    `log_path`) are made on first access by `__getattr__`; the load makes it a plain `LogSegment` again.
    The hook lives on this subclass only because a class with `__getattr__` loses CPython 3.11's
    specialised attribute reads on every instance: every loaded segment's append and read paths paid for
    laziness (append_one about 15 % slower, bench/segment_append_bench.py)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> object:
        # only reached for an unset slot: a lazy segment's deferred state, loaded now, or its path (a Path per
        # segment built at open was a tenth of a clean start's load CPU; most segments are never opened)
        if name in _DEFERRED and self._lazy:
            self.ensure_loaded()
            return object.__getattribute__(self, name)
        if name == "log_path":
            path = self.log_path = self.dir / segment_file_name(self.base_offset, ".log")
            return path
        raise AttributeError(name)
