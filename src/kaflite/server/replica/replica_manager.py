"""ReplicaManager: the partitions this broker hosts, and the one door every per-partition request goes through
(Kafka's `server.ReplicaManager`).

Rules:
- the hosted partitions follow the metadata image (`on_image(old, new)`, subscribed to the broker's one
  metadata writer): a partition whose replicas include this broker gets a `Partition` with its local `Log`
  (opened or created) and the image's leader / ISR / epochs; a partition that left the image, or whose
  replicas no longer include this broker, is stopped and its log deleted (it leaves the log table at once;
  its directory's rename runs in a worker thread, not on the event loop; `stop_replicas`, the single node's
  topic deletion, renames before returning: its metadata file is written after the renames); a topic the image did not change
  (the same `TopicImage` object) is skipped, so an image change costs O(changed partitions); the logs of
  a topic about to be published can be created beforehand by `prepare_logs`' callable, in a worker thread
  (the single node's CreateTopics), and the image then finds them open: no file work on the loop;
- in a cluster (`open_logs_off_loop`, set by the Broker once started) a hosted partition whose log is not
  open yet (a new replica: a directory to create, its files to open) is not created on the event loop: it
  is queued, and a worker thread opens the queued logs OPEN_SLICE per call, one call at a time, in
  queue order; until its log is open the partition is not in `partitions` (`get_partition`:
  NOT_LEADER_OR_FOLLOWER, "being opened"; no fetcher follows it). Once open, on the loop, it takes the
  state of the image applied by then (`self.image`), never the state of the image that queued it: a leader
  epoch bump or an ISR change meanwhile is applied once, newest first; an image that no longer hosts it
  drops it from the queue (no file work done yet) or, when its open is in flight, has the new log deleted
  once open (the rename in a worker thread); an image applied twice queues it once. The `opened_listeners`
  are called after each slice (the fetchers follow the new partitions). The internal topics'
  (`INTERNAL_TOPICS`) logs open on the loop, in `on_image`: the coordinators subscribed after this
  manager load their partitions in the same image's notification;
- `get_partition(topic, partition, require_leader, current_leader_epoch)` is the only place the access
  errors are decided, for Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords and the group
  coordinator: a partition the image does not know is UNKNOWN_TOPIC_OR_PARTITION; one it knows but this
  broker does not host is NOT_LEADER_OR_FOLLOWER; then the partition's own checks (FENCED_LEADER_EPOCH /
  UNKNOWN_LEADER_EPOCH for a stale or future current leader epoch, NOT_LEADER_OR_FOLLOWER when the request
  needs the leader) — in Kafka's order (`getPartitionOrException`, `localLogWithEpochOrThrow`);
- `append_records` appends as leader (internal topics only when allowed: the coordinators) and wakes the
  fetchers of the partition; an I/O error becomes KAFKA_STORAGE_ERROR (logged) and the broker lives on; in
  a cluster, nothing (records nor transaction markers) is appended while `leadership_confirmed()` says a
  pause of the process may have cost this broker its leaderships (NOT_LEADER_OR_FOLLOWER);
- acks=-1 completes through the purgatory: `wait_committed` answers at once when the high watermark
  already passed the batch (always, with one replica: it moves on the append, after the fsync in
  flush-before-ack mode), else waits on `produce_key(t, p)`, completed whenever the partition's high
  watermark moves, until the request's timeout (REQUEST_TIMED_OUT); `wait_all_committed` does it for
  every partition of a request at once (Kafka's DelayedProduce): one waiter on the keys still pending, one
  deadline, each partition answered its own code (REQUEST_TIMED_OUT for those pending at the deadline);
- `append_committed` is the coordinators' door (Kafka's CoordinatorRuntime writes with acks=-1): append to
  an internal topic and resolve once the records are committed, or raise the KafkaError that says why not.
- a follower's fetch (`record_follower_fetch`) records its log end offset and catch-up time on the leader's
  Partition; a moved high watermark wakes the acks=-1 produces and the fetchers; a follower that caught up
  rejoins the ISR; `maybe_shrink_isr` (every replica.lag.time.max.ms / 2) drops members not caught up for
  `replica.lag.time.max.ms`. An ISR change is written by `isr_writer` (in a cluster: a compare-and-set on
  the state znode at the partition epoch this broker holds, then /isr_change_notification, as Kafka's
  ZooKeeper-mode leaders do) and applied only once written: a stale version is not applied (the
  newer state comes with the next image). The change in flight is the Partition's state (`propose_isr` /
  `complete_isr_change`): one per partition, the replica it adds counted in the high watermark from the
  proposal on, and after a refused or failed write none for ISR_RETRY_BACKOFF_MS unless a newer state
  arrives; none without a writer (single node: the ISR is the leader alone).
- DeleteRecords (Kafka's DelayedDeleteRecords): a follower's fetch also tells its log start offset
  (`record_follower_log_starts`, kept only while this broker leads, forgotten on a new leader epoch); the
  low watermark (`low_watermark`, Kafka's lowWatermarkIfLeader) is the smallest log start offset among the
  leader and every other replica whose broker is alive in the image, -1 for one not heard from since this
  broker became leader; `wait_low_watermark` answers once it reached the deleted offset, on leadership loss
  (NOT_LEADER_OR_FOLLOWER) or at the request's timeout (REQUEST_TIMED_OUT), woken on `delete_records_key`
  whenever a follower's reported log start offset changes.
All of it runs on the broker's event loop thread, except the queued logs' opening (above).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kaflite.cluster.metadata import INTERNAL_TOPICS, MetadataImage, TopicImage
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.purgatory import Purgatory
from kaflite.server.replica.partition import ISR_RETRY_BACKOFF_MS, Partition, PartitionState
from kaflite.storage.log import AppendResult

__all__ = ["ReplicaManager", "TopicSettings", "delete_records_key", "fetch_key", "produce_key"]

log = logging.getLogger("kaflite.server")

TopicPartition = tuple[str, int]
# writes a new ISR for a partition whose state this broker holds: the state as written (its new partition
# epoch), or None when the write was refused (stale version, leadership moved)
IsrWriter = Callable[[str, int, PartitionState, tuple[int, ...]], Awaitable[PartitionState | None]]


def fetch_key(topic: str, partition: int) -> tuple[str, str, int]:
    """Purgatory key of fetches waiting for data on a partition (completed on every append)."""
    return ("fetch", topic, partition)


def produce_key(topic: str, partition: int) -> tuple[str, str, int]:
    """Purgatory key of acks=-1 produce requests waiting for a partition's high watermark."""
    return ("produce", topic, partition)


def _logged(work: Callable[[], None], what: str) -> Callable[[], None]:
    """`work`, an OSError of which is logged instead of raised (it runs in a worker thread)."""
    def run() -> None:
        try:
            work()
        except OSError as e:
            log.error("%s failed: %s", what, e)
    return run


# New replicas' logs opened per worker-thread call (cluster images; see the rules): opening a new log creates
# its directory and files, 0.25 ms on a quiet machine and several ms under load; 200 new partitions in one
# image held the loop 0.5-0.7 s in a loaded cluster when they were opened in `on_image`. A slice is attached
# on the loop at once when its call returns (cheap: no file work), so the loop is never held longer than
# that for a slice, and the partitions of an image of thousands become usable slice by slice.
OPEN_SLICE = 32


def _open_logs(manager: Any, jobs: list[tuple[TopicPartition, Any]]) -> list[tuple[TopicPartition, Any]]:
    """In a worker thread: open (create) each log; each one's Log, or the exception that failed it."""
    out: list[tuple[TopicPartition, Any]] = []
    for (topic, partition), config in jobs:
        try:
            out.append(((topic, partition), manager.get_or_create(topic, partition, config)))
        except (KafkaError, OSError) as e:
            out.append(((topic, partition), e))
    return out


def delete_records_key(topic: str, partition: int) -> tuple[str, str, int]:
    """Purgatory key of DeleteRecords requests waiting for a partition's low watermark."""
    return ("delete_records", topic, partition)


@dataclass(frozen=True, slots=True)
class TopicSettings:
    """What a partition needs from its topic's effective configuration."""

    log_config: Any  # storage.LogConfig
    min_insync_replicas: int = 1
    codec: int | None = None  # the codec batches are stored in (None: as produced)


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        log_manager: Any,  # storage.LogManager
        purgatory: Purgatory,
        now_ms: Callable[[], int],
        topic_settings: Callable[[TopicImage], TopicSettings],
    ) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.purgatory = purgatory
        self.now_ms = now_ms
        self._topic_settings = topic_settings
        self.partitions: dict[TopicPartition, Partition] = {}
        self.image = MetadataImage()  # the last image applied
        self._delayed_produces = 0  # acks=-1 requests waiting in wait_committed (appends skip the wake-up
        # of produce keys while there are none)
        self.isr_writer: IsrWriter | None = None  # set in a cluster (the Broker); None: the ISR never changes
        # set in a cluster (ZkMetadata.leadership_confirmed): False after a pause of the process that may
        # have cost this broker its leaderships, until ZooKeeper confirmed them; appends wait for it
        self.leadership_confirmed: Callable[[], bool] | None = None
        self.replica_lag_time_max_ms = 30_000
        self._isr_in_flight: dict[TopicPartition, asyncio.Task[None]] = {}
        # per led partition, each follower's log start offset as its last fetch said (DeleteRecords' low
        # watermark); kept here rather than on the Partition, forgotten on a new leader epoch
        self._follower_log_start: dict[TopicPartition, dict[int, int]] = {}
        self._delayed_deletes = 0  # DeleteRecords requests waiting in wait_low_watermark
        # in a cluster (set by the Broker after the start's first image, which opens every log on the loop
        # before anything is served): new replicas' logs open in a worker thread (see the rules)
        self.open_logs_off_loop = False
        self._open_queue: dict[TopicPartition, None] = {}  # logs to open, in image order (a dict: ordered set)
        self._opening: set[TopicPartition] = set()  # logs being opened by the worker-thread call in flight
        self._opener: asyncio.Task[None] | None = None
        self._stopped = False
        # called on the loop after each slice of logs opened and attached (the replica fetchers follow them)
        self.opened_listeners: list[Callable[[], None]] = []

    # -- following the metadata image -----------------------------------------------------------------
    def on_image(self, _old: MetadataImage | None, new: MetadataImage) -> None:
        applied = self.image
        for name, topic in new.topics.items():
            before = applied.topics.get(name)
            if before is topic:
                continue
            if before is not None and before.topic_id != topic.topic_id:  # deleted and created again
                self._stop_topic(before)
            self._apply_topic(topic)
        for name, topic in applied.topics.items():
            if name not in new.topics:
                self._stop_topic(topic)
        self.image = new

    def reapply_settings(self) -> None:
        """Recompute every hosted partition's settings from the current broker configuration (a dynamic
        broker config changed a topic default): each log whose config differs gets the new one now."""
        for topic in self.image.topics.values():
            settings = self._topic_settings(topic)
            for index in range(topic.num_partitions):
                part = self.partitions.get((topic.name, index))
                if part is None:
                    continue
                if part.log is not None and part.log.config != settings.log_config:
                    part.log.update_config(settings.log_config)
                part.min_insync_replicas = settings.min_insync_replicas
                part.codec = settings.codec
                if part.is_leader:
                    part.maybe_increment_high_watermark()  # min.insync.replicas may have been lowered

    def _apply_topic(self, topic: TopicImage) -> None:
        settings = self._topic_settings(topic)
        name = topic.name
        defer = self.open_logs_off_loop and not self._stopped and name not in INTERNAL_TOPICS
        for index, reg in enumerate(topic.partitions):
            key = (name, index)
            part = self.partitions.get(key)
            if self.broker_id not in reg.replicas:
                if part is not None:
                    self._stop_partition(key, delete=True)
                self._open_queue.pop(key, None)  # not opened yet: nothing to undo (one in flight: _attach)
                continue
            if part is None and (key in self._open_queue or key in self._opening):
                continue  # being opened: it takes the state of the image applied by then (_attach_opened)
            plog = self.log_manager.get(name, index) if self.log_manager is not None else None
            if part is None and plog is None and defer and self.log_manager is not None:
                self._queue_open(key)
                continue
            self._host(key, reg, settings, plog)

    def _host(self, key: TopicPartition, reg: Any, settings: TopicSettings, plog: Any) -> None:
        """Host `key` (its Partition created when new) with `reg`'s state; `plog`: its log when open (else
        opened here, on the caller's thread)."""
        name, index = key
        part = self.partitions.get(key)
        if part is None:
            part = self.partitions[key] = Partition(name, index, self.broker_id)
        if self.log_manager is not None:
            if plog is None:  # get_or_create also applies a changed config
                plog = self.log_manager.get_or_create(name, index, settings.log_config)
            elif plog.config != settings.log_config:
                plog.update_config(settings.log_config)
            part.log = plog
        part.min_insync_replicas = settings.min_insync_replicas
        part.codec = settings.codec
        hw = part.high_watermark
        led = (part.is_leader, part.leader_epoch)
        part.apply_state(PartitionState(reg.leader, reg.leader_epoch, reg.partition_epoch, reg.replicas, reg.isr,
                                        reg.removing))
        if part.is_leader:
            part.note_leadership_start(self.now_ms())
            if not led[0] or part.leader_epoch != led[1]:  # Kafka resets the replicas' state on makeLeader
                self._follower_log_start.pop(key, None)
            part.maybe_increment_high_watermark()  # min.insync.replicas may have been lowered
        # a leadership lost (or a new leader epoch) answers the parked acks=-1 produces and long-polling
        # fetches now (NOT_LEADER_OR_FOLLOWER: the client follows the new leader), as Kafka's makeFollowers
        # completes its delayed operations; left parked, they would wait for the request timeout
        if part.high_watermark != hw or (led[0] and (part.is_leader, part.leader_epoch) != led):
            self._high_watermark_moved(part)

    # -- new replicas' logs, opened in a worker thread (cluster images; see the rules) ---------------------
    def _queue_open(self, key: TopicPartition) -> None:
        self._open_queue[key] = None
        if self._opener is None or self._opener.done():
            self._opener = asyncio.ensure_future(self._open_queued())

    async def _open_queued(self) -> None:
        """Open the queued logs, OPEN_SLICE per worker-thread call, one call at a time; attach each slice on
        the loop when its call returns."""
        manager = self.log_manager
        loop = asyncio.get_running_loop()
        while self._open_queue and not self._stopped and manager is not None:
            keys = list(self._open_queue)[:OPEN_SLICE]
            jobs = []
            for key in keys:
                del self._open_queue[key]
                topic = self.image.topics.get(key[0])
                if topic is None:  # cannot be (an image without it dequeued it): nothing to open
                    continue
                # the config as of now; one changed by a later image is applied when attached
                jobs.append((key, self._topic_settings(topic).log_config))
            self._opening.update(key for key, _c in jobs)
            try:
                opened = await loop.run_in_executor(None, _open_logs, manager, jobs)
            except Exception:  # noqa: BLE001 - no worker thread (the loop closing): a later image queues them again
                log.exception("opening %d log(s) failed", len(jobs))
                continue
            finally:
                self._opening.difference_update(key for key, _c in jobs)
            self._attach_opened(opened)

    def _attach_opened(self, opened: list[tuple[TopicPartition, Any]]) -> None:
        """On the loop: host each partition whose log the worker opened (`Log`, or the exception that failed
        it), with the state of the image applied now."""
        attached = 0
        for key, plog in opened:
            if isinstance(plog, BaseException):
                # as a failed open in on_image: no replica here until an image changes the topic again
                log.error("opening the log of %s-%d failed: %s", key[0], key[1], plog)
                continue
            topic = self.image.topics.get(key[0])
            reg = topic.partitions[key[1]] if topic is not None and key[1] < topic.num_partitions else None
            if reg is None or self.broker_id not in reg.replicas:
                # the image that queued it is gone (the partition moved away or its topic was deleted): the
                # new log goes, as a stopped partition's (it was empty: nothing served it)
                if self.log_manager is not None and self.log_manager.get(*key) is plog:
                    work = self.log_manager.detach(key[0], key[1])
                    if work is not None:
                        self._run_file_work(work, f"deleting log {key[0]}-{key[1]}")
                continue
            if key in self.partitions:  # cannot be (hosted only here once queued); never replace a live one
                continue
            assert topic is not None
            self._host(key, reg, self._topic_settings(topic), plog)
            attached += 1
        if attached:
            for listener in list(self.opened_listeners):
                try:
                    listener()
                except Exception:  # noqa: BLE001 - one listener must not stop the others
                    log.exception("a listener of the opened partitions failed")

    def opening(self, topic: str, partition: int) -> bool:
        """The partition's log is queued or being opened (not served yet)."""
        key = (topic, partition)
        return key in self._open_queue or key in self._opening

    async def stop(self) -> None:
        """Open no more logs (the broker is stopping): waits for the worker-thread call in flight, whose
        logs the LogManager then closes with the others."""
        self._stopped = True
        self._open_queue.clear()
        opener = self._opener
        if opener is not None and not opener.done():
            try:
                await opener
            except Exception:  # noqa: BLE001 - stopping: the logs are closed by the LogManager
                pass

    def prepare_logs(self, topic: TopicImage) -> Callable[[], None] | None:
        """The file work of hosting `topic`, not yet in the image: a callable that creates the logs of its
        partitions this broker holds, with the configs `on_image` will give them (the caller runs it in a
        worker thread, then publishes the image: `_apply_topic` finds every log open). None: no logs here."""
        if self.log_manager is None:
            return None
        manager, name = self.log_manager, topic.name
        config = self._topic_settings(topic).log_config  # computed here: the settings are the loop's
        mine = [index for index, reg in enumerate(topic.partitions) if self.broker_id in reg.replicas]

        def create() -> None:
            for index in mine:
                if manager.get(name, index) is None:  # one already open is the image's: its config stays
                    manager.get_or_create(name, index, config)

        return create

    def _stop_topic(self, topic: TopicImage) -> None:
        for index in range(topic.num_partitions):
            self._stop_partition((topic.name, index), delete=True)

    def stop_replicas(self, topic: TopicImage, deletion_tag: str | None = None) -> None:
        """Stop hosting every partition of `topic` and delete their logs now, before the image says so
        (Kafka's stopReplicas with delete: renamed at once, files removed after log.segment.delete.delay.ms).
        `deletion_tag` leaves each directory as a marker until `LogManager.forget_deletions`. The renames
        happen here, before returning: the single node's caller writes its metadata file after them (logs
        first, so a crash in between leaves markers the next start completes, never a live directory of a
        topic the metadata no longer has)."""
        for index in range(topic.num_partitions):
            self._stop_partition((topic.name, index), delete=True, tag=deletion_tag, inline=True)

    def detach_replicas(self, topic: TopicImage, deletion_tag: str) -> list[Callable[[], None]]:
        """`stop_replicas` without its file work: every partition of `topic` is stopped and leaves the log
        table now; the returned callables rename their directories (the caller runs them in a worker thread,
        then writes its metadata)."""
        works: list[Callable[[], None]] = []
        for index in range(topic.num_partitions):
            self._stop_partition((topic.name, index), delete=True, tag=deletion_tag, works=works)
        return works

    def _stop_partition(self, key: TopicPartition, *, delete: bool, tag: str | None = None,
                        inline: bool = False, works: list[Callable[[], None]] | None = None) -> None:
        self._open_queue.pop(key, None)  # queued, not opened yet: nothing to undo
        part = self.partitions.pop(key, None)
        if part is None:
            return
        if delete and self.log_manager is not None:
            # the partition leaves the log table now; its directory's rename (file work) runs in a worker
            # thread, not on the event loop (a topic of 200 partitions was 200 renames in one loop turn),
            # unless the caller needs it done first (`inline`, stop_replicas)
            work = self.log_manager.detach(key[0], key[1], tag)
            if work is not None and works is not None:
                works.append(_logged(work, f"deleting log {key[0]}-{key[1]}"))
            elif work is not None:
                self._run_file_work(work, f"deleting log {key[0]}-{key[1]}", inline=inline)
        part.log = None
        self._follower_log_start.pop(key, None)
        # waiters re-check and find the partition gone
        self.purgatory.complete(fetch_key(*key))
        self.purgatory.complete(produce_key(*key))
        self.purgatory.complete(delete_records_key(*key))

    @staticmethod
    def _run_file_work(work: Callable[[], None], what: str, *, inline: bool = False) -> None:
        """`work` in a worker thread when an event loop runs here (and not `inline`), else now; a failure is
        logged."""
        run = _logged(work, what)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            inline = True
        if inline:
            run()
            return
        loop.run_in_executor(None, run)

    def _high_watermark_moved(self, part: Partition) -> None:
        if self.purgatory.idle:  # nobody to wake: no keys built (a follower's fetch per partition comes here)
            return
        self.purgatory.complete(produce_key(part.topic, part.partition))
        self.purgatory.complete(fetch_key(part.topic, part.partition))
        if self._delayed_deletes:  # a leadership change: waiting DeleteRecords re-check
            self.purgatory.complete(delete_records_key(part.topic, part.partition))

    # -- followers, as the leader sees them ----------------------------------------------------------
    def record_follower_fetch(self, part: Partition, replica_id: int, fetch_offset: int) -> None:
        """A follower fetched from `fetch_offset` (its log end offset). Raises NOT_LEADER_OR_FOLLOWER when it
        is not a replica of `part` or this broker does not lead it."""
        if part.update_follower_fetch_state(replica_id, fetch_offset, self.now_ms()):
            self._high_watermark_moved(part)
        if part.can_join_isr(replica_id):
            replicas = part.state.replicas
            isr = tuple(r for r in replicas if r in part.state.isr or r == replica_id)
            self._alter_isr(part, isr)

    def record_follower_log_starts(self, replica_id: int, log_starts: dict[TopicPartition, int]) -> None:
        """A follower's fetch told its log start offset for each partition it names (Kafka records it in
        updateFollowerFetchState); kept for the partitions this broker leads and it is a replica of."""
        for key, start in log_starts.items():
            part = self.partitions.get(key)
            if part is None or not part.is_leader or replica_id == self.broker_id \
                    or replica_id not in part.state.replicas:
                continue
            known = self._follower_log_start.setdefault(key, {})
            if known.get(replica_id) != start:
                known[replica_id] = start
                if self._delayed_deletes:
                    self.purgatory.complete(delete_records_key(*key))

    def low_watermark(self, part: Partition) -> int:
        """Kafka's Partition.lowWatermarkIfLeader: the smallest log start offset among the leader and the
        other replicas whose broker is alive (-1 for one whose log start is not known yet)."""
        low = part.log_start_offset
        known = self._follower_log_start.get((part.topic, part.partition), {})
        alive = self.image.brokers
        for replica in part.state.replicas:
            if replica != self.broker_id and replica in alive:
                low = min(low, known.get(replica, -1))
        return low

    async def wait_low_watermark(self, part: Partition, required_offset: int,
                                 deadline_ms: float) -> tuple[ErrorCode, int]:
        """DelayedDeleteRecords: wait until the low watermark of `part` reaches `required_offset`; returns
        (NONE, low watermark), (NOT_LEADER_OR_FOLLOWER, -1) or (REQUEST_TIMED_OUT, low watermark)."""
        key = delete_records_key(part.topic, part.partition)
        self._delayed_deletes += 1
        try:
            while True:
                if self.partitions.get((part.topic, part.partition)) is not part or not part.is_leader:
                    return ErrorCode.not_leader_or_follower, -1
                low = self.low_watermark(part)
                if low >= required_offset:
                    return ErrorCode.none, low
                remaining = deadline_ms - self.now_ms()
                if remaining <= 0:
                    return ErrorCode.request_timed_out, low
                await self.purgatory.wait([key], remaining)
        finally:
            self._delayed_deletes -= 1

    def maybe_shrink_isr(self) -> int:
        """Drop the ISR members that have not caught up for replica.lag.time.max.ms (leader partitions
        only); returns how many ISR changes were started."""
        if self.isr_writer is None:
            return 0
        now = self.now_ms()
        started = 0
        for part in self.partitions.values():
            if not part.is_leader or len(part.state.isr) <= 1:
                continue
            out = part.out_of_sync_replicas(now, self.replica_lag_time_max_ms)
            if out and self._alter_isr(part, tuple(r for r in part.state.isr if r not in out)):
                log.info("%s-%d: shrinking the ISR from %s: %s not caught up for %d ms", part.topic,
                         part.partition, list(part.state.isr), list(out), self.replica_lag_time_max_ms)
                started += 1
        return started

    def _alter_isr(self, part: Partition, isr: tuple[int, ...]) -> bool:
        """Start writing `isr` for `part` (the Partition's pending ISR change, see its rules): False when no
        writer, a change is in flight, the partition backs off after a refused write, or nothing changes."""
        key = (part.topic, part.partition)
        writer = self.isr_writer
        if writer is None:
            return False
        pending = part.propose_isr(isr, self.now_ms())
        if pending is None:
            return False

        async def write() -> None:
            try:
                written = await writer(part.topic, part.partition, pending.sent, isr)
            except Exception:  # noqa: BLE001 - ZooKeeper unreachable: tried again after the backoff
                log.exception("%s-%d: writing ISR %s failed", part.topic, part.partition, list(isr))
                written = None
            finally:
                if self._isr_in_flight.get(key) is task:
                    del self._isr_in_flight[key]
            if written is None:
                log.info("%s-%d: ISR change to %s not written (its state moved, or ZooKeeper failed): "
                         "left to the next image, or tried again after %d ms", part.topic, part.partition,
                         list(isr), ISR_RETRY_BACKOFF_MS)
            if part.complete_isr_change(pending, written, self.now_ms()):
                if written is not None:
                    log.info("%s-%d: ISR is now %s (partition epoch %d)", part.topic, part.partition,
                             list(part.isr), part.state.partition_epoch)
                self._high_watermark_moved(part)

        task = asyncio.ensure_future(write())
        self._isr_in_flight[key] = task  # a reference, so the task is not collected while it runs
        return True

    # -- the door ------------------------------------------------------------------------------------
    def get_partition(
        self, topic: str, partition: int, *, require_leader: bool = True, current_leader_epoch: int = -1
    ) -> Partition:
        """The hosted partition, checked for this request; raises KafkaError with the code to answer."""
        part = self.partitions.get((topic, partition))
        if part is None:
            if self.image.has_partition(topic, partition):
                if self.opening(topic, partition):
                    raise KafkaError(ErrorCode.not_leader_or_follower,
                                     f"broker {self.broker_id}: the log of {topic}-{partition} is being opened")
                raise KafkaError(ErrorCode.not_leader_or_follower,
                                 f"broker {self.broker_id} hosts no replica of {topic}-{partition}")
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{topic}-{partition} does not exist")
        if require_leader and current_leader_epoch < 0 and part.state.leader == self.broker_id \
                and part.log is not None:
            return part  # the common case, without the calls
        part.check_access(require_leader, current_leader_epoch)
        return part

    def partition_or_none(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    # -- appends -------------------------------------------------------------------------------------
    def _leader_for_append(self, topic: str, partition: int) -> Partition:
        part = self.get_partition(topic, partition)
        confirmed = self.leadership_confirmed
        if confirmed is not None and not confirmed():
            # a resumed broker must not acknowledge a write at a leadership ZooKeeper may have moved while
            # it was paused (the new leader's log would drop it): the client retries, as after a move
            raise KafkaError(ErrorCode.not_leader_or_follower,
                             f"broker {self.broker_id} was paused: it leads {topic}-{partition} again once "
                             "ZooKeeper has confirmed it")
        return part

    def append_records(
        self,
        topic: str,
        partition: int,
        records: bytes | memoryview,
        required_acks: int = 1,
        *,
        internal_topics_allowed: bool = False,
    ) -> tuple[Partition, AppendResult]:
        """Append as leader; returns the partition and what the log did. Raises KafkaError."""
        if not internal_topics_allowed and topic in INTERNAL_TOPICS:
            raise KafkaError(ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {topic}")
        part = self._leader_for_append(topic, partition)
        codec = part.codec
        if codec is not None:
            from kaflite.protocol.record_batch import recompress_batches

            records = recompress_batches(records, codec)
        try:
            result = part.append_records_to_leader(records, required_acks, self.now_ms())
        except OSError as e:  # disk full, I/O error: Kafka's KAFKA_STORAGE_ERROR, the broker lives on
            log.error("append to %s-%d failed: %s", topic, partition, e)
            raise KafkaError(ErrorCode.kafka_storage_error, str(e)) from e
        # nothing to wake when nobody waits (a producer to 10,000 partitions pays no key per partition)
        if not self.purgatory.idle:
            if self._delayed_produces:  # someone may wait for this partition's high watermark
                self.purgatory.complete(produce_key(topic, partition))
            self.purgatory.complete(fetch_key(topic, partition))
        return part, result

    def append_txn_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                          coordinator_epoch: int) -> tuple[Partition, AppendResult]:
        """WriteTxnMarkers on the leader (internal topics included: `__consumer_offsets` takes markers for
        transactional offset commits); wakes the partition's fetchers, whose last stable offset moved."""
        part = self._leader_for_append(topic, partition)
        try:
            result = part.append_txn_marker_to_leader(producer_id, producer_epoch, commit, coordinator_epoch,
                                                      self.now_ms())
        except OSError as e:
            log.error("marker append to %s-%d failed: %s", topic, partition, e)
            raise KafkaError(ErrorCode.kafka_storage_error, str(e)) from e
        if not self.purgatory.idle:
            if self._delayed_produces:
                self.purgatory.complete(produce_key(topic, partition))
            self.purgatory.complete(fetch_key(topic, partition))
        return part, result

    async def wait_committed(self, part: Partition, required_offset: int, deadline_ms: float) -> ErrorCode:
        """Wait until the high watermark of `part` reaches `required_offset` (DelayedProduce): NONE, or
        the error the produce is answered with (NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER,
        REQUEST_TIMED_OUT)."""
        return (await self.wait_all_committed([(part, required_offset)], deadline_ms))[0]

    async def wait_all_committed(self, waits: list[tuple[Partition, int]], deadline_ms: float) -> list[ErrorCode]:
        """Kafka's DelayedProduce of a whole request: every (partition, offset its high watermark must reach)
        waited for at once, by one waiter watching the produce keys of those still pending, re-checked
        whenever one is completed, until all are decided or `deadline_ms`. Each partition's answer, in
        order: NONE, NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER (no longer hosted here), or
        REQUEST_TIMED_OUT for those still pending at the deadline."""
        codes: list[ErrorCode | None] = [None] * len(waits)
        self._delayed_produces += 1
        try:
            while True:
                keys = []
                for i, (part, required) in enumerate(waits):
                    if codes[i] is not None:
                        continue
                    if self.partitions.get((part.topic, part.partition)) is not part:
                        codes[i] = ErrorCode.not_leader_or_follower
                        continue
                    done, code = part.check_enough_replicas_reach_offset(required)
                    if done:
                        codes[i] = code
                    else:
                        keys.append(produce_key(part.topic, part.partition))
                if not keys:
                    break
                remaining = deadline_ms - self.now_ms()
                if remaining <= 0:
                    break
                await self.purgatory.wait(keys, remaining)
        finally:
            self._delayed_produces -= 1
        return [ErrorCode.request_timed_out if code is None else code for code in codes]

    async def append_committed(
        self, topic: str, partition: int, records: bytes | memoryview, timeout_ms: float
    ) -> AppendResult:
        """The coordinators' append (Kafka's CoordinatorRuntime, acks=-1): write to a partition this broker
        leads, internal topics included, and return once the records are committed (the high watermark
        passed them). Raises KafkaError: NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION (the
        coordinator moved), NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, or
        the log's own refusals; nothing is reported committed that is not."""
        part, result = self.append_records(topic, partition, records, -1, internal_topics_allowed=True)
        code = await self.wait_committed(part, result.last_offset + 1, self.now_ms() + timeout_ms)
        if code is not ErrorCode.none:
            raise KafkaError(code, f"records appended to {topic}-{partition} at {result.base_offset} were not "
                                   "committed")
        return result
