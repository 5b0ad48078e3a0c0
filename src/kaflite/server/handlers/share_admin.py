"""The share-group admin APIs of KIP-932: DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and
DeleteShareGroupOffsets (92), v0 each: what a Kafka 4.1.0 broker advertises (kio also has
DescribeShareGroupOffsets v1, Kafka 4.2's, not served: tests/server/test_kafka_versions.py). Behaviour as
read in apache/kafka's KafkaApis and GroupCoordinatorService (4.2 development line). They act on the durable
share-partition state, `__share_group_state` (`server/coordinators/share_state.py`), which is what Kafka's persister reads
and writes.

Rules:
- group.share.enable=false: Describe answers every group UNSUPPORTED_VERSION, Alter and Delete the whole
  request (ApiVersions does not advertise them then).
- ACLs as Kafka: Describe DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED for that group) and DESCRIBE on
  each topic (a named topic refused: its partitions TOPIC_AUTHORIZATION_FAILED, start offset -1; all topics
  asked: refused ones left out); Alter READ on the group and READ on each topic; Delete DELETE on the group
  and READ on each topic. A refused group is a top-level error (Alter, Delete).
- An empty group id is INVALID_GROUP_ID (Alter, Delete: top level).
- A share group exists when the share-group coordinator knows it (a member joined since the broker
  started) or `__share_group_state` holds state of it (after a restart, before any member joined). Alter
  and Delete of a group that does not exist are GROUP_ID_NOT_FOUND, of a group with members NON_EMPTY_GROUP
  (top level, nothing changes); Describe does not ask (a group without state describes as -1 offsets).
- Describe with topics: an unknown topic is answered with topic id zero and start offset -1 for each
  partition asked (no error, as OffsetFetch); a partition without state (uninitialized) start offset -1,
  leader epoch 0 (Kafka's defaults); one with state its start offset and the leader epoch last written
  (kaflite's own writes carry none, -1, answered as 0). With topics null: every share partition of the group
  with state, by topic (topics gone from the metadata left out).
- Alter: per topic, an unknown topic UNKNOWN_TOPIC_OR_PARTITION for each partition, a partition index
  past the topic's partitions UNKNOWN_TOPIC_OR_PARTITION; every other partition gets a new state: a
  ShareSnapshot with the given start offset, no state batches (every record from there on AVAILABLE, never
  delivered) and a state epoch one past the one held (Kafka's persister initializeState with the group's
  epoch; kaflite keeps no durable group epoch), answered once committed. The group's share partition in
  memory is dropped, so its next fetch rebuilds it from that state. A start offset of -1 makes the share
  partition uninitialized: its next fetch starts it from `share.auto.offset.reset`.
- Delete: per topic, an unknown topic UNKNOWN_TOPIC_OR_PARTITION; a topic of which the group has no state
  UNKNOWN_TOPIC_OR_PARTITION ("There is no offset information to delete."); otherwise the state of every
  partition of the topic gets tombstones (committed before the answer) and the share partitions in memory
  are dropped: the group's next fetch starts them from `share.auto.offset.reset`.
- A state write that fails answers that partition (Alter) or topic (Delete) with the runtime's error (or
  the persister's, below).
- A cluster: a share partition whose `__share_group_state` partition another broker leads is read and
  written there through the persister (share_persister.py), as Kafka's group coordinator does: Describe
  by ReadShareGroupStateSummary (87; a failed read is start offset -1, as Kafka), Alter by a summary
  (the state epoch held) then InitializeShareGroupState (83) with the next state epoch, Delete by
  DeleteShareGroupState (86), each answered once the share coordinator answered (committed there). With
  topics null (Describe) or for Delete's "no offset information" check, the share partitions asked there
  are those the group's key 15 record names (initializing or initialized) when this broker holds the
  group, as Kafka's group coordinator does, else (a group known from state only) every partition of every
  topic (Describe: every topic but the internal `__` ones); a state exists when its start offset or state
  epoch is set.
- The group's key 15 record (its initialized share partitions, share_initialize.py) follows: Alter's
  partitions written are initialized, Delete's topics neither initialized nor initializing (so they are
  initialized again before they are assigned), written before the answer. The share-partition leaders drop a group's share partitions from memory once no share
  session of it is left there (share.py), so their next fetch reads the state these APIs changed.
- Group existence (Alter, Delete) is this broker's knowledge: the group's membership here or state on
  this broker's shards. A group known only from state at other brokers' share coordinators (after a
  restart of its group coordinator, before any member joined) is GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import uuid
from collections.abc import Iterable
from typing import Any

from kaflite.coordinator.share.group import ShareGroupCoordinator
from kaflite.coordinator.share.state_records import SHARE_GROUP_STATE_TOPIC, ShareStateKey
from kaflite.coordinator.share.state_shard import ShareStateResult, ShareStateShard, StateAnswer
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.acl import rules
from kaflite.server.context import RequestContext, build
from kaflite.server.coordinators import share_membership, share_state
from kaflite.server.coordinators.broker_api import ShareBroker
from kaflite.server.handlers import ApiTable, share
from kaflite.server.share_persister import PersistedSummary

__all__ = ["APIS", "delete_share_group", "delete_state_elsewhere", "is_share_group"]

_ZERO = datetime.timedelta(0)
_NO_ID = uuid.UUID(int=0)
_UNINITIALIZED = -1  # Kafka's PartitionFactory.UNINITIALIZED_START_OFFSET
_DEFAULT_LEADER_EPOCH = 0  # PartitionFactory.DEFAULT_LEADER_EPOCH
_ELSEWHERE = "The share partition's state was never written (no __share_group_state)."

log = logging.getLogger("kaflite.share")


def _service(broker: ShareBroker) -> share_state.ShareStateService | None:
    """The share coordinator when `__share_group_state` exists (None: no share partition has state)."""
    svc = broker.services.get(share_state.SHARE_STATE_SERVICE)
    if svc is None and SHARE_GROUP_STATE_TOPIC in broker.metadata.topics:
        svc = share_state.ShareStateService.of(broker)
    return svc


def _state_keys(broker: ShareBroker, group_id: str) -> list[ShareStateKey]:
    svc = _service(broker)
    if svc is None:
        return []
    return [k for _p, shard in svc.runtime.active_shards() for k in shard.keys_of_group(group_id)]


def is_share_group(broker: ShareBroker, group_id: str) -> bool:
    """A share group of this id exists (see the rules): DescribeGroups (groups.py) answers it as Kafka
    answers a group that is not a classic group."""
    coord = broker.services.get(share_state.SHARE_COORDINATOR)
    return (coord is not None and group_id in coord.groups) or bool(_state_keys(broker, group_id))


def _group_error(broker: ShareBroker, group_id: str) -> tuple[ErrorCode, str] | None:
    """GROUP_ID_NOT_FOUND / NON_EMPTY_GROUP for Alter and Delete (see the rules), None when it may change."""
    coord = broker.services.get(share_state.SHARE_COORDINATOR)
    group = None
    if coord is not None:
        coord.expire(broker.now_ms())
        group = coord.groups.get(group_id)
    if group is None and not _state_keys(broker, group_id):
        return ErrorCode.group_id_not_found, f"Group {group_id} not found."
    if group is not None and group.members:
        return ErrorCode.non_empty_group, f"The group {group_id} is not empty."
    return None


def _refused(ctx: RequestContext, group_id: str, rule: rules.Check) -> tuple[ErrorCode, str | None] | None:
    """The whole-request checks of Alter and Delete, in Kafka's order (share groups enabled, the group's ACL
    `rule`, a group id, the group's existence and emptiness): the error (and message) of the first that
    fails, or None."""
    if not share.share_enabled(ctx.broker):
        return ErrorCode.unsupported_version, "Share groups are not enabled."
    if not ctx.allowed(rule, group_id):
        return rule.error, None
    if not group_id:
        return ErrorCode.invalid_group_id, None
    return _group_error(ctx.broker, group_id)


def _step(action: Any) -> Any:
    """A coordinator-runtime step answering `action(shard, now)` (a StateAnswer) directly."""
    def step(shard: ShareStateShard, now: int) -> ShareStateResult:
        result = action(shard, now)
        if isinstance(result, ShareStateResult):
            if not result.responses:
                result.responses.append((None, StateAnswer(ErrorCode.none)))
            return result
        return ShareStateResult(responses=[(None, result)])
    return step


def _forget(broker: ShareBroker, group_id: str, topic: str, partitions: Iterable[int] | None) -> None:
    """Drop the group's share partitions of `topic` from memory (rebuilt from the durable state)."""
    coord = broker.services.get(share_state.SHARE_COORDINATOR)
    if coord is None:
        return
    wanted = None if partitions is None else set(partitions)
    for key in [k for k in coord.partitions if k[0] == group_id and k[1] == topic
                and (wanted is None or k[2] in wanted)]:
        del coord.partitions[key]


def _membership(broker: ShareBroker, group_id: str) -> ShareGroupCoordinator | None:
    """The share-group coordinator when it holds the group (whose initialized share partitions, key 15,
    Alter and Delete change), else None."""
    coord = broker.services.get(share_state.SHARE_COORDINATOR)
    if coord is None:
        return None
    share_membership.reconcile(broker, coord)
    return coord if group_id in coord.groups else None


async def _write_records(broker: ShareBroker) -> None:
    """The key 15 records changed through `_membership`, written (a failure is logged by share_membership.write, and
    the group imported again from what was written: its partitions are initialized again when needed)."""
    coord = broker.services.get(share_state.SHARE_COORDINATOR)
    if coord is not None:
        await share_membership.write_touched(broker, coord)


# --- DescribeShareGroupOffsets (90) -------------------------------------------------------------------

async def _start_offsets(broker: ShareBroker, group_id: str, topic: str, topic_id: uuid.UUID, partitions: Iterable[int]
                         ) -> list[tuple[int, int, int]]:
    """(partition, start offset, leader epoch) of the group's share partitions of a topic, read from the
    durable state (after the writes still pending there)."""
    svc = _service(broker)
    partitions = list(partitions)
    remote = await _summaries(broker, [k for k in (ShareStateKey(group_id, topic_id, p) for p in partitions)
                                       if svc is not None and not svc.here(svc.partition_for(k))])
    out: list[tuple[int, int, int]] = []
    for p in partitions:
        start, epoch = _UNINITIALIZED, _DEFAULT_LEADER_EPOCH
        key = ShareStateKey(group_id, topic_id, p)
        if key in remote:  # another broker's share coordinator: through the persister (RPC 87)
            summary = remote[key]
            if summary is not None and summary.start_offset >= 0:
                start, epoch = summary.start_offset, max(summary.leader_epoch, _DEFAULT_LEADER_EPOCH)
        elif svc is not None and svc.here(svc.partition_for(key)):
            def read(shard: ShareStateShard, _now: int, key: ShareStateKey = key) -> StateAnswer:
                state = shard.states.get(key)
                if state is None:
                    return StateAnswer(ErrorCode.none)
                return StateAnswer(ErrorCode.none, state.snapshot.start_offset, state.state_epoch,
                                   state.leader_epoch)
            try:
                a = await svc.runtime.write(svc.partition_for(key), _step(read))
            except KafkaError:
                a = StateAnswer(ErrorCode.unknown_server_error)  # as Kafka: a failed read is no data
            if a.error is ErrorCode.none and a.start_offset >= 0:
                start, epoch = a.start_offset, max(a.leader_epoch, _DEFAULT_LEADER_EPOCH)
        out.append((p, start, epoch))
    return out


async def _summaries(broker: Any, keys: list[ShareStateKey]) -> dict[ShareStateKey, PersistedSummary | None]:
    """The state summaries of keys whose `__share_group_state` partition another broker leads, read there
    through the persister (ReadShareGroupStateSummary, concurrently; one request per key); None for a key
    whose read failed (as Kafka: no data rather than an error)."""
    if not keys:
        return {}
    persister = share.persister(broker)
    reads = [asyncio.ensure_future(persister.summary(k)) for k in keys]
    out: dict[ShareStateKey, PersistedSummary | None] = {}
    for key, read in zip(keys, reads, strict=True):
        try:
            out[key] = await read
        except KafkaError as e:
            log.info("share state summary of %s: %s", key, e)
            out[key] = None
    return out


async def _initialized_in_cluster(broker: Any, group_id: str, topics: Iterable[str] | None = None
                                  ) -> dict[str, list[int]]:
    """`_initialized`, plus (a cluster) the share partitions of `topics` (None: every topic but the
    internal ones) whose state is held by another broker's share coordinator, asked there: for a group this
    broker holds, those its key 15 record names (initializing or initialized), as Kafka's group coordinator
    does; for one it does not (known from state only), every partition. A state exists when its start
    offset or state epoch is set."""
    out = {t: set(ps) for t, ps in _initialized(broker, group_id).items()}
    svc = _service(broker)
    if svc is not None:
        group = None
        coord = broker.services.get(share_state.SHARE_COORDINATOR)
        if coord is not None:
            share_membership.reconcile(broker, coord)
            group = coord.groups.get(group_id)
        names = [t for t in broker.metadata.topics if not t.startswith("__")] if topics is None else list(topics)
        keys: list[tuple[str, ShareStateKey]] = []
        for name in names:
            image = broker.metadata.topics.get(name)
            every = range(image.num_partitions if image is not None else 0)
            recorded = None if group is None else group.initialized.get(name, frozenset()) | group.initializing.get(
                name, frozenset())
            for p in every if recorded is None else sorted(q for q in recorded if q in every):
                key = ShareStateKey(group_id, image.topic_id, p)
                if not svc.here(svc.partition_for(key)):
                    keys.append((name, key))
        found = await _summaries(broker, [k for _n, k in keys])
        for name, key in keys:
            summary = found.get(key)
            if summary is not None and (summary.start_offset >= 0 or summary.state_epoch > 0):
                out.setdefault(name, set()).add(key.partition)
    return {t: sorted(ps) for t, ps in sorted(out.items())}


async def delete_state_elsewhere(broker: Any, group_id: str) -> ErrorCode:
    """DeleteGroups of a share group (`delete_share_group`), in a cluster: the group's state
    held by other brokers' share coordinators gets tombstones there (DeleteShareGroupState, answered once
    committed). The first error, or NONE."""
    svc = _service(broker)
    if svc is None:
        return ErrorCode.none
    keys = [ShareStateKey(group_id, broker.metadata.topics[t].topic_id, p)
            for t, ps in (await _initialized_in_cluster(broker, group_id)).items() for p in ps
            if t in broker.metadata.topics]
    remote = [k for k in keys if not svc.here(svc.partition_for(k))]
    deletes = [asyncio.ensure_future(share.persister(broker).delete(k)) for k in remote]
    code = ErrorCode.none
    for d in deletes:
        try:
            await d
        except KafkaError as e:
            code = e.code if code is ErrorCode.none else code
    return code


async def _initialize_elsewhere(broker: Any, key: ShareStateKey, start: int) -> None:
    """AlterShareGroupOffsets of a key whose state another broker's share coordinator holds: its state
    epoch read there (ReadShareGroupStateSummary), then InitializeShareGroupState with the next one, as
    the local path does on its own shard."""
    persister = share.persister(broker)
    held = await persister.summary(key)
    await persister.initialize(key, held.state_epoch + 1, start)


def _initialized(broker: ShareBroker, group_id: str) -> dict[str, list[int]]:
    """topic -> partitions of the group that have a share-partition state (durable, or in memory only)."""
    out: dict[str, set[int]] = {}
    for key in _state_keys(broker, group_id):
        topic = broker.metadata.topic_by_id(key.topic_id)
        if topic is not None:
            out.setdefault(topic.name, set()).add(key.partition)
    coord = broker.services.get(share_state.SHARE_COORDINATOR)
    for g, t, p in list(coord.partitions) if coord is not None else ():
        if g == group_id and t in broker.metadata.topics:
            out.setdefault(t, set()).add(p)
    return {t: sorted(ps) for t, ps in sorted(out.items())}


async def handle_describe_share_group_offsets(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    broker = ctx.broker
    enabled = share.share_enabled(broker)

    def partition(index: int, start: int, epoch: int, code: ErrorCode = ErrorCode.none) -> Any:
        return build(R.DescribeShareGroupOffsetsResponsePartition, partition_index=index, start_offset=start,
                     leader_epoch=epoch, error_code=code,
                     error_message=None if code is ErrorCode.none else code.name.upper())

    groups = []
    for g in request.groups:
        group_id = g.group_id

        def failed(code: ErrorCode, message: str | None = None, group_id: str = group_id) -> Any:
            return build(R.DescribeShareGroupOffsetsResponseGroup, group_id=group_id, topics=(), error_code=code,
                         error_message=message)
        if not enabled:
            groups.append(failed(ErrorCode.unsupported_version, "Share groups are not enabled."))
            continue
        if not ctx.allowed(rules.DESCRIBE_SHARE_OFFSETS_GROUP, group_id):
            groups.append(failed(rules.DESCRIBE_SHARE_OFFSETS_GROUP.error))
            continue
        if g.topics is None:  # every share partition of the group; topics not authorized left out
            wanted = [(t, ps) for t, ps in (await _initialized_in_cluster(broker, group_id)).items()
                      if ctx.allowed(rules.DESCRIBE_SHARE_OFFSETS_TOPIC, t)]
        else:
            wanted = [(str(t.topic_name), [int(p) for p in t.partitions]) for t in g.topics]
        topics = []
        for name, parts in wanted:
            image = broker.metadata.topics.get(name)
            if g.topics is not None and not ctx.allowed(rules.DESCRIBE_SHARE_OFFSETS_TOPIC, name):
                answers = tuple(partition(p, _UNINITIALIZED, _DEFAULT_LEADER_EPOCH,
                                          rules.DESCRIBE_SHARE_OFFSETS_TOPIC.error) for p in parts)
                topics.append(build(R.DescribeShareGroupOffsetsResponseTopic, topic_name=name, topic_id=_NO_ID,
                                    partitions=answers))
                continue
            if image is None:  # no data rather than an error (as Kafka, like OffsetFetch)
                answers = tuple(partition(p, _UNINITIALIZED, _DEFAULT_LEADER_EPOCH) for p in parts)
                topics.append(build(R.DescribeShareGroupOffsetsResponseTopic, topic_name=name, topic_id=_NO_ID,
                                    partitions=answers))
                continue
            found = await _start_offsets(broker, group_id, name, image.topic_id, parts)
            topics.append(build(R.DescribeShareGroupOffsetsResponseTopic, topic_name=name, topic_id=image.topic_id,
                                partitions=tuple(partition(p, s, e) for p, s, e in found)))
        groups.append(build(R.DescribeShareGroupOffsetsResponseGroup, group_id=group_id, topics=tuple(topics),
                            error_code=ErrorCode.none, error_message=None))
    return build(R.DescribeShareGroupOffsetsResponse, throttle_time=_ZERO, groups=tuple(groups))


# --- AlterShareGroupOffsets (91) ----------------------------------------------------------------------

async def handle_alter_share_group_offsets(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    broker = ctx.broker
    group_id = request.group_id

    def failed(code: ErrorCode, message: str | None = None) -> Any:
        return build(R.AlterShareGroupOffsetsResponse, throttle_time=_ZERO, error_code=code,
                     error_message=message or code.name.upper(), responses=())
    refused = _refused(ctx, group_id, rules.ALTER_SHARE_OFFSETS_GROUP)
    if refused is not None:
        return failed(*refused)
    await share_state.ShareStateService.prepare(broker)  # __share_group_state created off the loop if missing
    svc = share_state.ShareStateService.of(broker)
    # (topic, topic id, [(partition, error or a pending write)])
    pending: list[tuple[str, uuid.UUID, list[tuple[int, Any]]]] = []
    for t in request.topics:
        name = str(t.topic_name)
        image = broker.metadata.topics.get(name)
        parts: list[tuple[int, Any]] = []
        for p in t.partitions:
            index, start = int(p.partition_index), int(p.start_offset)
            if not ctx.allowed(rules.ALTER_SHARE_OFFSETS_TOPIC, name):
                parts.append((index, rules.ALTER_SHARE_OFFSETS_TOPIC.error))
            elif image is None or not 0 <= index < image.num_partitions:
                parts.append((index, ErrorCode.unknown_topic_or_partition))
            else:
                key = ShareStateKey(group_id, image.topic_id, index)
                partition = svc.partition_for(key)
                if not svc.here(partition):  # another broker's share coordinator: through the persister
                    parts.append((index, asyncio.ensure_future(_initialize_elsewhere(broker, key, start))))
                    continue

                def initialize(shard: ShareStateShard, now: int, key: ShareStateKey = key, start: int = start) -> Any:
                    state = shard.states.get(key)
                    epoch = 0 if state is None else state.state_epoch + 1
                    return shard.initialize(key, epoch, start, now)
                parts.append((index, svc.runtime.write(partition, _step(initialize))))
        pending.append((name, image.topic_id if image is not None else _NO_ID, parts))
    responses = []
    for name, topic_id, parts in pending:
        answers = []
        written = []
        for index, answer in parts:
            code = answer if isinstance(answer, ErrorCode) else ErrorCode.none
            message = _ELSEWHERE if code is ErrorCode.coordinator_not_available else None
            if not isinstance(answer, ErrorCode):
                try:
                    a = await answer
                    code = a.error if isinstance(a, StateAnswer) else ErrorCode.none
                except KafkaError as e:
                    code, message = e.code, str(e) or None
                if code is ErrorCode.none:
                    written.append(index)
            answers.append(build(R.AlterShareGroupOffsetsResponsePartition, partition_index=index, error_code=code,
                                 error_message=message if code is not ErrorCode.none else None))
        _forget(broker, group_id, name, written)  # rebuilt from the new state at the next fetch
        members = _membership(broker, group_id)
        if members is not None:
            members.mark_initialized(group_id, name, written)  # initialized (key 15), as Kafka's
        responses.append(build(R.AlterShareGroupOffsetsResponseTopic, topic_name=name, topic_id=topic_id,
                               partitions=tuple(answers)))
    await _write_records(broker)
    return build(R.AlterShareGroupOffsetsResponse, throttle_time=_ZERO, error_code=ErrorCode.none,
                 error_message=None, responses=tuple(responses))


# --- DeleteShareGroupOffsets (92) ---------------------------------------------------------------------

async def handle_delete_share_group_offsets(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    broker = ctx.broker
    group_id = request.group_id

    def failed(code: ErrorCode, message: str | None = None) -> Any:
        return build(R.DeleteShareGroupOffsetsResponse, throttle_time=_ZERO, error_code=code,
                     error_message=message or code.name.upper(), responses=())

    def topic(name: str, topic_id: uuid.UUID | None, code: ErrorCode, message: str | None = None) -> Any:
        return build(R.DeleteShareGroupOffsetsResponseTopic, topic_name=name, topic_id=topic_id, error_code=code,
                     error_message=None if code is ErrorCode.none else message or code.name.upper())
    refused = _refused(ctx, group_id, rules.DELETE_SHARE_OFFSETS_GROUP)
    if refused is not None:
        return failed(*refused)
    svc = _service(broker)
    initialized = await _initialized_in_cluster(broker, group_id, [str(t.topic_name) for t in request.topics])
    refused_topics: list[Any] = []  # as Kafka: refused topics, then the deleted ones, then the other errors
    errors: list[Any] = []
    deleted: list[tuple[str, uuid.UUID, list[Any]]] = []
    for t in request.topics:
        name = str(t.topic_name)
        image = broker.metadata.topics.get(name)
        if not ctx.allowed(rules.DELETE_SHARE_OFFSETS_TOPIC, name):
            refused_topics.append(topic(name, None, rules.DELETE_SHARE_OFFSETS_TOPIC.error))
        elif image is None:
            errors.append(topic(name, None, ErrorCode.unknown_topic_or_partition))
        elif name not in initialized:
            errors.append(topic(name, None, ErrorCode.unknown_topic_or_partition,
                                "There is no offset information to delete."))
        else:
            writes: list[Any] = []
            for p in range(image.num_partitions):
                key = ShareStateKey(group_id, image.topic_id, p)
                if svc is None:
                    if p in initialized[name]:  # state in memory only, never written: cannot be deleted
                        writes.append(ErrorCode.coordinator_not_available)
                    continue
                if not svc.here(svc.partition_for(key)):  # another broker's share coordinator: the persister
                    if p in initialized[name]:
                        writes.append(asyncio.ensure_future(share.persister(broker).delete(key)))
                    continue
                writes.append(svc.runtime.write(svc.partition_for(key),
                                                _step(lambda shard, _now, key=key: shard.delete([key]))))
            deleted.append((name, image.topic_id, writes))
    answers: list[Any] = []
    for name, topic_id, writes in deleted:
        code: ErrorCode = ErrorCode.none
        message = None
        for w in writes:
            if isinstance(w, ErrorCode):
                code, message = w, _ELSEWHERE
                continue
            try:
                await w
            except KafkaError as e:
                code, message = e.code, str(e) or None
        if code is ErrorCode.none:
            _forget(broker, group_id, name, None)
            members = _membership(broker, group_id)
            if members is not None:
                members.uninitialize_topics([name], group_id)  # initialized again before it is assigned
        answers.append(topic(name, topic_id, code, message))
    await _write_records(broker)
    return build(R.DeleteShareGroupOffsetsResponse, throttle_time=_ZERO, error_code=ErrorCode.none,
                 error_message=None, responses=tuple(refused_topics + answers + errors))


APIS: ApiTable = {
    90: (0, 0, handle_describe_share_group_offsets),
    91: (0, 0, handle_alter_share_group_offsets),
    92: (0, 0, handle_delete_share_group_offsets),
}


async def delete_share_group(broker: ShareBroker, group_id: str) -> ErrorCode | None:
    """DeleteGroups of a share group: NON_EMPTY_GROUP while it has members, else it and its share
    partitions' state go (tombstones in `__share_group_state`, committed before the answer); None when no
    share group has this id, in memory or in `__share_group_state` (the group coordinator answers)."""
    coord = broker.services.get(share_state.SHARE_COORDINATOR)
    svc = broker.services.get(share_state.SHARE_STATE_SERVICE)
    known = coord is not None and group_id in coord.groups
    persisted = svc is not None and any(s.keys_of_group(group_id) for _p, s in svc.runtime.active_shards())
    if not known and not persisted:
        return None
    if known and coord is not None:
        coord.expire(broker.now_ms())
        code: ErrorCode = coord.delete_group(group_id)
        written = await share_membership.write_touched(broker, coord)  # the group's tombstones, committed
        if code is not ErrorCode.none:
            return code
        if group_id in written:
            return written[group_id]
    if svc is not None:
        try:
            await svc.delete_group(group_id)
        except KafkaError as e:
            return e.code
        code = await delete_state_elsewhere(broker, group_id)
        if code is not ErrorCode.none:
            return code
    return ErrorCode.none
