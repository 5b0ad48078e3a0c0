"""The share coordinator's RPCs over the wire; the share coordinator itself is `ShareStateService`
(kaflite.server.coordinators.share_state), whose rules say where a share partition's state lives.

Rules of the handlers:
- the share coordinator's RPCs, v0 each (what Kafka 4.1 serves): InitializeShareGroupState (83),
  ReadShareGroupState (84), WriteShareGroupState (85), DeleteShareGroupState (86),
  ReadShareGroupStateSummary (87), answered per (topic id, partition) by the shard's steps (state_shard's
  rules): CLUSTER_ACTION on the cluster (else CLUSTER_AUTHORIZATION_FAILED for every partition, as Kafka);
  UNSUPPORTED_VERSION with group.share.enable=false (ApiVersions does not advertise them then); an empty
  group id, a null topic id or a negative partition INVALID_REQUEST; no `__share_group_state` yet (being
  created, off the event loop) COORDINATOR_NOT_AVAILABLE; a key whose state partition another broker leads
  NOT_COORDINATOR (FindCoordinator key type 2 names the right one), one loading
  COORDINATOR_LOAD_IN_PROGRESS. Writes are answered once committed. They act on the durable state only:
  a share partition this broker has in use keeps its state in memory and writes it over at its next
  change (in Kafka only a share partition's leader writes its state, through these RPCs).
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable
from typing import Any

from kaflite.coordinator.share.partition import StateBatch
from kaflite.coordinator.share.state_records import SHARE_GROUP_STATE_TOPIC, ShareStateKey
from kaflite.coordinator.share.state_shard import ShareStateShard, StateAnswer
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.acl import rules
from kaflite.server.context import RequestContext, build
from kaflite.server.coordinators.share_state import ShareStateService
from kaflite.server.handlers import ApiTable

__all__ = ["APIS"]

# --- the share coordinator's RPCs (83-87) -------------------------------------------------------------

_ZERO_ID = uuid.UUID(int=0)
_ZERO = datetime.timedelta(0)
Step = Callable[[ShareStateShard, int], Any]


async def _serve(ctx: RequestContext, request: Any, step: Callable[[ShareStateKey, Any], Step]
                 ) -> list[tuple[uuid.UUID | None, list[tuple[int, StateAnswer]]]]:
    """Every (topic id, partition) of the request answered by `step(key, partition data)` on its shard (or
    the error that keeps it from running), in request order."""
    broker = ctx.broker
    denied = not ctx.allowed(rules.SHARE_STATE)
    enabled = bool(broker.setting("group.share.enable"))
    svc = ShareStateService.of(broker) if enabled and not denied else None
    pending: list[tuple[uuid.UUID | None, list[tuple[int, Any]]]] = []
    for t in request.topics:
        parts: list[tuple[int, Any]] = []
        for p in t.partitions:
            index = int(p.partition)
            answer: Any
            if denied:
                answer = StateAnswer(ErrorCode.cluster_authorization_failed)
            elif svc is None:
                answer = StateAnswer(ErrorCode.unsupported_version)
            elif not request.group_id or t.topic_id is None or t.topic_id == _ZERO_ID or index < 0:
                answer = StateAnswer(ErrorCode.invalid_request)
            elif SHARE_GROUP_STATE_TOPIC not in broker.metadata.topics and svc.ensure_topic() is None:
                answer = StateAnswer(ErrorCode.coordinator_not_available)
            else:
                key = ShareStateKey(request.group_id, t.topic_id, index)
                partition = svc.partition_for(key)
                if not svc.here(partition):
                    answer = StateAnswer(ErrorCode.not_coordinator)
                else:
                    answer = svc.runtime.write(partition, step(key, p))
            parts.append((index, answer))
        pending.append((t.topic_id, parts))
    out: list[tuple[uuid.UUID | None, list[tuple[int, StateAnswer]]]] = []
    for topic_id, parts in pending:
        done: list[tuple[int, StateAnswer]] = []
        for index, answer in parts:
            if isinstance(answer, StateAnswer):
                done.append((index, answer))
                continue
            try:
                done.append((index, await answer))
            except KafkaError as e:
                done.append((index, StateAnswer(e.code)))
        out.append((topic_id, done))
    return out


def _message(a: StateAnswer) -> str | None:
    return None if a.error is ErrorCode.none else a.error.name.upper()


def _batches(batches: Any) -> tuple[StateBatch, ...]:
    return tuple(StateBatch(int(b.first_offset), int(b.last_offset), int(b.delivery_state), int(b.delivery_count))
                 for b in batches)


async def handle_initialize_share_group_state(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response

    def step(key: ShareStateKey, p: Any) -> Step:
        return lambda shard, now: shard.initialize(key, int(p.state_epoch), int(p.start_offset), now)
    results = await _serve(ctx, request, step)
    return build(R.InitializeShareGroupStateResponse, results=tuple(
        build(R.InitializeStateResult, topic_id=tid, partitions=tuple(
            build(R.PartitionResult, partition=i, error_code=a.error, error_message=_message(a)) for i, a in parts))
        for tid, parts in results))


async def handle_read_share_group_state(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response

    def step(key: ShareStateKey, p: Any) -> Step:
        return lambda shard, now: shard.read_state(key, int(p.leader_epoch), now)
    results = await _serve(ctx, request, step)
    return build(R.ReadShareGroupStateResponse, results=tuple(
        build(R.ReadStateResult, topic_id=tid, partitions=tuple(
            build(R.PartitionResult, partition=i, error_code=a.error, error_message=_message(a),
                  state_epoch=a.state_epoch, start_offset=a.start_offset, state_batches=tuple(
                      build(R.StateBatch, first_offset=b.first_offset, last_offset=b.last_offset,
                            delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                      for b in a.batches))
            for i, a in parts))
        for tid, parts in results))


async def handle_write_share_group_state(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response

    def step(key: ShareStateKey, p: Any) -> Step:
        return lambda shard, now: shard.write_state(key, int(p.state_epoch), int(p.leader_epoch),
                                                    int(p.start_offset), _batches(p.state_batches), now)
    results = await _serve(ctx, request, step)
    return build(R.WriteShareGroupStateResponse, results=tuple(
        build(R.WriteStateResult, topic_id=tid, partitions=tuple(
            build(R.PartitionResult, partition=i, error_code=a.error, error_message=_message(a)) for i, a in parts))
        for tid, parts in results))


async def handle_delete_share_group_state(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response

    def step(key: ShareStateKey, _p: Any) -> Step:
        def delete(shard: ShareStateShard, _now: int) -> Any:
            result = shard.delete([key])
            result.responses.append((None, StateAnswer(ErrorCode.none)))
            return result
        return delete
    results = await _serve(ctx, request, step)
    return build(R.DeleteShareGroupStateResponse, results=tuple(
        build(R.DeleteStateResult, topic_id=tid, partitions=tuple(
            build(R.PartitionResult, partition=i, error_code=a.error, error_message=_message(a)) for i, a in parts))
        for tid, parts in results))


async def handle_read_share_group_state_summary(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response

    def step(key: ShareStateKey, p: Any) -> Step:
        return lambda shard, _now: shard.summary(key, int(p.leader_epoch))
    results = await _serve(ctx, request, step)
    return build(R.ReadShareGroupStateSummaryResponse, results=tuple(
        build(R.ReadStateSummaryResult, topic_id=tid, partitions=tuple(
            build(R.PartitionResult, partition=i, error_code=a.error, error_message=_message(a),
                  state_epoch=a.state_epoch, leader_epoch=a.leader_epoch, start_offset=a.start_offset)
            for i, a in parts))
        for tid, parts in results))


APIS: ApiTable = {
    83: (0, 0, handle_initialize_share_group_state),
    84: (0, 0, handle_read_share_group_state),
    85: (0, 0, handle_write_share_group_state),
    86: (0, 0, handle_delete_share_group_state),
    87: (0, 0, handle_read_share_group_state_summary),
}
