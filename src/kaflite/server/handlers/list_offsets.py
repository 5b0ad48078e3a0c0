"""ListOffsets (key 2), v1-10: offsets by special timestamp or by time.

Rules (Kafka's `Partition.fetchOffsetForTimestamp`):
- -2 (EARLIEST) answers the log start offset, -1 (LATEST) the high watermark (the last stable offset for
  read_committed, the same here: no transactions), both with timestamp -1;
- -3 (MAX_TIMESTAMP, v7) answers the first record carrying the largest timestamp, or -1/-1 when empty;
- -4 (EARLIEST_LOCAL, v8, KIP-405) answers what -2 does: without tiered storage the local log starts at
  the log start offset (Kafka's UnifiedLog with remote storage disabled);
- -5 (LATEST_TIERED, v9, KIP-1005) answers offset -1 with timestamp -1 and epoch -1: nothing is tiered
  (Kafka's answer when remote storage is disabled);
- a timestamp >= 0 answers the first offset whose timestamp is >= it, or -1/-1 when none is;
- leader epoch (v4+): the partition's current leader epoch for LATEST, else the epoch the found record was
  written in (the leader-epoch cache); -1 when no offset is found;
- v10's `timeout_ms` (KIP-1075) bounds how long the broker may wait for offsets read from remote (tiered)
  storage; nothing is tiered (as Kafka with remote storage disabled), every answer is immediate, so it has
  no effect;
- which partition may be asked here (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH
  / UNKNOWN_LEADER_EPOCH for the request's current leader epoch) is `ReplicaManager.get_partition`'s.
"""

from __future__ import annotations

import datetime
from typing import Any

from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.acl import rules
from kaflite.server.context import RequestContext, build
from kaflite.server.handlers import ApiTable
from kaflite.server.handlers.partitions import per_partition
from kaflite.server.replica import Partition

API_KEY = 2
EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -2, -1, -3, -4, -5
_ZERO = datetime.timedelta(0)


def lookup_offset(part: Partition, timestamp: int, read_committed: bool = False) -> tuple[int, int, int]:
    """(offset, timestamp, leader epoch) answered for one partition; (-1, -1, -1) when there is none."""
    log = part.log
    assert log is not None  # get_partition checked it
    if timestamp == LATEST_TIERED:
        return -1, -1, -1
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        offset = log.log_start_offset
        return offset, -1, part.epoch_for_offset(offset)
    if timestamp == LATEST:  # Kafka's lastFetchableOffset
        return part.last_stable_offset if read_committed else part.high_watermark, -1, part.leader_epoch
    hit = log.offset_for_timestamp(timestamp)
    if hit is None:
        return -1, -1, -1
    return int(hit[0]), int(hit[1]), part.epoch_for_offset(int(hit[0]))


async def handle_list_offsets(ctx: RequestContext, request: Any) -> Any:
    replicas = ctx.broker.replica_manager
    R = ctx.response
    read_committed = getattr(request, "isolation_level", 0) == 1

    def answer(topic: str, p: Any) -> Any:
        ctx.check(rules.LIST_OFFSETS_TOPIC, topic)
        if p.timestamp < LATEST_TIERED:
            raise KafkaError(ErrorCode.invalid_request, f"bad timestamp {p.timestamp}")
        part = replicas.get_partition(topic, p.partition_index,
                                      current_leader_epoch=int(getattr(p, "current_leader_epoch", -1)))
        offset, ts, epoch = lookup_offset(part, p.timestamp, read_committed)
        return build(R.ListOffsetsPartitionResponse, partition_index=p.partition_index, error_code=ErrorCode.none,
                     timestamp=ts, offset=offset, leader_epoch=epoch)

    def refused(_topic: str, p: Any, code: ErrorCode, _message: str | None) -> Any:
        return build(R.ListOffsetsPartitionResponse, partition_index=p.partition_index, error_code=code,
                     timestamp=-1, offset=-1, leader_epoch=-1)

    topics = tuple(build(R.ListOffsetsTopicResponse, name=name, partitions=tuple(parts))
                   for name, parts in per_partition(request.topics, answer, refused))
    return build(R.ListOffsetsResponse, throttle_time=_ZERO, topics=topics)


APIS: ApiTable = {API_KEY: (1, 10, handle_list_offsets)}
