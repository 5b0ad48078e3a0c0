"""Group APIs over the wire: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
DescribeGroups, ListGroups, DeleteGroups, ConsumerGroupHeartbeat/Describe. The group coordinator itself is
`GroupService` (kaflite.server.coordinators.groups), whose rules say how requests are routed, committed
and answered; the handlers parse requests, check ACLs and build the answers.

Rules of the handlers:
- JoinGroup / SyncGroup may park: the handler awaits a future keyed by a token a later step answers;
  the connection's later requests wait behind it in order (Kafka's muted channel);
- a request takes the service through `service(ctx)` (`GroupService.of_async`): on a single node a group
  request sent before any FindCoordinator waits for `__consumer_offsets` to be created off the event loop.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

from kaflite.coordinator import (
    GroupCoordinator,
)
from kaflite.coordinator import messages as m
from kaflite.coordinator.consumer_group import ConsumerHeartbeatRequest, ConsumerHeartbeatResponse
from kaflite.coordinator.timeline import RebalanceEvent
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.acl import rules
from kaflite.server.authorizer import ResourceType
from kaflite.server.context import RequestContext, build
from kaflite.server.coordinators.broker_api import CoordinatorBroker
from kaflite.server.coordinators.groups import GroupService, load_at_start
from kaflite.server.handlers import ApiTable
from kaflite.server.handlers.share import listed_share_groups
from kaflite.server.handlers.share_admin import delete_share_group, is_share_group

_ZERO = datetime.timedelta(0)


def to_ms(value: Any) -> int:
    """kio carries Kafka's millisecond durations as timedeltas; the coordinator works in int ms."""
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


def on_start(broker: CoordinatorBroker) -> Awaitable[Any] | None:
    """At broker start-up (the registry's hook): the groups loaded when `__consumer_offsets` exists
    (`load_at_start`)."""
    return load_at_start(broker)


async def service(ctx: RequestContext) -> GroupService:
    """The broker's GroupService for a request: on a single node `__consumer_offsets` is created first
    (in a worker thread) when missing, as FindCoordinator does, so a group request sent before any
    FindCoordinator waits for it rather than holding the event loop or failing."""
    return await GroupService.of_async(ctx.broker)


async def group_history(ctx: RequestContext, group_id: str) -> list[RebalanceEvent]:
    """The group's rebalance timeline from its shard (a read after the shard's pending writes); KafkaError
    NOT_COORDINATOR when this broker does not coordinate the group, COORDINATOR_LOAD_IN_PROGRESS while its
    partition loads."""
    def failed(code: ErrorCode) -> list[RebalanceEvent]:
        raise KafkaError(code, f"the rebalance history of group {group_id!r} is not on this broker")

    events = await (await service(ctx)).call(group_id, lambda shard, now: shard.handle_group_history(group_id, now), failed)
    if events is None:
        raise KafkaError(ErrorCode.coordinator_load_in_progress, f"group {group_id!r} is loading")
    return events  # type: ignore[no-any-return]


def _group_ops(ctx: RequestContext, group_id: str, wanted: bool) -> int:
    """`authorized_operations` of a described group: INT32_MIN unless asked for (Kafka)."""
    return ctx.authorized_operations(ResourceType.GROUP, group_id) if wanted else -(2**31)


# --- JoinGroup (11) / SyncGroup (14) / Heartbeat (12) / LeaveGroup (13) ------------------------------

def _denied(ctx: RequestContext, check: rules.Check, group_id: str | None) -> bool:
    """The group check refused (Kafka's KafkaApis: READ on the group for every classic group request)."""
    return not ctx.allowed(check, group_id or "")


async def handle_join_group(ctx: RequestContext, request: Any) -> Any:
    svc = await service(ctx)
    req = m.JoinGroupRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        protocol_type=request.protocol_type,
        protocols=tuple(m.Protocol(p.name, bytes(p.metadata)) for p in request.protocols),
        session_timeout_ms=to_ms(request.session_timeout),
        rebalance_timeout_ms=to_ms(getattr(request, "rebalance_timeout", -1)) if ctx.api_version >= 1 else -1,
        group_instance_id=getattr(request, "group_instance_id", None),
        client_id=ctx.client_id,
        client_host="/" + (ctx.client_host or "127.0.0.1"),
        version=ctx.api_version,
        reason=getattr(request, "reason", None),
    )

    def step(token: Hashable) -> Callable[[GroupCoordinator, int], Any]:
        return lambda shard, now: shard.handle_join(dataclasses.replace(req, token=token), now)

    resp: m.JoinGroupResponse = (
        m.JoinGroupResponse(ErrorCode.group_authorization_failed, member_id=req.member_id)
        if _denied(ctx, rules.JOIN_GROUP, req.group_id)
        else await svc.call_parked(req.group_id, step, lambda code: m.JoinGroupResponse(code, member_id=req.member_id))
    )
    R = ctx.response
    members = tuple(build(R.JoinGroupResponseMember, member_id=mb.member_id,
                          group_instance_id=mb.group_instance_id, metadata=mb.metadata) for mb in resp.members)
    return build(R.JoinGroupResponse, throttle_time=_ZERO, error_code=resp.error, generation_id=resp.generation_id,
                 protocol_type=resp.protocol_type, protocol_name=(resp.protocol_name or "") if ctx.api_version < 7
                 else resp.protocol_name, leader=resp.leader, skip_assignment=resp.skip_assignment,
                 member_id=resp.member_id, members=members)


async def handle_sync_group(ctx: RequestContext, request: Any) -> Any:
    svc = await service(ctx)
    req = m.SyncGroupRequest(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        assignments=tuple((a.member_id, bytes(a.assignment)) for a in request.assignments),
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
    )

    def step(token: Hashable) -> Callable[[GroupCoordinator, int], Any]:
        return lambda shard, now: shard.handle_sync(dataclasses.replace(req, token=token), now)

    resp: m.SyncGroupResponse = (
        m.SyncGroupResponse(ErrorCode.group_authorization_failed)
        if _denied(ctx, rules.SYNC_GROUP, req.group_id)
        else await svc.call_parked(req.group_id, step, m.SyncGroupResponse)
    )
    return build(ctx.response.SyncGroupResponse, throttle_time=_ZERO, error_code=resp.error,
                 protocol_type=resp.protocol_type, protocol_name=resp.protocol_name, assignment=resp.assignment)


async def handle_heartbeat(ctx: RequestContext, request: Any) -> Any:
    svc = await service(ctx)
    req = m.HeartbeatRequest(request.group_id, request.generation_id, request.member_id,
                             getattr(request, "group_instance_id", None))
    resp: m.HeartbeatResponse = (
        m.HeartbeatResponse(ErrorCode.group_authorization_failed)
        if _denied(ctx, rules.HEARTBEAT, req.group_id)
        else await svc.call(req.group_id, lambda shard, now: shard.handle_heartbeat(req, now), m.HeartbeatResponse)
    )
    return build(ctx.response.HeartbeatResponse, throttle_time=_ZERO, error_code=resp.error)


async def handle_leave_group(ctx: RequestContext, request: Any) -> Any:
    svc = await service(ctx)
    if ctx.api_version >= 3:
        idents = tuple(m.MemberIdentity(mb.member_id, mb.group_instance_id, getattr(mb, "reason", None))
                       for mb in request.members)
    else:
        idents = (m.MemberIdentity(request.member_id),)
    req = m.LeaveGroupRequest(request.group_id, idents)
    resp: m.LeaveGroupResponse = (
        m.LeaveGroupResponse(ErrorCode.group_authorization_failed)
        if _denied(ctx, rules.LEAVE_GROUP, req.group_id)
        else await svc.call(req.group_id, lambda shard, now: shard.handle_leave(req, now), m.LeaveGroupResponse)
    )
    R = ctx.response
    if ctx.api_version < 3:
        # v0-2 name one member: its error is the request's error
        error = resp.error
        if error is ErrorCode.none and resp.members:
            error = resp.members[0].error
        return build(R.LeaveGroupResponse, throttle_time=_ZERO, error_code=error)
    members = tuple(build(R.MemberResponse, member_id=mr.member_id, group_instance_id=mr.group_instance_id,
                          error_code=mr.error) for mr in resp.members)
    return build(R.LeaveGroupResponse, throttle_time=_ZERO, error_code=resp.error, members=members)


# --- ConsumerGroupHeartbeat (68), KIP-848 -----------------------------------------------------------

def consumer_protocol_enabled(broker: CoordinatorBroker) -> bool:
    """group.coordinator.rebalance.protocols lists consumer (KIP-848 groups served)."""
    return "consumer" in broker.setting("group.coordinator.rebalance.protocols")


async def handle_consumer_group_heartbeat(ctx: RequestContext, request: Any) -> Any:
    if not consumer_protocol_enabled(ctx.broker):  # Kafka: the API is not enabled
        return build(ctx.response.ConsumerGroupHeartbeatResponse, throttle_time=_ZERO,
                     error_code=ErrorCode.unsupported_version, error_message="The consumer group protocol is "
                     "not enabled (group.coordinator.rebalance.protocols).", member_id=None, member_epoch=-1,
                     heartbeat_interval=datetime.timedelta(0), assignment=None)
    if _denied(ctx, rules.CONSUMER_GROUP_HEARTBEAT, request.group_id):
        return build(ctx.response.ConsumerGroupHeartbeatResponse, throttle_time=_ZERO,
                     error_code=rules.CONSUMER_GROUP_HEARTBEAT.error, error_message=None, member_id=None,
                     member_epoch=-1, heartbeat_interval=datetime.timedelta(0), assignment=None)
    svc = await service(ctx)
    metadata = ctx.broker.metadata
    topics = {name: t.num_partitions for name, t in metadata.topics.items() if not t.internal}
    topic_ids = {name: t.topic_id for name, t in metadata.topics.items() if not t.internal}
    owned = None
    if request.topic_partitions is not None:
        owned = {}
        for tp in request.topic_partitions:
            topic = metadata.topic_by_id(tp.topic_id) if tp.topic_id is not None else None
            if topic is not None:  # a deleted topic's partitions are simply no longer owned
                owned[topic.name] = frozenset(int(p) for p in tp.partitions)
    rebalance = to_ms(request.rebalance_timeout)
    req = ConsumerHeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id, member_epoch=int(request.member_epoch),
        subscribed_topics=None if request.subscribed_topic_names is None else tuple(request.subscribed_topic_names),
        subscribed_regex=getattr(request, "subscribed_topic_regex", None),
        owned=owned, rebalance_timeout_ms=rebalance, instance_id=request.instance_id, rack_id=request.rack_id,
        server_assignor=request.server_assignor, client_id=ctx.client_id,
        client_host="/" + (ctx.client_host or "127.0.0.1"), version=ctx.api_version,
    )
    resp: ConsumerHeartbeatResponse = await svc.call(
        req.group_id, lambda shard, now: shard.handle_consumer_heartbeat(req, topics, now, topic_ids),
        ConsumerHeartbeatResponse)
    R = ctx.response
    assignment = None
    if resp.assignment is not None:
        parts = tuple(build(R.TopicPartitions, topic_id=metadata.topics[t].topic_id, partitions=tuple(sorted(ps)))
                      for t, ps in resp.assignment.items() if t in metadata.topics)
        assignment = build(R.Assignment, topic_partitions=parts)
    return build(R.ConsumerGroupHeartbeatResponse, throttle_time=_ZERO, error_code=resp.error,
                 error_message=resp.error_message, member_id=resp.member_id, member_epoch=resp.member_epoch,
                 heartbeat_interval=datetime.timedelta(milliseconds=resp.heartbeat_interval_ms),
                 assignment=assignment)


async def handle_consumer_group_describe(ctx: RequestContext, request: Any) -> Any:
    """ConsumerGroupDescribe (69): KIP-848 groups with each member's epoch, subscription, current and
    target assignment (topic ids from the metadata image)."""
    svc = await service(ctx)
    metadata = ctx.broker.metadata
    R = ctx.response

    def assignment(a: Any) -> Any:
        parts = tuple(build(R.TopicPartitions, topic_id=metadata.topics[t].topic_id, topic_name=t,
                            partitions=tuple(sorted(ps)))
                      for t, ps in sorted(a.items()) if t in metadata.topics and ps)
        return build(R.Assignment, topic_partitions=parts)

    described: list[tuple[str, ErrorCode, str | None, Any]] = []
    want_ops = bool(getattr(request, "include_authorized_operations", False))
    for group_id in request.group_ids:
        if _denied(ctx, rules.CONSUMER_GROUP_DESCRIBE, group_id):
            described.append((group_id, rules.CONSUMER_GROUP_DESCRIBE.error, None, None))
            continue

        def step(shard: GroupCoordinator, now: int, group_id: str = group_id) -> Any:
            return shard.handle_describe_consumer_groups([group_id], now)

        def failed(code: ErrorCode, group_id: str = group_id) -> list[tuple[str, ErrorCode, str | None, Any]]:
            return [(group_id, code, None, None)]
        described += await svc.call(group_id, step, failed)
    groups = []
    for group_id, error, message, cg in described:
        if cg is None:
            groups.append(build(R.DescribedGroup, error_code=error, error_message=message, group_id=group_id,
                                group_state="", group_epoch=-1, assignment_epoch=-1, assignor_name="",
                                members=()))
            continue
        members = tuple(
            build(R.Member, member_id=mb.member_id, instance_id=mb.instance_id, rack_id=mb.rack_id,
                  member_epoch=mb.member_epoch, client_id=mb.client_id, client_host=mb.client_host,
                  subscribed_topic_names=tuple(mb.subscribed), subscribed_topic_regex=mb.subscribed_regex,
                  assignment=assignment(mb.assigned), target_assignment=assignment(cg.target.get(mb.member_id, {})),
                  member_type=0 if mb.classic is not None else 1)  # v1 (KIP-1099): 0 classic, 1 consumer
            for mb in cg.members.values()
        )
        groups.append(build(R.DescribedGroup, error_code=ErrorCode.none, group_id=group_id, group_state=cg.state,
                            group_epoch=cg.group_epoch, assignment_epoch=cg.assignment_epoch,
                            assignor_name=cg.assignor, members=members,
                            authorized_operations=_group_ops(ctx, group_id, want_ops)))
    return build(R.ConsumerGroupDescribeResponse, throttle_time=_ZERO, groups=tuple(groups))


# --- DescribeGroups (15) / ListGroups (16) / DeleteGroups (42) -----------------------------------

GROUP_ID_NOT_FOUND_VERSION = 6  # DescribeGroups answers GROUP_ID_NOT_FOUND from this version on (KIP-1043)


async def handle_describe_groups(ctx: RequestContext, request: Any) -> Any:
    """DescribeGroups (15): each group as its coordinator shard sees it; a group that does not exist is
    described as Dead, and from v6 also answered GROUP_ID_NOT_FOUND with a message (KIP-1043, as Kafka)."""
    svc = await service(ctx)
    R = ctx.response
    described: list[m.DescribedGroup] = []
    want_ops = bool(getattr(request, "include_authorized_operations", False))
    for group_id in request.groups:
        if _denied(ctx, rules.DESCRIBE_GROUPS, group_id):
            described.append(m.DescribedGroup(group_id, rules.DESCRIBE_GROUPS.error, "", "", ""))
            continue

        def step(shard: GroupCoordinator, now: int, group_id: str = group_id) -> Any:
            return shard.handle_describe_groups([group_id], now)

        def failed(code: ErrorCode, group_id: str = group_id) -> list[m.DescribedGroup]:
            return [m.DescribedGroup(group_id, code, "", "", "")]
        described += await svc.call(group_id, step, failed)
    groups = []
    for g in described:
        members = tuple(build(R.DescribedGroupMember, member_id=dm.member_id, group_instance_id=dm.group_instance_id,
                              client_id=dm.client_id, client_host=dm.client_host, member_metadata=dm.metadata,
                              member_assignment=dm.assignment) for dm in g.members)
        error, message = g.error, None
        if ctx.api_version >= GROUP_ID_NOT_FOUND_VERSION and error is ErrorCode.none and g.state == "Dead":
            # v6 (KIP-1043): a group that does not exist says so; older versions describe it as Dead
            error, message = ErrorCode.group_id_not_found, f"Group {g.group_id} not found."
            if is_share_group(ctx.broker, g.group_id):  # as Kafka: a share group is no classic group
                message = f"Group {g.group_id} is not a classic group."
        groups.append(build(R.DescribedGroup, error_code=error, error_message=message, group_id=g.group_id,
                            group_state=g.state, protocol_type=g.protocol_type, protocol_data=g.protocol,
                            members=members,
                            authorized_operations=_group_ops(ctx, g.group_id, want_ops and error is ErrorCode.none)))
    return build(R.DescribeGroupsResponse, throttle_time=_ZERO, groups=tuple(groups))


async def handle_list_groups(ctx: RequestContext, request: Any) -> Any:
    svc = await service(ctx)
    R = ctx.response
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    states = tuple(getattr(request, "states_filter", ()))
    listed: list[m.ListedGroup] = []
    # as Kafka: a partition still loading (or failing) makes the listing incomplete, which the error says
    error = ErrorCode.none
    for partition in svc.runtime.partitions():
        try:
            shard_groups = await svc.runtime.write(partition, lambda shard, now: shard.handle_list_groups(states, now))
        except KafkaError as e:
            error = e.code
            continue
        listed += [g for g in shard_groups if not types or g.group_type in types]
    listed += [g for g in listed_share_groups(ctx.broker, states) if not types or g.group_type in types]
    # Kafka: DESCRIBE on the cluster lists every group, else only those the principal may DESCRIBE
    if not ctx.allowed(rules.LIST_GROUPS_CLUSTER):
        listed = [g for g in listed if ctx.allowed(rules.LIST_GROUPS_GROUP, g.group_id)]
    groups = tuple(build(R.ListedGroup, group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state,
                         group_type=g.group_type) for g in listed)
    return build(R.ListGroupsResponse, throttle_time=_ZERO, error_code=error, groups=groups)


async def handle_delete_groups(ctx: RequestContext, request: Any) -> Any:
    svc = await service(ctx)
    R = ctx.response
    by_partition: dict[int, list[str]] = {}
    answered: dict[str, ErrorCode] = {}
    for group_id in request.groups_names:
        if _denied(ctx, rules.DELETE_GROUPS, group_id):
            answered[group_id] = rules.DELETE_GROUPS.error
            continue
        share_answer = await delete_share_group(ctx.broker, group_id)
        if share_answer is not None:  # a share group (in memory or in __share_group_state)
            answered[group_id] = share_answer
            continue
        by_partition.setdefault(svc.partition_for(group_id), []).append(group_id)
    for ids in by_partition.values():
        def step(shard: GroupCoordinator, now: int, ids: list[str] = ids) -> Any:
            return shard.handle_delete_groups(ids, now)

        def failed(code: ErrorCode, ids: list[str] = ids) -> list[tuple[str, ErrorCode]]:
            return [(gid, code) for gid in ids]
        answers = await svc.call(ids[0], step, failed)
        answered.update(answers)
    results = tuple(build(R.DeletableGroupResult, group_id=gid, error_code=answered[gid])
                    for gid in request.groups_names)
    return build(R.DeleteGroupsResponse, throttle_time=_ZERO, results=results)


APIS: ApiTable = {
    11: (0, 9, handle_join_group),
    12: (0, 4, handle_heartbeat),
    13: (0, 5, handle_leave_group),
    14: (0, 5, handle_sync_group),
    15: (0, 6, handle_describe_groups),
    16: (0, 5, handle_list_groups),
    42: (0, 2, handle_delete_groups),
    68: (0, 1, handle_consumer_group_heartbeat),
    69: (0, 1, handle_consumer_group_describe),
}
