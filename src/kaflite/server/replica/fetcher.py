"""The replica fetchers: how a follower copies its leaders (Kafka's ReplicaFetcherManager,
ReplicaFetcherThread and AbstractFetcherThread).

Rules:
- the partitions this broker follows are those of the metadata image whose replicas include it and whose
  leader is another live broker (`ReplicaFetcherManager.on_image`, called after the ReplicaManager applied
  the image); each goes to the fetcher of its (leader, hash(topic, partition) mod num.replica.fetchers);
  a partition whose leader or leader epoch changed leaves its fetcher and joins the new leader's, marked
  for truncation; a partition this broker now leads, or no longer hosts, leaves its fetcher; a fetcher
  without partitions stops. The departures are made in `on_image` itself (a fetcher never appends for a
  leader or epoch the image has replaced); the arrivals FOLLOW_SLICE per loop turn, the first slice at once,
  the others in a task that yields to the loop between two slices, each partition checked again against
  the ReplicaManager when its slice runs (1,000 new partitions, each logged, held the loop ~0.5 s on a loaded
  machine); a later image recomputes what is left to add;
- before it fetches a partition marked for truncation, the fetcher truncates it until its epochs agree with
  the leader's (KIP-101 / KIP-279, Kafka's AbstractFetcherThread.getOffsetTruncationState): it asks the
  leader with OffsetForLeaderEpoch (replica_id = this broker) where its latest epoch ended there; an answer
  (E, O) with E known here truncates to min(O, where E ends here, the log end offset) and ends the
  truncation; an E this replica does not have (only older ones) truncates to where the largest local epoch
  below E ends, and the next round asks for that epoch (each round asks a smaller epoch, so it ends); an
  answer without end offset (-1) truncates to the local high watermark; a replica without any epoch
  (empty leader-epoch cache) truncates to its high watermark without asking (`truncation_target`); a round
  over more than TRUNCATION_SLICE partitions goes in slices, each its own request and worker-thread
  truncation, the event loop free between two slices;
- then one Fetch (v12, replica_id = this broker, no fetch session) per round carries every partition of the
  fetcher: fetch offset = the local log end offset, last fetched epoch = the local latest epoch (KIP-595),
  log start offset = the local one, current leader epoch = the image's, at most `replica.fetch.max.bytes`
  per partition and `replica.fetch.response.max.bytes` in all, long-polled `replica.fetch.wait.max.ms` for
  `replica.fetch.min.bytes`;
- an answer with a diverging epoch (E, O) appends nothing and moves no watermark: the log is truncated by
  the same rule as an OffsetForLeaderEpoch answer (a further round, when needed, by OffsetForLeaderEpoch);
- the answer's batches are appended verbatim (`Partition.append_records_to_follower`: same offsets, same
  bytes, the producer state rebuilt from them) and the follower's high watermark is the leader's, capped
  by its log end offset; then the leader's log start offset, capped by the local high watermark, becomes
  the local one when higher (Kafka's maybeIncrementLogStartOffset: segments wholly below it are deleted,
  in a worker thread); OFFSET_OUT_OF_RANGE below the leader's log start offset restarts the local log
  there (in a worker thread), above it (the local log end is past the leader's) marks the partition for
  truncation when it has epochs, else truncates to the leader's high watermark in the answer, so the next
  fetch offset is within the leader's log;
- a leader's log start inside a batch (DeleteRecords): the answer at that start is the batch holding it,
  whose base offset is below the local log end; when the local log is empty there (end == start, as after
  the restart above) the log restarts at the batch's base offset (in a worker thread) and the batch is
  appended (Kafka's UnexpectedAppendOffsetException path); any other append refused below the log end marks
  the partition for truncation;
- a leadership error (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION) waits
  `replica.fetch.backoff.ms` for the image to move the partition; UNKNOWN_LEADER_EPOCH (a leader that has
  not applied the state this follower holds yet) is retried after LEADER_BEHIND_RETRY_MS, in the answer to
  a Fetch or to the truncation's OffsetForLeaderEpoch alike;
- a connection or decoding failure closes the connection and retries after `replica.fetch.backoff.ms`;
- the connection goes to the leader's endpoint on the inter-broker listener (`inter.broker.listener.name`,
  else the first one it registered), through the broker's one BrokerConnector (TLS, SASL login: a refused
  login is a connection failure, retried as above);
- a stopped fetcher fetches no more: `stop()` ends its loop at the next turn and cancels its task until it is
  done (`kaflite.server.stopping.cancel_until_done`: Python 3.11's wait_for can swallow a cancellation).
Everything runs on the broker's event loop; the appends are the Log's own (synchronous, as a leader's); the
truncations (segment renames, the producer state rebuilt from snapshot and log, the checkpoint files rewritten
with fsyncs) and what deletes whole segments (a moved log start offset, a restart at the leader's) run in a
worker thread (the Log is thread-safe: the housekeeping pass uses it from a thread too) while the fetcher
waits for them, so the partition is not fetched meanwhile; a round's truncations run in one worker call per
slice of TRUNCATION_SLICE partitions that checkpoints once (`LogManager.truncate_logs`), not once per partition.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kio.schema.offset_for_leader_epoch.v4.response import OffsetForLeaderEpochResponse
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32

from kaflite.cluster.metadata import MetadataImage
from kaflite.protocol import fetch_v12
from kaflite.protocol.errors import ErrorCode, KafkaError, ProtocolError
from kaflite.server.broker_connection import BrokerConnection, address_of
from kaflite.server.replica.partition import Partition
from kaflite.server.security.client import BrokerConnector
from kaflite.server.stopping import cancel_until_done
from kaflite.storage.log import Log

__all__ = ["FetcherConfig", "ReplicaFetcher", "ReplicaFetcherManager"]

log = logging.getLogger("kaflite.replica")

TopicPartition = tuple[str, int]
_LEADERSHIP_ERRORS = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch,
                                ErrorCode.unknown_leader_epoch, ErrorCode.unknown_topic_or_partition})


# The leader answers UNKNOWN_LEADER_EPOCH while it has not applied the newer state this follower already
# holds (the controller's decision reaches the brokers one at a time): it will within milliseconds, so the
# partition is retried after this instead of replica.fetch.backoff.ms (Kafka's delay), which stalled every
# acks=all produce on the new leader for a second after a leader change (bench/cluster_bench.py).
LEADER_BEHIND_RETRY_MS = 50

# A truncation round asks the leader about at most this many partitions per OffsetForLeaderEpoch and truncates
# them in one worker-thread call before the next slice. Building and reading that request, deciding each
# partition's target and logging its truncation happen on the event loop: for a failover that truncates 1,000
# partitions in one request, that was one loop turn of 128 ms on a loaded machine
# (bench/follower_truncation_bench.py); a slice of 100 bounds it to a tenth. Kafka sends one request per
# fetcher thread, off any request-serving thread.
TRUNCATION_SLICE = 100

# Partitions a fetcher manager adds to its fetchers per loop turn (see the rules): each is logged ("following
# broker ..."), which is most of the cost.
FOLLOW_SLICE = 100


def error_delay_ms(code: ErrorCode, backoff_ms: int) -> int:
    """How long a partition whose fetch was answered `code` waits before it is fetched again."""
    if code is ErrorCode.unknown_leader_epoch:
        return min(backoff_ms, LEADER_BEHIND_RETRY_MS)
    return backoff_ms


def idle_wait_s(delays: list[float], now: float, backoff_ms: int) -> float:
    """How long a fetcher with nothing to fetch sleeps (unless woken): until its first delayed partition is
    due, at most replica.fetch.backoff.ms."""
    wait = backoff_ms / 1000
    due = [d - now for d in delays if d > now]
    return min([wait, *due]) if due else wait


def epoch_end_offset(entries: Sequence[tuple[int, int]], log_end_offset: int, epoch: int) -> tuple[int, int] | None:
    """Where `epoch` ends in this replica's leader-epoch cache (`entries`: (epoch, start offset), ascending),
    as Kafka's LeaderEpochFileCache.endOffsetFor answers a follower: (the largest local epoch <= `epoch`, the
    start of the first larger one, or the log end offset for the latest); when every local epoch is larger,
    (`epoch`, the first one's start); None when nothing is known (no entries, or `epoch` above the latest)."""
    if not entries or epoch < 0:
        return None
    if epoch == entries[-1][0]:
        return epoch, log_end_offset
    floor: int | None = None
    for e, start in entries:
        if e > epoch:
            return (epoch if floor is None else floor), start
        floor = e
    return None  # above the latest local epoch


@dataclass(frozen=True, slots=True)
class Truncation:
    """Where to truncate after a leader's answer (Kafka's OffsetTruncationState): `offset`; `complete` False
    means the epochs may still disagree below it, and the next round asks the leader about `next_epoch`."""

    offset: int
    complete: bool = True
    next_epoch: int = -1


def truncation_target(entries: Sequence[tuple[int, int]], log_end_offset: int, high_watermark: int,
                      asked_epoch: int, leader_epoch: int, leader_end_offset: int) -> Truncation:
    """Kafka's AbstractFetcherThread.getOffsetTruncationState: the leader answered (`leader_epoch`,
    `leader_end_offset`) about `asked_epoch` (OffsetForLeaderEpoch, or a Fetch's diverging epoch)."""
    leo = log_end_offset
    if leader_end_offset < 0:  # the leader knows nothing of the epoch: keep what was committed here
        return Truncation(min(high_watermark, leo))
    if leader_epoch < 0:
        return Truncation(min(leader_end_offset, leo))
    local = epoch_end_offset(entries, leo, leader_epoch)
    if local is None:  # no local epoch at or below the leader's: the leader's offset alone
        return Truncation(min(leader_end_offset, leo))
    local_epoch, local_end = local
    if local_epoch != leader_epoch:
        if local_epoch < asked_epoch:
            # this replica never had the leader's epoch: everything after the end of its own largest epoch
            # below it may differ, and whether that epoch agrees with the leader's is the next question
            return Truncation(min(local_end, leo), complete=False, next_epoch=local_epoch)
        return Truncation(min(local_end, leo))  # an answer above what was asked: nothing more to ask
    return Truncation(min(local_end, leader_end_offset, leo))


@dataclass(frozen=True, slots=True)
class FetcherConfig:
    """The replica.fetch.* keys (Kafka's names and defaults)."""

    num_fetchers: int = 1
    max_bytes: int = 1_048_576  # replica.fetch.max.bytes
    response_max_bytes: int = 10_485_760  # replica.fetch.response.max.bytes
    wait_max_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    backoff_ms: int = 1000  # replica.fetch.backoff.ms
    socket_timeout_ms: int = 30_000  # replica.socket.timeout.ms
    listener: str | None = None  # inter.broker.listener.name
    connector: BrokerConnector | None = None  # TLS / SASL of that listener (None: PLAINTEXT)


@dataclass(slots=True)
class _FetchState:
    leader_epoch: int
    truncating: bool = True  # ask the leader where our epoch ended before fetching (KIP-279)
    delayed_until: float = 0.0
    ask_epoch: int = -1  # the epoch the next truncation round asks about (-1: the latest local one)


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader (Kafka's ReplicaFetcherThread)."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int, fetcher_id: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.fetcher_id = fetcher_id
        self.partitions: dict[TopicPartition, _FetchState] = {}
        self._task: asyncio.Task[None] | None = None
        self._conn: BrokerConnection | None = None
        self._wake = asyncio.Event()
        self._failing = False
        self._stopped = False

    def __repr__(self) -> str:
        return f"ReplicaFetcher(leader={self.leader_id}, id={self.fetcher_id}, partitions={len(self.partitions)})"

    def add(self, tp: TopicPartition, leader_epoch: int) -> None:
        self.partitions[tp] = _FetchState(leader_epoch)
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    async def stop(self) -> None:
        # the flag ends the loop at its next turn and the cancellation is repeated until the task is done:
        # a cancellation that Python 3.11's wait_for swallowed (see kaflite.server.stopping) once left a
        # fetcher running and its broker not exiting on SIGTERM
        self._stopped = True
        self._wake.set()
        task, self._task = self._task, None
        if task is not None:
            await cancel_until_done(task)
        self._close()

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def _connection(self) -> BrokerConnection:
        if self._conn is None:
            host, port = self.manager.address_of(self.leader_id)
            self._conn = await BrokerConnection.open(host, port, f"broker-{self.manager.broker_id}-fetcher-{self.fetcher_id}",
                                                     self.manager.config.socket_timeout_ms / 1000,
                                                     self.manager.config.connector)
        return self._conn

    async def _run(self) -> None:
        while self.partitions and not self._stopped:
            try:
                did = await self.do_work()
            except asyncio.CancelledError:
                raise
            except (TimeoutError, OSError, EOFError, ConnectionError, KafkaError, ValueError) as e:
                # the first failure of a streak is a warning, its retries debug (a dead leader is retried
                # every backoff until the image moves its partitions)
                (log.debug if self._failing else log.warning)(
                    "fetcher %d from broker %d: %s; retrying every %d ms", self.fetcher_id, self.leader_id,
                    e or type(e).__name__, self.manager.config.backoff_ms)
                self._failing = True
                self._close()
                did = False
            except Exception:  # noqa: BLE001 - a bug must not kill replication silently: logged, retried
                log.exception("fetcher %d from broker %d failed", self.fetcher_id, self.leader_id)
                self._close()
                did = False
            else:
                self._failing = False
            if not did and not self._stopped:
                self._wake.clear()
                wait = idle_wait_s([st.delayed_until for st in self.partitions.values()],
                                   asyncio.get_running_loop().time(), self.manager.config.backoff_ms)
                try:
                    await asyncio.wait_for(self._wake.wait(), wait)
                except TimeoutError:
                    pass
        self._close()

    async def do_work(self) -> bool:
        """One round: truncate the partitions that need it, then one Fetch. False: nothing could be done
        (the caller backs off)."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        truncating = [tp for tp, s in self.partitions.items() if s.truncating and s.delayed_until <= now]
        if truncating:
            await self._truncate(truncating)
        ready = {tp: s for tp, s in self.partitions.items() if not s.truncating and s.delayed_until <= now}
        if not ready:
            return bool(truncating)
        return await self._fetch(ready)

    async def _truncate(self, tps: list[TopicPartition]) -> None:
        """One truncation round for `tps` (see the rules), in slices of TRUNCATION_SLICE partitions, the loop
        free between them; a partition whose truncation is not complete stays marked and is asked about
        again in the next round."""
        rm = self.manager.replica_manager
        for start in range(0, len(tps), TRUNCATION_SLICE):
            if start:
                await asyncio.sleep(0)  # whatever else the loop has to do runs between two slices
            asked: dict[TopicPartition, tuple[Partition, int]] = {}
            pending: list[tuple[Partition, Truncation, str]] = []
            try:
                await self._truncate_round(rm, tps[start:start + TRUNCATION_SLICE], asked, pending)
            finally:
                await self._apply_all(pending)

    async def _truncate_round(self, rm: Any, tps: list[TopicPartition],
                              asked: dict[TopicPartition, tuple[Partition, int]],
                              pending: list[tuple[Partition, Truncation, str]]) -> None:
        for tp in tps:
            part = rm.partition_or_none(*tp)
            if part is None or part.log is None:
                self.partitions.pop(tp, None)
                continue
            fstate = self.partitions.get(tp)
            if fstate is None or not fstate.truncating:  # left this fetcher (or was re-added) during a slice
                continue
            epoch = fstate.ask_epoch if fstate.ask_epoch >= 0 else part.log.leader_epoch_cache.latest_epoch
            if epoch < 0:
                # no epoch history to compare (Kafka's truncateToHighWatermark): what is not committed here
                # may differ from the leader's, what is committed does not
                pending.append((part, Truncation(part.log.high_watermark), "no leader epoch here"))
                fstate.truncating, fstate.ask_epoch = False, -1
                continue
            asked[tp] = (part, epoch)
        if not asked:
            return
        by_topic: dict[str, list[OffsetForLeaderPartition]] = {}
        for (topic, index), (_part, epoch) in asked.items():
            by_topic.setdefault(topic, []).append(OffsetForLeaderPartition(
                partition=i32(index), current_leader_epoch=i32(self.partitions[(topic, index)].leader_epoch),
                leader_epoch=i32(epoch)))
        req = OffsetForLeaderEpochRequest(replica_id=BrokerId(self.manager.broker_id), topics=tuple(
            OffsetForLeaderTopic(topic=TopicName(t), partitions=tuple(ps)) for t, ps in by_topic.items()))
        conn = await self._connection()
        resp = await conn.request(req, OffsetForLeaderEpochResponse, self.manager.config.socket_timeout_ms / 1000)
        now = asyncio.get_running_loop().time()
        for t in resp.topics:
            for p in t.partitions:
                tp = (str(t.topic), int(p.partition))
                state = self.partitions.get(tp)
                if state is None or tp not in asked:
                    continue
                code = ErrorCode(int(getattr(p.error_code, "value", p.error_code)))
                if code is not ErrorCode.none:
                    # UNKNOWN_LEADER_EPOCH here too is a new leader that has not applied its own election
                    # yet: retried after 50 ms, as a Fetch answered so (a full replica.fetch.backoff.ms
                    # stalled acks=all on the new leader for a second after a controlled shutdown)
                    state.delayed_until = now + error_delay_ms(code, self.manager.config.backoff_ms) / 1000
                    continue
                part, epoch = asked[tp]
                if part.log is None:
                    continue
                pending.append(self._truncate_to_epoch_end(part, state, epoch, int(p.leader_epoch),
                                                           int(p.end_offset)))

    def _truncate_to_epoch_end(self, part: Partition, state: _FetchState, asked_epoch: int, leader_epoch: int,
                               end_offset: int) -> tuple[Partition, Truncation, str]:
        """Apply a leader's (epoch, end offset) answer about `asked_epoch` (OffsetForLeaderEpoch or a
        diverging epoch): truncate, and leave the partition marked when another round is needed."""
        plog = part.log
        assert plog is not None
        target = truncation_target(plog.leader_epoch_cache.entries, plog.log_end_offset, plog.high_watermark,
                                   asked_epoch, leader_epoch, end_offset)
        state.truncating = not target.complete
        state.ask_epoch = -1 if target.complete else target.next_epoch
        return part, target, f"leader {self.leader_id}: epoch {leader_epoch} ended at {end_offset}; " \
                             f"asked about {asked_epoch}"

    async def _apply_all(self, pending: list[tuple[Partition, Truncation, str]]) -> None:
        """Truncate each partition to its target in one worker-thread call (Log.truncate_to's file work and
        one checkpoint write for all of them: `LogManager.truncate_logs`), not on the event loop."""
        targets: list[tuple[Log, int]] = []
        for part, target, why in pending:
            plog = part.log
            if plog is None:
                continue
            leo = plog.log_end_offset
            if target.offset < leo:
                log.warning("%s-%d: truncating from %d to %d (%s)%s", part.topic, part.partition, leo,
                            target.offset, why, "" if target.complete else "; asking again")
                targets.append((plog, max(target.offset, 0)))
            elif any(start >= leo for _e, start in plog.leader_epoch_cache.entries):
                # nothing to remove, but a leader epoch starting at the log end goes (Kafka's truncateTo at
                # the log end): a deposed leader's election entry, which no batch carries, would make every
                # fetch claim that epoch as its last fetched one, answered diverging, forever
                targets.append((plog, leo))
        if not targets:
            return
        manager = getattr(self.manager.replica_manager, "log_manager", None)
        if manager is not None:
            await self._off_loop(manager.truncate_logs, targets)
        else:  # a replica manager without a LogManager (tests): each log checkpoints through its own callback
            await self._off_loop(lambda: [plog.truncate_to(offset) for plog, offset in targets])

    async def _apply(self, part: Partition, target: Truncation, why: str) -> None:
        await self._apply_all([(part, target, why)])

    async def _off_loop(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run a Log operation that deletes segment files in a worker thread (not on the event loop)."""
        await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    async def _adopt_log_start(self, part: Partition, leader_log_start: int) -> None:
        """Kafka's maybeIncrementLogStartOffset on a follower: the leader's log start offset (moved by
        DeleteRecords or retention there), capped by the local high watermark, when above the local one."""
        plog = part.log
        if plog is None or leader_log_start < 0:
            return
        target = min(leader_log_start, plog.high_watermark)
        if target <= plog.log_start_offset:
            return
        try:
            await self._off_loop(plog.delete_records, target)
        except (KafkaError, OSError) as e:  # a log closed meanwhile (partition gone), a full disk
            log.warning("%s-%d: moving the log start offset to the leader's %d failed: %s", part.topic,
                        part.partition, target, e)

    async def _restart_and_append(self, tp: TopicPartition, fstate: _FetchState, part: Partition,
                                  records: bytes | memoryview, leader_hw: int) -> bool:
        """The leader's batches were refused: when they start below this log's start, inside the batch
        holding it, and the log is empty (`Partition.restart_offset_for`), restart the log at the batch's
        base offset (in a worker thread) and append them. False: the refusal stands (or the partition moved
        meanwhile: the next round starts over)."""
        plog = part.log
        restart = part.restart_offset_for(records)
        if plog is None or restart is None:
            return False
        log.warning("%s-%d: the leader's batch at %d holds this log's start %d (its log end, nothing below it "
                    "here): restarting the local log at the batch's base offset %d", tp[0], tp[1], restart,
                    plog.log_start_offset, restart)
        await self._off_loop(plog.truncate_fully_and_start_at, restart)
        if self.partitions.get(tp) is not fstate or part.log is not plog or part.is_leader \
                or plog.log_end_offset != restart:
            return True  # a new leader or epoch meanwhile (it re-truncates), or the log went: append nothing
        try:
            part.append_records_to_follower(records, leader_hw)
        except KafkaError:
            return False  # refused again: the caller logs it and marks the partition for truncation
        return True

    async def _fetch(self, ready: dict[TopicPartition, _FetchState]) -> bool:
        rm = self.manager.replica_manager
        cfg = self.manager.config
        by_topic: dict[str, list[fetch_v12.FetchPartition]] = {}
        offsets: dict[TopicPartition, int] = {}
        fetched_epochs: dict[TopicPartition, int] = {}
        max_bytes = cfg.max_bytes
        for (topic, index), state in ready.items():
            part = rm.partition_or_none(topic, index)
            plog = part.log if part is not None else None
            if plog is None:
                self.partitions.pop((topic, index), None)
                continue
            end = offsets[(topic, index)] = plog.log_end_offset
            # KIP-595: the epoch of the last record here, so that the leader can tell where we diverge
            fetched_epochs[(topic, index)] = epoch = plog.leader_epoch_cache.latest_epoch
            by_topic.setdefault(topic, []).append(
                (index, state.leader_epoch, end, epoch, plog.log_start_offset, max_bytes))
        if not by_topic:
            return False
        # encoded by hand (kaflite.protocol.fetch_v12): kio built and walked a dataclass per partition both
        # ways, the largest per-round cost of a follower of thousands of partitions
        body = fetch_v12.encode_request(self.manager.broker_id, cfg.wait_max_ms, cfg.min_bytes,
                                        cfg.response_max_bytes, 0, 0, -1, list(by_topic.items()))
        conn = await self._connection()
        frame, offset = await conn.request_flexible_bytes(fetch_v12.API_KEY, fetch_v12.VERSION, body,
                                                          cfg.socket_timeout_ms / 1000 + cfg.wait_max_ms / 1000)
        try:
            resp = fetch_v12.decode_response(frame, offset)
        except ProtocolError as e:
            raise ConnectionError(f"Fetch answer from broker {self.leader_id}: {e}") from None
        code = ErrorCode(resp.error_code)
        if code is not ErrorCode.none:
            raise KafkaError(code, "fetch refused")
        now = asyncio.get_running_loop().time()
        progressed = False
        for t in resp.responses:
            for p in t.partitions:
                tp = (t.topic, p.partition_index)
                fstate = self.partitions.get(tp)
                part = rm.partition_or_none(*tp)
                if fstate is None or tp not in offsets or part is None or part.log is None:
                    continue
                if part.log.log_end_offset != offsets[tp]:
                    continue  # truncated meanwhile (a new leader): the next round starts over
                pcode = ErrorCode(p.error_code)
                diverging_epoch, diverging_end = p.diverging_epoch
                if pcode is ErrorCode.none and diverging_epoch >= 0 and diverging_end >= 0:
                    # the leader says our log diverges after (epoch, end offset): its answer carries no
                    # records, and no watermark moves until the truncation is done (Kafka's
                    # truncateOnFetchResponse)
                    await self._apply(*self._truncate_to_epoch_end(part, fstate, fetched_epochs[tp],
                                                                   diverging_epoch, diverging_end))
                    progressed = True
                elif pcode is ErrorCode.none:
                    records = p.records if p.records is not None else b""  # a view of the answer's frame
                    try:
                        part.append_records_to_follower(records, p.high_watermark)
                    except KafkaError as e:
                        if not await self._restart_and_append(tp, fstate, part, records, p.high_watermark):
                            log.warning("%s-%d: append of the leader's batches at %d refused (%s): truncating",
                                        tp[0], tp[1], offsets[tp], e)
                            fstate.truncating = True
                            continue
                    progressed = progressed or bool(records)
                    await self._adopt_log_start(part, p.log_start_offset)
                elif pcode is ErrorCode.offset_out_of_range:
                    leader_start = p.log_start_offset
                    if 0 <= leader_start and offsets[tp] < leader_start:
                        log.warning("%s-%d: fetch offset %d is below the leader's log start %d: restarting the "
                                    "local log there", tp[0], tp[1], offsets[tp], leader_start)
                        await self._off_loop(part.log.truncate_fully_and_start_at, leader_start)
                    elif part.log.leader_epoch_cache.latest_epoch >= 0:
                        fstate.truncating = True  # our log ends past the leader's: where do the epochs agree
                    else:
                        # no epochs to compare: the leader's high watermark is within its log, so the next
                        # fetch offset is too (marking for truncation to our own high watermark, which may
                        # be past the leader's end after an unclean election, looped forever)
                        leader_hw = p.high_watermark
                        plog = part.log
                        await self._apply(part, Truncation(leader_hw if leader_hw >= 0 else plog.high_watermark),
                                          f"fetch offset {offsets[tp]} past the end of leader {self.leader_id}, "
                                          f"whose high watermark is {leader_hw}")
                        if plog.log_end_offset >= offsets[tp]:  # nothing to truncate: wait, do not spin
                            fstate.delayed_until = now + cfg.backoff_ms / 1000
                elif pcode in _LEADERSHIP_ERRORS:
                    fstate.delayed_until = now + error_delay_ms(pcode, cfg.backoff_ms) / 1000
                else:
                    log.warning("%s-%d: fetch from broker %d answered %s", tp[0], tp[1], self.leader_id, pcode.name)
                    fstate.delayed_until = now + cfg.backoff_ms / 1000
        return True


class ReplicaFetcherManager:
    """The fetchers of this broker, one per (leader, fetcher id) (Kafka's ReplicaFetcherManager)."""

    def __init__(self, broker_id: int, replica_manager: Any, config: FetcherConfig,
                 image: Callable[[], MetadataImage]) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.config = config
        self._image = image
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._assigned: dict[TopicPartition, tuple[int, int, int]] = {}  # tp -> (leader, epoch, fetcher id)
        self._stopped = False
        self._stopping: set[asyncio.Task[None]] = set()  # fetchers left without partitions, stopping
        self._to_add: list[TopicPartition] = []  # partitions to follow, not added yet (FOLLOW_SLICE per turn)
        self._adding: asyncio.Task[None] | None = None

    def fetcher_id(self, tp: TopicPartition) -> int:
        # Kafka: Utils.abs(31 * topic.hashCode + partition) % numFetchers; any stable spread will do
        return (zlib.crc32(tp[0].encode()) * 31 + tp[1]) % self.config.num_fetchers

    def address_of(self, broker: int) -> tuple[str, int]:
        return address_of(self._image(), broker, self.config.listener)

    def on_image(self, _old: MetadataImage | None, _new: MetadataImage) -> None:
        """Follow the ReplicaManager's partitions (called after it applied the image, and after each slice
        of new logs it opened)."""
        if self._stopped:
            return
        wanted: dict[TopicPartition, tuple[int, int]] = {}
        for tp, part in self.replica_manager.partitions.items():
            want = self._wanted(part)
            if want is not None:
                wanted[tp] = want
        for tp, (leader, epoch, fid) in list(self._assigned.items()):
            if wanted.get(tp) != (leader, epoch):
                fetcher = self.fetchers.get((leader, fid))
                if fetcher is not None:
                    fetcher.remove(tp)
                del self._assigned[tp]
        self._to_add = [tp for tp in wanted if tp not in self._assigned]
        self._add_slice()
        for key, fetcher in list(self.fetchers.items()):
            if not fetcher.partitions:
                del self.fetchers[key]
                # kept until done: the loop holds tasks weakly, and stop() awaits the ones still running
                task = asyncio.ensure_future(fetcher.stop())
                self._stopping.add(task)
                task.add_done_callback(self._stopping.discard)
        if self._to_add and (self._adding is None or self._adding.done()):
            self._adding = asyncio.ensure_future(self._add_the_rest())

    def _wanted(self, part: Partition) -> tuple[int, int] | None:
        """(leader, leader epoch) to fetch `part` from, None when this broker does not follow it."""
        s = part.state
        if part.log is not None and s.leader >= 0 and s.leader != self.broker_id:
            return s.leader, s.leader_epoch
        return None

    def _add_slice(self) -> None:
        """Add the next FOLLOW_SLICE partitions of `_to_add` that the ReplicaManager still has this broker
        follow and no fetcher has yet."""
        todo, self._to_add = self._to_add[:FOLLOW_SLICE], self._to_add[FOLLOW_SLICE:]
        partitions = self.replica_manager.partitions
        for tp in todo:
            part = partitions.get(tp)
            want = None if part is None or tp in self._assigned else self._wanted(part)
            if want is None:
                continue
            leader, epoch = want
            fid = self.fetcher_id(tp)
            fetcher = self.fetchers.get((leader, fid))
            if fetcher is None:
                fetcher = self.fetchers[(leader, fid)] = ReplicaFetcher(self, leader, fid)
            fetcher.add(tp, epoch)
            self._assigned[tp] = (leader, epoch, fid)
            log.info("%s-%d: following broker %d (leader epoch %d), fetcher %d", tp[0], tp[1], leader, epoch, fid)

    async def _add_the_rest(self) -> None:
        while self._to_add and not self._stopped:
            await asyncio.sleep(0)  # the loop serves what waits between two slices
            if not self._stopped:
                self._add_slice()

    async def stop(self) -> None:
        self._stopped = True
        self._to_add = []
        adding, self._adding = self._adding, None
        if adding is not None:
            await asyncio.gather(adding, return_exceptions=True)
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        self._assigned.clear()
        for f in fetchers:
            await f.stop()
        if self._stopping:
            await asyncio.gather(*self._stopping, return_exceptions=True)
