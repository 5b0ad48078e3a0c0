"""ListOffsets (key 2), v1-7: offsets by special timestamp or by time.

Rules (Kafka's `Partition.fetchOffsetForTimestamp`):
- -2 (EARLIEST) answers the log start offset, -1 (LATEST) the high watermark (the last stable offset for
  read_committed, the same here: no transactions), both with timestamp -1;
- -3 (MAX_TIMESTAMP, v7) answers the first record carrying the largest timestamp, or -1/-1 when empty;
- a timestamp >= 0 answers the first offset whose timestamp is >= it, or -1/-1 when none is;
- leader epoch (v4+) is this broker's 0 when an offset is found.
"""

from __future__ import annotations

import datetime
from typing import Any

from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.context import RequestContext, build
from kaflite.server.handlers import ApiTable

API_KEY = 2
EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
_ZERO = datetime.timedelta(0)


def lookup_offset(log: Any, timestamp: int) -> tuple[int, int]:
    """(offset, timestamp) answered for one partition; (-1, -1) when there is none."""
    if timestamp == EARLIEST:
        return log.log_start_offset, -1
    if timestamp == LATEST:
        return log.high_watermark, -1
    hit = log.offset_for_timestamp(timestamp)
    if hit is None:
        return -1, -1
    return int(hit[0]), int(hit[1])


async def handle_list_offsets(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    R = ctx.response
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            code, offset, ts, epoch = ErrorCode.none, -1, -1, -1
            try:
                if p.timestamp < MAX_TIMESTAMP:
                    raise KafkaError(ErrorCode.invalid_request, f"bad timestamp {p.timestamp}")
                log = broker.get_log(t.name, p.partition_index)
                offset, ts = lookup_offset(log, p.timestamp)
                epoch = 0 if offset >= 0 else -1
            except KafkaError as e:
                code = e.code
            parts.append(
                build(
                    R.ListOffsetsPartitionResponse,
                    partition_index=p.partition_index,
                    error_code=code,
                    timestamp=ts,
                    offset=offset,
                    leader_epoch=epoch,
                )
            )
        topics.append(build(R.ListOffsetsTopicResponse, name=t.name, partitions=tuple(parts)))
    return build(R.ListOffsetsResponse, throttle_time=_ZERO, topics=tuple(topics))


APIS: ApiTable = {API_KEY: (1, 7, handle_list_offsets)}
