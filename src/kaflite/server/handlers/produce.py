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
  when the append returns (after the fsync when flush-before-ack is configured).
"""

from __future__ import annotations

import datetime
from typing import Any

from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.context import RequestContext, build
from kaflite.server.dispatcher import CloseConnection
from kaflite.server.handlers import ApiTable

API_KEY = 0
_ZERO = datetime.timedelta(0)
_UTC = datetime.UTC


def _ms_to_datetime(ms: int) -> datetime.datetime | None:
    if ms is None or ms < 0:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000.0, _UTC)


async def handle_produce(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    R = ctx.response
    acks = request.acks
    bad_acks = acks not in (0, 1, -1)
    failed: list[str] = []
    topics = []
    for topic_data in request.topic_data:
        name = topic_data.name
        parts = []
        for pdata in topic_data.partition_data:
            base_offset, log_start, append_time = -1, -1, -1
            message: str | None = None
            if bad_acks:
                code = ErrorCode.invalid_required_acks
            elif request.transactional_id is not None:
                code = ErrorCode.transactional_id_authorization_failed
                message = "kaflite does not support transactions"
            elif pdata.records is None or len(pdata.records) == 0:
                code = ErrorCode.corrupt_message
                message = "no record batch"
            else:
                try:
                    result = broker.append(name, pdata.index, pdata.records)
                except KafkaError as e:
                    code, message = e.code, e.message or None
                else:
                    code = ErrorCode.none
                    base_offset = result.base_offset
                    log_start = result.log_start_offset
                    append_time = result.log_append_time
            if code != ErrorCode.none:
                failed.append(f"{name}-{pdata.index}: {code.name}")
            parts.append(
                build(
                    R.PartitionProduceResponse,
                    index=pdata.index,
                    error_code=code,
                    base_offset=base_offset,
                    log_append_time=_ms_to_datetime(append_time),
                    log_start_offset=log_start,
                    record_errors=(),
                    error_message=message,
                )
            )
        topics.append(build(R.TopicProduceResponse, name=name, partition_responses=tuple(parts)))
    if acks == 0:
        if failed:
            raise CloseConnection("acks=0 produce failed: " + ", ".join(failed))
        return None
    return build(R.ProduceResponse, responses=tuple(topics), throttle_time=_ZERO)


APIS: ApiTable = {API_KEY: (3, 11, handle_produce)}
