"""Produce (key 0), v3-11: append each partition's record batches to its log.

Rules (Kafka's `ReplicaManager.appendRecords`):
- `acks` must be 0, 1 or -1 (all), else every partition gets INVALID_REQUIRED_ACKS;
- produce never auto-creates a topic: an unknown topic/partition gets UNKNOWN_TOPIC_OR_PARTITION;
- the storage engine validates the batches (CRC, sizes, idempotent sequences) and refuses with the
  error code the client must see; a duplicate of an already-appended idempotent batch is answered with
  success and the original offsets (no second copy is written);
- acks=0 gets no response at all; when one of its partitions failed, the connection is closed instead
  (the only way a fire-and-forget producer can notice, as Kafka does);
- acks=-1 waits for the high watermark to pass the batch; with a single in-sync replica it already has
  when the append returns (after the fsync when flush-before-ack is configured); a topic whose
  `min.insync.replicas` is above the ISR size (1) refuses acks=-1 with NOT_ENOUGH_REPLICAS, unwritten;
- clients cannot write to internal topics (`__consumer_offsets`): INVALID_TOPIC_EXCEPTION.
"""

from __future__ import annotations

import logging
from typing import Any

from kaflite.cluster.metadata import INTERNAL_TOPICS
from kaflite.protocol.encoders import ProducePartitionData, encode_produce_response
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.context import RequestContext
from kaflite.server.dispatcher import CloseConnection
from kaflite.server.handlers import ApiTable, EncodedBody

API_KEY = 0
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
    acks = request.acks
    bad_acks = acks not in (0, 1, -1)
    failed: list[str] = []
    bad_data: list[str] = []
    topics: list[tuple[str, list[ProducePartitionData]]] = []
    for topic_data in request.topic_data:
        name = topic_data.name
        parts: list[ProducePartitionData] = []
        for pdata in topic_data.partition_data:
            base_offset, log_start, append_time = -1, -1, -1
            message: str | None = None
            if bad_acks:
                code = ErrorCode.invalid_required_acks
            elif request.transactional_id is not None:
                code = ErrorCode.transactional_id_authorization_failed
                message = "kaflite does not support transactions"
            elif name in INTERNAL_TOPICS:
                code = ErrorCode.invalid_topic_exception
                message = f"Cannot append to internal topic {name}"
            elif acks == -1 and broker.metadata.topics.get(name) is not None and broker.min_insync_replicas(name) > 1:
                code = ErrorCode.not_enough_replicas
                message = f"The size of the current ISR [{broker.node_id}] is insufficient to satisfy the min.isr requirement of {broker.min_insync_replicas(name)}"
            elif pdata.records is None or len(pdata.records) == 0:
                code = ErrorCode.corrupt_message
                message = "no record batch"
            else:
                try:
                    result = broker.append(name, pdata.index, pdata.records)
                except KafkaError as e:
                    code, message = e.code, e.message or None
                except OSError as e:  # disk full, I/O error: Kafka's KAFKA_STORAGE_ERROR, the broker lives on
                    log.error("append to %s-%d failed: %s", name, pdata.index, e)
                    code, message = ErrorCode.kafka_storage_error, str(e)
                else:
                    code = ErrorCode.none
                    if broker.metrics is not None:
                        broker.metrics.produced(name, 0 if result.duplicate else result.last_offset - result.base_offset + 1,
                                                len(pdata.records))
                    base_offset = result.base_offset
                    log_start = result.log_start_offset
                    append_time = result.log_append_time
            if code != ErrorCode.none:
                if broker.metrics is not None:
                    broker.metrics.produce_failed(name)
                failed.append(f"{name}-{pdata.index}: {code.name}")
                if code in BAD_DATA:
                    bad_data.append(f"{name}-{pdata.index}: {code.name.upper()} {message or ''}".rstrip())
            parts.append((pdata.index, code.value, base_offset, append_time, log_start, message))
        topics.append((name, parts))
    if bad_data:
        log.warning(
            "produce from %s (client %r) refused: %s", ctx.client_host or "?", ctx.client_id, "; ".join(bad_data[:4])
        )
    if acks == 0:
        if failed:
            raise CloseConnection("acks=0 produce failed: " + ", ".join(failed))
        return None
    return EncodedBody([encode_produce_response(ctx.api_version, 0, topics)])


APIS: ApiTable = {API_KEY: (3, 11, handle_produce)}
