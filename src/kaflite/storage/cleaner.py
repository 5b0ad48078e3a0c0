"""Log compaction (`cleanup.policy=compact`): keep the latest record per key.

Rules (Kafka's LogCleaner, simplified where noted):
1. Only sealed segments are cleaned (never the active one), and only a leading run of segments whose
   newest record is older than `min.compaction.lag.ms`.
2. The offset map (key -> latest offset) is built over the whole log below the stable offset, active
   segment included (up to its size when the pass started), so a record superseded anywhere later is
   dropped. It is built from whole batches: keys are sliced out of the (decompressed) records section,
   without a Record object per record (`scan_records`); only a batch that loses some of its records is
   decoded and re-encoded (`filter_batch`).
3. A record survives when it is the latest for its key; a record without a key is dropped.
4. A tombstone (null value) that is the latest for its key survives until `delete.retention.ms` has
   passed since its timestamp (Kafka counts from when the segment was first cleaned; kaflite uses the
   record timestamp, which the broker sets for `__consumer_offsets`).
5. Surviving records keep their offsets; a partly-cleaned batch is re-encoded with its ORIGINAL base
   offset, lastOffsetDelta, producer id/epoch/base sequence and partition leader epoch, so offsets
   become sparse but batch ranges and producer sequences are unchanged. Untouched batches are copied
   verbatim. The last batch of each producer id is kept whole (idempotence state is rebuilt from it).
   A re-encoded batch keeps its codec (gzip, snappy, lz4, zstd: kaflite.protocol.compression).
6. Copy-on-write, the log's lock held only to choose and to swap: the pass snapshots the segments under
   the lock, then reads them (through descriptors of its own) and writes each cleaned copy with its
   indexes into a staging directory `<log dir>/.cleaning-*` (fsync'd) without the lock, so appends, reads
   and high-watermark updates go on; `Log.swap_cleaned_segments` then renames each copy over its segment,
   one segment per hold of the lock. A truncation or close meanwhile stops the swap (the copies may have
   dropped records superseded only by truncated ones); a segment deleted by retention meanwhile is
   skipped; a replaced segment waits file.delete.delay.ms under `.deleted` names (a read in flight
   completes). Crash safety: each rename is atomic (the old or the new `.log`); the old indexes are moved
   before it, so a crash in between leaves indexes that the load's sanity check rebuilds; a staging
   directory left by a crash is removed on load, as are the `.cleaned` files of the older swap protocol,
   whose `.swap` files still complete their replacement (Log._remove_temporary_files).
7. A log is cleaned when dirty bytes (after the cleaner checkpoint) / cleanable bytes >=
   `min.cleanable.dirty.ratio`, or when forced.
8. Transactions (Kafka's LogCleaner with KIP-98): nothing at or past the first open transaction is cleaned
   or enters the offset map (an open transaction may still abort); records of aborted transactions
   (the `.txnindex` ranges of their producer) are removed and never enter the offset map; control
   batches (COMMIT / ABORT markers) are not keyed records and never enter the offset map.
9. A marker is removed (`marker_removable`) once its transaction has no batch left in the log (every
   batch of its producer since that producer's previous marker was removed: aborted, or compacted away)
   and `delete.retention.ms` has passed since the marker's timestamp (Kafka counts from the delete
   horizon its first clean stamps into the batch); a marker that is its producer's last batch stays
   (rule 5), so a log rebuilt from scratch never shows an open transaction nor loses a producer's epoch.
10. Pacing (`CleanerThrottle`, fed the bytes the pass reads and writes, batch by batch): the pass sleeps
   so that its read + write rate, measured over windows of `check_interval_ms` (300), stays at most
   `log.cleaner.io.max.bytes.per.second` (Kafka's Throttler; unlimited by default, as Kafka); and
   whatever the rate, it sleeps `yield_s` after every `work_s` of running without sleeping, so that the
   event loop's thread, which waits for the interpreter lock while the pass computes in Python, gets it
   within a few ms instead of after the 5 ms switch interval at every one of its own I/O calls.
The decisions (`build_offset_map`, `record_survives`, `cleanable_prefix`, `should_clean`) are pure.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kaflite.protocol.compression import decompress
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.record_batch import (
    BATCH_HEADER_SIZE,
    Record,
    RecordBatchView,
    decode_records,
    encode_batch,
    read_varint,
)
from kaflite.storage.checkpoint import fsync_dir
from kaflite.storage.log import CLEANING_PREFIX, Log
from kaflite.storage.segment import LogSegment

_log = logging.getLogger("kaflite.storage")

__all__ = [
    "CleanResult",
    "CleanerThrottle",
    "build_offset_map",
    "record_survives",
    "cleanable_prefix",
    "marker_removable",
    "should_clean",
    "filter_batch",
    "compact_log",
]


@dataclass(frozen=True, slots=True)
class CleanResult:
    cleaned: bool
    segments: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    records_removed: int = 0


class CleanerThrottle:
    """Rule 10: the cleaner's I/O rate cap (Kafka's `log.cleaner.io.max.bytes.per.second`, its Throttler
    checked every 300 ms) and its yields of the interpreter lock. The clock and the sleep are injected.

    Why the yields: a pass computing in Python holds the GIL; every time the event loop's thread releases
    it (each socket call, each select) it must wait for the cleaner to drop it again, which CPython forces
    only after `sys.getswitchinterval()` (5 ms). A probe request crossing a few such waits took ~50 ms
    under compaction (docs/storage.md, "Storage work and the event loop"). A short real sleep every
    `work_s` hands the lock over (a `sleep(0)` does not: the running thread takes it back first)."""

    def __init__(self, max_bytes_per_second: float = float("inf"), *, check_interval_ms: float = 300,
                 work_s: float = 0.002, yield_s: float = 0.0005,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if max_bytes_per_second <= 0:
            raise ValueError("log.cleaner.io.max.bytes.per.second must be positive")
        self.max_bytes_per_second = max_bytes_per_second
        self.check_interval_s = check_interval_ms / 1000
        self.work_s = work_s
        self.yield_s = yield_s
        self._clock = clock
        self._sleep = sleep
        self._window_start = self._last_yield = clock()
        self._window_bytes = 0
        self.slept_s = 0.0  # total time slept (throttling and yields), for tests and logs

    def _nap(self, seconds: float) -> None:
        self._sleep(seconds)
        self.slept_s += seconds
        self._last_yield = self._clock()

    def maybe_throttle(self, nbytes: int) -> None:
        """Count `nbytes` read or written; sleep if the window's rate is over the cap, or to yield."""
        self._window_bytes += nbytes
        now = self._clock()
        elapsed = now - self._window_start
        if elapsed >= self.check_interval_s:
            if self.max_bytes_per_second != float("inf"):
                # sleep until the window's bytes are at the cap's rate (Kafka's Throttler.maybeThrottle)
                owed = self._window_bytes / self.max_bytes_per_second - elapsed
                if owed > 0:
                    self._nap(owed)
            self._window_start = self._clock()
            self._window_bytes = 0
        if self.yield_s > 0 and self._clock() - self._last_yield >= self.work_s:
            self._nap(self.yield_s)


# --- pure decisions ------------------------------------------------------------------------------------
def build_offset_map(records: Iterable[tuple[int, bytes | None]]) -> dict[bytes, int]:
    """key -> offset of its latest record (records in offset order)."""
    out: dict[bytes, int] = {}
    for offset, key in records:
        if key is not None:
            out[key] = offset
    return out


def record_survives(record: Record, offset_map: dict[bytes, int], now_ms: int, delete_retention_ms: int) -> bool:
    if record.key is None:
        return False
    if offset_map.get(record.key, -1) > record.offset:
        return False
    if record.value is None and now_ms - record.timestamp > delete_retention_ms:
        return False
    return True


def marker_removable(txn_has_data: bool, marker_timestamp: int, now_ms: int, delete_retention_ms: int,
                     last_of_producer: bool) -> bool:
    """Rule 9: may the cleaner drop a COMMIT / ABORT marker?"""
    return not txn_has_data and not last_of_producer and now_ms - marker_timestamp > delete_retention_ms


def cleanable_prefix(max_timestamps: Sequence[int], now_ms: int, min_compaction_lag_ms: int) -> int:
    """How many leading sealed segments may be cleaned: the last segment is active; a segment with a
    record younger than min.compaction.lag.ms stops the run."""
    n = 0
    while n < len(max_timestamps) - 1 and now_ms - max_timestamps[n] >= min_compaction_lag_ms:
        n += 1
    return n


def should_clean(dirty_bytes: int, cleanable_bytes: int, min_ratio: float) -> bool:
    return cleanable_bytes > 0 and dirty_bytes > 0 and dirty_bytes / cleanable_bytes >= min_ratio


def filter_batch(
    view: RecordBatchView, offset_map: dict[bytes, int], now_ms: int, delete_retention_ms: int
) -> tuple[bytes | memoryview | None, int]:
    """The batch to write in the cleaned segment (verbatim view, re-encoded bytes, or None when
    nothing survives) and the number of records removed."""
    try:
        records = decode_records(view)
    except KafkaError:
        return view.buffer, 0  # does not decode (corrupt on disk): keep the batch whole
    kept = [r for r in records if record_survives(r, offset_map, now_ms, delete_retention_ms)]
    removed = len(records) - len(kept)
    if not removed:
        return view.buffer, 0
    if not kept:
        return None, removed
    log_append = view.timestamp_type == 1
    first_ts = view.first_timestamp
    encoded = [
        (r.offset - view.base_offset, 0 if log_append else r.timestamp - first_ts, r.key, r.value, r.headers)
        for r in kept
    ]
    raw = encode_batch(
        encoded,
        base_offset=view.base_offset,
        last_offset_delta=view.last_offset_delta,
        first_timestamp=first_ts,
        max_timestamp=view.max_timestamp if log_append else max(r.timestamp for r in kept),
        producer_id=view.producer_id,
        producer_epoch=view.producer_epoch,
        base_sequence=view.base_sequence,
        attributes=view.attributes,
        partition_leader_epoch=view.partition_leader_epoch,
    )
    return raw, removed


# --- record scanning without Record objects -------------------------------------------------------------
def _varint(data: bytes, p: int) -> tuple[int, int]:
    b = data[p]
    if b < 0x80:  # one byte: the usual case for lengths and deltas of small records
        return (b >> 1) ^ -(b & 1), p + 1
    return read_varint(data, p)


def scan_records(data: bytes, start: int, end: int, count: int) -> list[tuple[int, int, bytes | None, bool]]:
    """(offset delta, timestamp delta, key, value is null) of each record of an uncompressed records
    section `data[start:end]`: the key is sliced out, the value and headers are skipped. Raises KafkaError
    or IndexError on malformed records (the caller keeps such a batch whole)."""
    out: list[tuple[int, int, bytes | None, bool]] = []
    pos = start
    for _ in range(count):
        length, pos = _varint(data, pos)
        rec_end = pos + length
        if length < 0 or rec_end > end:
            raise KafkaError(ErrorCode.corrupt_message, "record length runs past the end of the batch")
        ts_delta, p = _varint(data, pos + 1)  # (after the attributes byte)
        off_delta, p = _varint(data, p)
        klen, p = _varint(data, p)
        key = None
        if klen >= 0:
            key = data[p : p + klen]
            p += klen
        vlen, p = _varint(data, p)
        out.append((off_delta, ts_delta, key, vlen < 0))
        pos = rec_end
    if pos != end:
        raise KafkaError(ErrorCode.corrupt_message, "bytes left after the records the batch declares")
    return out


def _batch_records(chunk: bytes, rel: int, view: RecordBatchView) -> list[tuple[int, int, bytes | None, bool]]:
    end = rel + view.size
    if view.compression == 0:
        return scan_records(chunk, rel + BATCH_HEADER_SIZE, end, view.records_count)
    data = bytes(decompress(view.compression, chunk[rel + BATCH_HEADER_SIZE : end]))
    return scan_records(data, 0, len(data), view.records_count)


def _iter_file_batches(path: Path, end: int, chunk_size: int = 1 << 20, *,
                       missing_ok: bool = False) -> Iterator[tuple[bytes, int, int]]:
    """(chunk, position of a batch in it, batch size) of each whole batch of the file below byte `end`,
    through a descriptor of its own (the segment's may be evicted or closed meanwhile). Stops at a
    structurally impossible or truncated batch, as LogSegment.iter_batches. `missing_ok`: a file deleted
    meanwhile (see compact_log) has no batch."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        if missing_ok:
            return
        raise
    try:
        pos = 0
        chunk = b""
        chunk_start = 0
        while pos + BATCH_HEADER_SIZE <= end:
            rel = pos - chunk_start
            if rel + BATCH_HEADER_SIZE > len(chunk):
                chunk = os.pread(fd, min(max(chunk_size, BATCH_HEADER_SIZE), end - pos), pos)
                chunk_start, rel = pos, 0
                if len(chunk) < BATCH_HEADER_SIZE:
                    return
            length = _LENGTH.unpack_from(chunk, rel + 8)[0]
            size = length + 12
            if length < 49 or pos + size > end:
                return
            if rel + size > len(chunk):
                chunk = os.pread(fd, max(chunk_size, size), pos)
                chunk_start, rel = pos, 0
                if len(chunk) < size:
                    return
            yield chunk, rel, size
            pos += size
    finally:
        os.close(fd)


_LENGTH = struct.Struct(">i")


# --- the shell: files ----------------------------------------------------------------------------------
class AbortedRanges:
    """Which producer batches belong to an aborted transaction (from the log's transaction indexes)."""

    def __init__(self, log: Log) -> None:
        self.by_pid: dict[int, list[tuple[int, int]]] = {}
        for t in log.aborted_transactions():
            self.by_pid.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))

    def aborted(self, view: RecordBatchView) -> bool:
        if not view.is_transactional or view.is_control:
            return False
        return any(first <= view.base_offset <= last for first, last in self.by_pid.get(view.producer_id, ()))


@dataclass(slots=True)
class _Snapshot:
    """What a pass reads, captured under the log's lock (the files are then read without it)."""

    segments: list[LogSegment]  # every segment holding offsets below `stable`
    sizes: list[int]  # their sizes then (the active one grows meanwhile: read up to this)
    cleanable: int  # the first `cleanable` of them are cleaned
    stable: int
    truncations: int
    aborted: AbortedRanges
    throttle: CleanerThrottle  # (the pass's pacing, rule 10)


def _build_offset_map(snap: _Snapshot) -> tuple[dict[bytes, int], dict[int, int]]:
    """key -> latest offset over the log below the stable offset, built from whole batches (keys sliced
    out of the records section); and producer id -> base offset of its last batch (rule 5)."""
    offset_map: dict[bytes, int] = {}
    last_batch_of_producer: dict[int, int] = {}
    stable = snap.stable
    for seg, size in zip(snap.segments, snap.sizes, strict=True):
        for chunk, rel, bsize in _iter_file_batches(seg.log_path, size, missing_ok=True):
            snap.throttle.maybe_throttle(bsize)
            view = RecordBatchView.parse(chunk, rel)
            if view.producer_id >= 0:
                last_batch_of_producer[view.producer_id] = view.base_offset
            if view.base_offset >= stable or view.is_control or snap.aborted.aborted(view):
                continue
            base = view.base_offset
            try:
                for off_delta, _ts, key, _null in _batch_records(chunk, rel, view):
                    if key is not None:
                        offset_map[key] = base + off_delta
            except (KafkaError, IndexError):
                continue
    return offset_map, last_batch_of_producer


def _survivors(chunk: bytes, rel: int, view: RecordBatchView, offset_map: dict[bytes, int], now_ms: int,
               delete_retention_ms: int) -> tuple[int, int] | None:
    """(records kept, records removed) of a batch by rules 3-4, without decoding it into Records; None
    when it does not parse (kept whole)."""
    try:
        records = _batch_records(chunk, rel, view)
    except (KafkaError, IndexError):
        return None
    base = view.base_offset
    log_append = view.timestamp_type == 1
    first_ts = view.first_timestamp
    max_ts = view.max_timestamp
    horizon = now_ms - delete_retention_ms
    kept = 0
    for off_delta, ts_delta, key, null_value in records:
        if key is None or offset_map.get(key, -1) > base + off_delta:
            continue
        if null_value and (max_ts if log_append else first_ts + ts_delta) < horizon:
            continue
        kept += 1
    return kept, len(records) - kept


def _clean_segment(seg: LogSegment, size: int, staging: Path, log: Log, offset_map: dict[bytes, int],
                   last_batch_of_producer: dict[int, int], aborted: AbortedRanges, txn_has_data: dict[int, bool],
                   now_ms: int, throttle: CleanerThrottle) -> tuple[Path | None, int, int]:
    """Write the cleaned copy of `seg` (its first `size` bytes) with its indexes into `staging`, fsync'd;
    returns (its .log path, or None when nothing changes; new size; records removed)."""
    cfg = log.config
    pieces: list[bytes | bytearray | memoryview] = []
    infos: list[tuple[int, int, int, int]] = []
    removed = 0
    changed = False
    for chunk, rel, bsize in _iter_file_batches(seg.log_path, size):
        throttle.maybe_throttle(bsize)
        view = RecordBatchView.parse(chunk, rel)
        pid = view.producer_id
        last_of_producer = pid >= 0 and last_batch_of_producer.get(pid) == view.base_offset
        out: bytes | memoryview | None = chunk[rel : rel + bsize]
        if view.is_control:
            if marker_removable(txn_has_data.pop(pid, False), view.max_timestamp, now_ms,
                                cfg.delete_retention_ms, last_of_producer):
                removed += view.records_count
                out = None
        elif aborted.aborted(view):
            removed += view.records_count
            out = None
        else:
            if not last_of_producer:  # (a producer's last batch is kept whole: rule 5)
                verdict = _survivors(chunk, rel, view, offset_map, now_ms, cfg.delete_retention_ms)
                if verdict is not None and verdict[1]:
                    if verdict[0] == 0:
                        out = None
                        removed += verdict[1]
                    else:  # partly kept: decoded and re-encoded (rule 5)
                        out, r = filter_batch(RecordBatchView.parse(chunk[rel : rel + bsize]), offset_map,
                                              now_ms, cfg.delete_retention_ms)
                        removed += r
            if out is not None and view.is_transactional:
                txn_has_data[pid] = True
        if out is None:
            changed = True
            continue
        if len(out) != bsize:
            changed = True
        hdr = RecordBatchView.parse(out)
        pieces.append(out)
        infos.append((len(out), hdr.last_offset, hdr.max_timestamp, hdr.base_offset))
    if not changed:
        return None, size, removed
    new = LogSegment(staging, seg.base_offset, index_interval_bytes=cfg.index_interval_bytes,
                     max_index_size=cfg.segment_index_bytes, created_ms=seg.created_ms)
    try:
        for i in range(0, len(pieces), 256):  # bounded writes (one pwritev per group of batches)
            new.append(pieces[i : i + 256], infos[i : i + 256])
            throttle.maybe_throttle(sum(len(p) for p in pieces[i : i + 256]))
        new.on_become_inactive()
        new.flush(indexes=True)
        new_size = new.size
    finally:
        new.close()
    return new.log_path, new_size, removed


def compact_log(log: Log, now_ms: int, *, force: bool = False,
                throttle: CleanerThrottle | None = None) -> CleanResult:
    """Clean `log` if it is dirty enough (or `force`), copy-on-write: the choice and a snapshot of the
    segments are taken under the log's lock; the offset map and the cleaned copies (with their indexes,
    fsync'd, in a staging directory) are built WITHOUT it, so appends, reads and high-watermark updates go
    on; the lock is taken again only to swap the copies in (`Log.swap_cleaned_segments`), which
    re-checks what happened meanwhile: a truncation or a close aborts the pass (the offset map may name
    records that are gone), a segment deleted by retention is skipped. Only sealed segments below the
    active one are cleaned, so appends never conflict. `throttle` paces the reads and writes (rule 10;
    the default yields the interpreter lock but has no rate cap). Safe to call from a worker thread; one pass per
    log at a time (the broker's single housekeeping thread)."""
    with log.lock:
        if log.closed:  # closed or deleted since the caller looked
            return CleanResult(False)
        cfg = log.config
        segments = log.segments
        n = cleanable_prefix([s.max_timestamp for s in segments], now_ms, cfg.min_compaction_lag_ms)
        fuo = log.producer_state.first_unstable_offset  # (not capped by the high watermark, as before)
        stable = log.log_end_offset if fuo is None else fuo
        while n and segments[n - 1].next_offset > stable:  # an open transaction may still abort
            n -= 1
        if n == 0:
            return CleanResult(False)
        cleanable = segments[:n]
        cleanable_bytes = sum(s.size for s in cleanable)
        dirty_bytes = sum(s.size for s in cleanable if s.next_offset > log.cleaner_checkpoint)
        if not force and not should_clean(dirty_bytes, cleanable_bytes, cfg.min_cleanable_dirty_ratio):
            return CleanResult(False)
        snap = _Snapshot(segments, [s.size for s in segments], n, stable, log.truncations, AbortedRanges(log),
                         throttle or CleanerThrottle())
    # A segment file that disappears while being read was deleted meanwhile: by retention / DeleteRecords
    # (leading segments: whatever they held is gone, and the records they superseded were older still, so
    # the other copies stay right; the swap skips it) or by a truncation (the swap refuses the pass).
    staging = Path(tempfile.mkdtemp(prefix=CLEANING_PREFIX, dir=log.dir))
    try:
        offset_map, last_batch_of_producer = _build_offset_map(snap)
        cleaned: list[tuple[LogSegment, Path]] = []
        removed = after = 0
        txn_has_data: dict[int, bool] = {}  # producer id -> a batch of its current transaction is kept
        for seg, size in zip(cleanable, snap.sizes, strict=False):
            try:
                path, new_size, r = _clean_segment(seg, size, staging, log, offset_map, last_batch_of_producer,
                                                   snap.aborted, txn_has_data, now_ms, snap.throttle)
            except FileNotFoundError:
                continue
            removed += r
            after += new_size
            if path is not None:
                cleaned.append((seg, path))
        fsync_dir(staging)
        upto = cleanable[-1].next_offset
        if not log.swap_cleaned_segments(cleaned, snap.truncations, upto):
            _log.info("%s: compaction pass discarded: the log was truncated or closed meanwhile", log.dir.name)
            return CleanResult(False)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if removed or after != cleanable_bytes:
        _log.info("%s: compacted %d segment(s) up to offset %d: %d records removed, %d -> %d bytes",
                  log.dir.name, n, upto, removed, cleanable_bytes, after)
    return CleanResult(True, n, cleanable_bytes, after, removed)
