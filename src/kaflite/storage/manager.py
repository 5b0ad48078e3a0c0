"""LogManager: owns the data directories (`log.dirs`) and every partition Log in them.

Rules:
- A partition lives in `<log dir>/<topic>-<partition>/`; a new partition goes to the log dir holding the
  fewest partitions (Kafka's placement).
- Per log dir, Kafka's checkpoint files: `recovery-point-offset-checkpoint`,
  `log-start-offset-checkpoint`, `replication-offset-checkpoint` (high watermarks). They are rewritten
  (atomically) by `checkpoint()`, called from `flush_due`, retention, DeleteRecords, truncation, close and
  the end of `load()` (there only the files whose offsets the load changed: a clean start rewrites none),
  never under a Log's lock; `truncate_logs` (a follower's truncation round) writes them once for all the
  logs it truncated.
- `close()` flushes everything and leaves `.kafka_cleanshutdown`; `load()` skips recovery for logs in a
  directory with that marker (and removes it), otherwise recovers from each log's recovery point.
- `load()` opens the logs in at most `io_threads` worker threads at once (each log by one thread, in runs of
  at most LOAD_CHUNK logs per task); the partition table is filled in the listing's order after they
  opened, with every log that opened even when one failed (its error is then raised); two directories of
  one partition are refused before any log opens.
- `close()` closes the logs (each one's fsyncs, producer snapshot, index trims) in at most `io_threads`
  worker threads at once, never two threads on one log (each log is closed by exactly one task); the
  checkpoints and the marker are written only after every one of them has returned, and the marker only
  when every log reported its data flushed.
- A deleted partition leaves the table at once (`detach`, on the caller's thread) and its directory is
  renamed `<topic>-<partition>.<tag>-delete` (a rename needs no space) and its log closed to writes by the
  callable `detach` returns (the broker runs it in a worker thread; `delete` runs both at once); a
  `get_or_create` of that partition meanwhile waits for the rename; its files are removed by `delete_due_segments` (the housekeeping thread)
  once the broker's file.delete.delay.ms has passed (Kafka's asyncDelete: a fetch answer being sent
  from it completes meanwhile), and the emptied directory stays as a marker until the caller has
  recorded the deletion (`forget_deletions(tag)`, after the metadata file is written). On load (and at
  close) the files of such directories are removed and their tags are in `pending_deletions`, so a
  deletion interrupted by a crash or a full disk completes on restart.
- Storage errors of housekeeping (flush, retention, compaction, checkpoints) are reported once per
  partition (or file) per minute, one line each (storage.errors), and never stop the other logs' work;
  `close()` closes every file whatever fails and reports what it could not write.
- Each log dir is locked (Kafka's `.lock`, an exclusive flock) from construction to `close()`: a second
  manager on the same directory, in this process or another, fails with LogDirLockedError.
- Which compacted logs `run_compaction` cleans (Kafka's LogCleanerManager): those dirty enough
  (min.cleanable.dirty.ratio, decided in compact_log) and, regardless of the ratio, those whose oldest
  dirty sealed segment's first batch is older than max.compaction.lag.ms (`compaction_overdue`).
- A segment deleted by retention, DeleteRecords or truncation is renamed `.deleted` by its Log and its
  files are removed by `delete_due_segments(now)` once file.delete.delay.ms has passed (Kafka's
  asynchronous deletion), from the housekeeping thread.
- The broker's shell owns the schedule: it calls `run_retention(now)`, `run_compaction(now)`,
  `remove_expired_producers(now)`, `delete_due_segments(now)` and `flush_due(now)`; the decisions are
  pure functions of the logs' state and `now`.
- The housekeeping queue (Log rules): every log of the table is attached to it (`_queue_housekeeping`,
  queued once when it opens); `flush_due` and `delete_due_segments` visit only the queued logs, so an idle
  broker's pass costs nothing per partition. `flush_due` takes the whole queue (clearing each log's flag
  under the queue's lock, before it reads the log), does each one's due work, and queues again those that
  still want a pass (`Log.housekeeping_wanted`). `run_retention` skips the logs of one segment (retention
  never deletes the active segment); `close` closes every log of the table, queued or not. The periodic
  checkpoint (every 5 s) is written only when a high watermark or recovery point moved since the last one
  (`_offsets_moved`, set by the logs; a table change or a failed write sets it too); the other changes of
  the checkpointed offsets (log start offset, truncation) write at once (`_on_lso_change`).
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.storage.checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    atomic_write,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from kaflite.storage.cleaner import CleanerThrottle, compact_log
from kaflite.storage.config import LONG_MAX, LogConfig
from kaflite.storage.errors import storage_errors
from kaflite.storage.log import Log, OffsetsMoved, parse_topic_partition

__all__ = ["LogManager", "validate_topic_name", "compaction_overdue"]

_logger = logging.getLogger("kaflite.storage")

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
_MAX_TOPIC_LENGTH = 249
# how often flush_due rewrites the checkpoint files (Kafka: replica.high.watermark.checkpoint.interval.ms)
HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS = 5000
# logs closed at once by close(): their fsyncs overlap in the disk's queue (Kafka closes with
# num.recovery.threads.per.data.dir threads, default 1; docs/storage.md says why kaflite uses more)
IO_THREADS = 8
# at most this many logs opened by one task of load()'s worker threads
LOAD_CHUNK = 64


def validate_topic_name(topic: str) -> None:
    if not topic or topic in (".", ".."):
        raise KafkaError(ErrorCode.invalid_topic_exception, f"topic name {topic!r} is illegal")
    if len(topic) > _MAX_TOPIC_LENGTH:
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f"topic name is {len(topic)} characters long; the maximum is {_MAX_TOPIC_LENGTH}",
        )
    if not _LEGAL_TOPIC.match(topic):
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f"topic name {topic!r} is illegal: allowed characters are ASCII letters, digits, '.', '_' and '-'",
        )


def compaction_overdue(first_batch_timestamps: Iterable[int], now_ms: int, max_compaction_lag_ms: int) -> bool:
    """Kafka's LogCleanerManager.maxCompactionDelay > 0: the earliest first-batch timestamp of the dirty
    sealed segments (non-positive timestamps ignored) is older than now - max.compaction.lag.ms, so the
    log is cleaned whatever its dirty ratio."""
    stamps = [t for t in first_batch_timestamps if t > 0]
    return bool(stamps) and min(stamps) < now_ms - max(max_compaction_lag_ms, 0)


def _log_compaction_overdue(log: Log, now_ms: int) -> bool:
    lag = log.config.max_compaction_lag_ms
    if lag >= LONG_MAX:  # the default: never overdue, and no segment walk
        return False
    with log.lock:
        dirty_sealed = [s for s in log.segments[:-1] if s.next_offset > log.cleaner_checkpoint]
        # Kafka's LogSegment.getFirstBatchTimestamp: the max timestamp of the segment's first batch
        stamps = [s.rolling_based_timestamp for s in dirty_sealed if s.rolling_based_timestamp is not None]
    return compaction_overdue(stamps, now_ms, lag)


def _rmdir(path: Path) -> None:
    try:
        path.rmdir()
    except FileNotFoundError:
        pass
    except OSError:
        shutil.rmtree(path, ignore_errors=True)


def _wall_ms() -> int:
    return int(time.time() * 1000)


LOCK_FILE = ".lock"


class LogDirLockedError(OSError):
    """Another broker (process or LogManager) has this data directory open."""


def _lock_log_dir(directory: Path) -> int:
    """Kafka's `.lock`: an exclusive lock held for as long as the directory is open, so a second broker
    on the same data directory refuses to start instead of corrupting the logs. The kernel drops the lock
    when the holder dies (kill -9 included), so a restart after a crash is never blocked."""
    path = directory / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        os.close(fd)
        if err.errno in (errno.EAGAIN, errno.EACCES):
            raise LogDirLockedError(
                errno.EAGAIN, "another kaflite broker is using this data directory", str(path)
            ) from None
        raise
    return fd


class LogManager:
    def __init__(
        self,
        log_dirs: list[Path] | list[str],
        default_config: LogConfig | None = None,
        now_ms: Callable[[], int] | None = None,
        *,
        cleaner_io_max_bytes_per_second: float = float("inf"),
        io_threads: int = IO_THREADS,
    ) -> None:
        if not log_dirs:
            raise ValueError("LogManager: log_dirs must name at least one directory")
        self.log_dirs = [Path(d).resolve() for d in log_dirs]
        self._lock_fds: list[int] = []
        try:
            for d in self.log_dirs:
                d.mkdir(parents=True, exist_ok=True)
                self._lock_fds.append(_lock_log_dir(d))
        except BaseException:
            self._release_locks()
            raise
        self.default_config = default_config or LogConfig()
        self._now = now_ms or _wall_ms
        self._logs: dict[tuple[str, int], Log] = {}
        self._log_dir_of: dict[tuple[str, int], Path] = {}
        self._lock = threading.RLock()  # the partition table
        self._checkpoint_lock = threading.Lock()  # the checkpoint files
        self._last_checkpoint_ms = 0
        self._written: dict[tuple[Path, str], dict[tuple[str, int], int]] = {}
        self._partitions_per_dir: dict[Path, int] = {}
        self._closed = False
        self._load_failed = False  # set by a load that raised: see close
        # tag -> emptied `-delete` directories, found on load or left by a deletion not yet recorded
        self.pending_deletions: dict[str, list[Path]] = {}
        # deleted partitions whose files wait for file.delete.delay.ms: (when due, log, its `-delete` dir,
        # tag); `_forgotten` holds the `-delete` dirs whose deletion was recorded meanwhile
        self._doomed_logs: list[tuple[int, Log, Path, str | None]] = []
        self._forgotten: set[Path] = set()
        # partitions detached whose directory rename (a worker thread's) has not finished: key -> its event
        self._detaching: dict[tuple[str, int], threading.Event] = {}
        self._renaming: set[Path] = set()
        self.close_problems: list[str] = []
        # the housekeeping queue (rules): logs with work for the pass; a dict for its order and no duplicates
        self._due: dict[Log, None] = {}
        self._due_lock = threading.Lock()  # never held while a Log's lock is taken (a Log queues under its own)
        # set by the logs when a high watermark or recovery point moves, and here when the table changes: the
        # periodic checkpoint (every 5 s) is skipped while nothing moved (rules)
        self._offsets_moved = OffsetsMoved(True)
        if io_threads < 1:
            raise ValueError(f"LogManager: io_threads must be >= 1, not {io_threads}")
        self.io_threads = io_threads
        # log.cleaner.io.max.bytes.per.second: one throttle for every pass, as Kafka's cleaner threads share one
        self.cleaner_throttle = CleanerThrottle(cleaner_io_max_bytes_per_second)

    # ------------------------------------------------------------------------------------------
    def load(self) -> None:
        """Discover `<topic>-<partition>` directories in every log dir and open (recover) each log.

        The logs open in up to `io_threads` worker threads at once: opening one is a handful of small file
        reads (its directory listing, leader-epoch checkpoint, the active segment's indexes, its producer
        snapshot) that mostly wait on the disk, so 10,000 partitions one after another spent most of their
        start waiting (a profile of such a start on a busy disk: 77 s to Metadata, 9 s of it CPU). Which logs
        there are, and the checks between them (one directory per partition across the log dirs), are decided
        before any opens; the table is filled in the listing's order, and every log that opened is in it
        even when another failed (so `close` closes it), the first failure then raised."""
        with self._lock:
            started = time.monotonic()
            jobs: list[tuple[Path, Path, tuple[str, int], bool, int, int, int]] = []
            seen: dict[tuple[str, int], Path] = {}
            markers: list[tuple[Path, bool]] = []
            on_disk: dict[Path, tuple[tuple[str, dict[tuple[str, int], int]], ...]] = {}
            for d in self.log_dirs:
                clean_marker = d / CLEAN_SHUTDOWN_FILE
                clean = clean_marker.exists()
                markers.append((d, clean))
                recovery = read_offset_checkpoint(d / RECOVERY_POINT_CHECKPOINT)
                starts = read_offset_checkpoint(d / LOG_START_OFFSET_CHECKPOINT)
                hws = read_offset_checkpoint(d / HIGH_WATERMARK_CHECKPOINT)
                on_disk[d] = ((RECOVERY_POINT_CHECKPOINT, recovery), (LOG_START_OFFSET_CHECKPOINT, starts),
                              (HIGH_WATERMARK_CHECKPOINT, hws))
                # names as strings, directories told by the listing's entry type (no stat, no Path per
                # entry: 10,000 Paths built, sorted and stat'ed were a tenth of a clean load's CPU)
                with os.scandir(d) as listing:
                    subdirs = sorted(e.name for e in listing if e.is_dir())
                for name in subdirs:
                    if name.endswith("-delete"):
                        sub = d / name
                        self._empty_deleted_dir(sub)
                        tag = name[: -len("-delete")].rpartition(".")[2]
                        self.pending_deletions.setdefault(tag, []).append(sub)
                        continue
                    try:
                        tp = parse_topic_partition(name)
                    except ValueError:
                        continue  # not a partition directory (e.g. a broker's own folder)
                    sub = d / name
                    if tp in seen:
                        raise KafkaError(
                            ErrorCode.kafka_storage_error,
                            f"partition {sub.name} exists in two log dirs: {seen[tp]} and {d}",
                        )
                    seen[tp] = d
                    jobs.append((sub, d, tp, clean, recovery.get(tp, 0), starts.get(tp, 0), hws.get(tp, 0)))

            def open_log(job: tuple[Path, Path, tuple[str, int], bool, int, int, int]) -> Log:
                sub, _d, _tp, clean, recovery_point, log_start_offset, high_watermark = job
                return Log(sub, self.default_config, recovery_point=recovery_point,
                           log_start_offset=log_start_offset, high_watermark=high_watermark,
                           had_clean_shutdown=clean, now_ms=self._now, on_log_start_offset_change=self._on_lso_change,
                           existing=True)

            def open_logs(chunk: list[tuple[Path, Path, tuple[str, int], bool, int, int, int]]) -> list[Log | BaseException]:
                out: list[Log | BaseException] = []
                for job in chunk:
                    try:
                        out.append(open_log(job))
                    except Exception as e:  # re-raised below, once the table holds the logs that opened
                        out.append(e)
                return out

            failure: BaseException | None = None
            if self.io_threads == 1 or len(jobs) < 2:
                opened = open_logs(jobs)
            else:
                # a task opens a run of logs, not one: a future per log cost more than a clean log's open
                # (10,000 submits and results); runs small enough that the threads stay evenly busy
                step = max(1, min(LOAD_CHUNK, -(-len(jobs) // (4 * self.io_threads))))
                chunks = [jobs[i : i + step] for i in range(0, len(jobs), step)]
                with ThreadPoolExecutor(min(self.io_threads, len(chunks)), thread_name_prefix="kaflite-load") as pool:
                    futures = [pool.submit(open_logs, chunk) for chunk in chunks]
                    opened = []
                    for f, chunk in zip(futures, chunks, strict=True):
                        error = f.exception()
                        opened += f.result() if error is None else [error] * len(chunk)
            for job, result in zip(jobs, opened, strict=True):
                if isinstance(result, BaseException):
                    failure = failure or result
                    continue
                _sub, d, tp = job[:3]
                self._logs[tp] = result
                self._log_dir_of[tp] = d
                result.attach_housekeeping(self._queue_housekeeping, self._offsets_moved)
                self._partitions_per_dir[d] = self._partitions_per_dir.get(d, 0) + 1
            if failure is not None:
                # the logs that did not open were not recovered: a close must not write the marker (nor
                # checkpoints naming only the others) that would let the next start skip their recovery
                self._load_failed = True
                raise failure
            for d, clean in markers:
                (d / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
                loaded = [lg for tp, lg in self._logs.items() if self._log_dir_of[tp] == d]
                _logger.info(
                    "loaded %d logs from %s (%.0f ms for all log dirs, %d threads; %s; %d of %d segments opened "
                    "lazily, read on first use)",
                    len(loaded), d, (time.monotonic() - started) * 1000, self.io_threads,
                    "clean shutdown" if clean else
                    f"no clean-shutdown marker: {sum(1 for lg in loaded if lg.recovered)} recovered" if loaded else
                    "empty",
                    sum(lg.lazy_at_open for lg in loaded), sum(len(lg.segments) for lg in loaded),
                )
            # the checkpoint files as read count as written: only those the load changed (a recovery, an
            # offset clamped, a partition gone) are rewritten, not three files of 10,000 lines with their
            # fsyncs at every clean start; a full disk must not stop the broker from starting
            for d, files in on_disk.items():
                for name, offsets in files:
                    self._written[(d, name)] = offsets
            self._checkpoint_quietly()

    # ------------------------------------------------------------------------------------------
    def get_or_create(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        pending = self._detaching.get((topic, partition))
        if pending is not None:  # recreated right after its deletion: the old directory must be renamed first
            pending.wait(30)
        with self._lock:
            key = (topic, partition)
            log = self._logs.get(key)
            if log is not None:
                if config is not None and config != log.config:
                    log.update_config(config)
                return log
            if self._closed:
                raise KafkaError(ErrorCode.kafka_storage_error, "the log manager is closed")
            validate_topic_name(topic)
            if partition < 0:
                raise KafkaError(ErrorCode.invalid_partitions, f"partition {partition} must be >= 0")
            counts = self._partitions_per_dir  # kept up to date: O(1) per new partition, not O(partitions)
            target = min(self.log_dirs, key=lambda d: counts.get(d, 0))
            try:
                log = Log(
                    target / f"{topic}-{partition}",
                    config or self.default_config,
                    now_ms=self._now,
                    on_log_start_offset_change=self._on_lso_change,
                )
            except OSError as e:  # out of descriptors or space: the request gets a clear error, not a hang-up
                storage_errors.report(f"{topic}-{partition}", "opening the log", e)
                raise KafkaError(ErrorCode.kafka_storage_error,
                                 f"cannot open the log of {topic}-{partition}: {e.strerror or e}") from e
            self._logs[key] = log
            self._log_dir_of[key] = target
            counts[target] = counts.get(target, 0) + 1
            log.attach_housekeeping(self._queue_housekeeping, self._offsets_moved)
            self._offsets_moved.value = True  # a new entry in the checkpoints
            return log

    def _queue_housekeeping(self, log: Log) -> None:
        """A log's callback (Log rules): it has work for the housekeeping pass."""
        with self._due_lock:
            self._due[log] = None

    def _take_due(self) -> list[Log]:
        """The queued logs, the queue emptied; each log's flag is cleared here, under the queue's lock and
        before the pass reads the log, so a change after this queues it again (Log rules)."""
        with self._due_lock:
            due = list(self._due)
            self._due.clear()
            for log in due:
                log._hk_queued = False  # noqa: SLF001 - the queue's half of the flag (Log rules)
        return due

    def _in_table(self, log: Log) -> bool:
        """Still this manager's (not deleted: a detached log's files are the deletion's, `_delete_due_logs`).
        One dict read without the lock (the pass runs in a worker thread; a stale answer is one pass late)."""
        return self._logs.get((log.topic, log.partition)) is log

    def _requeue(self, log: Log) -> None:
        if log.housekeeping_wanted() and self._in_table(log):
            with self._due_lock:
                log._hk_queued = True  # noqa: SLF001
                self._due[log] = None

    @property
    def queued_for_housekeeping(self) -> int:
        """How many logs the next housekeeping pass visits (tests, benchmarks)."""
        return len(self._due)

    def get(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def logs(self) -> dict[tuple[str, int], Log]:
        with self._lock:
            return dict(self._logs)

    def _snapshot(self) -> list[Log]:
        """The logs now (the housekeeping passes run in a worker thread while the loop creates and
        deletes partitions)."""
        with self._lock:
            return list(self._logs.values())

    def delete(self, topic: str, partition: int, tag: str | None = None) -> None:
        """Remove a partition's log: rename its directory to `<dir>.<tag>-delete`, remove the files in it
        (space is freed here, even when the disk is full), keep the emptied directory as a marker until
        `forget_deletions(tag)`. Without a tag the marker goes at once."""
        work = self.detach(topic, partition, tag)
        if work is not None:
            work()

    def detach(self, topic: str, partition: int, tag: str | None = None) -> Callable[[], None] | None:
        """The first half of `delete`, cheap and without file work: the partition leaves the table now (the
        broker's event loop calls this); the returned callable renames its directory (the file work, which
        the broker runs in a worker thread). Until it has run, `get_or_create` of the same partition waits
        for it (the new log must not open the old directory). None: no such partition."""
        with self._lock:
            key = (topic, partition)
            log = self._logs.pop(key, None)
            where = self._log_dir_of.pop(key, None)
            if where is not None:
                self._partitions_per_dir[where] -= 1
            if log is None:
                return None
            doomed = log.dir.with_name(f"{topic}-{partition}.{tag or uuid.uuid4().hex}-delete")
            if tag is not None:
                self.pending_deletions.setdefault(tag, []).append(doomed)
            renamed = self._detaching[key] = threading.Event()
            self._renaming.add(doomed)

        def rename() -> None:
            # file work outside the manager lock (lock order: a Log's lock may call back into checkpoint())
            try:
                log.rename_dir_for_deletion(doomed)
                with self._lock:
                    self._doomed_logs.append((self._now() + self.default_config.file_delete_delay_ms, log, doomed,
                                              tag))
            finally:
                with self._lock:
                    self._renaming.discard(doomed)
                    if self._detaching.get(key) is renamed:
                        del self._detaching[key]
                renamed.set()
            _logger.info("deleted log %s-%d (its files go in %d ms)", topic, partition,
                         self.default_config.file_delete_delay_ms)
            # the checkpoints are rewritten by the next flush_due (an entry of a deleted partition is ignored
            # on load): one rewrite per partition would make deleting a topic of N partitions O(N^2)
            self._checkpoint_soon()

        return rename

    def truncate_logs(self, targets: Iterable[tuple[Log, int]]) -> list[Log]:
        """Kafka's LogManager.truncateTo: truncate each log to its offset, then write the checkpoints once
        (the lowered recovery points), not once per log: a failover truncating N partitions rewrote every
        checkpoint file N times (O(N^2)). File work: run it in a worker thread. Returns the truncated logs."""
        truncated = [lg for lg, offset in targets if lg.truncate_to(offset, checkpoint=False)]
        if truncated and not self._checkpoint_quietly():
            self._checkpoint_soon()
        return truncated

    def forget_deletions(self, tag: str) -> None:
        """The caller recorded the deletion (metadata written): the marker directories go (those whose
        files still wait for file.delete.delay.ms go with their files)."""
        with self._lock:
            paths = self.pending_deletions.pop(tag, [])
            # a directory still being renamed counts as waiting: its files go with the due ones
            waiting = {d for _when, _log, d, _tag in self._doomed_logs} | self._renaming
            self._forgotten.update(p for p in paths if p in waiting)
        for path in paths:
            if path not in waiting:
                _rmdir(path)

    def _delete_due_logs(self, now: int, *, all_of_them: bool = False) -> int:
        """Remove the files of the partitions deleted at least file.delete.delay.ms ago."""
        with self._lock:
            due = [d for d in self._doomed_logs if all_of_them or d[0] <= now]
            self._doomed_logs = [d for d in self._doomed_logs if not (all_of_them or d[0] <= now)]
        for _when, log, doomed, tag in due:
            log.delete_files()
            self._empty_deleted_dir(doomed)
            with self._lock:
                forgotten = doomed in self._forgotten
                self._forgotten.discard(doomed)
            if tag is None or forgotten:
                _rmdir(doomed)
        return len(due)

    @staticmethod
    def _empty_deleted_dir(path: Path) -> None:
        for child in list(path.iterdir()) if path.is_dir() else []:
            if child.is_dir():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)

    # ------------------------------------------------------------------------------------------
    def run_retention(self, now_ms: int | None = None) -> int:
        """Delete segments past retention in every log; returns how many segments were deleted."""
        now = self._now() if now_ms is None else now_ms
        deleted = 0
        for log in self._snapshot():
            if not log.closed and log.segment_count > 1:  # never the active segment: one has nothing to delete
                try:
                    deleted += log.delete_old_segments(now)
                except OSError as e:
                    storage_errors.report(log.dir.name, "retention", e)
        if deleted:
            self._checkpoint_quietly(force=True)
        return deleted

    def delete_due_segments(self, now_ms: int | None = None) -> int:
        """Remove the files of the segments deleted (renamed `.deleted`) and of the partitions deleted at
        least file.delete.delay.ms ago; returns how many segments and partitions. Run by the housekeeping
        thread at every pass."""
        now = self._now() if now_ms is None else now_ms
        removed = 0
        if self._doomed_logs:
            try:
                removed += self._delete_due_logs(now)
            except OSError as e:  # the load after a restart empties `-delete` directories
                storage_errors.report("deleted partitions", "deletion", e)
        with self._due_lock:  # a log with doomed segments is queued until they are gone (Log rules)
            queued = list(self._due)
        for log in queued:
            if log.doomed_segments and self._in_table(log):
                try:
                    removed += log.delete_due_segments(now)
                except OSError as e:  # retried at the next pass; a restart removes `.deleted` files too
                    storage_errors.report(log.dir.name, "segment deletion", e)
        if removed:
            # space was freed: on a full disk the checkpoint written when the log start offset moved may
            # have failed, and records deleted by DeleteRecords must not come back after a restart
            self._checkpoint_quietly(force=True)
        return removed

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Forget, in every log, the producers idle for longer than producer.id.expiration.ms (Kafka's
        check every producer.id.expiration.check.interval.ms); returns how many were forgotten."""
        now = self._now() if now_ms is None else now_ms
        return sum(log.remove_expired_producers(now) for log in self._snapshot() if not log.closed)

    def run_compaction(self, now_ms: int | None = None) -> int:
        """Compact every log whose cleanup.policy includes compact and that is dirty enough, or overdue
        by max.compaction.lag.ms; returns the number of logs cleaned."""
        now = self._now() if now_ms is None else now_ms
        cleaned = 0
        for log in self._snapshot():
            try:
                if not log.closed and log.config.compact and compact_log(
                    log, now, force=_log_compaction_overdue(log, now), throttle=self.cleaner_throttle
                ).cleaned:
                    cleaned += 1
            except OSError as e:  # the swap protocol leaves the segment as it was
                storage_errors.report(log.dir.name, "compaction", e)
        return cleaned

    def flush_due(self, now_ms: int | None = None) -> int:
        """Flush the segments rolled since the last pass and the logs whose flush.ms elapsed (or with
        flush.messages unflushed messages), of the queued logs (rules); refresh the checkpoint files after a
        flush and every 5 s when an offset moved (Kafka's replica.high.watermark.checkpoint.interval.ms).
        Returns the number of logs flushed."""
        now = self._now() if now_ms is None else now_ms
        flushed = 0
        for log in self._take_due():  # only the queued logs (rules): an idle partition is not visited
            if not self._in_table(log):  # deleted since it queued itself
                continue
            if not log.housekeeping_idle(now):  # (no lock taken: a log waiting for flush.ms has nothing due)
                try:
                    log.sync_snapshots()  # the producer snapshots of the rolls since the last pass (Log's rules)
                    log.write_pending_epochs()  # a new epoch's first batch (never written on the appending thread)
                    rolled = log.flush_rolled()  # Kafka's flush on roll: the recovery point moves to the new base
                    flushed += log.flush_due(now) or rolled
                except OSError as e:
                    storage_errors.report(log.dir.name, "flush", e)
            self._requeue(log)
        # every 5 s, if an offset moved since the last write: building the three files' contents of 10,000
        # logs to find them unchanged cost 31 ms (0.6% of a core for an idle broker)
        if flushed or (now - self._last_checkpoint_ms >= HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS
                       and self._offsets_moved.value):
            self._offsets_moved.value = False  # before reading the offsets: a move meanwhile sets it again
            self._checkpoint_quietly()  # (a failure sets it again)
            self._last_checkpoint_ms = now
        return flushed

    def _checkpoint_soon(self) -> None:
        """The next `flush_due` rewrites the checkpoints (a failed write, a table change)."""
        self._last_checkpoint_ms = 0
        self._offsets_moved.value = True

    def _checkpoint_quietly(self, *, force: bool = False) -> bool:
        try:
            self.checkpoint(force=force)
            return True
        except OSError as e:  # retried by the next periodic one; the previous files stay valid (atomic)
            storage_errors.report(f"{e.filename or self.log_dirs[0]}", "offset checkpoint", e)
            self._offsets_moved.value = True
            return False

    def checkpoint(self, *, force: bool = False) -> None:
        """Rewrite each log dir's recovery-point, log-start-offset and high-watermark checkpoints
        (only the files whose content changed, unless force).

        Lock order: the manager lock is held only to copy the partition table; the files are written
        under a separate lock, and no Log lock is taken (the offsets are read as plain ints), so a Log
        holding its own lock may call this (on a log start offset change) without deadlock."""
        with self._lock:
            placement = {tp: (self._log_dir_of[tp], log) for tp, log in self._logs.items()}
        by_dir: dict[Path, dict[tuple[str, int], Log]] = {d: {} for d in self.log_dirs}
        for tp, (ld, log) in placement.items():  # one pass, not one per log dir
            by_dir[ld][tp] = log
        with self._checkpoint_lock:
            for d in self.log_dirs:
                members = by_dir[d]
                for name, value in (
                    (RECOVERY_POINT_CHECKPOINT, lambda lg: lg.recovery_point),
                    (LOG_START_OFFSET_CHECKPOINT, lambda lg: lg.log_start_offset),
                    (HIGH_WATERMARK_CHECKPOINT, lambda lg: lg.high_watermark),
                ):
                    offsets = {tp: int(value(lg)) for tp, lg in members.items()}
                    if force or self._written.get((d, name)) != offsets:
                        write_offset_checkpoint(d / name, offsets)
                        self._written[(d, name)] = offsets

    def _on_lso_change(self, log: Log) -> None:
        # a moved log start offset must survive a crash, or deleted records would come back; a lowered
        # recovery point (truncation) too, or a stale one would skip a needed rescan
        # On a full disk the checkpoint cannot be written before the segments are deleted (which is what
        # frees the space): it is reported, and retried by the next flush_due, within a second.
        if (log.topic, log.partition) in self._logs and not self._checkpoint_quietly():
            self._checkpoint_soon()

    def flush(self) -> None:
        for log in self._snapshot():
            if not log.closed:
                log.flush()
        self.checkpoint()

    def close(self, *, clean: bool = True) -> None:
        """Close every log and release the directories. `clean=False` writes neither the checkpoints nor
        the clean-shutdown marker, so the next load recovers every log as after a crash (tests, tools); a
        manager whose `load` failed closes so too (a failed start: the logs that did not open were not
        recovered, and a marker would let the next start trust them)."""
        clean = clean and not self._load_failed
        with self._lock:
            if self._closed:
                return
            self._closed = True
            logs = list(self._logs.values())
            renaming = list(self._detaching.values())
        for event in renaming:  # a deletion's rename still running in a worker thread: its log is closed by it
            event.wait(30)
        problems: list[str] = []
        try:
            try:  # deleted partitions waiting for file.delete.delay.ms go now (no descriptor left open)
                self._delete_due_logs(0, all_of_them=True)
            except OSError as e:
                problems.append(f"deleted partitions: {e.strerror or e}")
            problems += self._close_logs(logs)
            if clean:
                try:
                    self.checkpoint(force=True)
                except OSError as e:
                    problems.append(f"offset checkpoints in {e.filename or self.log_dirs[0]}: {e.strerror or e}")
                unflushed = [log.dir.name for log in logs if not log.flushed_at_close]
                if unflushed:  # no marker: the next start recovers these logs from their recovery points
                    problems.append(f"clean-shutdown marker not written: {len(unflushed)} log(s) could not be "
                                    f"flushed or their indexes written ({', '.join(unflushed[:5])}{', ...' if len(unflushed) > 5 else ''})")
                else:
                    for d in self.log_dirs:
                        try:
                            atomic_write(d / CLEAN_SHUTDOWN_FILE, b"")
                        except OSError as e:
                            problems.append(f"clean-shutdown marker in {d}: {e.strerror or e}")
        finally:
            self._release_locks()
            self.close_problems = problems
            if problems:
                _logger.warning("closed the logs; %d thing(s) could not be written (the next start recovers or "
                             "rebuilds them): %s%s", len(problems), "; ".join(problems[:10]),
                             f"; and {len(problems) - 10} more" if len(problems) > 10 else "")

    def _close_logs(self, logs: list[Log]) -> list[str]:
        """Close every log, `io_threads` at a time: a log's close waits mostly on its fsyncs (several per
        log, which release the GIL), so one after another a clean stop of 2,000 partitions took 5-27 s on a
        busy disk; several in flight share the device's queue. Problems come back in the logs' order."""
        if self.io_threads == 1 or len(logs) < 2:
            return [p for log in logs for p in log.close()]
        with ThreadPoolExecutor(min(self.io_threads, len(logs)), thread_name_prefix="kaflite-close") as pool:
            return [p for problems in pool.map(Log.close, logs) for p in problems]

    def _release_locks(self) -> None:
        for fd in self._lock_fds:
            os.close(fd)  # closing the descriptor releases its flock
        self._lock_fds.clear()
