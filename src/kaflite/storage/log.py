"""Log: one partition's durable log, a sequence of LogSegments in `<topic>-<partition>/`.

Rules:
- Offsets are dense for appended data (compaction may later leave gaps inside old segments):
  log_start_offset <= high_watermark <= log_end_offset, and recovery_point <= log_end_offset.
- The high watermark is the value checkpointed at open (clamped to the recovered log) and then only moves
  forward (`update_high_watermark`; who decides it is the partition's leader, `server.replica.Partition`);
  only a truncation below it (replication, a torn tail) lowers it to the new log end offset.
- append: validate the record set (log_validator, headers only), check idempotent-producer state,
  assign offsets by patching baseOffset / partitionLeaderEpoch in a copy of the 61-byte header (the body
  is written from the caller's buffer, never copied), roll the segment if needed, write, index. An append
  never fsyncs: when `flush.messages` unflushed offsets have accumulated (`flush_needed`) the produce
  handler calls `flush_up_to` in a worker thread and answers after it (`flush.messages=1`: flush before
  acknowledge); appends nobody flushes (followers, coordinators) are flushed by the next `flush_due`.
- A replica append (assign_offsets=False, `_append_replica`) writes the fetched buffer unchanged with one
  write after a walk of its batch headers (log_validator.scan_replica_batches); producer state, markers and
  the leader-epoch cache are updated from the header tuples. It has the effects of `_append_general` on the
  same set (tests/storage/test_replica_fast_path.py), which still handles every set the walk refuses.
- Flush (`flush_up_to`, `flush_due`, `flush_rolled`): what to fsync is captured under the lock
  (`_plan_flush`: each dirty file is marked clean there, so an append made during the fsyncs marks it
  again), the fsyncs run after releasing it, then the recovery point moves to the planned offset under the
  lock (never past the log end, and not at all if a truncation happened meanwhile). A flush that fails,
  in its plan (a sealed segment's pending index entries are written there: a full disk) or in an fsync,
  marks everything it had marked clean unsynced again (`_unplan`), for the next flush. Flush passes are
  serialised by `_flush_lock` (taken before the log lock): one pass covers every append before it (group
  commit). Only `close` fsyncs under the lock.
- Flush on roll (Kafka's `flushUptoOffsetExclusive(newSegment.baseOffset)`): a roll records its new base;
  the housekeeping thread (`flush_rolled`, from `LogManager.flush_due`) fsyncs the rolled segments and their
  indexes and moves the recovery point to that base, so the recovery after a crash rescans only the
  segments rolled since the last housekeeping pass and the active one.
- read: whole batches starting at the batch that contains fetch_offset, below max_offset, at most
  max_bytes (but at least one batch when min_one_message); OFFSET_OUT_OF_RANGE outside
  [log_start_offset, log_end_offset].
- position_of(offset): where an offset lies, as (base offset of its segment, byte position of the batch
  holding it) without reading records (Kafka's LogOffsetMetadata, what a parked fetch compares): the log
  end offset (or beyond) is the active segment's size, free; another offset is found from the segment's
  offset index plus a header scan of about one index interval, and remembered (POSITION_CACHE entries)
  until a truncation or a segment swap (compaction) makes it stale.
- Recovery on open: segments wholly before the recovery point are opened lazily (segment.py: their
  indexes read and sanity-checked on first use); the segment holding the recovery point and all later
  ones are rescanned (CRC), a torn/corrupt tail is truncated and every later segment deleted, before the
  log serves anything. Nothing that was flushed (fsync'd) before the crash is lost.
- After a clean stop the active segment opens lazily too (segment.py rules) when two records of the stop agree
  on its next offset: the recovery point the stop checkpointed (`recovery_point`) and the name of the stop's
  producer snapshot, and the file's length agrees (empty iff that offset is the segment's base). Then the
  log end offset, high watermark and producer state are known without reading a segment file (a start of
  10,000 partitions read every active segment's two indexes and tail); otherwise the active segment is read
  at open as before (tests/storage/test_lazy_active_segment.py).
- After a clean stop the producer state is read on first use: when the latest producer snapshot is at the
  log end offset (the stop's), nothing is left to replay, and the load leaves `producer_state` unset; its
  first use (an append, a transaction's or the cleaner's look, the expiry check, a truncation) reads the
  snapshot under the lock (`_read_producer_state`, the same search and replay the load does otherwise). A
  start of 10,000 partitions read and parsed 10,000 snapshots that most partitions never use before their
  next stop, and a close needs none (the snapshot at the log end offset is kept).
- Retention / DeleteRecords only move the log start offset forward and delete whole segments, never
  the active one; truncate_to (replication) removes a suffix.
- The one exception to log_start_offset <= log_end_offset (Kafka's `UnifiedLog.truncateTo` makes it too): a
  truncation to a log start offset that lies inside a batch (DeleteRecords, or a follower's adoption of its
  leader's log start, put it there) removes that batch whole, so the log end offset falls below the start;
  the high watermark stays at the start (Kafka's `updateHighWatermark`). Meanwhile a read is
  OFFSET_OUT_OF_RANGE and ListOffsets answers the log start for both earliest and latest. The follower
  restarts the log at the leader's log start (OFFSET_OUT_OF_RANGE) and then at the base offset of the batch
  its leader sends (`Partition.restart_offset_for`); a load of such a log restarts it empty at its log start.
- The files such a change rewrites with fsyncs are written after the lock is released, never under it
  (`_notify_lso_change`): the leader-epoch-checkpoint (changed in memory under the lock, written by
  `LeaderEpochFileCache.write_pending`, which never puts older entries over newer ones) and the manager's
  offset checkpoints (the `on_log_start_offset_change` callback; `truncate_to(checkpoint=False)` leaves it to
  a caller that truncates many logs and checkpoints once, `LogManager.truncate_logs`).
- Transactions: a transactional batch opens its producer's transaction (producer_state), a COMMIT / ABORT
  marker (`append_marker`, written by the transaction coordinator, or a control batch a follower copies)
  closes it; an ABORT adds an entry to the marker's segment's `.txnindex` (txn_index). The last stable
  offset is the first offset of the earliest open transaction, capped by the high watermark. Recovery,
  truncation and snapshots rebuild both: the open transactions travel in the producer snapshot, and the
  replay after it re-adds every ABORT marker the `.txnindex` does not hold yet (entries past the log end
  are dropped first).
- A roll writes the producer snapshot without fsync (under the lock, on the appending thread: an fsync
  there stalled every produce and follower fetch of the broker for as long as the disk took, 5 ms on
  average and far more on a busy disk, at every 1 MiB segment of the dev profile); `sync_snapshots`
  fsyncs it with the directory later, from the flusher thread and outside the lock, as Kafka (3.7+,
  KAFKA-15046) flushes the snapshot in its scheduler. A snapshot torn by a crash before that is
  unreadable and skipped by the recovery, which replays the log instead.
- The producer snapshots on disk are `_snapshots` (their offsets, ascending), listed once by the load and
  kept equal to the directory by every write and delete of a snapshot (roll, close, truncation, a full
  truncation, the rebuild's discards, deleted segments, `delete_files`): nothing lists the directory
  after the load (a listing per roll grew with the log: 3 files per segment, at every 1 MiB segment of
  every replica). As in Kafka, a roll deletes no snapshot: one lives as long as the segment it lies in,
  and goes (renamed `.deleted`, removed by `delete_due_segments` off the lock) when retention or
  DeleteRecords delete the segment it lies in; a truncation deletes those above the new log end.
  tests/storage/test_snapshot_offsets.py checks the list against the directory after each operation.
  Close writes a snapshot only when none is at the log end offset (Kafka's takeSnapshot): a log closed
  without a write since its open keeps the one it opened with.
- Housekeeping queue (`attach_housekeeping`, the LogManager's): the housekeeping pass visits only the logs
  that queued themselves, not all 10,000 of a big broker every second. A log queues itself (at most once:
  `_hk_queued`) after every change that can give the pass work: an append or a marker (unflushed data, a
  roll's snapshot, rolled segments to flush, an epoch file to write), a segment doomed by retention,
  DeleteRecords, truncation or compaction (files to remove after file.delete.delay.ms), an epoch file write
  that failed, a flush that failed, a config change (flush.ms / flush.messages). The pass clears the flag
  before it reads the log's state, then keeps the log queued while `housekeeping_wanted` (work now, or work
  that time alone will make due: flush.ms elapsing, a doomed segment's delay); a change made meanwhile either
  is seen by that read or queues the log again. Unflushed data without flush.ms and below flush.messages is
  the only state left unqueued: no pass would flush it before (only an append, which queues, or a config
  change, which queues, can make it due), and `close` flushes every log, queued or not.
All methods take an internal lock, so a Log may be shared by the event loop and a flusher thread.

Logging (`kaflite.storage`, as Kafka's LogLoader / UnifiedLog): a recovered partition says what was
scanned and what was decided (INFO), a truncation or deleted segments say at which offset and why
(WARNING), rebuilt indexes say why (WARNING); retention deletions say how many segments, why and the new
log start offset (INFO). A cleanly loaded partition logs nothing (100,000 partitions, 100,000 lines).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import struct
import threading
import time
from bisect import bisect_right, insort
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Protocol

from kaflite.protocol.control_record import build_marker_batch, parse_marker
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.record_batch import (
    BATCH_HEADER_SIZE,
    CONTROL_MASK,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    RecordBatchView,
    crc32c,
)
from kaflite.storage.checkpoint import fsync_dir, fsync_file, read_small_file
from kaflite.storage.config import LogConfig
from kaflite.storage.errors import storage_errors
from kaflite.storage.file_cache import file_cache
from kaflite.storage.file_slice import FileSlice
from kaflite.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache
from kaflite.storage.log_validator import (
    fast_path_limit,
    fast_single_batch,
    scan_replica_batches,
    validate_client_batches,
    validate_replica_batches,
)
from kaflite.storage.producer_state import ProducerEntry, ProducerStateManager
from kaflite.storage.retention import SegmentLike, select_segments_to_delete
from kaflite.storage.segment import (
    DELETED_SUFFIX,
    H_ATTR,
    H_BASE,
    H_EPOCH,
    H_LEN,
    H_LOD,
    H_MAX_TS,
    H_PID,
    H_PLE,
    H_SEQ,
    HeaderFields,
    LogSegment,
)
from kaflite.storage.txn_index import AbortedTxn, TransactionIndex

__all__ = ["Log", "AppendResult", "FetchDataInfo", "OffsetsMoved", "parse_topic_partition",
           "EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "MAX_TIMESTAMP"]

log = logging.getLogger("kaflite.storage")

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3

CLEANING_PREFIX = ".cleaning-"  # a compaction pass's staging directory inside the log directory (cleaner.py)
_SEGMENT_FILE = re.compile(r"^(\d{20})\.log$")
_SNAPSHOT_FILE = re.compile(r"^(\d{20})\.snapshot$")
_TXN_INDEX_SUFFIX = ".txnindex"
_pack_q_into = struct.Struct(">q").pack_into
_OFFSET_LENGTH_EPOCH = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch: bytes 0-16
_pack_offset_length_epoch_into = _OFFSET_LENGTH_EPOCH.pack_into
_pack_offset_length_epoch = _OFFSET_LENGTH_EPOCH.pack
_pack_i_into = struct.Struct(">i").pack_into
_pack_h_into = struct.Struct(">h").pack_into
_pack_I_into = struct.Struct(">I").pack_into
_INT32_MAX = 0x7FFFFFFF
POSITION_CACHE = 64  # offsets whose position `position_of` remembers (high watermarks, fetch offsets)
_new_tuple = tuple.__new__  # builds a NamedTuple without the Python-level __new__ frame (hot path)


# a time past every flush.ms: `housekeeping_idle` then answers whether time alone would make the log due
_FOREVER_MS = 1 << 80  # (beyond any flush.ms a config takes: Kafka bounds it by a Java long)

class AppendResult(NamedTuple):
    """What an append did (a NamedTuple: cheap to build on the hot path)."""

    base_offset: int
    last_offset: int
    log_append_time: int  # -1 with CreateTime
    log_start_offset: int
    duplicate: bool = False


@dataclass(slots=True)
class FetchDataInfo:
    records: list[memoryview | bytes | FileSlice] = field(default_factory=list)  # send these in order
    size: int = 0


def parse_topic_partition(name: str) -> tuple[str, int]:
    """`<topic>-<partition>` -> (topic, partition); raises ValueError naming the directory."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        raise ValueError(f"log directory name {name!r} is not <topic>-<partition>")
    return topic, int(part)


def _wall_ms() -> int:
    return int(time.time() * 1000)


def _fdatasync_path(path: Path) -> None:
    """fdatasync a segment file through a descriptor of its own (it flushes the inode's pages whoever
    wrote them; the segment's cached descriptor may be closed or reused meanwhile); gone is fine."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:  # deleted (retention) or replaced meanwhile: nothing of it to keep
        return
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)


class OffsetsMoved:
    """The LogManager's "a checkpointed offset moved" flag, one object shared by the manager and every log
    of its table: a log sets `value` when its high watermark or recovery point moves forward (under its own
    lock, one attribute store), the manager's pass clears it before it reads the offsets for the periodic
    checkpoint (no log lock: a move meanwhile sets it again, so none is missed). A log no manager attached
    has one of its own that nobody reads."""

    __slots__ = ("value",)

    def __init__(self, value: bool = False) -> None:
        self.value = value


class _Syncable(Protocol):
    def mark_unsynced(self) -> None: ...


@dataclass(slots=True)
class _FlushPlan:
    """What one flush fsyncs, captured under the log's lock (Log._plan_flush)."""

    upto: int  # the recovery point once done
    truncations: int  # Log._truncations when planned
    data: list[LogSegment] = field(default_factory=list)
    files: list[tuple[Path, _Syncable]] = field(default_factory=list)  # indexes, txn indexes, epochs
    snapshots: list[Path] = field(default_factory=list)
    dir: bool = False


class _RetentionView:
    """A segment as retention sees it (retention.SegmentLike): the largest timestamp is read when retention
    asks for it, so a lazily opened segment is loaded only if the time rule reaches it (retention rule 4)."""

    __slots__ = ("_seg", "base_offset", "size")

    def __init__(self, seg: LogSegment) -> None:
        self._seg = seg
        self.base_offset = seg.base_offset
        self.size = seg.size

    @property
    def largest_timestamp(self) -> int:
        seg = self._seg
        return seg.max_timestamp if seg.max_timestamp >= 0 else seg.last_modified_ms


class Log:
    def __init__(
        self,
        directory: Path | str,
        config: LogConfig | None = None,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int = 0,
        had_clean_shutdown: bool = False,
        now_ms: Callable[[], int] | None = None,
        on_log_start_offset_change: Callable[[Log], None] | None = None,  # also on truncation
        existing: bool = False,  # the caller listed the directory: no mkdir (a failing syscall per log at start)
    ) -> None:
        # the caller's Path as it is (a start opens 10,000 logs: re-parsing each one's path, and building the
        # paths of its files as Paths, was a fifth of a clean load's CPU); the files read at open are named
        # by strings built from `dir_s`
        self.dir = directory if isinstance(directory, Path) else Path(directory)
        dir_s = str(self.dir)
        fresh = False
        if not existing:
            try:
                self.dir.mkdir(parents=True)
                fresh = True  # we created the directory: it holds no file to discover, recover or clean up
            except FileExistsError:
                pass
        try:
            self.topic, self.partition = parse_topic_partition(self.dir.name)
        except ValueError:
            self.topic, self.partition = self.dir.name, -1
        self.config = config or LogConfig()
        self._derive_config()
        self._now = now_ms or _wall_ms
        self._lock = threading.RLock()
        self._on_lso_change = on_log_start_offset_change
        # a moved log start offset / lowered recovery point waiting for its checkpoint write, which runs after
        # the lock is released (`_notify_lso_change`): the checkpoint fsyncs (Log rules)
        self._lso_changed = False
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._next_offset = 0
        self._log_start_offset = 0
        self._high_watermark = 0
        self.recovery_point = 0
        self._dir_dirty = False
        self._unsynced_snapshots: list[Path] = []  # written on roll, not fsync'd yet (sync_snapshots)
        self._snapshots: list[int] = []  # offsets of the producer snapshots on disk, ascending (Log rules)
        self._closed = False
        self._last_flush_ms = self._now()
        # fsyncs run outside `_lock` (Log rules): `_flush_lock` serialises the flush passes (one pass at a
        # time, so a waiting one finds its offsets covered: group commit); lock order _flush_lock, _lock
        self._flush_lock = threading.Lock()
        self._truncations = 0  # bumped by every truncation: a flush planned before one must not move the RP
        # offset -> (segment base, position, the segment, truncations then): position_of's memory
        self._positions: dict[int, tuple[int, int, LogSegment, int]] = {}
        self._roll_flush_to = 0  # rolled segments below this offset await their flush (flush_rolled)
        # the housekeeping queue (Log rules): the manager's callback, and whether this log is in its queue
        self._hk_queue: Callable[[Log], None] | None = None
        self._hk_queued = False
        # the manager's "an offset it checkpoints moved" flag, shared by its logs (one attribute store per change)
        self._offsets_moved = OffsetsMoved()
        self._producer_state: ProducerStateManager | None = ProducerStateManager()
        self._txn_indexes: dict[int, TransactionIndex] = {}  # segment base -> its aborted transactions
        # segments deleted (retention, DeleteRecords, truncation) whose files wait, renamed `.deleted`, for
        # file.delete.delay.ms: (when due, the segment, its renamed .txnindex)
        self._doomed: list[tuple[int, LogSegment, Path | None]] = []
        self._doomed_snapshots: list[tuple[int, Path]] = []  # (when due, renamed `.deleted` snapshot)
        self.leader_epoch_cache = LeaderEpochFileCache(f"{dir_s}/{LEADER_EPOCH_CHECKPOINT}", read=not fresh)
        self._latest_epoch = -1  # mirror of leader_epoch_cache.latest_epoch for the hot path
        self.replica_fast_path = True  # False: replica appends take _append_general (the tests' reference)
        self.recovered_bytes_truncated = 0
        self.recovered = False  # recovery rescanned at least one segment on open
        self.lazy_at_open = 0  # segments opened lazily by the load (LogSegment.lazy: nothing read yet)
        # False when close() could not write what a start after a clean stop trusts without a rescan: the data
        # (flush), or the active segment's index entries (that start loads them as they are)
        self.flushed_at_close = True
        self.cleaner_checkpoint = 0  # compaction: offsets below this were cleaned (in memory only)
        self._load(recovery_point, log_start_offset, high_watermark, had_clean_shutdown, fresh=fresh)
        if self.leader_epoch_cache.pending_write:  # a load that restarted the log empty
            # (only then: with nothing pending, write_pending would still unlink a stray `.tmp`, one syscall
            # per log at start, and `_remove_temporary_files` has already removed those)
            self.leader_epoch_cache.write_pending(self._lock)

    # ==========================================================================================
    # properties
    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest open transaction, or the high watermark when that is lower
        (or no transaction is open): what a read_committed consumer may read up to."""
        fuo = self.producer_state.first_unstable_offset
        hw = self._high_watermark
        return hw if fuo is None or fuo > hw else fuo

    @property
    def size(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    def update_high_watermark(self, offset: int) -> int:
        """Advance the high watermark to `offset` (clamped to the log end offset); returns the high
        watermark after the call. It only moves forward: an offset at or below the current one changes
        nothing (Kafka's `maybeIncrementHighWatermark`), because what a consumer or an acks=all producer
        was told is committed stays committed. Only a truncation of the log itself (`truncate_to`, recovery
        of a torn tail) lowers it, to the new log end offset."""
        with self._lock:
            hw = min(offset, self._next_offset)
            if hw > self._high_watermark:
                self._high_watermark = hw
                self._offsets_moved.value = True
            return self._high_watermark

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch (Kafka's UnifiedLog.endOffsetForEpoch): (the largest epoch <= `epoch`, the
        offset where the next epoch starts, or the log end offset for the latest); (-1, -1) when unknown."""
        with self._lock:
            return self.leader_epoch_cache.end_offset_for(epoch, self._next_offset)

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config
            for seg in self._segments:
                seg.index_interval_bytes = config.index_interval_bytes
            self._derive_config()
        self._request_housekeeping()  # a new flush.ms / flush.messages may make unflushed data due

    # ==========================================================================================
    # the housekeeping queue (Log rules)
    def attach_housekeeping(self, queue: Callable[[Log], None], offsets_moved: OffsetsMoved | None = None) -> None:
        """The manager's queue: `queue(log)` adds this log to the next housekeeping pass. Queued once now (a
        loaded log may hold a roll's work, a crash's unflushed tail, an epoch file to write).
        `offsets_moved.value` is set whenever the high watermark or the recovery point moves forward (what the
        periodic checkpoint writes; the other changes call on_log_start_offset_change)."""
        if offsets_moved is not None:
            self._offsets_moved = offsets_moved
        self._hk_queue = queue
        self._hk_queued = False
        self._request_housekeeping()

    def _request_housekeeping(self) -> None:
        """After a change that may give the housekeeping pass work: queue this log, unless it is queued.
        Cheap when queued (one attribute read): called on every append."""
        if not self._hk_queued:
            queue = self._hk_queue
            if queue is not None:
                self._hk_queued = True
                queue(self)

    def housekeeping_wanted(self) -> bool:
        """Without a lock (as `housekeeping_idle`): does this log need a housekeeping pass, now or once time
        alone has passed (flush.ms, file.delete.delay.ms), with no further call on it? The pass keeps a log
        queued while this holds (Log rules): segments waiting out their delay, or a log not idle at any
        time to come (what `housekeeping_idle` reads, with flush.ms elapsed)."""
        if self._closed:
            return False
        return bool(self._doomed or self._doomed_snapshots) or not self.housekeeping_idle(_FOREVER_MS)

    def _derive_config(self) -> None:
        """Config values the hot path reads, computed once per config change."""
        cfg = self.config
        self._fast_limit = fast_path_limit(cfg)
        self._log_append_time = cfg.log_append_time
        self._segment_bytes = cfg.segment_bytes
        self._roll_ms = cfg.segment_ms - cfg.segment_jitter_ms
        self._flush_messages = cfg.flush_interval_messages

    # ==========================================================================================
    # load / recovery
    def _new_segment(self, base_offset: int, *, lazy: bool = False, size: int | None = None,
                     known_next_offset: int | None = None) -> LogSegment:
        return LogSegment(
            self.dir,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            created_ms=self._now(),
            lazy=lazy,
            size=size,
            known_next_offset=known_next_offset,
        )

    def _remove_temporary_files(self) -> list[str]:
        """Finish or undo what a crash interrupted (Kafka's LogLoader rules): `.cleaned` and `.tmp`
        files are dropped, a `.swap` (a fully written compaction result) replaces its segment,
        `.deleted` files and orphan indexes go. Returns the names left in the directory. One listing, names
        as strings (a recovery of 2,000 segments spent a fifth of its time listing and sorting Paths)."""
        dir_s = str(self.dir)
        names = sorted(os.listdir(dir_s))
        changed = False
        for name in names:
            if name.startswith(CLEANING_PREFIX):  # a compaction pass cut short: its copies were never swapped in
                shutil.rmtree(self.dir / name, ignore_errors=True)
                changed = True
            elif name.endswith((".cleaned", ".tmp", ".deleted")):
                (self.dir / name).unlink(missing_ok=True)
                changed = True
            elif name.endswith(".log.swap"):
                p = self.dir / name
                target = p.with_name(name[: -len(".swap")])
                os.replace(p, target)
                for suffix in (".index", ".timeindex"):
                    target.with_suffix(suffix).unlink(missing_ok=True)
                self._dir_dirty = True
                changed = True
        if changed:
            names = os.listdir(dir_s)
        present = set(names)
        left = []
        for name in names:
            stem, _, suffix = name.rpartition(".")
            if f".{suffix}" in (".index", ".timeindex", _TXN_INDEX_SUFFIX) and f"{stem}.log" not in present:
                (self.dir / name).unlink(missing_ok=True)
            else:
                left.append(name)
        return left

    def _load(self, recovery_point: int, log_start_offset: int, high_watermark: int, clean: bool, *,
              fresh: bool = False) -> None:
        """`fresh`: the directory was just created by this Log, so it is empty: the four directory listings
        (temporary files, segments, snapshots, transaction indexes) would find nothing. Skipping them is
        most of the cost of a new partition (10,000 partitions of a new topic are created at once)."""
        bases: list[int] = []
        names: list[str] = []
        if not fresh:
            names = self._remove_temporary_files()
            bases = sorted(int(m.group(1)) for n in names if (m := _SEGMENT_FILE.match(n)))
            # the one listing of the snapshots: from here on every change goes through `_snapshots`
            self._snapshots = sorted(int(m.group(1)) for n in names if (m := _SNAPSHOT_FILE.match(n)))
        epochs = self.leader_epoch_cache
        epochs_on_disk = list(epochs.entries)
        recovered_any = False

        def note_epoch(fields: HeaderFields) -> None:
            ple = fields[H_PLE]
            if ple >= 0 and ple > epochs.latest_epoch:
                epochs.assign(ple, fields[H_BASE])

        segments: list[LogSegment] = []
        prev_next: int | None = None
        started = time.monotonic()
        recovered: list[LogSegment] = []
        deleted: list[int] = []
        name = self.dir.name
        dir_s = str(self.dir)
        for i, base in enumerate(bases):
            is_last = i == len(bases) - 1
            holds_unflushed = is_last or bases[i + 1] > recovery_point
            if not is_last and (clean or not holds_unflushed):
                # sealed and flushed before the stop: opened lazily (Kafka's LazyIndex), its indexes read and
                # checked on first use (segment.py rules); the next segment's base bounds its offsets
                segments.append(self._new_segment(base, lazy=True))
                self.lazy_at_open += 1
                prev_next = None
                continue
            if is_last and clean and self._snapshots and self._snapshots[-1] == recovery_point >= base:
                # the active segment of a clean stop: its next offset is the recovery point the stop
                # checkpointed, and the stop's producer snapshot is named after the same offset (two records
                # written at close, after the data's fsync): opened lazily, read on first use (Log rules)
                size = os.stat(f"{dir_s}/{base:020d}.log").st_size
                if (size == 0) == (recovery_point == base):  # data iff offsets: else the records are wrong
                    segments.append(self._new_segment(base, lazy=True, size=size, known_next_offset=recovery_point))
                    self.lazy_at_open += 1
                    break
            seg = self._new_segment(base)
            if prev_next is not None and base < prev_next:
                # overlapping segments cannot both be right: keep the earlier data, drop from here on
                seg.delete()
                for later in bases[i + 1 :]:
                    self._delete_segment_files(later)
                deleted = bases[i:]
                log.warning("%s: segment %d overlaps the previous one (which ends at offset %d): deleted "
                            "segments %s", name, base, prev_next, deleted)
                break
            need_recovery = not clean and holds_unflushed
            if not need_recovery and not seg.load():
                need_recovery = True
                log.warning("%s: rebuilding the indexes of segment %d: %s", name, base, seg.load_problem)
            if need_recovery:
                recovered_any = True
                truncated = seg.recover(on_batch=note_epoch)
                recovered.append(seg)
                self.recovered_bytes_truncated += truncated
                if truncated:
                    note = seg.recovery
                    assert note is not None
                    segments.append(seg)
                    for later in bases[i + 1 :]:
                        self._delete_segment_files(later)
                    deleted = bases[i + 1 :]
                    log.warning(
                        "%s: truncated at offset %d (byte %d of segment %d, %d bytes discarded): %s%s",
                        name, note.truncated_at_offset, note.valid_bytes, base, truncated, note.reason,
                        f"; deleted the {len(deleted)} later segments {deleted}" if deleted else "",
                    )
                    break
            segments.append(seg)
            prev_next = seg.next_offset
        self.recovered = bool(recovered)
        if recovered:
            notes = [s.recovery for s in recovered if s.recovery is not None]
            log.info(
                "%s: recovered %d segment(s) %s from %s: scanned %d batches (%d records), log end offset %d, "
                "indexes rebuilt, %d later segment(s) deleted, in %.0f ms",
                name, len(recovered), [s.base_offset for s in recovered],
                "a clean shutdown with bad indexes" if clean else f"recovery point {recovery_point}",
                sum(n.batches for n in notes), sum(n.records for n in notes),
                segments[-1].next_offset, len(deleted), (time.monotonic() - started) * 1000,
            )
        if not segments:
            segments.append(self._new_segment(max(log_start_offset, 0)))
            self._dir_dirty = True
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._next_offset = segments[-1].next_offset
        self._log_start_offset = max(log_start_offset, segments[0].base_offset)
        if self._log_start_offset > self._next_offset:
            # a truncation to a log start inside a batch (Log rules), or segment files deleted by hand:
            # nothing at or after the log start is here (Kafka's LogLoader does the same)
            log.warning("%s: log end offset %d is below its log start offset %d: deleted every segment %s, the "
                        "log restarts empty at %d", name, self._next_offset, self._log_start_offset,
                        self._bases, self._log_start_offset)
            self._truncate_fully_and_start_at(self._log_start_offset)
        try:
            epochs.truncate_from_end(self._next_offset)
            epochs.truncate_from_start(self._log_start_offset)
            if epochs.entries != epochs_on_disk:  # recovery assigned epochs without persisting them
                epochs.flush()
        except OSError as e:  # a full disk must not keep the broker from starting: memory is right,
            storage_errors.report(self.dir.name, "leader-epoch checkpoint", e)  # the file is redone next load
        self._latest_epoch = epochs.latest_epoch
        if recovered_any:
            # recovered bytes may only be in the page cache: make them durable before trusting them
            try:
                self._flush_all_segments()
                self.recovery_point = self._next_offset
            except OSError as e:
                # a full disk (the rebuilt indexes could not be written) must not keep the broker from
                # starting: the recovery point stays (a crash before the next flush rescans the same
                # segments), and the segments not fsync'd stay dirty for the next flush, which writes the
                # indexes first
                storage_errors.report(self.dir.name, "flush after recovery", e)
                self.recovery_point = min(max(recovery_point, self._log_start_offset), self._next_offset)
                self._dir_dirty = True
        else:
            self.recovery_point = min(max(recovery_point, self._log_start_offset), self._next_offset)
            if clean:
                self.recovery_point = self._next_offset
        self._high_watermark = min(max(high_watermark, self._log_start_offset), self._next_offset)
        if not fresh:  # an empty log has no producer: the ProducerStateManager made in __init__ is its state
            self._rebuild_producer_state(set(names), defer=clean and not recovered_any)

    def _delete_segment_files(self, base: int) -> None:
        for suffix in (".log", ".index", ".timeindex", _TXN_INDEX_SUFFIX):
            (self.dir / f"{base:020d}{suffix}").unlink(missing_ok=True)
        self._txn_indexes.pop(base, None)
        self._dir_dirty = True

    # ==========================================================================================
    # producer state
    def snapshot_offsets(self) -> list[int]:
        """The offsets of the producer snapshots on disk, ascending (from memory: Log rules)."""
        with self._lock:
            return list(self._snapshots)

    def _delete_snapshot(self, off: int) -> None:
        """Remove `<off>.snapshot` from the disk, then from `_snapshots` (an unlink that fails leaves both)."""
        (self.dir / f"{off:020d}.snapshot").unlink(missing_ok=True)
        self._snapshots.remove(off)

    def _rebuild_producer_state(self, names: set[str] | None = None, *, defer: bool = False) -> None:
        """Latest snapshot at or below the log end offset, then replay the batch headers after it;
        without a usable snapshot, replay the whole log. `names`: the directory's files as the load listed
        them (no second listing, no stat per segment). The snapshots are `_snapshots` (never a listing).
        `defer` (a clean load): when the latest snapshot is at the log end offset, nothing is replayed and
        reading it waits for the first use of `producer_state` (Log rules)."""
        self._load_txn_indexes(names)
        if defer and self._snapshots and self._snapshots[-1] == self._next_offset >= self._log_start_offset:
            self._producer_state = None  # (read on first use: the producer_state property)
            return
        self.producer_state = self._read_producer_state()

    # A property, not a __getattr__: a class with __getattr__ loses CPython 3.11's specialised attribute
    # reads for every attribute of every instance (all of Log's hot path, about 2x per read measured); the
    # property costs one call where the producer state is used.
    @property
    def producer_state(self) -> ProducerStateManager:
        state = self._producer_state
        if state is None:
            # deferred by a clean load (Log rules): read now, under the lock (another thread's first use
            # waits for this one's and finds it set)
            with self._lock:
                state = self._producer_state
                if state is None:
                    state = self._producer_state = self._read_producer_state()
        return state

    @producer_state.setter
    def producer_state(self, state: ProducerStateManager) -> None:
        self._producer_state = state

    def _read_producer_state(self) -> ProducerStateManager:
        """The producer state from the latest readable snapshot at or below the log end offset and the batch
        headers after it (the whole log without one); unreadable or out-of-range snapshots are deleted."""
        state = ProducerStateManager()
        start = self._log_start_offset
        dir_s = str(self.dir)
        for off in reversed(list(self._snapshots)):
            if off > self._next_offset or off < self._log_start_offset:
                self._delete_snapshot(off)
                continue
            try:
                state = ProducerStateManager.from_json(read_small_file(f"{dir_s}/{off:020d}.snapshot").decode())
                start = off
                break
            except (ValueError, TypeError, OSError):  # torn by a crash before its fsync (roll), or gone
                self._delete_snapshot(off)
        self._replay_producer_state(state, start)
        state.evict_before(self._log_start_offset)
        return state

    def _load_txn_indexes(self, names: set[str] | None = None) -> None:
        """Each segment's `.txnindex`, without the entries whose marker lies past the log end."""
        self._txn_indexes = {}
        for seg in self._segments:
            name = f"{seg.base_offset:020d}{_TXN_INDEX_SUFFIX}"
            if names is not None and name not in names:
                continue
            path = self.dir / name
            if names is not None or path.exists():
                idx = TransactionIndex(path)
                idx.truncate_to(self._next_offset)
                if idx.entries:
                    self._txn_indexes[seg.base_offset] = idx

    def _txn_index(self, base: int) -> TransactionIndex:
        idx = self._txn_indexes.get(base)
        if idx is None:
            idx = self._txn_indexes[base] = TransactionIndex(self.dir / f"{base:020d}{_TXN_INDEX_SUFFIX}")
        return idx

    def _delete_txn_index(self, base: int) -> None:
        self._txn_indexes.pop(base, None)
        (self.dir / f"{base:020d}{_TXN_INDEX_SUFFIX}").unlink(missing_ok=True)

    def _index_aborted(self, seg_base: int, txn: AbortedTxn | None) -> None:
        if txn is not None:
            idx = self._txn_index(seg_base)
            if txn.last_offset > idx.last_offset:  # a replay re-finds markers already indexed
                idx.append(txn)

    def _replay_producer_state(self, state: ProducerStateManager, from_offset: int) -> None:
        segments = self._segments
        for i, seg in enumerate(segments):
            # a segment whose successor starts at or below `from_offset` holds nothing to replay: skipped
            # without touching it (a lazy segment would load: 2,000 index reads at every start)
            if (i + 1 < len(segments) and segments[i + 1].base_offset <= from_offset) or seg.size == 0:
                continue
            if seg.next_offset <= from_offset:
                continue
            pos = seg.translate_offset(from_offset) if seg.base_offset < from_offset else 0
            if pos is None:
                continue
            for p, f in seg.iter_headers(pos, chunk=1 << 20):
                pid = f[H_PID]
                if pid < 0:
                    continue
                last = f[H_BASE] + f[H_LOD]
                if last < from_offset:
                    continue
                attrs = f[H_ATTR]
                if attrs & CONTROL_MASK:
                    raw = seg.pread(f[H_LEN] + 12, p)
                    marker = parse_marker(RecordBatchView.parse(raw, 0))
                    if marker is not None:
                        self._index_aborted(seg.base_offset, state.complete_txn(
                            pid, f[H_EPOCH], f[H_BASE], marker.is_commit, marker.coordinator_epoch, f[H_MAX_TS]))
                    continue
                seq = f[H_SEQ]
                last_seq = (seq + f[H_LOD]) & _INT32_MAX if seq >= 0 else -1
                state.update(pid, f[H_EPOCH], seq, last_seq, f[H_BASE], last, f[H_MAX_TS],
                             bool(attrs & TRANSACTIONAL_MASK))

    def aborted_transactions(self) -> list[AbortedTxn]:
        """Every aborted transaction the log's segments index (compaction)."""
        with self._lock:
            return [t for base in self._bases if (idx := self._txn_indexes.get(base)) for t in idx.entries]

    def collect_aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of every aborted transaction overlapping [fetch_offset, upper_bound):
        what a read_committed fetch of that range returns (Kafka's collectAbortedTransactions)."""
        with self._lock:
            if not self._txn_indexes:
                return []
            out: list[tuple[int, int]] = []
            i = max(bisect_right(self._bases, fetch_offset) - 1, 0)
            for seg in self._segments[i:]:
                idx = self._txn_indexes.get(seg.base_offset)
                if idx is None:
                    continue
                found, complete = idx.collect(fetch_offset, upper_bound)
                out.extend((t.producer_id, t.first_offset) for t in found)
                if complete:
                    break
            return out

    def _write_producer_snapshot(self, *, sync: bool = True) -> None:
        """Kafka writes `<offset>.snapshot` on roll and on close. `sync=False` (the
        roll): no fsync here, the file waits in `_unsynced_snapshots` for `sync_snapshots`. No older one
        is deleted here (Kafka's roll deletes none either): they go with their segments (Log rules)."""
        off = self._next_offset
        path = self.producer_state.write_snapshot(self.dir, off, sync=sync)
        if not sync:
            self._unsynced_snapshots.append(path)
        snaps = self._snapshots
        if not snaps or snaps[-1] < off:
            snaps.append(off)
        elif off not in snaps:  # (not expected: a truncation deletes the snapshots above the log end)
            insort(snaps, off)

    # ==========================================================================================
    # append
    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        leader_epoch: int = 0,
        now_ms: int | None = None,
        assign_offsets: bool = True,
    ) -> AppendResult:
        if type(records) is bytes:  # the usual case: bytes are always 1-D unsigned bytes
            buf = memoryview(records)
        else:
            buf = records if type(records) is memoryview else memoryview(records)
            if buf.format != "B" or buf.ndim != 1:
                buf = buf.cast("B")
        try:
            return self._append(buf, leader_epoch, now_ms, assign_offsets)
        except OSError as e:  # disk full, I/O error: the partition's KAFKA_STORAGE_ERROR, logged once a minute
            storage_errors.report(self.dir.name, "append", e)
            raise KafkaError(ErrorCode.kafka_storage_error, f"append to {self.dir.name} failed: {e.strerror or e}") from e
        finally:  # (also after a failure: a roll may have happened before the write that failed)
            if not self._hk_queued:
                self._request_housekeeping()

    def _append(self, buf: memoryview, leader_epoch: int, now_ms: int | None, assign_offsets: bool) -> AppendResult:
        if not assign_offsets:
            return self._append_replica(buf, now_ms)
        with self._lock:
            f = fast_single_batch(buf, self._fast_limit) if assign_offsets and not self._closed else None
            if f is None:
                return self._append_general(buf, leader_epoch, self._now() if now_ms is None else now_ms,
                                            assign_offsets)
            # The hot path: ONE valid client batch (log_validator.fast_single_batch).
            # Same effects as _append_general, in straight-line code with config values precomputed
            # (_derive_config) and the clock read only when a rule needs it.
            offset = self._next_offset
            pid = f[9]
            if pid >= 0:
                # Idempotent / transactional producer: producer_state's rules 2-6 inline on its entry for
                # the accepted and duplicate cases; any batch they refuse goes to the general path, whose
                # ProducerStateManager.check raises the precise error (rule 7 of producer_state).
                # 0x7FFFFFFF written out (not _INT32_MAX): a constant costs no global lookup.
                epoch = f[10]
                seq = f[11]
                last_seq = (seq + f[6]) & 0x7FFFFFFF
                txn = f[5] & 0x10
                try:  # a subscript, not .get(): no call on the hot path (a new producer raises, once)
                    entry: ProducerEntry | None = self.producer_state.producers[pid]
                except KeyError:
                    entry = None
                if entry is not None:
                    retained = entry.retained
                    if epoch == entry.producer_epoch:
                        # every retained batch is compared, also for a batch in sequence: Kafka looks for a
                        # duplicate before it checks the sequence (the retained batches of a producer
                        # need not be contiguous: a follower's state, an expired producer's new start)
                        for b in retained:
                            if b[0] == seq and b[1] == last_seq:  # duplicate: the original offsets
                                return _new_tuple(AppendResult, (b[2], b[3], b[4] if self._log_append_time else -1,
                                                                 self._log_start_offset, True))
                        refused = retained and seq != (retained[-1][1] + 1) & 0x7FFFFFFF
                    else:  # a new epoch starts at sequence 0 (unless the entry had no epoch yet)
                        refused = epoch < entry.producer_epoch or (seq != 0 and entry.producer_epoch >= 0)
                    if refused or (not txn and entry.current_txn_first_offset >= 0):
                        return self._append_general(buf, leader_epoch, self._now() if now_ms is None else now_ms,
                                                    assign_offsets)
            max_ts = f[8]
            append_time = -1
            if self._log_append_time:  # the whole header changes (timestamp type, max timestamp, CRC)
                hdr: bytes | bytearray = bytearray(buf[:BATCH_HEADER_SIZE])
                _pack_offset_length_epoch_into(hdr, 0, offset, f[1], leader_epoch)
                body = buf[BATCH_HEADER_SIZE:]
                append_time = max_ts = self._now() if now_ms is None else now_ms
                _pack_h_into(hdr, 21, f[5] | TIMESTAMP_TYPE_MASK)
                _pack_q_into(hdr, 35, append_time)
                _pack_I_into(hdr, 17, crc32c(body, crc32c(hdr[21:])))
            else:  # only baseOffset and partitionLeaderEpoch change: a new 16-byte prefix
                hdr = _pack_offset_length_epoch(offset, f[1], leader_epoch)
                body = buf[16:]
            size = len(buf)
            last = offset + f[6]
            seg = self._segments[-1]
            if seg.size:
                rbt = seg.rolling_based_timestamp
                if rbt is not None and rbt >= 0:
                    waited = max_ts - rbt
                else:
                    waited = (self._now() if now_ms is None else now_ms) - seg.created_ms
                if (seg.size > self._segment_bytes - size or waited > self._roll_ms or seg.indexes_full
                        or last - seg.base_offset > _INT32_MAX):
                    seg = self._roll(offset)
            seg.append_one(hdr, body, size, last, max_ts)
            self._next_offset = last + 1
            if pid >= 0:  # ProducerStateManager.update, inline (after the write, as the general path)
                if entry is None:
                    entry = self.producer_state.producers[pid] = ProducerEntry(pid, epoch)
                elif epoch != entry.producer_epoch:
                    entry.producer_epoch = epoch
                    entry.retained.clear()
                entry.retained.append((seq, last_seq, offset, last, max_ts))  # a plain tuple (rule 8)
                entry.last_timestamp = max_ts
                if txn and entry.current_txn_first_offset < 0:
                    entry.current_txn_first_offset = offset
                    self.producer_state.ongoing[pid] = offset
            if leader_epoch > self._latest_epoch:
                self._assign_epoch(leader_epoch, offset)
            return _new_tuple(AppendResult, (offset, last, append_time, self._log_start_offset, False))

    def _append_replica(self, buf: memoryview, now_ms: int | None) -> AppendResult:
        """A follower's append of the leader's batches (Kafka's appendAsFollower), the replica hot path:
        one header walk (log_validator.scan_replica_batches: offsets, magic, CRC), the whole buffer written
        with one pwritev, producer state, transaction markers and the leader-epoch cache updated from the
        header tuples -- the same effects as _append_general(assign_offsets=False) in the same order, with
        no RecordBatchView except for a control batch (its marker record is read). A set the walk refuses
        goes to _append_general, which raises the precise error."""
        with self._lock:
            now = self._now() if now_ms is None else now_ms
            headers = scan_replica_batches(buf, self._next_offset) \
                if self.replica_fast_path and not self._closed else None
            if headers is None:
                return self._append_general(buf, 0, now, False)
            infos: list[tuple[int, int, int, int]] = []
            max_ts_in_append = -1 << 63
            for f in headers:
                max_ts = f[8]
                infos.append((f[1] + 12, f[0] + f[6], max_ts, f[0]))
                if max_ts > max_ts_in_append:
                    max_ts_in_append = max_ts
            first_offset = headers[0][0]
            last_offset = infos[-1][1]
            config = self.config
            seg = self._segments[-1]
            if seg.should_roll(len(buf), max_ts_in_append, last_offset, now, config.segment_bytes,
                               config.segment_ms - config.segment_jitter_ms):
                seg = self._roll(first_offset)
            elif first_offset - seg.base_offset > _INT32_MAX:  # pragma: no cover - needs a huge gap
                seg = self._roll(first_offset)
            seg.append([buf], infos)  # the fetched bytes as they are: the replica stays byte-identical
            self._next_offset = last_offset + 1

            # producer state after the write, batch by batch (ProducerStateManager.update inline for a data
            # batch, producer_state rule 7; the entry of the previous batch reused: a fetched set is mostly
            # one producer's run of batches)
            state = self.producer_state
            producers = state.producers
            pos = 0
            entry: ProducerEntry | None = None
            for f in headers:
                pid = f[9]
                if pid >= 0:
                    base = f[0]
                    if f[5] & CONTROL_MASK:  # the leader's COMMIT / ABORT marker: its one record is read
                        marker = parse_marker(RecordBatchView(buf, pos, f))
                        if marker is not None:
                            self._index_aborted(seg.base_offset, state.complete_txn(
                                pid, f[10], base, marker.is_commit, marker.coordinator_epoch, f[8]))
                        entry = None  # complete_txn may have made the producer's entry
                    else:
                        epoch = f[10]
                        if entry is None or entry.producer_id != pid:
                            entry = producers.get(pid)
                            if entry is None:
                                entry = producers[pid] = ProducerEntry(pid, epoch)
                        if epoch != entry.producer_epoch:
                            entry.producer_epoch = epoch
                            entry.retained.clear()
                        seq = f[11]
                        if seq >= 0:  # a plain tuple (rule 8)
                            entry.retained.append((seq, (seq + f[6]) & _INT32_MAX, base, base + f[6], f[8]))
                        entry.last_timestamp = f[8]
                        if f[5] & TRANSACTIONAL_MASK and entry.current_txn_first_offset < 0:
                            entry.current_txn_first_offset = base
                            state.ongoing[pid] = base
                pos += f[1] + 12
            for f in headers:
                if f[2] > self._latest_epoch:
                    self._assign_epoch(f[2], f[0])
            return _new_tuple(AppendResult, (first_offset, last_offset, -1, self._log_start_offset, False))

    def _append_general(self, buf: memoryview, leader_epoch: int, now: int, assign_offsets: bool) -> AppendResult:
        """Every append the hot path does not take (several batches, producer-id batches the producer state
        refuses, compacted topics, timestamp bounds, replica appends, and every invalid input, which is
        refused here). Lock held."""
        if self._closed:
            raise KafkaError(ErrorCode.kafka_storage_error, f"log {self.dir.name} is closed")
        config = self.config
        if assign_offsets:
            views = validate_client_batches(buf, config, now)
        else:
            views = validate_replica_batches(buf, self._next_offset)

        # idempotent producers: a duplicate answers with the original offsets, writes nothing
        producer_batches = [v for v in views if v.producer_id >= 0]
        if producer_batches and assign_offsets:
            if len(producer_batches) > 1:
                raise KafkaError(
                    ErrorCode.invalid_record,
                    "an append with a producer id must carry exactly one record batch",
                )
            v = producer_batches[0]
            dup = self.producer_state.check(v.producer_id, v.producer_epoch, v.base_sequence, v.last_sequence,
                                            v.is_transactional)
            if dup is not None:
                return AppendResult(
                    dup.first_offset,
                    dup.last_offset,
                    dup.timestamp if config.log_append_time else -1,
                    self._log_start_offset,
                    True,
                )

        log_append_time = assign_offsets and config.log_append_time
        pieces: list[bytes | bytearray | memoryview] = []
        infos: list[tuple[int, int, int, int]] = []
        if assign_offsets:
            offset = self._next_offset
            first_offset = offset
            for v in views:
                hdr = bytearray(v.buffer[:BATCH_HEADER_SIZE])
                _pack_q_into(hdr, 0, offset)
                _pack_i_into(hdr, 12, leader_epoch)
                body = v.buffer[BATCH_HEADER_SIZE:]
                max_ts = v.max_timestamp
                if log_append_time:
                    _pack_h_into(hdr, 21, v.attributes | TIMESTAMP_TYPE_MASK)
                    _pack_q_into(hdr, 35, now)
                    max_ts = now
                    _pack_I_into(hdr, 17, crc32c(body, crc32c(hdr[21:])))
                pieces.append(hdr)
                pieces.append(body)
                last = offset + v.last_offset_delta
                infos.append((v.batch_length + 12, last, max_ts, offset))
                offset = last + 1
        else:
            first_offset = views[0].base_offset
            for v in views:
                pieces.append(v.buffer)
                infos.append((v.size, v.last_offset, v.max_timestamp, v.base_offset))
        last_offset = infos[-1][1]
        max_ts_in_append = max(i[2] for i in infos)

        seg = self._segments[-1]
        if seg.should_roll(len(buf), max_ts_in_append, last_offset, now, config.segment_bytes,
                           config.segment_ms - config.segment_jitter_ms):
            seg = self._roll(first_offset)
        elif first_offset - seg.base_offset > _INT32_MAX:  # pragma: no cover - needs a huge gap
            seg = self._roll(first_offset)
        seg.append(pieces, infos)
        self._next_offset = last_offset + 1

        for v, info in zip(views, infos, strict=True):
            if v.producer_id >= 0:
                if v.is_control:  # only from a replica: the leader's marker, copied
                    marker = parse_marker(v)
                    if marker is not None:
                        self._index_aborted(seg.base_offset, self.producer_state.complete_txn(
                            v.producer_id, v.producer_epoch, info[3], marker.is_commit, marker.coordinator_epoch,
                            info[2]))
                    continue
                seq = v.base_sequence
                self.producer_state.update(
                    v.producer_id, v.producer_epoch, seq, v.last_sequence, info[3], info[1], info[2],
                    v.is_transactional,
                )
        if assign_offsets:
            if leader_epoch > self._latest_epoch:
                self._assign_epoch(leader_epoch, first_offset)
        else:
            for v in views:
                if v.partition_leader_epoch > self._latest_epoch:
                    self._assign_epoch(v.partition_leader_epoch, v.base_offset)

        return AppendResult(
            first_offset, last_offset, now if log_append_time else -1, self._log_start_offset, False
        )

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, *,
                      leader_epoch: int = 0, now_ms: int | None = None) -> AppendResult:
        """Write a COMMIT / ABORT marker for `producer_id` (the transaction coordinator's WriteTxnMarkers,
        Kafka's AppendOrigin.COORDINATOR): it closes the producer's transaction; an ABORT is indexed.
        INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED for a stale marker."""
        try:
            with self._lock:
                if self._closed:
                    raise KafkaError(ErrorCode.kafka_storage_error, f"log {self.dir.name} is closed")
                now = self._now() if now_ms is None else now_ms
                self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
                offset = self._next_offset
                batch = build_marker_batch(producer_id, producer_epoch, commit, coordinator_epoch, now,
                                           base_offset=offset, partition_leader_epoch=leader_epoch)
                seg = self._segments[-1]
                if seg.should_roll(len(batch), now, offset, now, self.config.segment_bytes,
                                   self.config.segment_ms - self.config.segment_jitter_ms):
                    seg = self._roll(offset)
                seg.append([batch], [(len(batch), offset, now, offset)])
                self._next_offset = offset + 1
                self._index_aborted(seg.base_offset, self.producer_state.complete_txn(
                    producer_id, producer_epoch, offset, commit, coordinator_epoch, now))
                if leader_epoch > self._latest_epoch:
                    self._assign_epoch(leader_epoch, offset)
                return AppendResult(offset, offset, -1, self._log_start_offset, False)
        except OSError as e:
            storage_errors.report(self.dir.name, "append", e)
            raise KafkaError(ErrorCode.kafka_storage_error, f"append to {self.dir.name} failed: {e.strerror or e}") from e
        finally:
            self._request_housekeeping()

    def assign_leader_epoch_start(self, epoch: int) -> bool:
        """This replica leads from now on under `epoch`, starting at the log end offset: recorded in the
        leader-epoch cache at once, in memory (Kafka's `maybeAssignEpochStartOffset` at the election; the
        file is written after the epoch's first batch, off the appending thread: LeaderEpochFileCache)."""
        try:
            with self._lock:
                return self.leader_epoch_cache.assign_unwritten(epoch, self._next_offset)
        finally:
            self._request_housekeeping()

    def _assign_epoch(self, epoch: int, start_offset: int) -> None:
        if self.leader_epoch_cache.assign(epoch, start_offset):
            self._latest_epoch = epoch

    def _roll(self, new_base: int) -> LogSegment:
        old = self._segments[-1]
        if old.size == 0:
            if old.base_offset == new_base:
                return old
            old.delete()
            self._segments.pop()
            self._bases.pop()
        else:
            old.on_become_inactive()
        seg = self._new_segment(new_base)
        self._segments.append(seg)
        self._bases.append(new_base)
        self._dir_dirty = True
        self._write_producer_snapshot(sync=False)
        # Kafka's roll schedules flushUptoOffsetExclusive(new base): the housekeeping thread fsyncs the
        # rolled segment and its indexes and moves the recovery point here (flush_rolled)
        if new_base > self._roll_flush_to:
            self._roll_flush_to = new_base
        return seg

    def roll(self) -> LogSegment:
        """Force a new active segment at the log end offset (tests, admin)."""
        try:
            with self._lock:
                return self._roll(self._next_offset)
        finally:
            self._request_housekeeping()  # the rolled segment's flush, the snapshot's fsync

    # ==========================================================================================
    # read
    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_message: bool = True,
        lazy: bool = False,
    ) -> FetchDataInfo:
        """`lazy`: the batches come back as a `FileSlice` (read from the file as the client drains the
        socket) instead of bytes in memory, for fetch answers."""
        with self._lock:
            leo = self._next_offset
            if fetch_offset < self._log_start_offset or fetch_offset > leo:
                raise KafkaError(
                    ErrorCode.offset_out_of_range,
                    f"offset {fetch_offset} is outside [{self._log_start_offset}, {leo}] of {self.dir.name}",
                )
            limit = leo if max_offset is None else min(max_offset, leo)
            if fetch_offset >= limit or max_bytes < 0:
                return FetchDataInfo()
            i = max(bisect_right(self._bases, fetch_offset) - 1, 0)
            segments = self._segments
            while i < len(segments):
                seg = segments[i]
                if seg.base_offset >= limit:
                    break
                data = (seg.read_slice if lazy else seg.read)(fetch_offset, max_bytes, limit, min_one_message)
                if data is None:
                    i += 1
                    continue
                return FetchDataInfo([data], len(data)) if data else FetchDataInfo()
            return FetchDataInfo()

    def position_of(self, offset: int) -> tuple[int, int]:
        """(base offset of the segment holding `offset`, byte position in it of the first batch whose last
        offset is >= `offset`): the log end offset, or beyond, is the active segment's end. Nothing is read
        for the log end offset or a remembered offset; otherwise one index lookup and a header scan of about
        one index interval (no records). An offset below the log start is placed in the first segment."""
        with self._lock:
            if offset >= self._next_offset:
                seg = self._segments[-1]
                return seg.base_offset, seg.size
            known = self._positions.get(offset)
            i = max(bisect_right(self._bases, offset) - 1, 0)
            segments = self._segments
            if known is not None and known[3] == self._truncations and known[2] is segments[i]:
                return known[0], known[1]
            while i < len(segments):
                seg = segments[i]
                pos = seg.translate_offset(offset)
                if pos is not None:
                    break
                i += 1  # nothing at or after `offset` here (a compacted gap): the next segment's start
            else:  # pragma: no cover - offsets below the log end always lie in a segment
                seg = segments[-1]
                return seg.base_offset, seg.size
            if len(self._positions) >= POSITION_CACHE:
                self._positions.clear()
            self._positions[offset] = (seg.base_offset, pos, seg, self._truncations)
            return seg.base_offset, pos

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """ListOffsets: (offset, timestamp) of the first record with timestamp >= target, None when none.
        Kafka's special targets: -2 earliest -> (log start, -1), -1 latest -> (log end, -1),
        -3 max timestamp -> (offset of the max timestamp, max timestamp)."""
        with self._lock:
            if timestamp_ms == EARLIEST_TIMESTAMP:
                return self._log_start_offset, -1
            if timestamp_ms == LATEST_TIMESTAMP:
                return self._next_offset, -1
            if timestamp_ms == MAX_TIMESTAMP:
                best: LogSegment | None = None
                for seg in self._segments:
                    if seg.size and seg.max_timestamp >= 0 and seg.next_offset > self._log_start_offset and (
                            best is None or seg.max_timestamp > best.max_timestamp):
                        best = seg
                # the exact record (KIP-734 as fixed by KAFKA-16310), not its batch's last offset
                return None if best is None else best.find_offset_by_timestamp(best.max_timestamp,
                                                                                 self._log_start_offset)
            for seg in self._segments:
                if seg.size == 0 or seg.next_offset <= self._log_start_offset or seg.max_timestamp < timestamp_ms:
                    continue
                found = seg.find_offset_by_timestamp(timestamp_ms, self._log_start_offset)
                if found is not None:
                    return found
            return None

    # ==========================================================================================
    # retention, delete records, truncation
    def segment_infos(self) -> list[SegmentLike]:
        return [_RetentionView(s) for s in self._segments]

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Apply retention (time, size, log start offset); returns the number of segments deleted."""
        now = self._now() if now_ms is None else now_ms
        with self._lock:
            if self._closed:  # closed or deleted while a housekeeping pass was on its way here
                return 0
            cfg = self.config
            n, reason = select_segments_to_delete(
                self.segment_infos(),
                now_ms=now,
                retention_ms=cfg.retention_ms,
                retention_bytes=cfg.retention_bytes,
                delete_policy=cfg.delete,
                high_watermark=self._high_watermark,
                log_start_offset=self._log_start_offset,
            )
            if n:
                bases = self._bases[:n]
                size = sum(seg.size for seg in self._segments[:n])
                self._delete_leading_segments(n)
                log.info("%s: deleted %d segment(s) %s (%d bytes) past %s; log start offset now %d",
                         self.dir.name, n, bases, size, reason, self._log_start_offset)
        self._notify_lso_change()
        return n

    def _delete_leading_segments(self, n: int) -> None:
        doomed = self._segments[:n]
        self._segments = self._segments[n:]
        self._bases = self._bases[n:]
        for seg in doomed:
            self._doom_segment(seg)
        # the snapshots below the first segment left describe offsets the log no longer holds: renamed now,
        # removed with the segments (delete_due_segments), never unlinked by the caller (Kafka's
        # removeAndMarkSnapshotForDeletion with the segment)
        first = self._segments[0].base_offset
        due = self._now() + self.config.file_delete_delay_ms
        while self._snapshots and self._snapshots[0] < first:
            path = self.dir / f"{self._snapshots[0]:020d}.snapshot"
            target = path.with_name(path.name + DELETED_SUFFIX)
            try:
                os.replace(path, target)
                self._doomed_snapshots.append((due, target))
            except FileNotFoundError:
                pass
            del self._snapshots[0]
        self._dir_dirty = True
        new_start = max(self._log_start_offset, self._segments[0].base_offset)
        self._advance_log_start_offset(new_start)

    def _advance_log_start_offset(self, new_start: int) -> None:
        if new_start <= self._log_start_offset:
            return
        self._log_start_offset = new_start
        self._high_watermark = max(self._high_watermark, new_start)
        self.recovery_point = max(self.recovery_point, new_start)
        try:
            # memory now, the file after the lock is released (_write_pending_epochs)
            self.leader_epoch_cache.truncate_from_start(new_start, persist=False)
        except OSError as e:  # full disk: entries below the log start are dropped again on the next load
            storage_errors.report(self.dir.name, "leader-epoch checkpoint", e)
        self._latest_epoch = self.leader_epoch_cache.latest_written_epoch
        self.producer_state.evict_before(new_start)
        self._lso_changed = True

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Forget idempotent producers idle for longer than producer.id.expiration.ms."""
        now = self._now() if now_ms is None else now_ms
        with self._lock:
            return self.producer_state.remove_expired(now, self.config.producer_id_expiration_ms)

    def delete_records(self, before_offset: int) -> int:
        """DeleteRecords: move the log start offset to `before_offset` (<= high watermark) and delete
        the segments wholly below it. Returns the new log start offset."""
        with self._lock:
            if before_offset > self._high_watermark or before_offset < 0:
                raise KafkaError(
                    ErrorCode.offset_out_of_range,
                    f"cannot move the log start offset of {self.dir.name} to {before_offset}: it must be in "
                    f"[0, high watermark {self._high_watermark}]",
                )
            if before_offset > self._log_start_offset:
                self._advance_log_start_offset(before_offset)
                n = 0
                while n < len(self._segments) - 1 and self._segments[n + 1].base_offset <= before_offset:
                    n += 1
                if n:
                    bases = self._bases[:n]
                    self._delete_leading_segments(n)
                    log.info("%s: DeleteRecords moved the log start offset to %d, deleted segment(s) %s",
                             self.dir.name, self._log_start_offset, bases)
            start = self._log_start_offset
        self._notify_lso_change()  # the checkpoint's fsyncs, outside the lock
        return start

    def _notify_lso_change(self, *, checkpoint: bool = True) -> None:
        """Write the files a truncation or a moved log start offset changed, which fsync: the
        leader-epoch-checkpoint (`LeaderEpochFileCache.write_pending`) and the manager's offset checkpoints
        (its callback). Called by the public methods after releasing the lock, never under it."""
        try:
            self.leader_epoch_cache.write_pending(self._lock)
        except OSError as e:  # full disk: rewritten at the next change; the next load drops stale entries
            storage_errors.report(self.dir.name, "leader-epoch checkpoint", e)
        if self.leader_epoch_cache.pending_write:  # the write failed: the housekeeping pass retries it
            self._request_housekeeping()
        if self._lso_changed and checkpoint:
            self._lso_changed = False
            if self._on_lso_change is not None:
                self._on_lso_change(self)

    def truncate_to(self, offset: int, *, checkpoint: bool = True) -> bool:
        """Remove every offset >= `offset` (a batch containing it goes whole). Returns False when
        there was nothing to remove. Even then, leader epochs starting at the log end go (Kafka's
        `UnifiedLog.truncateTo`): a deposed leader's election entry, which no batch carries, would
        otherwise make it claim an epoch its new leader never had, fetch after fetch.
        The lowered recovery point is checkpointed after the lock is released, unless `checkpoint` is
        False: the caller writes one checkpoint for many truncations (`LogManager.truncate_logs`)."""
        with self._lock:
            truncated = self._truncate_to_locked(offset)
        # the recovery point went down: a stale (higher) checkpoint would skip the rescan of data appended
        # after this truncation (Kafka checkpoints on truncation too)
        self._notify_lso_change(checkpoint=checkpoint)
        return truncated

    def _truncate_to_locked(self, offset: int) -> bool:
        if offset < 0:
            raise ValueError(f"truncate_to: offset must be >= 0, got {offset}")
        if self._closed:  # deleted (or closed) while a truncation was on its way here from the fetcher
            return False
        if offset >= self._next_offset:
            self.leader_epoch_cache.truncate_from_end(self._next_offset, persist=False)
            self._latest_epoch = self.leader_epoch_cache.latest_written_epoch
            return False
        if offset < self._log_start_offset:
            self._truncate_fully_and_start_at(offset)
            return True
        while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
            gone = self._segments.pop()
            self._doom_segment(gone)
            self._bases.pop()
        self._segments[-1].truncate_to(offset)
        self._next_offset = self._segments[-1].next_offset
        self._after_truncation()
        self._lso_changed = True
        return True

    def _doom_segment(self, seg: LogSegment) -> None:
        """Kafka's asynchronous segment deletion (lock held): the segment's files are renamed `.deleted` now
        and removed by `delete_due_segments` (the housekeeping thread) once file.delete.delay.ms has
        passed, so a read in flight on it (a FileSlice being sent) completes from the renamed file, and no
        unlink runs on the caller's thread (the event loop for DeleteRecords and truncation). A crash in
        between leaves `.deleted` files, which the next load removes (_remove_temporary_files)."""
        self._txn_indexes.pop(seg.base_offset, None)
        txn = self.dir / f"{seg.base_offset:020d}{_TXN_INDEX_SUFFIX}"
        target = txn.with_name(txn.name + DELETED_SUFFIX)
        txn_doomed: Path | None = target
        try:
            os.replace(txn, target)
        except FileNotFoundError:  # only segments holding an aborted transaction have one
            txn_doomed = None
        seg.rename_deleted()
        self._doomed.append((self._now() + self.config.file_delete_delay_ms, seg, txn_doomed))
        self._request_housekeeping()  # its files go at the first pass after file.delete.delay.ms

    @property
    def doomed_segments(self) -> int:
        """Deleted segments whose files wait for file.delete.delay.ms."""
        return len(self._doomed)

    def delete_due_segments(self, now_ms: int | None = None, *, all_of_them: bool = False) -> int:
        """Remove the files of the segments deleted at least file.delete.delay.ms ago (every one with
        `all_of_them`); returns how many. Called by the housekeeping thread; the unlinks run outside the
        log's lock (the segments are no longer part of the log)."""
        if not self._doomed and not self._doomed_snapshots:
            return 0
        now = self._now() if now_ms is None else now_ms
        with self._lock:
            due = [d for d in self._doomed if all_of_them or d[0] <= now]
            self._doomed = [d for d in self._doomed if not (all_of_them or d[0] <= now)]
            snaps = [p for when, p in self._doomed_snapshots if all_of_them or when <= now]
            self._doomed_snapshots = [d for d in self._doomed_snapshots if not (all_of_them or d[0] <= now)]
        for _when, seg, txn in due:
            seg.delete()  # a read still in flight keeps the descriptor until it returns (FileCache pins)
            if txn is not None:
                txn.unlink(missing_ok=True)
        for path in snaps:  # (a newer file of the same `.deleted` name may go instead: harmless, it is doomed too)
            path.unlink(missing_ok=True)
        return len(due)

    def _after_truncation(self) -> None:
        self._truncations += 1
        # Kafka's truncateTo + updateHighWatermark: the high watermark falls to the new log end offset but
        # never below the log start offset. A truncation to a log start inside a batch removes that batch
        # whole and leaves the log end below the start (Log rules): the high watermark stays at the start
        self._high_watermark = max(min(self._high_watermark, self._next_offset), self._log_start_offset)
        self.recovery_point = min(self.recovery_point, self._next_offset)
        self.leader_epoch_cache.truncate_from_end(self._next_offset, persist=False)
        self._latest_epoch = self.leader_epoch_cache.latest_written_epoch
        for off in [o for o in self._snapshots if o > self._next_offset]:
            self._delete_snapshot(off)
        self._dir_dirty = True
        self._rebuild_producer_state()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        with self._lock:
            self._truncate_fully_and_start_at(offset)
        self._notify_lso_change()

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        self._truncations += 1
        for seg in self._segments:
            self._doom_segment(seg)  # renamed first: the new segment may take the same base offset
        for off in list(self._snapshots):
            self._delete_snapshot(off)
        seg = self._new_segment(offset)
        self._segments = [seg]
        self._bases = [offset]
        self._next_offset = offset
        self._log_start_offset = offset
        self._high_watermark = offset
        self.recovery_point = offset
        self.leader_epoch_cache.clear(persist=False)
        self._latest_epoch = -1
        self.producer_state = ProducerStateManager()
        self._dir_dirty = True
        self._lso_changed = True

    @property
    def lock(self) -> threading.RLock:
        """The lock every method of this log takes (reentrant). Hold it to keep the log still across
        several calls (the cleaner does while it chooses what to clean, never while it reads or writes)."""
        return self._lock

    @property
    def truncations(self) -> int:
        """How many truncations this log has seen (a compaction pass planned before one is discarded)."""
        return self._truncations

    def swap_cleaned_segments(self, cleaned: list[tuple[LogSegment, Path]], truncations: int,
                              cleaned_upto: int) -> bool:
        """Compaction's swap (cleaner.py): each (sealed segment, its cleaned `.log` in a staging directory,
        written with its `.index` / `.timeindex` beside it and fsync'd) replaces the segment, one segment per
        hold of the lock (so an append waits for one rename and one index load at most). Stops (False) when
        the log was closed or truncated since `truncations` was read: the copies not swapped yet were
        computed from records that may be gone (those swapped before were checked, and each copy stands on
        its own). A segment no longer in the log (retention deleted it) is skipped. The replaced segment is
        doomed like a deleted one (file.delete.delay.ms, `.deleted` names: LogSegment.link_deleted), so a
        read in flight on it completes. Crash safety: the old indexes are renamed away first and the old
        `.log` given a second `.deleted` name, then each file is renamed over its live name (atomic), so a
        crash leaves the old or the new `.log`, and missing indexes, which the load rebuilds. The directory
        is fsync'd after the last swap, outside the lock."""
        swapped = 0
        complete = True
        for seg, path in cleaned:
            with self._lock:
                if self._closed or self._truncations != truncations:
                    complete = False
                    break
                try:
                    i = self._segments.index(seg)
                except ValueError:  # deleted meanwhile (retention): its copy goes with the staging directory
                    continue
                if i == len(self._segments) - 1:  # cannot happen: only segments below the active one are cleaned
                    raise ValueError(f"swap_cleaned_segments: {seg.log_path.name} is the active segment")
                live, live_indexes = seg.log_path, (seg.index.path, seg.time_index.path)
                try:
                    # Kafka renames a replaced segment `.deleted` and removes it after file.delete.delay.ms:
                    # a fetch answer being sent from it (a FileSlice) completes with the old bytes
                    seg.link_deleted()
                    self._doomed.append((self._now() + self.config.file_delete_delay_ms, seg, None))
                    self._request_housekeeping()
                except OSError:  # no hard links here: the old file goes now (the reader's answer is cut)
                    seg.index.delete()
                    seg.time_index.delete()
                    seg.retire_fd()
                os.replace(path, live)
                for idx in live_indexes:
                    staged = path.with_name(idx.name)
                    if staged.exists():
                        os.replace(staged, idx)
                new = self._new_segment(seg.base_offset)
                if not new.load():  # (the copy and its indexes were written together: not expected)
                    log.warning("%s: rebuilding the indexes of cleaned segment %d: %s", self.dir.name,
                                seg.base_offset, new.load_problem)
                    new.recover()
                    new.on_become_inactive()
                self._segments[i] = new
                swapped += 1
        with self._lock:
            if complete and not self._closed and self._truncations == truncations:
                self.cleaner_checkpoint = max(self.cleaner_checkpoint, cleaned_upto)
            else:
                complete = False
        if swapped:
            try:
                fsync_dir(self.dir)
            except FileNotFoundError:  # the partition was deleted meanwhile
                pass
        return complete

    # ==========================================================================================
    # flush / close
    def flush(self) -> None:
        """fsync everything appended so far and move the recovery point to the log end offset."""
        self.flush_up_to(None)

    def flush_up_to(self, offset: int | None) -> bool:
        """Make every offset below `offset` durable (None: below the log end offset); returns whether
        this call fsynced. Group commit: a caller that waited for another's pass finds its offsets
        covered and returns at once; a pass covers every append made before it started. The fsyncs run
        outside the log's lock, so appends and reads go on meanwhile. Blocking: never on the event loop."""
        with self._flush_lock:
            with self._lock:
                if self._closed or (offset is not None and self.recovery_point >= offset):
                    return False
                plan = self._plan_flush(self._next_offset, self._now())
            self._run_flush(plan)
            return True

    def flush_needed(self, end_offset: int) -> bool:
        """After an append ending at `end_offset` (exclusive): does `flush.messages` ask for an fsync
        before it is acknowledged (`flush_up_to(end_offset)`, from a worker thread)?"""
        rp = self.recovery_point
        return end_offset > rp and self._next_offset - rp >= self._flush_messages

    def housekeeping_idle(self, now_ms: int) -> bool:
        """Without a lock: nothing for the housekeeping pass (`LogManager.flush_due`) to do here now, no
        snapshot to sync, epoch file to write, rolled segment or due flush. Each value is one plain read, so
        an append racing with this makes it due a pass later, as one made just after the pass would: a
        pass over 10,000 logs then takes no lock per idle log."""
        if self._unsynced_snapshots or self.leader_epoch_cache.pending_write or self._closed:
            return False
        rp = self.recovery_point
        if min(self._roll_flush_to, self._next_offset) > rp:  # (a truncation below the roll: nothing to flush)
            return False
        unflushed = self._next_offset - rp
        if unflushed <= 0:
            return True
        interval = self.config.flush_interval_ms
        return unflushed < self._flush_messages and (interval is None or now_ms - self._last_flush_ms < interval)

    def flush_rolled(self) -> bool:
        """Kafka's flush on roll: fsync the segments rolled since the last flush (data and indexes) and
        move the recovery point to the newest roll's base. Called by the housekeeping thread."""
        with self._flush_lock:
            with self._lock:
                upto = self._roll_flush_to
                if self._closed or upto <= self.recovery_point:
                    return False
                plan = self._plan_flush(upto, self._now())
            self._run_flush(plan)
            return True

    def write_pending_epochs(self) -> bool:
        """Write the leader-epoch-checkpoint an append or a truncation changed in memory (with fsync,
        outside the lock: LeaderEpochFileCache's rules). Called by the housekeeping thread."""
        if not self.leader_epoch_cache.pending_write:
            return False
        try:
            return self.leader_epoch_cache.write_pending(self._lock)
        except FileNotFoundError:
            if self._closed:  # the partition was deleted (its directory renamed) meanwhile: nothing to keep
                return False
            raise

    @property
    def unsynced_snapshots(self) -> int:
        return len(self._unsynced_snapshots)

    def sync_snapshots(self) -> int:
        """fsync the producer snapshots written on roll since the last call, then the directory (their
        names), outside the lock so appends and reads go on meanwhile; returns how many were synced.
        Called by the flusher thread (`LogManager.flush_due`) and by every flush."""
        with self._lock:
            paths, self._unsynced_snapshots = self._unsynced_snapshots, []
        synced = sum(fsync_file(p) for p in paths)
        if synced:
            try:
                fsync_dir(self.dir)
            except FileNotFoundError:  # the partition was deleted meanwhile
                return 0
        return synced

    def _plan_flush(self, upto: int, now: int) -> _FlushPlan:
        """Under the lock: what a flush up to `upto` must fsync, each item marked synced now (so an append
        made during the fsyncs marks it again instead of being forgotten); `_run_flush` does the fsyncs."""
        plan = _FlushPlan(upto, self._truncations)
        segments = self._segments
        start = max(bisect_right(self._bases, self.recovery_point) - 1, 0)
        last = len(segments) - 1
        try:
            for i in range(start, last + 1):
                seg = segments[i]
                if seg.base_offset >= upto and i:
                    break
                if seg.dirty:
                    seg.dirty = False
                    plan.data.append(seg)
                if i < last:  # a sealed segment's indexes are complete: the active one's are rebuilt on recovery
                    for idx in (seg.index, seg.time_index):
                        path = idx.take_unsynced()  # writes its pending entries: may fail (a full disk)
                        if path is not None:
                            plan.files.append((path, idx))
        except OSError:
            # what was marked clean above is not fsync'd by anyone now: marked again, or a later flush would
            # skip it and move the recovery point past data never fsync'd
            self._unplan(plan)
            self._request_housekeeping()
            raise
        for txn in self._txn_indexes.values():
            path = txn.take_unsynced()
            if path is not None:
                plan.files.append((path, txn))
        plan.snapshots, self._unsynced_snapshots = self._unsynced_snapshots, []
        path = self.leader_epoch_cache.take_unsynced()  # a new partition's first epochs, before the RP moves
        if path is not None:
            plan.files.append((path, self.leader_epoch_cache))
            self._dir_dirty = True
        plan.dir, self._dir_dirty = self._dir_dirty, False
        self._last_flush_ms = now
        return plan

    def _run_flush(self, plan: _FlushPlan) -> None:
        """The fsyncs of `plan` (lock not held, unless the caller holds it: close), then the recovery
        point moves, unless a truncation happened meanwhile (what the plan covered may be gone)."""
        epochs = self.leader_epoch_cache
        if epochs.pending_write:  # an epoch's first batch since the last write: durable before the RP moves
            epochs.write_pending(self._lock)
            with self._lock:
                path = epochs.take_unsynced()  # (a new partition's file is written without fsync)
            if path is not None:
                plan.files.append((path, epochs))
                plan.dir = True
        try:
            for seg in plan.data:
                _fdatasync_path(seg.log_path)
            for path, _owner in plan.files:
                fsync_file(path)
            for path in plan.snapshots:
                fsync_file(path)
            if plan.dir:
                fsync_dir(self.dir)
        except OSError:
            with self._lock:  # fsync again next time
                self._unplan(plan)
            self._request_housekeeping()
            raise
        with self._lock:
            if any(owner is self.leader_epoch_cache for _p, owner in plan.files):
                self.leader_epoch_cache.synced()
            if self._truncations == plan.truncations:
                rp = min(plan.upto, self._next_offset)
                if rp > self.recovery_point:
                    self.recovery_point = rp
                    self._offsets_moved.value = True

    def _unplan(self, plan: _FlushPlan) -> None:
        """Under the lock: a flush of `plan` failed, everything it marked synced is marked unsynced again."""
        for seg in plan.data:
            seg.dirty = True
        for _path, owner in plan.files:
            owner.mark_unsynced()
        self._unsynced_snapshots[:0] = plan.snapshots
        self._dir_dirty = self._dir_dirty or plan.dir

    def _flush_all_segments(self) -> None:
        for seg in self._segments:
            seg.flush(indexes=seg is not self._segments[-1])
        self.leader_epoch_cache.sync()
        fsync_dir(self.dir)
        self._dir_dirty = False

    def flush_due(self, now_ms: int) -> bool:
        """Flush if `flush.ms` has elapsed since the last flush, or `flush.messages` unflushed messages
        accumulated (appends nobody flushed: a follower's, a coordinator's), and something is unflushed."""
        with self._flush_lock:
            with self._lock:
                unflushed = self._next_offset - self.recovery_point
                if self._closed or unflushed <= 0:
                    return False
                interval = self.config.flush_interval_ms
                if unflushed < self._flush_messages and (interval is None or now_ms - self._last_flush_ms < interval):
                    return False
                plan = self._plan_flush(self._next_offset, now_ms)
            self._run_flush(plan)
            return True

    @property
    def unflushed_messages(self) -> int:
        return self._next_offset - self.recovery_point

    def close(self) -> list[str]:
        """Flush, write the producer snapshot and close every segment. Never leaves a descriptor open:
        what could not be written (disk full) is returned as one line each, and `flushed_at_close` says
        whether the data and the indexes reached the disk (a clean-shutdown marker must not vouch for them
        if not: the next start then rescans the segments from the recovery point and rebuilds their indexes)."""
        problems: list[str] = []
        with self._lock:
            if self._closed:
                return problems
            try:  # (the one fsync under the lock: the log is closing, nobody may append any more)
                self._run_flush(self._plan_flush(self._next_offset, self._now()))
            except OSError as e:
                self.flushed_at_close = False
                problems.append(f"{self.dir.name}: flush: {e.strerror or e}")
            try:
                # Kafka's takeSnapshot: none when one at the log end offset exists (a log opened and closed
                # without a write, as most of 10,000 partitions restarted are: a file and two fsyncs each);
                # a roll's unsynced one was fsync'd by the flush above
                if not self._snapshots or self._snapshots[-1] != self._next_offset:
                    self._write_producer_snapshot()
            except OSError as e:  # rebuilt from the log on the next start: nothing is lost
                problems.append(f"{self.dir.name}: producer snapshot: {e.strerror or e}")
            for seg in self._segments:
                try:
                    seg.close()
                except OSError as e:  # rebuilt from the log by the next start, which this makes a recovery
                    self.flushed_at_close = False
                    problems.append(f"{self.dir.name}: index of segment {seg.base_offset}: {e.strerror or e}")
            self._closed = True
            try:  # deleted segments waiting for file.delete.delay.ms go now (no descriptor left open)
                self.delete_due_segments(all_of_them=True)
            except OSError as e:  # a leftover `.deleted` file is removed by the next load
                problems.append(f"{self.dir.name}: deleted segments: {e.strerror or e}")
        return problems

    def rename_dir_for_deletion(self, target: Path) -> None:
        """Partition deletion (Kafka's asyncDelete): rename the directory to `target` and close the log to
        every write, keeping its segments readable (a fetch answer being sent completes) until
        `delete_files`, which the manager calls once file.delete.delay.ms has passed. The rename and the
        segments' new paths happen under the FileCache's lock, which every reopen of a shed descriptor
        takes."""
        with self._lock:
            self._closed = True
            with file_cache.lock:
                os.rename(self.dir, target)
                self.dir = target
                for seg in [*self._segments, *(d[1] for d in self._doomed)]:
                    seg.moved_to(target)
                self._doomed = [(when, seg, None if txn is None else target / txn.name)
                                for when, seg, txn in self._doomed]
                self._doomed_snapshots = [(when, target / p.name) for when, p in self._doomed_snapshots]

    def delete_files(self) -> None:
        """Close and remove every file of this log (the directory itself is the manager's)."""
        with self._lock:
            for seg in self._segments:
                seg.delete()
                self._delete_txn_index(seg.base_offset)
            for off in list(self._snapshots):
                self._delete_snapshot(off)
            self._segments = []
            self._bases = []
            self._closed = True
            self.delete_due_segments(all_of_them=True)

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return (
            f"Log({self.dir.name}, start={self._log_start_offset}, end={self._next_offset}, "
            f"hw={self._high_watermark}, segments={len(self._segments)})"
        )
