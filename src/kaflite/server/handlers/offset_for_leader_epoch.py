"""OffsetForLeaderEpoch (key 23), v2-4: where a leader epoch ended, for a client validating its position
after a leader change (KIP-320) or a follower truncating (KIP-101).

Rules (Kafka's `Partition.lastOffsetForLeaderEpoch`):
- which partition may be asked here is `ReplicaManager.get_partition`'s decision: UNKNOWN_TOPIC_OR_PARTITION,
  NOT_LEADER_OR_FOLLOWER (this broker does not lead it), and `current_leader_epoch` (-1 = not checked)
  older than the partition's leader epoch answers FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH;
- otherwise the partition's leader-epoch cache answers (Kafka's `endOffsetFor`): the latest epoch (a
  leader's current one from its election on): (it, the log end offset); between entries: (the largest
  epoch <= the requested one, the start offset of the next); older than every entry: (the requested
  epoch, the first entry's start); newer than every entry, or no entry at all: (-1, -1).
"""

from __future__ import annotations

import datetime
from typing import Any

from kaflite.protocol.errors import ErrorCode
from kaflite.server.acl import rules
from kaflite.server.context import RequestContext, build
from kaflite.server.handlers import ApiTable
from kaflite.server.handlers.partitions import per_partition

API_KEY = 23
_ZERO = datetime.timedelta(0)


async def handle_offset_for_leader_epoch(ctx: RequestContext, request: Any) -> Any:
    replicas = ctx.broker.replica_manager
    R = ctx.response
    # a follower with CLUSTER_ACTION sees every partition, anyone else needs DESCRIBE on each topic
    follower = ctx.allowed(rules.FETCH_FOLLOWER)

    def answer(topic: str, p: Any) -> Any:
        if not follower:
            ctx.check(rules.LIST_OFFSETS_TOPIC, topic)
        part = replicas.get_partition(topic, p.partition, current_leader_epoch=int(p.current_leader_epoch))
        assert part.log is not None  # get_partition checked it
        epoch, offset = part.log.end_offset_for_epoch(int(p.leader_epoch))
        return build(R.EpochEndOffset, error_code=ErrorCode.none, partition=p.partition, leader_epoch=epoch,
                     end_offset=offset)

    def refused(_topic: str, p: Any, code: ErrorCode, _message: str | None) -> Any:
        return build(R.EpochEndOffset, error_code=code, partition=p.partition, leader_epoch=-1, end_offset=-1)

    topics = tuple(build(R.OffsetForLeaderTopicResult, topic=name, partitions=tuple(parts))
                   for name, parts in per_partition(request.topics, answer, refused, name="topic"))
    return build(R.OffsetForLeaderEpochResponse, throttle_time=_ZERO, topics=topics)


APIS: ApiTable = {API_KEY: (2, 4, handle_offset_for_leader_epoch)}
