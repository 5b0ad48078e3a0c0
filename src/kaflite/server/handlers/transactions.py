"""Transaction APIs over the wire and `TransactionService`, the shell that runs the pure transaction
coordinator shards (kaflite.coordinator.transaction) on the coordinator runtime over `__transaction_state`.

APIs: InitProducerId with a transactional id (from init_producer_id.py), AddPartitionsToTxn (v0-v4, v4
batched / verify-only), AddOffsetsToTxn, EndTxn, WriteTxnMarkers, TxnOffsetCommit, DescribeTransactions,
ListTransactions, DescribeProducers; the FindCoordinator key type 1 (groups.py), the produce check
(`verify_produce`) calls into the service.

Rules of the shell:
- one TransactionService per broker (`broker.extensions["transaction_coordinator"]`), created at start-up
  when `__transaction_state` exists, else on the first transactional request: it creates the compacted
  topic (transaction.state.log.num.partitions, .replication.factor - in a cluster, refused while fewer
  brokers are alive; 1 on a single node -, .min.isr, .segment.bytes) and loads a
  shard per partition this broker leads; leadership changes load / unload shards;
- a request runs as a step on the shard of `partition_for(transactional.id)`; its `__transaction_state`
  records are appended as one batch and the answer leaves once they are committed (the runtime's rule);
- markers: when a step moves a transaction to PrepareCommit / PrepareAbort, its answer carries the markers
  to write; the service writes them to each partition's leader through the marker channel
  (server/txn_marker_channel.py: on this node `write_markers`, the function WriteTxnMarkers runs; on other
  brokers WriteTxnMarkers requests, retried until written or this broker stops coordinating the id), then
  runs the shard's `complete` step (CompleteCommit / CompleteAbort). The periodic task re-sends the markers of every transaction found in Prepare* after a
  load (a crash between PrepareCommit and the markers completes the commit), aborts transactions past
  their timeout (transaction.abort.timed.out.transaction.cleanup.interval.ms) and removes transactional
  ids idle past transactional.id.expiration.ms (transaction.remove.expired.transaction.cleanup.interval.ms);
- TxnOffsetCommit screens its partitions first as OffsetCommit does (offsets.py `screen_partitions`: READ
  on the topic, UNKNOWN_TOPIC_OR_PARTITION for a topic not in the metadata or a partition beyond its count;
  a request left with none is answered without the coordinator's checks, as Kafka's KafkaApis);
- transactional offsets (TxnOffsetCommit) are written by the group coordinator at once, as OffsetCommit
  records in a transactional batch of the producer (its id and epoch) in the group's `__consumer_offsets`
  partition, pending in the group shard; the transaction's marker is written to that partition like any
  other and then handed to the group shard (COMMIT: the offsets become committed, ABORT: dropped); loading
  replays both, as Kafka does. OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT meanwhile;
- PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH to request versions older than KIP-588's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import re
import struct
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from kaflite.coordinator import OFFSETS_TOPIC
from kaflite.coordinator.leadership import leadership_changes
from kaflite.coordinator.runtime import CoordinatorRuntime
from kaflite.coordinator.transaction import (
    TRANSACTION_STATE_TOPIC,
    InitPidAnswer,
    MarkerJob,
    TransactionCoordinatorShard,
    TxnAnswer,
    TxnConfig,
    TxnState,
    partition_for,
)
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.record_batch import BATCH_HEADER_SIZE, TRANSACTIONAL_MASK
from kaflite.server.acl import rules
from kaflite.server.context import RequestContext, build
from kaflite.server.coordinators.internal_topic import TRANSACTION_STATE, ensure_async
from kaflite.server.handlers import ApiTable
from kaflite.server.handlers.coordinator_writer import InternalTopicWriter
from kaflite.server.handlers.groups import GroupService, to_ms
from kaflite.server.handlers.offsets import screen_partitions
from kaflite.server.txn_marker_channel import TransactionMarkerChannelManager

log = logging.getLogger("kaflite.coordinator")

_ZERO = datetime.timedelta(0)
_EXTENSION = "transaction_coordinator"



def fenced(code: ErrorCode, version: int, first_fenced_version: int) -> ErrorCode:
    """KIP-588: PRODUCER_FENCED only for request versions that know it, else INVALID_PRODUCER_EPOCH."""
    if code is ErrorCode.producer_fenced and version < first_fenced_version:
        return ErrorCode.invalid_producer_epoch
    return code


class TransactionService:
    def __init__(self, broker: Any) -> None:
        self.broker = broker
        setting = broker.setting
        self.config = TxnConfig(
            max_timeout_ms=int(setting("transaction.max.timeout.ms")),
            id_expiration_ms=int(setting("transactional.id.expiration.ms")),
            num_partitions=int(setting("transaction.state.log.num.partitions")),
        )
        self.commit_timeout_ms = int(setting("offsets.commit.timeout.ms"))
        self.abort_interval_ms = int(setting("transaction.abort.timed.out.transaction.cleanup.interval.ms"))
        self.expire_interval_ms = int(setting("transaction.remove.expired.transaction.cleanup.interval.ms"))
        self.load_buffer_size = int(setting("transaction.state.log.load.buffer.size"))
        # offsets.commit.timeout.ms: Kafka's transaction state log uses the request timeout
        self.writer = InternalTopicWriter(broker, TRANSACTION_STATE_TOPIC, self.commit_timeout_ms,
                                          self.load_buffer_size)
        self.runtime: CoordinatorRuntime[TransactionCoordinatorShard] = CoordinatorRuntime(
            self._new_shard, self.writer, broker.now_ms, "transaction coordinator")
        self._in_flight: set[str] = set()  # transactional ids whose markers are being written
        self._tasks: set[asyncio.Future[Any]] = set()
        self.channel = TransactionMarkerChannelManager(
            broker.node_id, lambda: broker.metadata, self.write_markers,
            listener=broker.config.inter_broker_listener_name, connector=broker.inter_broker_connector,
            request_timeout_ms=int(setting("replica.socket.timeout.ms")))  # the inter-broker network timeout

    def _new_shard(self, partition: int) -> TransactionCoordinatorShard:
        return TransactionCoordinatorShard(self.config, self.broker.producer_ids.next_id)

    # --- lifecycle ------------------------------------------------------------------------------

    @classmethod
    def of(cls, broker: Any) -> TransactionService:
        svc = broker.extensions.get(_EXTENSION)
        if svc is None:
            svc = cls(broker)
            svc.start()
            broker.extensions[_EXTENSION] = svc
        return svc  # type: ignore[no-any-return]

    @classmethod
    async def of_async(cls, broker: Any) -> TransactionService:
        """`of`, with `__transaction_state` created first in a worker thread when missing on a single node
        (`ensure_async`), so that the service finds it when it starts."""
        await ensure_async(broker, TRANSACTION_STATE)
        return cls.of(broker)

    def start(self) -> None:
        self.ensure_topic()
        loads = []
        if getattr(self.broker, "log_manager", None) is not None:
            for partition in range(self.config.num_partitions):
                reg = self.broker.metadata.partition(TRANSACTION_STATE_TOPIC, partition)
                if reg is not None and reg.leader == self.broker.node_id:
                    loads.append(self.runtime.load(partition, reg.leader_epoch))
            self.broker.metadata_writer.subscribe(self._on_image)
        self.loaded: asyncio.Future[Any] = asyncio.gather(*loads)
        self.loaded.add_done_callback(lambda _f: self._resend_pending())
        self.broker.add_task(asyncio.ensure_future(self.runtime.run_timers()))
        self.broker.add_task(asyncio.ensure_future(self._housekeeping()))

    def ensure_topic(self) -> Any:
        """`__transaction_state`, created first when missing (replication factor
        transaction.state.log.replication.factor in a cluster, 1 on a single node). None in a cluster while it
        is not in the metadata image yet (being created off the event loop, just created, or refused while
        fewer brokers are alive)."""
        topic = TRANSACTION_STATE.ensure(self.broker, self.config.num_partitions)
        if topic is not None:
            self._adopt(topic)
        return topic

    def _adopt(self, topic: Any) -> None:
        if topic.num_partitions != self.config.num_partitions:
            log.warning("%s has %d partitions; transaction.state.log.num.partitions=%d is ignored",
                        TRANSACTION_STATE_TOPIC, topic.num_partitions, self.config.num_partitions)
            self.config = dataclasses.replace(self.config, num_partitions=topic.num_partitions)

    def _on_image(self, old: Any, new: Any) -> None:
        """Leadership of `__transaction_state` partitions moved: load / unload their shards with the new
        image's leader epoch (kaflite.coordinator.leadership's rules); a loaded shard's transactions left in
        Prepare* get their markers sent again."""
        changes = leadership_changes(old, new, TRANSACTION_STATE_TOPIC, self.broker.node_id)
        if changes.appeared is not None:  # created (by any broker) since we started: its partition count decides
            self._adopt(changes.appeared)
        for partition, epoch in changes.unloads:
            self.runtime.unload(partition, epoch)
        for partition, epoch in changes.loads:
            self.runtime.load(partition, epoch).add_done_callback(lambda _f: self._resend_pending())

    # --- routing --------------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def coordinator_epoch(self, transactional_id: str) -> int:
        return max(0, self.runtime.leader_epoch(self.partition_for(transactional_id)) or 0)

    async def call(self, transactional_id: str, op: Callable[[TransactionCoordinatorShard, int], Any]) -> Any:
        """Run a step on the id's shard; its answer once committed. Raises KafkaError (NOT_COORDINATOR...)."""
        return await self.runtime.write(self.partition_for(transactional_id), op)

    def shard_or_none(self, transactional_id: str) -> TransactionCoordinatorShard | None:
        try:
            return self.runtime.shard(self.partition_for(transactional_id))
        except KafkaError:
            return None

    # --- markers --------------------------------------------------------------------------------

    def spawn_markers(self, job: MarkerJob) -> None:
        if job.transactional_id in self._in_flight:
            return
        self._in_flight.add(job.transactional_id)
        task = asyncio.ensure_future(self._complete(job))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _complete(self, job: MarkerJob) -> None:
        try:
            partition = self.partition_for(job.transactional_id)
            leader_epoch = self.runtime.leader_epoch(partition)

            def still_coordinator() -> bool:
                return self.shard_or_none(job.transactional_id) is not None and \
                    self.runtime.leader_epoch(partition) == leader_epoch

            written = await self.channel.send(job, self.coordinator_epoch(job.transactional_id), still_coordinator)
            if not written:
                log.info("transaction %r: no longer its coordinator; the new one completes it", job.transactional_id)
                return
            await self.call(job.transactional_id,
                            lambda s, now: s.complete(job.transactional_id, job.producer_id, job.producer_epoch, now))
        except KafkaError as e:
            log.warning("transaction %r: completing failed (%s); retried by the periodic task",
                        job.transactional_id, e)
        except Exception:  # noqa: BLE001 - a marker task must never die silently
            log.exception("transaction %r: writing markers failed", job.transactional_id)
        finally:
            self._in_flight.discard(job.transactional_id)

    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                            partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """WriteTxnMarkers on this broker, the leader of each partition (else NOT_LEADER_OR_FOLLOWER): a marker
        per partition, answered once replicated (acks=-1, as Kafka appends markers); on a `__consumer_offsets`
        partition the group shard then ends the producer's pending offsets (an error there is answered, so
        the coordinator sends the marker again). The error per partition."""
        out: dict[tuple[str, int], ErrorCode] = {}
        replicas = self.broker.replica_manager
        appended = []
        for topic, partition in partitions:
            try:
                part, result = replicas.append_txn_marker(topic, partition, producer_id, producer_epoch, commit,
                                                          coordinator_epoch)
                appended.append(((topic, partition), part, int(result.last_offset) + 1))
            except KafkaError as e:
                out[(topic, partition)] = e.code
        if appended:
            deadline = self.broker.now_ms() + self.commit_timeout_ms
            codes = await asyncio.gather(*(replicas.wait_committed(part, end, deadline) for _tp, part, end in appended))
            for (tp, _part, _end), code in zip(appended, codes, strict=True):
                out[tp] = code
                if tp[0] == OFFSETS_TOPIC and code is ErrorCode.none:
                    out[tp] = await self._end_offsets_transaction(tp[1], producer_id, commit)
        return out

    async def _end_offsets_transaction(self, offsets_partition: int, producer_id: int, commit: bool) -> ErrorCode:
        """The marker is in the `__consumer_offsets` partition: the group shard commits or drops the
        producer's pending offsets (Kafka's completeTransaction)."""
        try:
            groups = GroupService.of(self.broker)
            await groups.runtime.write(offsets_partition, _end_transaction(producer_id, commit))
        except KafkaError as e:
            return e.code
        return ErrorCode.none

    def _resend_pending(self) -> None:
        for _p, shard in self.runtime.active_shards():
            for job in shard.pending_markers():
                self.spawn_markers(job)

    async def _housekeeping(self) -> None:
        next_expiry = self.broker.now_ms() + self.expire_interval_ms
        while True:
            await asyncio.sleep(self.abort_interval_ms / 1000.0)
            try:
                now = self.broker.now_ms()
                self._resend_pending()
                for partition, shard in self.runtime.active_shards():
                    for tid in shard.timed_out(now):
                        log.info("transaction %r timed out: aborting it", tid)
                        job = await self.runtime.write(partition, _abort_timed_out(tid))
                        if isinstance(job, MarkerJob):
                            self.spawn_markers(job)
                    if now >= next_expiry:
                        doomed = shard.expired(now)
                        if doomed:
                            removed = await self.runtime.write(partition, _expire(doomed))
                            log.info("removed %d expired transactional id(s): %s", len(removed or ()), removed)
                if now >= next_expiry:
                    next_expiry = now + self.expire_interval_ms
            except KafkaError as e:
                log.warning("transaction coordinator housekeeping: %s", e)
            except Exception:  # noqa: BLE001 - keep the periodic task alive
                log.exception("transaction coordinator housekeeping failed")


def _end_transaction(producer_id: int, commit: bool) -> Callable[[Any, int], Any]:
    return lambda shard, now: shard.handle_end_transaction(producer_id, commit, now)


def _abort_timed_out(tid: str) -> Callable[[TransactionCoordinatorShard, int], Any]:
    return lambda shard, now: shard.abort_timed_out(tid, now)


def _expire(tids: list[str]) -> Callable[[TransactionCoordinatorShard, int], Any]:
    return lambda shard, now: shard.expire(tids, now)


def on_start(broker: Any) -> Awaitable[Any] | None:
    """At start-up: when `__transaction_state` exists, load it now and complete the transactions a crash
    left in PrepareCommit / PrepareAbort."""
    if TRANSACTION_STATE_TOPIC in broker.metadata.topics:
        return TransactionService.of(broker).loaded
    return None


async def service_or_error(ctx: RequestContext) -> TransactionService:
    """The broker's TransactionService for a request (on a single node `__transaction_state` created first,
    in a worker thread, when missing, as FindCoordinator does); COORDINATOR_NOT_AVAILABLE when it cannot
    start."""
    try:
        return await TransactionService.of_async(ctx.broker)
    except KafkaError as e:
        log.warning("no transaction coordinator: %s", e)
        raise KafkaError(ErrorCode.coordinator_not_available, str(e)) from e


def _denied(ctx: RequestContext, transactional_id: str, check: rules.Check) -> bool:
    return not ctx.allowed(check, transactional_id)


# --- InitProducerId with a transactional id (22) ------------------------------------------------------

async def init_transactional_producer_id(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    tid = request.transactional_id

    def answer(code: ErrorCode, pid: int = -1, epoch: int = -1) -> Any:
        return build(R.InitProducerIdResponse, throttle_time=_ZERO, error_code=fenced(code, ctx.api_version, 4),
                     producer_id=pid, producer_epoch=epoch)

    if _denied(ctx, tid, rules.INIT_PRODUCER_ID_TXN):
        return answer(ErrorCode.transactional_id_authorization_failed)
    timeout = to_ms(request.transaction_timeout)
    expected_pid = int(getattr(request, "producer_id", -1))
    expected_epoch = int(getattr(request, "producer_epoch", -1))
    try:
        svc = await service_or_error(ctx)
        a: InitPidAnswer = await svc.call(tid, lambda s, now: s.init_producer_id(tid, timeout, now, expected_pid,
                                                                                 expected_epoch))
    except KafkaError as e:
        return answer(e.code)
    if a.markers is not None:
        svc.spawn_markers(a.markers)
    return answer(a.error, a.producer_id, a.producer_epoch)


# --- AddPartitionsToTxn (24) ---------------------------------------------------------------------------

async def _add_partitions(ctx: RequestContext, tid: str, pid: int, epoch: int, topics: Any,
                          verify_only: bool, broker_call: bool = False) -> dict[tuple[str, int], ErrorCode]:
    wanted = [(t.name, int(p)) for t in topics for p in t.partitions]
    if broker_call:  # v4+: a broker verifying; its CLUSTER_ACTION was checked for the whole request
        denied: list[tuple[str, int]] = []
    else:
        if _denied(ctx, tid, rules.ADD_PARTITIONS_TXN):
            return dict.fromkeys(wanted, ErrorCode.transactional_id_authorization_failed)
        denied = [tp for tp in wanted if not ctx.allowed(rules.ADD_PARTITIONS_TOPIC, tp[0])]
    image = ctx.broker.metadata
    unknown = [tp for tp in wanted if not image.has_partition(*tp)]
    if unknown or denied:  # Kafka: the bad ones say why, the others were not attempted
        out = dict.fromkeys(wanted, ErrorCode.operation_not_attempted)
        out.update(dict.fromkeys(unknown, ErrorCode.unknown_topic_or_partition))
        out.update(dict.fromkeys(denied, ErrorCode.topic_authorization_failed))
        return out
    try:
        svc = await service_or_error(ctx)
        if verify_only:
            shard = svc.runtime.shard(svc.partition_for(tid))
            return {tp: shard.verify(tid, pid, epoch, tp) for tp in wanted}
        a: TxnAnswer = await svc.call(tid, lambda s, now: s.add_partitions(tid, pid, epoch, wanted, now))
        code = a.error
    except KafkaError as e:
        code = e.code
    return dict.fromkeys(wanted, code)


def _topic_results(R: Any, results: dict[tuple[str, int], ErrorCode], version: int) -> tuple[Any, ...]:
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), code in results.items():
        by_topic.setdefault(topic, []).append(build(R.AddPartitionsToTxnPartitionResult, partition_index=partition,
                                                    partition_error_code=fenced(code, version, 2)))
    return tuple(build(R.AddPartitionsToTxnTopicResult, name=t, results_by_partition=tuple(ps))
                 for t, ps in by_topic.items())


async def handle_add_partitions_to_txn(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    v = ctx.api_version
    if v <= 3:
        results = await _add_partitions(ctx, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                                        request.v3_and_below_producer_epoch, request.v3_and_below_topics, False)
        return build(R.AddPartitionsToTxnResponse, throttle_time=_ZERO,
                     results_by_topic_v3_and_below=_topic_results(R, results, v))
    # v4: several transactions at once (from brokers, KIP-890); CLUSTER_ACTION on the cluster is Kafka's ACL
    if not ctx.allowed(rules.ADD_PARTITIONS_BROKER):
        return build(R.AddPartitionsToTxnResponse, throttle_time=_ZERO, error_code=rules.ADD_PARTITIONS_BROKER.error,
                     results_by_transaction=())
    out = []
    for txn in request.transactions:
        results = await _add_partitions(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics,
                                        bool(txn.verify_only), broker_call=True)
        out.append(build(R.AddPartitionsToTxnResult, transactional_id=txn.transactional_id,
                         topic_results=_topic_results(R, results, v)))
    return build(R.AddPartitionsToTxnResponse, throttle_time=_ZERO, error_code=ErrorCode.none,
                 results_by_transaction=tuple(out))


# --- AddOffsetsToTxn (25) / EndTxn (26) ----------------------------------------------------------------

async def handle_add_offsets_to_txn(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    tid = request.transactional_id

    def answer(code: ErrorCode) -> Any:
        return build(R.AddOffsetsToTxnResponse, throttle_time=_ZERO, error_code=fenced(code, ctx.api_version, 2))

    if _denied(ctx, tid, rules.ADD_OFFSETS_TXN):
        return answer(ErrorCode.transactional_id_authorization_failed)
    if not ctx.allowed(rules.ADD_OFFSETS_GROUP, request.group_id):
        return answer(ErrorCode.group_authorization_failed)
    try:
        groups = await GroupService.of_async(ctx.broker)  # __consumer_offsets exists before its partition joins a txn
        tp = (OFFSETS_TOPIC, groups.partition_for(request.group_id))
        svc = await service_or_error(ctx)
        a: TxnAnswer = await svc.call(tid, lambda s, now: s.add_partitions(
            tid, request.producer_id, request.producer_epoch, [tp], now))
    except KafkaError as e:
        return answer(e.code)
    return answer(a.error)


async def handle_end_txn(ctx: RequestContext, request: Any) -> Any:
    """EndTxn (26). v5 also answers the producer id and epoch the producer continues with (KIP-890's
    transaction protocol 2 bumps the epoch at every end; kaflite finalizes no transaction.version 2 and
    keeps protocol 1, so they are the request's own on success, -1 / -1 on an error, as Kafka's coordinator
    answers an error)."""
    R = ctx.response
    tid = request.transactional_id

    def answer(code: ErrorCode) -> Any:
        ok = code is ErrorCode.none
        return build(R.EndTxnResponse, throttle_time=_ZERO, error_code=fenced(code, ctx.api_version, 2),
                     producer_id=request.producer_id if ok else -1, producer_epoch=request.producer_epoch if ok else -1)

    if _denied(ctx, tid, rules.END_TXN):
        return answer(ErrorCode.transactional_id_authorization_failed)
    commit = bool(request.committed)
    try:
        svc = await service_or_error(ctx)
        a: TxnAnswer = await svc.call(tid, lambda s, now: s.end_txn(tid, request.producer_id, request.producer_epoch,
                                                                    commit, now))
    except KafkaError as e:
        return answer(e.code)
    if a.markers is not None:
        svc.spawn_markers(a.markers)
    return answer(a.error)


# --- WriteTxnMarkers (27) ---------------------------------------------------------------------------

async def handle_write_txn_markers(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    if not ctx.allowed(rules.WRITE_TXN_MARKERS):
        code = ErrorCode.cluster_authorization_failed
        return build(R.WriteTxnMarkersResponse, markers=tuple(build(
            R.WritableTxnMarkerResult, producer_id=mk.producer_id, topics=tuple(build(
                R.WritableTxnMarkerTopicResult, name=t.name, partitions=tuple(build(
                    R.WritableTxnMarkerPartitionResult, partition_index=p, error_code=code)
                    for p in t.partition_indexes)) for t in mk.topics)) for mk in request.markers))
    svc = await service_or_error(ctx)
    results = []
    for mk in request.markers:
        parts = [(t.name, int(p)) for t in mk.topics for p in t.partition_indexes]
        codes = await svc.write_markers(mk.producer_id, mk.producer_epoch, bool(mk.transaction_result),
                                        mk.coordinator_epoch, parts)
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), code in codes.items():
            by_topic.setdefault(topic, []).append(build(R.WritableTxnMarkerPartitionResult, partition_index=partition,
                                                        error_code=code))
        results.append(build(R.WritableTxnMarkerResult, producer_id=mk.producer_id, topics=tuple(
            build(R.WritableTxnMarkerTopicResult, name=t, partitions=tuple(ps)) for t, ps in by_topic.items())))
    return build(R.WriteTxnMarkersResponse, markers=tuple(results))


# --- TxnOffsetCommit (28) ---------------------------------------------------------------------------

async def handle_txn_offset_commit(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    tid = request.transactional_id
    group_id = request.group_id
    wanted = [(t.name, p) for t in request.topics for p in t.partitions]

    def answer(codes: Callable[[str, Any], ErrorCode]) -> Any:
        by_topic: dict[str, list[Any]] = {}
        for topic, p in wanted:
            by_topic.setdefault(topic, []).append(build(R.TxnOffsetCommitResponsePartition,
                                                        partition_index=p.partition_index,
                                                        error_code=fenced(codes(topic, p), ctx.api_version, 3)))
        return build(R.TxnOffsetCommitResponse, throttle_time=_ZERO, topics=tuple(
            build(R.TxnOffsetCommitResponseTopic, name=t, partitions=tuple(ps)) for t, ps in by_topic.items()))

    refused: dict[tuple[str, int], ErrorCode] = {}  # screened out: they keep their own error

    def all_failed(code: ErrorCode) -> Any:
        return answer(lambda topic, p: refused.get((topic, int(p.partition_index)), code))

    if _denied(ctx, tid, rules.TXN_OFFSET_COMMIT_TXN):
        return all_failed(ErrorCode.transactional_id_authorization_failed)
    if not ctx.allowed(rules.TXN_OFFSET_COMMIT_GROUP, group_id):
        return all_failed(ErrorCode.group_authorization_failed)
    # Kafka's KafkaApis screens the partitions before the group coordinator sees them: a topic not in the
    # metadata (or a partition beyond its count) is UNKNOWN_TOPIC_OR_PARTITION, the rest goes on
    valid, screened = screen_partitions(ctx, request.topics, rules.TXN_OFFSET_COMMIT_TOPIC)
    refused.update(screened)
    if not valid:
        return answer(lambda topic, p: refused[(topic, int(p.partition_index))])
    try:
        groups = await GroupService.of_async(ctx.broker)
        gshard = groups.shard(group_id)  # NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS
        svc = await service_or_error(ctx)
    except KafkaError as e:
        return all_failed(e.code)
    shard = svc.shard_or_none(tid)
    if shard is not None:  # the transaction's coordinator is here: the group's partition must be in it
        code = shard.verify(tid, request.producer_id, request.producer_epoch,
                            (OFFSETS_TOPIC, groups.partition_for(group_id)))
        if code is ErrorCode.invalid_producer_epoch:
            code = ErrorCode.producer_fenced
        if code is not ErrorCode.none:
            return all_failed(code)
    group = gshard.groups.get(group_id)
    if group is not None:
        error = group.validate_offset_commit(getattr(request, "member_id", ""), getattr(request, "group_instance_id", None),
                                             int(getattr(request, "generation_id", -1)), transactional=True)
        if error is not None:
            return all_failed(error)
    max_metadata = groups.config.offset_metadata_max_bytes
    producer_id, producer_epoch = int(request.producer_id), int(request.producer_epoch)
    partition = groups.partition_for(group_id)
    # the log's own fencing of a transactional write (Kafka's append checks the producer epoch)
    try:
        lg = ctx.broker.replica_manager.get_partition(OFFSETS_TOPIC, partition).log
    except KafkaError:
        return all_failed(ErrorCode.not_coordinator)
    entry = lg.producer_state.producers.get(producer_id) if lg is not None else None
    if entry is not None and producer_epoch < entry.producer_epoch:
        return all_failed(ErrorCode.producer_fenced)
    offsets: dict[tuple[str, int], tuple[int, int, str]] = {}
    codes: dict[tuple[str, int], ErrorCode] = {}
    for topic, p in ((topic, p) for topic, parts in valid for p in parts):
        metadata = p.committed_metadata or ""
        if len(metadata) > max_metadata:
            codes[(topic, int(p.partition_index))] = ErrorCode.offset_metadata_too_large
            continue
        offsets[(topic, int(p.partition_index))] = (int(p.committed_offset),
                                                    int(getattr(p, "committed_leader_epoch", -1)), metadata)
    if offsets:
        try:
            await groups.runtime.write(
                partition, lambda s, now: s.handle_txn_offset_commit(group_id, producer_id, offsets, now),
                producer=(producer_id, producer_epoch))
        except KafkaError as e:
            return all_failed(e.code)
    codes.update(refused)
    return answer(lambda topic, p: codes.get((topic, int(p.partition_index)), ErrorCode.none))


# --- DescribeTransactions (65) / ListTransactions (66) / DescribeProducers (61) ----------------------

def _ms_datetime(ms: int) -> datetime.datetime:
    """kio carries Kafka's int64 millisecond timestamps as aware datetimes (-1 stays -1 on the wire)."""
    return datetime.datetime.fromtimestamp(ms / 1000.0, tz=datetime.UTC)


async def handle_describe_transactions(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    svc = await service_or_error(ctx)
    states = []
    for tid in request.transactional_ids:
        def state(code: ErrorCode, meta: Any = None, tid: str = tid) -> Any:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(meta.partitions if meta is not None else ()):
                if ctx.allowed(rules.DESCRIBE_TRANSACTIONS_TOPIC, topic):  # Kafka leaves the others out
                    by_topic.setdefault(topic, []).append(partition)
            return build(R.TransactionState, error_code=code, transactional_id=tid,
                         transaction_state=meta.state.kafka_name if meta is not None else "",
                         transaction_timeout=datetime.timedelta(milliseconds=meta.timeout_ms if meta else 0),
                         transaction_start_time=_ms_datetime(meta.start_ms if meta is not None else -1),
                         producer_id=meta.producer_id if meta is not None else -1,
                         producer_epoch=meta.producer_epoch if meta is not None else -1,
                         topics=tuple(build(R.TopicData, topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()))
        if _denied(ctx, tid, rules.DESCRIBE_TRANSACTIONS):
            states.append(state(ErrorCode.transactional_id_authorization_failed))
            continue
        try:
            shard = svc.runtime.shard(svc.partition_for(tid))
        except KafkaError as e:
            states.append(state(e.code))
            continue
        meta = shard.txns.get(tid)
        states.append(state(ErrorCode.transactional_id_not_found) if meta is None else state(ErrorCode.none, meta))
    return build(R.DescribeTransactionsResponse, throttle_time=_ZERO, transaction_states=tuple(states))


async def handle_list_transactions(ctx: RequestContext, request: Any) -> Any:
    """ListTransactions (66): the transactions of the coordinator shards here, filtered by state, producer id,
    (v1, KIP-994) how long they have been running and (v2, KIP-1152) a regular expression the whole
    transactional id must match (Kafka: java.util.regex, `matcher(id).matches()`; here Python's
    `re.fullmatch`, whose common syntax is the same); null or empty matches every id, one that does not
    compile answers INVALID_REGULAR_EXPRESSION and lists nothing."""
    R = ctx.response
    svc = await service_or_error(ctx)
    filters = list(request.state_filters or ())
    unknown = [f for f in filters if TxnState.from_kafka_name(f) is None]
    wanted_states = {TxnState.from_kafka_name(f) for f in filters} - {None}
    pids = {int(p) for p in request.producer_id_filters or ()}
    # v1 (KIP-994): only transactions running for longer than duration_filter ms (-1: all)
    duration = int(getattr(request, "duration_filter", -1))
    pattern_text = getattr(request, "transactional_id_pattern", None)
    pattern = None
    if pattern_text:
        try:
            pattern = re.compile(pattern_text)
        except re.error:
            return build(R.ListTransactionsResponse, throttle_time=_ZERO, error_code=ErrorCode.invalid_regular_expression,
                         unknown_state_filters=tuple(unknown), transaction_states=())
    now = ctx.broker.now_ms()
    out = []
    for _p, shard in svc.runtime.active_shards():
        for tid, meta in sorted(shard.txns.items()):
            if filters and meta.state not in wanted_states:
                continue
            if pids and meta.producer_id not in pids:
                continue
            if duration >= 0 and now - meta.start_ms <= duration:
                continue
            if pattern is not None and pattern.fullmatch(tid) is None:
                continue
            if _denied(ctx, tid, rules.LIST_TRANSACTIONS):
                continue
            out.append(build(R.TransactionState, transactional_id=tid, producer_id=meta.producer_id,
                             transaction_state=meta.state.kafka_name))
    return build(R.ListTransactionsResponse, throttle_time=_ZERO, error_code=ErrorCode.none,
                 unknown_state_filters=tuple(unknown), transaction_states=tuple(out))


async def handle_describe_producers(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    replicas = ctx.broker.replica_manager
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partition_indexes:
            try:
                ctx.check(rules.DESCRIBE_PRODUCERS, t.name)
                part = replicas.get_partition(t.name, int(p))
                lg = part.log
                assert lg is not None
                producers = []
                for e in sorted(lg.producer_state.producers.values(), key=lambda e: e.producer_id):
                    producers.append(build(R.ProducerState, producer_id=e.producer_id, producer_epoch=e.producer_epoch,
                                           last_sequence=e.last_seq,
                                           last_timestamp=max(e.batches[-1].timestamp if e.batches else -1,
                                                              e.last_timestamp),
                                           coordinator_epoch=e.coordinator_epoch,
                                           current_txn_start_offset=e.current_txn_first_offset))
                parts.append(build(R.PartitionResponse, partition_index=p, error_code=ErrorCode.none,
                                   error_message=None, active_producers=tuple(producers)))
            except KafkaError as e:
                parts.append(build(R.PartitionResponse, partition_index=p, error_code=e.code,
                                   error_message=e.message or None, active_producers=()))
        topics.append(build(R.TopicResponse, name=t.name, partitions=tuple(parts)))
    return build(R.DescribeProducersResponse, throttle_time=_ZERO, topics=tuple(topics))


# --- the produce check (produce.py) ------------------------------------------------------------------

def verify_produce(broker: Any, transactional_id: str, topic: str, partition: int, records: bytes) -> None:
    """A transactional Produce may only write to a partition of the producer's ongoing transaction
    (KIP-890's verification, made here when this broker coordinates the id; in a cluster whose coordinator
    is elsewhere the batch is appended unverified, as Kafka before 3.6, and so is every batch with
    transaction.partition.verification.enable=false). `records` is never null or empty (Produce refuses
    those first, INVALID_RECORD). Raises the KafkaError to answer."""
    if not broker.setting("transaction.partition.verification.enable"):
        return
    try:
        svc = TransactionService.of(broker)
    except KafkaError as e:
        raise KafkaError(ErrorCode.not_enough_replicas, f"no transaction coordinator: {e}") from e
    shard = svc.shard_or_none(transactional_id)
    if shard is None:
        if svc.runtime.state(svc.partition_for(transactional_id)) is not None:
            raise KafkaError(ErrorCode.not_enough_replicas, "the transaction coordinator is loading")
        return
    # the first batch's header fields read in place (no RecordBatchView per produce); a header or batch
    # RecordBatchView.parse would refuse as truncated is left to the log, which refuses it precisely
    n = len(records)
    if n < BATCH_HEADER_SIZE:
        return
    length, attributes, producer_id, producer_epoch = _unpack_txn_fields(records, 0)
    if length < BATCH_HEADER_SIZE - 12 or n < length + 12:
        return
    if not attributes & TRANSACTIONAL_MASK:
        raise KafkaError(ErrorCode.invalid_record, "a transactional produce must carry transactional batches")
    code = shard.verify(transactional_id, producer_id, producer_epoch, (topic, partition))
    if code is not ErrorCode.none:
        raise KafkaError(code, f"{topic}-{partition} is not part of the ongoing transaction of "
                               f"{transactional_id!r} (producer {producer_id}, epoch {producer_epoch})")


# batchLength (at 8), attributes (21), producerId (43), producerEpoch (51) of a v2 record batch header
_unpack_txn_fields = struct.Struct(">8xi9xh20xqh").unpack_from


# Kafka 3.9's ranges: AddPartitionsToTxn v5, AddOffsetsToTxn / EndTxn / TxnOffsetCommit v4 have the fields
# of the version before (they only allow TRANSACTION_ABORTABLE, which kaflite never answers). Kafka 4.1's
# EndTxn v5 (+ producer id / epoch in the answer) and TxnOffsetCommit v5 (same fields) belong to KIP-890's
# transaction protocol 2, which a client speaks only when transaction.version 2 is finalized: kaflite
# finalizes none, so they keep protocol 1's meaning (TxnOffsetCommit v5: the group's partition must have
# been added by AddOffsetsToTxn, as in v4)
APIS: ApiTable = {
    24: (0, 5, handle_add_partitions_to_txn),
    25: (0, 4, handle_add_offsets_to_txn),
    26: (0, 5, handle_end_txn),
    27: (1, 1, handle_write_txn_markers),
    28: (0, 5, handle_txn_offset_commit),
    61: (0, 0, handle_describe_producers),
    65: (0, 0, handle_describe_transactions),
    66: (0, 2, handle_list_transactions),
}
