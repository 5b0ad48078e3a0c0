"""Log compaction (`cleanup.policy=compact`): keep the latest record per key.

Rules (Kafka's LogCleaner, simplified where noted):
1. Only sealed segments are cleaned (never the active one), and only a leading run of segments whose
   newest record is older than `min.compaction.lag.ms`.
2. The offset map (key -> latest offset) is built over the whole log, active segment included, so a
   record superseded anywhere later is dropped.
3. A record survives when it is the latest for its key; a record without a key is dropped.
4. A tombstone (null value) that is the latest for its key survives until `delete.retention.ms` has
   passed since its timestamp (Kafka counts from when the segment was first cleaned; kaflite uses the
   record timestamp, which the broker sets for `__consumer_offsets`).
5. Surviving records keep their offsets; a partly-cleaned batch is re-encoded with its ORIGINAL base
   offset, lastOffsetDelta, producer id/epoch/base sequence and partition leader epoch, so offsets
   become sparse but batch ranges and producer sequences are unchanged. Untouched batches are copied
   verbatim. The last batch of each producer id is kept whole (idempotence state is rebuilt from it).
   A re-encoded batch keeps its codec (gzip, snappy, lz4, zstd: kaflite.protocol.compression).
6. Crash safety (Kafka's swap protocol): the cleaned copy is written to `<base>.log.cleaned`, fsync'd,
   renamed to `<base>.log.swap`, then atomically renamed over `<base>.log`. On load a `.cleaned` file is
   discarded and a `.swap` file completes the replacement (see Log._remove_temporary_files).
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
The decisions (`build_offset_map`, `record_survives`, `cleanable_prefix`, `should_clean`) are pure.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kaflite.protocol.errors import KafkaError
from kaflite.protocol.record_batch import Record, RecordBatchView, decode_records, encode_batch
from kaflite.storage.log import Log

_log = logging.getLogger("kaflite.storage")

__all__ = [
    "CleanResult",
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


def _log_records(log: Log, aborted: AbortedRanges, stable: int) -> Iterable[tuple[int, bytes | None]]:
    for seg in log.segments:
        if seg.base_offset >= stable:
            break
        for _pos, _fields, data in seg.iter_batches():
            view = RecordBatchView.parse(data)
            if view.base_offset >= stable:
                return
            if view.is_control or aborted.aborted(view):
                continue
            try:
                for r in decode_records(view):
                    yield r.offset, r.key
            except KafkaError:
                continue


def compact_log(log: Log, now_ms: int, *, force: bool = False) -> CleanResult:
    """Clean `log` if it is dirty enough (or `force`). Holds the log's lock for the whole pass: the
    segments it reads are not deleted (retention, DeleteRecords, truncation) or closed under it, and an
    append to this log waits until the pass is over. Safe to call from a worker thread."""
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
        aborted = AbortedRanges(log)
        offset_map = build_offset_map(_log_records(log, aborted, stable))
        last_batch_of_producer: dict[int, int] = {}
        for seg in segments:
            for _p, f in seg.iter_headers(chunk=1 << 20):
                if f[9] >= 0:
                    last_batch_of_producer[f[9]] = f[0]
        removed = 0
        after = 0
        txn_has_data: dict[int, bool] = {}  # producer id -> a batch of its current transaction is kept
        for seg in cleanable:
            pieces: list[bytes | memoryview] = []
            for _pos, _fields, data in seg.iter_batches():
                view = RecordBatchView.parse(data)
                pid = view.producer_id
                last_of_producer = pid >= 0 and last_batch_of_producer.get(pid) == view.base_offset
                if view.is_control:
                    if marker_removable(txn_has_data.pop(pid, False), view.max_timestamp, now_ms,
                                        cfg.delete_retention_ms, last_of_producer):
                        removed += view.records_count
                    else:
                        pieces.append(data)
                    continue
                if aborted.aborted(view):
                    removed += view.records_count
                    continue
                out: bytes | memoryview | None = data
                r = 0
                if not last_of_producer:  # (a producer's last batch is kept whole: rule 5)
                    out, r = filter_batch(view, offset_map, now_ms, cfg.delete_retention_ms)
                removed += r
                if out is not None:
                    pieces.append(bytes(out))
                    if view.is_transactional:
                        txn_has_data[pid] = True
            new_size = sum(len(p) for p in pieces)
            after += new_size
            if new_size != seg.size:
                log.replace_segment(seg, pieces)
        log.cleaner_checkpoint = cleanable[-1].next_offset
        if removed or after != cleanable_bytes:
            _log.info("%s: compacted %d segment(s) up to offset %d: %d records removed, %d -> %d bytes",
                      log.dir.name, n, log.cleaner_checkpoint, removed, cleanable_bytes, after)
        return CleanResult(True, n, cleanable_bytes, after, removed)
