"""Committed offsets over the wire: OffsetCommit (8) v2-9, OffsetFetch (9) v1-9, OffsetDelete (47) v0.

Rules:
- a commit for a partition that does not exist is answered UNKNOWN_TOPIC_OR_PARTITION (as Kafka's
  request handler does before the coordinator sees it); the rest goes to the coordinator, which fences
  stale members and writes one OffsetCommit record per partition to `__consumer_offsets`;
- OffsetFetch v8+ carries several groups; v0-7 one; `topics` null (v2+) means every committed partition;
  a partition without a commit answers offset -1;
- v1 has no top-level error code: a group-level error is reported on every partition.
"""

from __future__ import annotations

import datetime
from typing import Any

from kaflite.coordinator import messages as m
from kaflite.protocol.errors import ErrorCode
from kaflite.server.context import RequestContext, build
from kaflite.server.handlers import ApiTable
from kaflite.server.handlers.groups import service, to_ms

_ZERO = datetime.timedelta(0)


async def handle_offset_commit(ctx: RequestContext, request: Any) -> Any:
    svc = service(ctx)
    broker = ctx.broker
    unknown: dict[str, list[int]] = {}
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            if not broker.metadata.has_partition(t.name, p.partition_index):
                unknown.setdefault(t.name, []).append(p.partition_index)
                continue
            parts.append(m.OffsetCommitPartition(p.partition_index, p.committed_offset, p.committed_metadata,
                                                 getattr(p, "committed_leader_epoch", -1)))
        if parts:
            topics.append((t.name, tuple(parts)))
    retention = to_ms(getattr(request, "retention_time", -1)) if ctx.api_version <= 4 else -1
    req = m.OffsetCommitRequest(request.group_id, tuple(topics), request.generation_id_or_member_epoch,
                                request.member_id, getattr(request, "group_instance_id", None), retention,
                                ctx.api_version)
    def failed(code: ErrorCode) -> m.OffsetCommitResponse:  # the whole commit failed: every partition says so
        return m.OffsetCommitResponse(tuple((t, tuple((p.partition, code) for p in ps)) for t, ps in req.topics))

    resp: m.OffsetCommitResponse = await svc.call(
        req.group_id, lambda shard, now: shard.handle_offset_commit(req, now), failed)
    errors = {(t, p): e for t, ps in resp.topics for p, e in ps}
    for t, ps in unknown.items():
        for p in ps:
            errors[(t, p)] = ErrorCode.unknown_topic_or_partition
    R = ctx.response
    out = []
    for t in request.topics:  # answer in the request's order
        out.append(build(R.OffsetCommitResponseTopic, name=t.name, partitions=tuple(
            build(R.OffsetCommitResponsePartition, partition_index=p.partition_index,
                  error_code=errors.get((t.name, p.partition_index), ErrorCode.unknown_server_error))
            for p in t.partitions)))
    return build(R.OffsetCommitResponse, throttle_time=_ZERO, topics=tuple(out))


async def _fetch_one(ctx: RequestContext, group_id: str, topics: Any, require_stable: bool) -> m.OffsetFetchResponse:
    svc = service(ctx)
    wanted = None if topics is None else tuple((t.name, tuple(t.partition_indexes)) for t in topics)
    req = m.OffsetFetchRequest(group_id, wanted, require_stable)
    # a step without records: answered after any pending write of the shard, so never uncommitted state
    resp: m.OffsetFetchResponse = await svc.call(group_id, lambda shard, now: shard.handle_offset_fetch(req, now),
                                                 lambda code: m.OffsetFetchResponse(group_id, code))
    return resp


async def handle_offset_fetch(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    v = ctx.api_version
    if v >= 8:
        groups = []
        for g in request.groups:
            resp = await _fetch_one(ctx, g.group_id, g.topics, request.require_stable)
            topics = tuple(build(R.OffsetFetchResponseTopics, name=t, partitions=tuple(
                build(R.OffsetFetchResponsePartitions, partition_index=f.partition, committed_offset=f.offset,
                      committed_leader_epoch=f.leader_epoch, metadata=f.metadata, error_code=f.error)
                for f in fs)) for t, fs in resp.topics)
            groups.append(build(R.OffsetFetchResponseGroup, group_id=g.group_id, topics=topics, error_code=resp.error))
        return build(R.OffsetFetchResponse, throttle_time=_ZERO, groups=tuple(groups))
    resp = await _fetch_one(ctx, request.group_id, request.topics, getattr(request, "require_stable", False))
    partition_error = resp.error if v < 2 else None  # v1: no top-level error code
    topics = tuple(build(R.OffsetFetchResponseTopic, name=t, partitions=tuple(
        build(R.OffsetFetchResponsePartition, partition_index=f.partition, committed_offset=f.offset,
              committed_leader_epoch=f.leader_epoch, metadata=f.metadata,
              error_code=partition_error if partition_error is not None else f.error)
        for f in fs)) for t, fs in resp.topics)
    return build(R.OffsetFetchResponse, throttle_time=_ZERO, topics=topics, error_code=resp.error)


async def handle_offset_delete(ctx: RequestContext, request: Any) -> Any:
    svc = service(ctx)
    R = ctx.response
    req = m.OffsetDeleteRequest(request.group_id, tuple((t.name, tuple(p.partition_index for p in t.partitions))
                                                        for t in request.topics))
    resp: m.OffsetDeleteResponse = await svc.call(
        req.group_id, lambda shard, now: shard.handle_offset_delete(req, now), m.OffsetDeleteResponse)
    topics = tuple(build(R.OffsetDeleteResponseTopic, name=t, partitions=tuple(
        build(R.OffsetDeleteResponsePartition, partition_index=p, error_code=e) for p, e in ps))
        for t, ps in resp.topics)
    return build(R.OffsetDeleteResponse, error_code=resp.error, throttle_time=_ZERO, topics=topics)


APIS: ApiTable = {
    8: (2, 9, handle_offset_commit),
    9: (1, 9, handle_offset_fetch),
    47: (0, 0, handle_offset_delete),
}
