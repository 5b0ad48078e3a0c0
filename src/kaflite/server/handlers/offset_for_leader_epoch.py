"""OffsetForLeaderEpoch (key 23), v2-4: where a leader epoch ended, for a client validating its position
after a leader change (KIP-320) or a follower truncating (KIP-101).

Rules (Kafka's `Partition.lastOffsetForLeaderEpoch`):
- an unknown topic or partition answers UNKNOWN_TOPIC_OR_PARTITION;
- `current_leader_epoch` (-1 = not checked) older than the partition's leader epoch answers
  FENCED_LEADER_EPOCH, newer answers UNKNOWN_LEADER_EPOCH (this broker leads every partition at epoch 0);
- otherwise (largest epoch <= the requested one, the start offset of the next epoch or the log end
  offset for the latest), from the partition's leader-epoch cache; (-1, -1) when the epoch predates
  every entry or the log never had one.
"""

from __future__ import annotations

import datetime
from typing import Any

from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.context import RequestContext, build
from kaflite.server.handlers import ApiTable

API_KEY = 23
LEADER_EPOCH = 0  # single node: this broker has led every partition since it was created
_ZERO = datetime.timedelta(0)


def epoch_end(log: Any, current_leader_epoch: int, leader_epoch: int) -> tuple[ErrorCode, int, int]:
    if current_leader_epoch >= 0 and current_leader_epoch < LEADER_EPOCH:
        return ErrorCode.fenced_leader_epoch, -1, -1
    if current_leader_epoch > LEADER_EPOCH:
        return ErrorCode.unknown_leader_epoch, -1, -1
    epoch, offset = log.end_offset_for_epoch(leader_epoch)
    return ErrorCode.none, epoch, offset


async def handle_offset_for_leader_epoch(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    R = ctx.response
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            try:
                code, epoch, offset = epoch_end(broker.get_log(t.topic, p.partition),
                                                int(p.current_leader_epoch), int(p.leader_epoch))
            except KafkaError as e:
                code, epoch, offset = e.code, -1, -1
            parts.append(build(R.EpochEndOffset, error_code=code, partition=p.partition, leader_epoch=epoch,
                               end_offset=offset))
        topics.append(build(R.OffsetForLeaderTopicResult, topic=t.topic, partitions=tuple(parts)))
    return build(R.OffsetForLeaderEpochResponse, throttle_time=_ZERO, topics=tuple(topics))


APIS: ApiTable = {API_KEY: (2, 4, handle_offset_for_leader_epoch)}
