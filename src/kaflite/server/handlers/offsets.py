"""Committed offsets over the wire: OffsetCommit (8) v2-9, OffsetFetch (9) v1-9, OffsetDelete (47) v0.

Rules:
- OffsetCommit (and TxnOffsetCommit, transactions.py) screens its partitions as Kafka's KafkaApis does
  before the coordinator sees them (`screen_partitions`): READ on the group refused answers
  GROUP_AUTHORIZATION_FAILED everywhere; a topic without READ answers TOPIC_AUTHORIZATION_FAILED, a topic
  not in the metadata, or a partition beyond its count, UNKNOWN_TOPIC_OR_PARTITION; a request left with
  no partition is answered without asking the coordinator (so it creates no group); the rest goes to the
  coordinator, which fences stale members and writes one OffsetCommit record per partition to
  `__consumer_offsets`;
- OffsetFetch v8+ carries several groups; v0-7 one; `topics` null (v2+) means every committed partition;
  a partition without a commit answers offset -1;
- v1 has no top-level error code: a group-level error is reported on every partition.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable
from typing import Any

from kaflite.coordinator import messages as m
from kaflite.protocol.errors import ErrorCode
from kaflite.server.acl import rules
from kaflite.server.context import RequestContext, build
from kaflite.server.handlers import ApiTable
from kaflite.server.handlers.groups import service, to_ms

_ZERO = datetime.timedelta(0)


def screen_partitions(ctx: RequestContext, topics: Iterable[Any], check: rules.Check) -> tuple[list[tuple[str, list[Any]]],
                                                                          dict[tuple[str, int], ErrorCode]]:
    """The partitions of an OffsetCommit / TxnOffsetCommit request the coordinator may see, by topic in
    the request's order, and the error of each other one (Kafka's KafkaApis: READ on the topic, then the
    topic in the metadata, then the partition within its count)."""
    valid: list[tuple[str, list[Any]]] = []
    refused: dict[tuple[str, int], ErrorCode] = {}
    metadata = ctx.broker.metadata
    for t in topics:
        if not ctx.allowed(check, t.name):
            code: ErrorCode | None = ErrorCode.topic_authorization_failed
        elif t.name not in metadata.topics:
            code = ErrorCode.unknown_topic_or_partition
        else:
            code = None
        parts = []
        for p in t.partitions:
            index = int(p.partition_index)
            if code is not None:
                refused[(t.name, index)] = code
            elif not metadata.has_partition(t.name, index):
                refused[(t.name, index)] = ErrorCode.unknown_topic_or_partition
            else:
                parts.append(p)
        if parts:
            valid.append((t.name, parts))
    return valid, refused


async def handle_offset_commit(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response

    def answer(errors: dict[tuple[str, int], ErrorCode]) -> Any:
        out = []
        for t in request.topics:  # answer in the request's order
            out.append(build(R.OffsetCommitResponseTopic, name=t.name, partitions=tuple(
                build(R.OffsetCommitResponsePartition, partition_index=p.partition_index,
                      error_code=errors.get((t.name, int(p.partition_index)), ErrorCode.unknown_server_error))
                for p in t.partitions)))
        return build(R.OffsetCommitResponse, throttle_time=_ZERO, topics=tuple(out))

    if not ctx.allowed(rules.OFFSET_COMMIT_GROUP, request.group_id):
        return answer({(t.name, int(p.partition_index)): ErrorCode.group_authorization_failed
                       for t in request.topics for p in t.partitions})
    valid, refused = screen_partitions(ctx, request.topics, rules.OFFSET_COMMIT_TOPIC)
    if not valid:
        return answer(refused)
    svc = await service(ctx)
    topics = tuple((name, tuple(m.OffsetCommitPartition(p.partition_index, p.committed_offset, p.committed_metadata,
                                                        getattr(p, "committed_leader_epoch", -1)) for p in parts))
                   for name, parts in valid)
    retention = to_ms(getattr(request, "retention_time", -1)) if ctx.api_version <= 4 else -1
    req = m.OffsetCommitRequest(request.group_id, topics, request.generation_id_or_member_epoch,
                                request.member_id, getattr(request, "group_instance_id", None), retention,
                                ctx.api_version)
    def failed(code: ErrorCode) -> m.OffsetCommitResponse:  # the whole commit failed: every partition says so
        return m.OffsetCommitResponse(tuple((t, tuple((p.partition, code) for p in ps)) for t, ps in req.topics))

    resp: m.OffsetCommitResponse = await svc.call(
        req.group_id, lambda shard, now: shard.handle_offset_commit(req, now), failed)
    errors = {(t, p): e for t, ps in resp.topics for p, e in ps}
    errors.update(refused)
    return answer(errors)


async def _fetch_one(ctx: RequestContext, group_id: str, topics: Any, require_stable: bool) -> m.OffsetFetchResponse:
    # Kafka: DESCRIBE on the group, then DESCRIBE on each topic; a named topic refused answers
    # TOPIC_AUTHORIZATION_FAILED per partition, one refused in an all-topics fetch is left out
    if not ctx.allowed(rules.OFFSET_FETCH_GROUP, group_id):
        return m.OffsetFetchResponse(group_id, rules.OFFSET_FETCH_GROUP.error)
    svc = await service(ctx)
    wanted = None if topics is None else tuple((t.name, tuple(t.partition_indexes)) for t in topics)
    allowed = {t for t in {name for name, _ in wanted or ()} if ctx.allowed(rules.OFFSET_FETCH_TOPIC, t)}
    asked = None if wanted is None else tuple((t, ps) for t, ps in wanted if t in allowed)
    req = m.OffsetFetchRequest(group_id, asked, require_stable)
    # a step without records: answered after any pending write of the shard, so never uncommitted state
    resp: m.OffsetFetchResponse = await svc.call(group_id, lambda shard, now: shard.handle_offset_fetch(req, now),
                                                 lambda code: m.OffsetFetchResponse(group_id, code))
    if wanted is None:
        kept = tuple((t, fs) for t, fs in resp.topics if ctx.allowed(rules.OFFSET_FETCH_TOPIC, t))
        return dataclasses.replace(resp, topics=kept)
    if len(allowed) == len({name for name, _ in wanted}):
        return resp
    code = rules.OFFSET_FETCH_TOPIC.error
    denied = tuple((t, tuple(m.FetchedOffset(p, -1, -1, "", code) for p in ps)) for t, ps in wanted if t not in allowed)
    return dataclasses.replace(resp, topics=resp.topics + denied)


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
    R = ctx.response
    if not ctx.allowed(rules.OFFSET_DELETE_GROUP, request.group_id):
        return build(R.OffsetDeleteResponse, error_code=rules.OFFSET_DELETE_GROUP.error, throttle_time=_ZERO, topics=())
    svc = await service(ctx)
    allowed = {t.name for t in request.topics if ctx.allowed(rules.OFFSET_DELETE_TOPIC, t.name)}
    req = m.OffsetDeleteRequest(request.group_id, tuple((t.name, tuple(p.partition_index for p in t.partitions))
                                                        for t in request.topics if t.name in allowed))
    if req.topics:
        resp: m.OffsetDeleteResponse = await svc.call(
            req.group_id, lambda shard, now: shard.handle_offset_delete(req, now), m.OffsetDeleteResponse)
    else:
        resp = m.OffsetDeleteResponse(ErrorCode.none)
    code = rules.OFFSET_DELETE_TOPIC.error
    resp = dataclasses.replace(resp, topics=resp.topics + tuple(
        (t.name, tuple((p.partition_index, code) for p in t.partitions)) for t in request.topics if t.name not in allowed))
    topics = tuple(build(R.OffsetDeleteResponseTopic, name=t, partitions=tuple(
        build(R.OffsetDeleteResponsePartition, partition_index=p, error_code=e) for p, e in ps))
        for t, ps in resp.topics)
    return build(R.OffsetDeleteResponse, error_code=resp.error, throttle_time=_ZERO, topics=topics)


APIS: ApiTable = {
    8: (2, 9, handle_offset_commit),
    9: (1, 9, handle_offset_fetch),
    47: (0, 0, handle_offset_delete),
}
