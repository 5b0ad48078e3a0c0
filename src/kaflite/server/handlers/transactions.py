"""Transaction APIs over the wire; the transaction coordinator itself is `TransactionService`
(kaflite.server.coordinators.transactions), whose rules say how steps, markers and the periodic task run.

APIs: InitProducerId with a transactional id (from init_producer_id.py), AddPartitionsToTxn (v0-v4, v4
batched / verify-only), AddOffsetsToTxn, EndTxn, WriteTxnMarkers, TxnOffsetCommit, DescribeTransactions,
ListTransactions, DescribeProducers; the FindCoordinator key type 1 (groups.py), the produce check
(`verify_produce`) calls into the service.

Rules of the handlers:
- TxnOffsetCommit screens its partitions first as OffsetCommit does (offsets.py `screen_partitions`: READ
  on the topic, UNKNOWN_TOPIC_OR_PARTITION for a topic not in the metadata or a partition beyond its count;
  a request left with none is answered without the coordinator's checks, as Kafka's KafkaApis);
- a request takes the service through `service_or_error` (`TransactionService.of_async`: on a single
  node `__transaction_state` created off the event loop first); one that cannot start is answered
  COORDINATOR_NOT_AVAILABLE;
- transactional offsets (TxnOffsetCommit) are written by the group coordinator at once, as OffsetCommit
  records in a transactional batch of the producer (its id and epoch) in the group's `__consumer_offsets`
  partition, pending in the group shard; the transaction's marker is written to that partition like any
  other and then handed to the group shard (COMMIT: the offsets become committed, ABORT: dropped); loading
  replays both, as Kafka does. OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT meanwhile;
- PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH to request versions older than KIP-588's.
"""

from __future__ import annotations

import datetime
import logging
import re
import struct
from collections.abc import Awaitable, Callable
from typing import Any

from kaflite.coordinator import OFFSETS_TOPIC
from kaflite.coordinator.transaction import (
    InitPidAnswer,
    TxnAnswer,
    TxnState,
)
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.record_batch import BATCH_HEADER_SIZE, TRANSACTIONAL_MASK
from kaflite.server.acl import rules
from kaflite.server.context import RequestContext, build
from kaflite.server.coordinators.broker_api import CoordinatorBroker
from kaflite.server.coordinators.groups import GroupService
from kaflite.server.coordinators.transactions import TransactionService, load_at_start
from kaflite.server.handlers import ApiTable
from kaflite.server.handlers.groups import to_ms
from kaflite.server.handlers.offsets import screen_partitions

log = logging.getLogger("kaflite.coordinator")

_ZERO = datetime.timedelta(0)



def fenced(code: ErrorCode, version: int, first_fenced_version: int) -> ErrorCode:
    """KIP-588: PRODUCER_FENCED only for request versions that know it, else INVALID_PRODUCER_EPOCH."""
    if code is ErrorCode.producer_fenced and version < first_fenced_version:
        return ErrorCode.invalid_producer_epoch
    return code


def on_start(broker: CoordinatorBroker) -> Awaitable[Any] | None:
    """At start-up (the registry's hook): `__transaction_state` loaded when it exists (`load_at_start`)."""
    return load_at_start(broker)


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

def verify_produce(broker: CoordinatorBroker, transactional_id: str, topic: str, partition: int, records: bytes) -> None:
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
