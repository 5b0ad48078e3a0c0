"""Produce (key 0), v0-13: append each partition's record batches to its log.

Rules (Kafka's `ReplicaManager.appendRecords`):
- `acks` must be 0, 1 or -1 (all), else every partition gets INVALID_REQUIRED_ACKS;
- produce never auto-creates a topic; which partition may be written here (UNKNOWN_TOPIC_OR_PARTITION,
  NOT_LEADER_OR_FOLLOWER) is `ReplicaManager.get_partition`'s decision;
- the storage engine validates the batches (CRC, sizes, idempotent sequences) and refuses with the
  error code the client must see; a duplicate of an already-appended idempotent batch is answered with
  success and the original offsets (no second copy is written);
- acks=0 gets no response at all; when one of its partitions failed, the connection is closed instead
  (the only way a fire-and-forget producer can notice, as Kafka does);
- acks=-1 waits (the purgatory, up to the request's timeout) for the high watermark to pass the batch;
  with a single in-sync replica it already has when the append returns (after the fsync when
  flush-before-ack is configured), so nothing waits; a partition whose ISR is smaller than its
  `min.insync.replicas` refuses acks=-1 with NOT_ENOUGH_REPLICAS, unwritten (`Partition`); the partitions
  of one request that wait are waited for together (`ReplicaManager.wait_all_committed`, Kafka's
  DelayedProduce): one deadline, the answer goes out once every one is decided, and each is answered its
  own code — NONE once replicated, REQUEST_TIMED_OUT for one still not replicated at the deadline,
  NOT_LEADER_OR_FOLLOWER for one whose leadership was lost, NOT_ENOUGH_REPLICAS_AFTER_APPEND;
- `flush.messages` (flush before acknowledge): when an append leaves that many unflushed messages
  (`Log.flush_needed`), the partition is answered only after `Log.flush_up_to` fsync'd it, in a worker thread,
  never on the event loop; concurrent producers share fsyncs (one fsync covers every append made before it
  started); a failed fsync answers KAFKA_STORAGE_ERROR;
- a batch refused for some of its records (a keyless record in a compacted topic, a timestamp out of
  range) answers the partition's error, its message, and (v8+, KIP-467) `record_errors`: the index in the
  batch and the reason of each refused record, so the client fails those and the rest as collateral;
- checks in Kafka's order: an unknown or not led partition (UNKNOWN_TOPIC_OR_PARTITION /
  NOT_LEADER_OR_FOLLOWER) before its records, null or empty records (INVALID_RECORD, "at least one record
  batch per partition", Kafka's `validateRecords`) before the transaction, so a transactional Produce is
  checked against the producer's ongoing transaction only for a partition led here that carries a batch;
- clients cannot write to internal topics (`__consumer_offsets`): INVALID_TOPIC_EXCEPTION;
- a zstd batch in Produce below v7 is UNSUPPORTED_COMPRESSION_TYPE for its partition, unwritten (zstd came
  with v7, KIP-110; Kafka's `ProduceRequest.validateRecords`);
- from v10 a partition answered NOT_LEADER_OR_FOLLOWER carries `current_leader` (the leader and its epoch in
  the metadata image) and the answer `node_endpoints` (those leaders' endpoints on the request's
  listener), KIP-951, so the producer redirects without a Metadata round trip;
- v0-v2 carry message sets of formats v0/v1, not record batches: each partition's set is converted into
  one magic-2 batch first (protocol/legacy_produce.py, Kafka's up-conversion), then handled as any
  batch; their answers lack what later versions added (v0: no throttle time, v0-v1: no log append time);
- v12 is v11 (KIP-890): a transactional client sends it only when the `transaction.version` feature 2 is
  finalized, which kaflite does not advertise (Kafka's producer then caps at v11, librdkafka at v10), so
  a transactional v12 is checked as v11 (the partition must already be in the transaction);
- v13 names topics by id (KIP-516): an id is resolved through the metadata image, before anything else; an id
  no topic has (or the zero id) is UNKNOWN_TOPIC_ID for each of its partitions (acks=0: the connection is
  closed), and the answer names topics by id.
"""

from __future__ import annotations

import asyncio
import logging
import types
import uuid
from typing import Any

from kaflite.protocol.compression import CODECS
from kaflite.protocol.encoders import ProducePartitionData, encode_produce_response
from kaflite.protocol.errors import ErrorCode, KafkaError, RecordValidationError
from kaflite.protocol.legacy_produce import to_record_batch
from kaflite.protocol.messages import PRODUCE_KEY
from kaflite.protocol.record_batch import iter_batches
from kaflite.server.acl import rules
from kaflite.server.context import RequestContext
from kaflite.server.dispatcher import CloseConnection
from kaflite.server.handlers import ApiTable, EncodedBody
from kaflite.server.handlers.metadata import leader_hints
from kaflite.server.handlers.partitions import per_partition
from kaflite.server.handlers.transactions import verify_produce
from kaflite.server.quota import PRODUCER_BYTE_RATE
from kaflite.server.replica import Partition
from kaflite.storage.errors import storage_errors
from kaflite.storage.log import Log

API_KEY = PRODUCE_KEY
TOPIC_IDS_VERSION = 13  # KIP-516: topics named by id from this version on
RECORD_BATCH_VERSION = 3  # the first Produce version carrying record batches (magic 2) rather than message sets
ZSTD_VERSION = 7  # the first Produce version allowed to carry zstd batches (KIP-110)
_ZSTD = CODECS["zstd"]
_NO_ID = uuid.UUID(int=0)
PartitionAnswer = ProducePartitionData
log = logging.getLogger("kaflite.server")
# Refusals caused by what the client sent (logged once per request, as Kafka logs failed appends).
BAD_DATA = frozenset(
    {
        ErrorCode.corrupt_message,
        ErrorCode.invalid_record,
        ErrorCode.unsupported_compression_type,
        ErrorCode.message_too_large,
        ErrorCode.record_list_too_large,
        ErrorCode.invalid_timestamp,
    }
)


async def handle_produce(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    replicas = broker.replica_manager
    metrics = broker.metrics
    acks = request.acks
    bad_acks = acks not in (0, 1, -1)
    transactional_id: Any = getattr(request, "transactional_id", None)  # from v3
    transactional = transactional_id is not None
    legacy = ctx.api_version < RECORD_BATCH_VERSION
    zstd_refused = ctx.api_version < ZSTD_VERSION
    failed: list[str] = []
    bad_data: list[str] = []
    topics: list[tuple[str, list[PartitionAnswer]]] = []
    # acks=-1 answers whose batch the high watermark has not passed yet: (topic slot, answer, partition,
    # offset the high watermark must reach)
    pending: list[tuple[int, PartitionAnswer, Partition, int]] = []
    # flush.messages: answers whose batch must be fsync'd first (topic slot, answer, log, end offset)
    to_flush: list[tuple[int, PartitionAnswer, Log, int]] = []

    # Kafka refuses a transactional produce whole without WRITE on its transactional id
    txn_refused = transactional and not ctx.allowed(rules.PRODUCE_TXN, transactional_id)
    topic_allowed: dict[str, bool] = {}

    def append(topic: str, pdata: Any) -> PartitionAnswer:
        if txn_refused:
            raise KafkaError(rules.PRODUCE_TXN.error)
        allowed = topic_allowed.get(topic)
        if allowed is None:
            allowed = topic_allowed[topic] = ctx.allowed(rules.PRODUCE_TOPIC, topic)
        if not allowed:
            raise KafkaError(rules.PRODUCE_TOPIC.error)
        if bad_acks:
            raise KafkaError(ErrorCode.invalid_required_acks)
        if transactional or not pdata.records:
            # Kafka's order: an unknown (or not led) partition is answered as such first, then the batches
            # are validated (KafkaApis), then the transaction verified (ReplicaManager)
            replicas.get_partition(topic, pdata.index)
            if not pdata.records:  # null (the field is nullable) or empty: `ProduceRequest.validateRecords`
                raise KafkaError(ErrorCode.invalid_record, f"Produce requests with version {ctx.api_version} "
                                                           "must have at least one record batch per partition")
            # the partition must be part of the producer's ongoing transaction
            verify_produce(broker, transactional_id, topic, pdata.index, pdata.records)
        records = pdata.records
        if legacy:
            replicas.get_partition(topic, pdata.index)  # an unknown or not led partition answered as such first
            records = to_record_batch(records)
        elif zstd_refused and records and any(b.compression == _ZSTD for b in iter_batches(records)):
            raise KafkaError(ErrorCode.unsupported_compression_type,
                             f"Produce v{ctx.api_version} cannot carry zstd batches (v{ZSTD_VERSION}+ can)")
        try:
            part, result = replicas.append_records(topic, pdata.index, records, acks)
        except RecordValidationError as e:  # KIP-467: which records, and why (v8+ answers carry them)
            return refused(topic, pdata, e.code, e.message, e.record_errors)
        if metrics is not None:
            metrics.produced(topic, 0 if result.duplicate else result.last_offset - result.base_offset + 1,
                             len(pdata.records))
        answer = (pdata.index, 0, result.base_offset, result.log_append_time, result.log_start_offset, None, ())
        log_ = part.log
        if log_ is not None and not result.duplicate and log_.flush_needed(result.last_offset + 1):
            to_flush.append((len(topics), answer, log_, result.last_offset + 1))
        if acks == -1 and not part.commits_on_append:
            done, code = part.check_enough_replicas_reach_offset(result.last_offset + 1)
            if not done:
                pending.append((len(topics), answer, part, result.last_offset + 1))
            elif code is not ErrorCode.none:
                answer = (pdata.index, code.value, *answer[2:])
                failed.append(f"{topic}-{pdata.index}: {code.name}")  # (every error answered is in `failed`)
        return answer

    def refused(topic: str, pdata: Any, code: ErrorCode, message: str | None,
                record_errors: tuple[tuple[int, str | None], ...] = ()) -> PartitionAnswer:
        if metrics is not None:
            metrics.produce_failed(topic)
        failed.append(f"{topic}-{pdata.index}: {code.name}")
        if code in BAD_DATA:
            bad_data.append(f"{topic}-{pdata.index}: {code.name.upper()} {message or ''}".rstrip())
        return (pdata.index, code.value, -1, -1, -1, message, record_errors)

    # how the answer names each topic of `topics`: its name, or from v13 its id
    keys: list[str | uuid.UUID] = []
    by_id = ctx.api_version >= TOPIC_IDS_VERSION
    for topic_data in request.topic_data:
        if by_id:
            topic_id = topic_data.topic_id or _NO_ID
            found = broker.metadata.topic_by_id(topic_id) if topic_id != _NO_ID else None
            if found is None:  # Kafka answers an unknown id before looking at anything else
                code = ErrorCode.unknown_topic_id
                failed.extend(f"{topic_id}-{p.index}: {code.name}" for p in topic_data.partition_data)
                topics.append((str(topic_id), [(p.index, code.value, -1, -1, -1, None, ())
                                               for p in topic_data.partition_data]))
                keys.append(topic_id)
                continue
            by_name = types.SimpleNamespace(name=found.name, partition_data=topic_data.partition_data)
            topics.extend(per_partition((by_name,), append, refused, partitions="partition_data"))
            keys.append(topic_id)
        else:
            topics.extend(per_partition((topic_data,), append, refused, partitions="partition_data"))
            keys.append(topic_data.name)
    if to_flush:  # flush.messages: fsync'd in a worker thread (group commit: Log.flush_up_to), then answered
        flush_failed = await asyncio.to_thread(_flush_logs, [(log_, end) for _s, _a, log_, end in to_flush])
        for slot, answer, log_, _end in to_flush:
            if log_ in flush_failed:
                parts = topics[slot][1]
                i = next(i for i, a in enumerate(parts) if a is answer)
                parts[i] = (answer[0], ErrorCode.kafka_storage_error.value, -1, -1, -1, flush_failed[log_], ())
                failed.append(f"{topics[slot][0]}-{answer[0]}: {ErrorCode.kafka_storage_error.name}")
    if pending:  # DelayedProduce: wait for the high watermark (never with a single in-sync replica)
        deadline = broker.now_ms() + request.timeout.total_seconds() * 1000.0
        codes = await replicas.wait_all_committed([(part, required) for _s, _a, part, required in pending],
                                                  deadline)
        for (slot, answer, _part, _required), code in zip(pending, codes, strict=True):
            if code is not ErrorCode.none:
                parts = topics[slot][1]
                i = next(i for i, a in enumerate(parts) if a is answer)
                parts[i] = (answer[0], code.value, *answer[2:])
                if metrics is not None:
                    metrics.produce_failed(topics[slot][0])
                failed.append(f"{topics[slot][0]}-{answer[0]}: {code.name}")
    if bad_data:
        log.warning(
            "produce from %s (client %r) refused: %s", ctx.client_host or "?", ctx.client_id, "; ".join(bad_data[:4])
        )
    # the request's bytes count against the producer's quota (Kafka's quotas.produce, also with acks=0:
    # the dispatcher then mutes the connection without an answer)
    ctx.record_quota(PRODUCER_BYTE_RATE, ctx.request_bytes)
    ctx.record_request_time()  # now, so the answer encoded below carries its throttle too
    if acks == 0:
        if failed:
            raise CloseConnection("acks=0 produce failed: " + ", ".join(failed))
        return None
    leaders: dict[tuple[str | uuid.UUID, int], tuple[int, int]] | None = None
    endpoints: list[tuple[int, str, int, str | None]] = []
    # KIP-951: where a partition's leader is now; looked for only when some partition failed (every error
    # answered is in `failed`), not over every answer of a request to thousands of partitions
    if failed and ctx.api_version >= 10:
        moved = {(t, a[0]): (key, a[0]) for (t, answers), key in zip(topics, keys, strict=True) for a in answers
                 if a[1] == ErrorCode.not_leader_or_follower.value}
        if moved:
            hints, endpoints = leader_hints(ctx, moved)
            leaders = {moved[tp]: hint for tp, hint in hints.items()}
    named = [(key, answers) for key, (_t, answers) in zip(keys, topics, strict=True)]
    return EncodedBody([encode_produce_response(ctx.api_version, ctx.throttle_time_ms, named, leaders, endpoints)])


def _flush_logs(logs: list[tuple[Log, int]]) -> dict[Log, str]:
    """Worker thread: fsync each log up to its end offset; the logs whose fsync failed, with why."""
    failed: dict[Log, str] = {}
    for log_, end in logs:
        try:
            log_.flush_up_to(end)
        except OSError as e:
            storage_errors.report(log_.dir.name, "flush", e)
            failed[log_] = f"flush of {log_.dir.name} failed: {e.strerror or e}"
    return failed


APIS: ApiTable = {API_KEY: (0, 13, handle_produce)}
