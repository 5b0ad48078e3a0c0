"""Group APIs over the wire: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
DescribeGroups, ListGroups, DeleteGroups; and `GroupService`, the shell around the pure coordinator.

Rules of the shell (the decisions are all in `kaflite.coordinator`):
- one GroupService per broker (`broker.extensions["group_coordinator"]`), created at broker start-up
  when `__consumer_offsets` exists (`on_start`), else on the first group request: it creates the compacted internal topic `__consumer_offsets` (offsets.topic.num.partitions
  partitions), replays every record of it into the coordinator, then activates it (Kafka loads the
  partitions a broker leads the same way when it becomes their leader);
- every coordinator step's records are appended to `__consumer_offsets-<partition_for(group)>` as one
  batch per partition BEFORE its responses are released (Kafka answers once the write is done);
- JoinGroup / SyncGroup may park: the handler awaits a future keyed by a token the coordinator answers
  later; the connection's later requests wait behind it in order (Kafka's muted channel);
- session, rebalance and initial-delay timers run on one asyncio task sleeping until the coordinator's
  next deadline, with the broker's clock.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import itertools
import logging
from collections import defaultdict
from collections.abc import Callable, Hashable
from typing import Any

from kaflite.coordinator import OFFSETS_TOPIC, CoordinatorConfig, CoordinatorResult, GroupCoordinator
from kaflite.coordinator import messages as m
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.record_batch import build_record_batch, decode_records, iter_batches
from kaflite.server.context import RequestContext, build
from kaflite.server.handlers import ApiTable

log = logging.getLogger("kaflite.coordinator")

_ZERO = datetime.timedelta(0)
_EXTENSION = "group_coordinator"
_LOAD_CHUNK = 1 << 20


def to_ms(value: Any) -> int:
    """kio carries Kafka's millisecond durations as timedeltas; the coordinator works in int ms."""
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


class GroupService:
    """The coordinator of one broker: loading, appending its records, parking requests, its timers."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        try:
            self.config = CoordinatorConfig.from_properties(broker.config)
        except (TypeError, AttributeError):  # a config object that is not a mapping: Kafka's defaults
            self.config = CoordinatorConfig()
        self.coordinator = GroupCoordinator(self.config, active=False)
        self._futures: dict[Hashable, asyncio.Future[Any]] = {}
        self._tokens = itertools.count(1)
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        try:  # offsets.topic.compression.codec: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd (Kafka's ids)
            self._codec = int(broker.setting("offsets.topic.compression.codec"))
        except Exception:  # noqa: BLE001 - a config without the key: uncompressed, Kafka's default
            self._codec = 0

    # --- lifecycle ------------------------------------------------------------------------------

    @classmethod
    def of(cls, broker: Any) -> GroupService:
        """The broker's GroupService, started (loaded and active) on first use."""
        service = broker.extensions.get(_EXTENSION)
        if service is None:
            service = cls(broker)
            service.start()
            broker.extensions[_EXTENSION] = service
        return service  # type: ignore[no-any-return]

    def start(self) -> None:
        configs = {"cleanup.policy": "compact"}
        try:
            configs["segment.bytes"] = str(int(self.broker.setting("offsets.topic.segment.bytes")))
        except Exception:  # noqa: BLE001 - an older config without the key: the topic default applies
            pass
        topic = self.broker.ensure_topic(OFFSETS_TOPIC, self.config.offsets_topic_num_partitions, configs)
        if topic.num_partitions != self.config.offsets_topic_num_partitions:
            # As Kafka: the existing topic decides where groups live (changing the setting later would
            # otherwise strand every group in the wrong partition).
            log.warning("%s has %d partitions; offsets.topic.num.partitions=%d is ignored", OFFSETS_TOPIC,
                        topic.num_partitions, self.config.offsets_topic_num_partitions)
            self.config = dataclasses.replace(self.config, offsets_topic_num_partitions=topic.num_partitions)
            self.coordinator = GroupCoordinator(self.config, active=False)
        loaded = self._load()
        self._apply(self.coordinator.activate(self.broker.now_ms()))
        log.info("group coordinator loaded %d record(s): %d group(s)", loaded, len(self.coordinator.groups))
        self._wakeup = asyncio.Event()
        self._task = asyncio.ensure_future(self._timer_loop())
        self.broker.add_task(self._task)  # cancelled with the broker's own tasks on stop

    def _load(self) -> int:
        """Replay every record of `__consumer_offsets` (the same path as live writes)."""
        count = 0
        if getattr(self.broker, "log_manager", None) is None:
            return 0
        for partition in range(self.config.offsets_topic_num_partitions):
            lg = self.broker.get_log(OFFSETS_TOPIC, partition)
            offset = lg.log_start_offset
            end = lg.log_end_offset
            for _ in range(1_000_000):
                if offset >= end:
                    break
                info = lg.read(offset, _LOAD_CHUNK)
                data = b"".join(bytes(part) for part in info.records)
                if not data:
                    break
                last = offset
                for batch in iter_batches(data):
                    if batch.is_control:
                        last = batch.last_offset + 1
                        continue
                    for record in decode_records(batch):
                        if record.offset >= offset and record.key is not None:
                            try:
                                self.coordinator.replay(record.key, record.value)
                                count += 1
                            except ValueError as e:  # a record we cannot read must not stop the load
                                log.warning("skipping %s-%d offset %d: %s", OFFSETS_TOPIC, partition,
                                            record.offset, e)
                    last = batch.last_offset + 1
                if last <= offset:
                    break
                offset = last
        return count

    # --- running coordinator steps --------------------------------------------------------------

    def new_token(self) -> tuple[Hashable, asyncio.Future[Any]]:
        token = next(self._tokens)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._futures[token] = fut
        return token, fut

    def run(self, step: Callable[[int], CoordinatorResult]) -> CoordinatorResult:
        result = step(self.broker.now_ms())
        self._apply(result)
        return result

    def _apply(self, result: CoordinatorResult) -> None:
        self._append(result)
        for token, response in result.responses:
            fut = self._futures.pop(token, None) if token is not None else None
            if fut is not None and not fut.done():
                fut.set_result(response)
        if result.timers and self._wakeup is not None:
            # Due timers (a zero initial delay in --dev) fire from the timer task on a later loop
            # iteration, after the requests already read: like Kafka's timer, which runs after the
            # coordinator events already queued.
            self._wakeup.set()

    def _append(self, result: CoordinatorResult) -> None:
        if not result.records:
            return
        by_partition: dict[int, list[tuple[bytes, bytes | None, list[tuple[str, bytes | None]]]]] = defaultdict(list)
        for record in result.records:
            by_partition[record.partition].append((record.key, record.value, []))
        now = self.broker.now_ms()
        codec = self._codec
        for partition, records in by_partition.items():
            try:
                batch = build_record_batch(records, timestamp_ms=now, compression=codec)
                self.broker.append(OFFSETS_TOPIC, partition, batch)
            except KafkaError:
                # The state already moved on (Kafka would revert); log loudly, keep serving.
                log.exception("appending %d record(s) to %s-%d failed", len(records), OFFSETS_TOPIC, partition)

    async def _timer_loop(self) -> None:
        assert self._wakeup is not None
        while True:
            deadline = self.coordinator.next_deadline()
            now = self.broker.now_ms()
            if deadline is not None and deadline <= now:
                try:
                    self._apply(self.coordinator.poll_timers(now))
                except Exception:
                    log.exception("group coordinator timer failed")
                continue
            self._wakeup.clear()
            timeout = None if deadline is None else (deadline - now) / 1000.0
            try:
                await asyncio.wait_for(self._wakeup.wait(), timeout)
            except TimeoutError:
                pass


def on_start(broker: Any) -> None:
    """At broker start-up: when `__consumer_offsets` exists, load the groups now (Kafka replays the
    topic as its partitions come online), so member session timers run and describe/list answers are
    ready before the first group request. A broker that never had a group creates the topic lazily, on
    the first FindCoordinator, as Kafka does."""
    if OFFSETS_TOPIC in broker.metadata.topics:
        GroupService.of(broker)


def service(ctx: RequestContext) -> GroupService:
    return GroupService.of(ctx.broker)


# --- FindCoordinator (10) -----------------------------------------------------------------------

async def handle_find_coordinator(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    broker = ctx.broker
    GroupService.of(broker)  # make sure __consumer_offsets exists and is loaded before anyone joins
    node = (broker.node_id, broker.advertised.host, broker.advertised.port)

    def answer(key: str, key_type: int) -> tuple[ErrorCode, str | None, tuple[int, str, int]]:
        if key_type != 0:
            # transactions are not implemented: no transaction coordinator to point to
            return ErrorCode.coordinator_not_available, "kaflite has no transaction coordinator", (-1, "", -1)
        return ErrorCode.none, None, node

    if ctx.api_version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            code, message, (node_id, host, port) = answer(key, request.key_type)
            coordinators.append(build(R.Coordinator, key=key, node_id=node_id, host=host, port=port,
                                      error_code=code, error_message=message))
        return build(R.FindCoordinatorResponse, throttle_time=_ZERO, coordinators=tuple(coordinators))
    code, message, (node_id, host, port) = answer(request.key, getattr(request, "key_type", 0))
    return build(R.FindCoordinatorResponse, throttle_time=_ZERO, error_code=code, error_message=message,
                 node_id=node_id, host=host, port=port)


# --- JoinGroup (11) / SyncGroup (14) / Heartbeat (12) / LeaveGroup (13) ------------------------------

async def handle_join_group(ctx: RequestContext, request: Any) -> Any:
    svc = service(ctx)
    token, fut = svc.new_token()
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
        token=token,
    )
    svc.run(lambda now: svc.coordinator.handle_join(req, now))
    resp: m.JoinGroupResponse = await fut
    R = ctx.response
    members = tuple(build(R.JoinGroupResponseMember, member_id=mb.member_id,
                          group_instance_id=mb.group_instance_id, metadata=mb.metadata) for mb in resp.members)
    return build(R.JoinGroupResponse, throttle_time=_ZERO, error_code=resp.error, generation_id=resp.generation_id,
                 protocol_type=resp.protocol_type, protocol_name=(resp.protocol_name or "") if ctx.api_version < 7
                 else resp.protocol_name, leader=resp.leader, skip_assignment=resp.skip_assignment,
                 member_id=resp.member_id, members=members)


async def handle_sync_group(ctx: RequestContext, request: Any) -> Any:
    svc = service(ctx)
    token, fut = svc.new_token()
    req = m.SyncGroupRequest(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        assignments=tuple((a.member_id, bytes(a.assignment)) for a in request.assignments),
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        token=token,
    )
    svc.run(lambda now: svc.coordinator.handle_sync(req, now))
    resp: m.SyncGroupResponse = await fut
    return build(ctx.response.SyncGroupResponse, throttle_time=_ZERO, error_code=resp.error,
                 protocol_type=resp.protocol_type, protocol_name=resp.protocol_name, assignment=resp.assignment)


async def handle_heartbeat(ctx: RequestContext, request: Any) -> Any:
    svc = service(ctx)
    req = m.HeartbeatRequest(request.group_id, request.generation_id, request.member_id,
                             getattr(request, "group_instance_id", None))
    resp: m.HeartbeatResponse = svc.run(lambda now: svc.coordinator.handle_heartbeat(req, now)).response()
    return build(ctx.response.HeartbeatResponse, throttle_time=_ZERO, error_code=resp.error)


async def handle_leave_group(ctx: RequestContext, request: Any) -> Any:
    svc = service(ctx)
    if ctx.api_version >= 3:
        idents = tuple(m.MemberIdentity(mb.member_id, mb.group_instance_id, getattr(mb, "reason", None))
                       for mb in request.members)
    else:
        idents = (m.MemberIdentity(request.member_id),)
    req = m.LeaveGroupRequest(request.group_id, idents)
    resp: m.LeaveGroupResponse = svc.run(lambda now: svc.coordinator.handle_leave(req, now)).response()
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

async def handle_consumer_group_heartbeat(ctx: RequestContext, request: Any) -> Any:
    from kaflite.coordinator.consumer_group import ConsumerHeartbeatRequest

    svc = service(ctx)
    metadata = ctx.broker.metadata
    topics = {name: t.num_partitions for name, t in metadata.topics.items() if not t.internal}
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
        owned=owned, rebalance_timeout_ms=rebalance, instance_id=request.instance_id, rack_id=request.rack_id,
        server_assignor=request.server_assignor, client_id=ctx.client_id,
        client_host="/" + (ctx.client_host or "127.0.0.1"), version=ctx.api_version,
    )
    resp = svc.run(lambda now: svc.coordinator.handle_consumer_heartbeat(req, topics, now)).response()
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
    svc = service(ctx)
    metadata = ctx.broker.metadata
    R = ctx.response

    def assignment(a: Any) -> Any:
        parts = tuple(build(R.TopicPartitions, topic_id=metadata.topics[t].topic_id, topic_name=t,
                            partitions=tuple(sorted(ps)))
                      for t, ps in sorted(a.items()) if t in metadata.topics and ps)
        return build(R.Assignment, topic_partitions=parts)

    groups = []
    for group_id, error, message, cg in svc.coordinator.describe_consumer_groups(request.group_ids):
        if cg is None:
            groups.append(build(R.DescribedGroup, error_code=error, error_message=message, group_id=group_id,
                                group_state="", group_epoch=-1, assignment_epoch=-1, assignor_name="",
                                members=()))
            continue
        members = tuple(
            build(R.Member, member_id=mb.member_id, instance_id=mb.instance_id, rack_id=None,
                  member_epoch=mb.member_epoch, client_id=mb.client_id, client_host=mb.client_host,
                  subscribed_topic_names=tuple(mb.subscribed), subscribed_topic_regex=None,
                  assignment=assignment(mb.assigned), target_assignment=assignment(cg.target.get(mb.member_id, {})),
                  member_type=1)  # 1: a consumer-protocol member (v1)
            for mb in cg.members.values()
        )
        groups.append(build(R.DescribedGroup, error_code=ErrorCode.none, group_id=group_id, group_state=cg.state,
                            group_epoch=cg.group_epoch, assignment_epoch=cg.assignment_epoch,
                            assignor_name=cg.assignor, members=members,
                            authorized_operations=-(2**31)))
    return build(R.ConsumerGroupDescribeResponse, throttle_time=_ZERO, groups=tuple(groups))


# --- DescribeGroups (15) / ListGroups (16) / DeleteGroups (42) -----------------------------------

async def handle_describe_groups(ctx: RequestContext, request: Any) -> Any:
    svc = service(ctx)
    R = ctx.response
    groups = []
    for g in svc.coordinator.describe_groups(request.groups):
        members = tuple(build(R.DescribedGroupMember, member_id=dm.member_id, group_instance_id=dm.group_instance_id,
                              client_id=dm.client_id, client_host=dm.client_host, member_metadata=dm.metadata,
                              member_assignment=dm.assignment) for dm in g.members)
        groups.append(build(R.DescribedGroup, error_code=g.error, group_id=g.group_id, group_state=g.state,
                            protocol_type=g.protocol_type, protocol_data=g.protocol, members=members,
                            authorized_operations=-(2**31)))
    return build(R.DescribeGroupsResponse, throttle_time=_ZERO, groups=tuple(groups))


async def handle_list_groups(ctx: RequestContext, request: Any) -> Any:
    svc = service(ctx)
    R = ctx.response
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    listed = [g for g in svc.coordinator.list_groups(getattr(request, "states_filter", ()))
              if not types or g.group_type in types]
    groups = tuple(build(R.ListedGroup, group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state,
                         group_type=g.group_type) for g in listed)
    return build(R.ListGroupsResponse, throttle_time=_ZERO, error_code=ErrorCode.none, groups=groups)


async def handle_delete_groups(ctx: RequestContext, request: Any) -> Any:
    svc = service(ctx)
    R = ctx.response
    answers = svc.run(lambda now: svc.coordinator.handle_delete_groups(request.groups_names, now)).response()
    results = tuple(build(R.DeletableGroupResult, group_id=gid, error_code=code) for gid, code in answers)
    return build(R.DeleteGroupsResponse, throttle_time=_ZERO, results=results)


APIS: ApiTable = {
    10: (0, 6, handle_find_coordinator),
    11: (0, 9, handle_join_group),
    12: (0, 4, handle_heartbeat),
    13: (0, 5, handle_leave_group),
    14: (0, 5, handle_sync_group),
    15: (0, 5, handle_describe_groups),
    16: (0, 5, handle_list_groups),
    42: (0, 2, handle_delete_groups),
    68: (0, 1, handle_consumer_group_heartbeat),
    69: (0, 1, handle_consumer_group_describe),
}
