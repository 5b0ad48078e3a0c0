"""Helpers of the coordinator-runtime tests on a real broker: the injected disk fault, the persisted view of a
shard, and raw group requests (kio over a WireClient)."""

from __future__ import annotations

import datetime
import errno
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest, OffsetFetchRequestTopic
from kio.schema.sync_group.v3.request import SyncGroupRequest, SyncGroupRequestAssignment
from kio.static.primitive import i32, i32Timedelta, i64

from coordinator.coord_harness import encode_subscription
from kaflite.coordinator import GroupCoordinator, partition_for
from kaflite.protocol.errors import ErrorCode
from kaflite.server.coordinators.groups import GROUP_SERVICE, GroupService
from server.kwire import WireClient, decode_response


def _service(broker: Any) -> GroupService:
    """The embedded broker's GroupService (started by the group requests before)."""
    service = broker.server.broker.services.get(GROUP_SERVICE)
    assert service is not None
    return service


# --- the fault ------------------------------------------------------------------------------------


@contextmanager
def full_disk(broker: Any, partition: int) -> Iterator[list[int]]:
    """Every append to `__consumer_offsets-<partition>` raises ENOSPC until the block ends; yields the
    list of refused appends (one entry per attempt)."""
    refused: list[int] = []

    def failing(*args: object, **kwargs: object) -> Any:
        refused.append(1)
        raise OSError(errno.ENOSPC, "No space left on device (injected)")

    def inject() -> None:
        _service(broker).writer.log(partition).append = failing

    def clear() -> None:
        del _service(broker).writer.log(partition).append  # the method again

    broker.call(inject)
    try:
        yield refused
    finally:
        broker.call(clear)


def persisted_view(shard: GroupCoordinator) -> dict[str, Any]:
    """What the log can tell about a shard: each group's generation, protocol, leader, members with their
    assignments (loaded groups are Stable or Empty), and every committed offset."""
    groups = {}
    for gid, g in sorted(shard.groups.items()):
        members = sorted((mid, mb.group_instance_id, mb.assignment) for mid, mb in g.members.items())
        groups[gid] = (g.state.value, g.generation_id, g.protocol_type, g.protocol_name, g.leader_id, members)
    offsets = {gid: {tp: (v.offset, v.metadata) for tp, v in sorted(committed.items())}
               for gid, committed in sorted(shard.offsets.items())}
    return {"groups": groups, "offsets": offsets}


def live_and_log(broker: Any, group: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The live shard of `group` and a fresh shard replayed from its partition's log, as persisted views."""
    def read() -> tuple[dict[str, Any], dict[str, Any]]:
        svc = _service(broker)
        partition = svc.partition_for(group)
        fresh = GroupCoordinator(svc.config, active=False)
        for key, value in svc.writer.records(partition):
            fresh.replay(key, value)
        return persisted_view(svc.runtime.shard(partition)), persisted_view(fresh)
    return broker.call(read)  # type: ignore[no-any-return]


def group_in_same_partition(group: str) -> str:
    target = partition_for(group)
    for i in range(100_000):
        other = f"{group}-{i}"
        if partition_for(other) == target:
            return other
    raise AssertionError("no other group id in the same partition")


# --- the wire ---------------------------------------------------------------------------------------

def _ms(n: int) -> Any:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=n))


def join_request(group: str, member_id: str, topic: str) -> JoinGroupRequest:
    return JoinGroupRequest(group_id=group, session_timeout=_ms(10_000), rebalance_timeout=_ms(10_000),
                            member_id=member_id, group_instance_id=None, protocol_type="consumer",
                            protocols=(JoinGroupRequestProtocol(name="range", metadata=encode_subscription([topic])),))


def commit_request(group: str, topic: str, member_id: str, generation: int, offset: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=i32(generation), member_id=member_id,
                               group_instance_id=None, topics=(OffsetCommitRequestTopic(name=topic, partitions=(
                                   OffsetCommitRequestPartition(partition_index=i32(0), committed_offset=i64(offset),
                                                                committed_leader_epoch=i32(-1),
                                                                committed_metadata=f"at {offset}"),)),))


def commit(client: WireClient, group: str, topic: str, member_id: str, generation: int, offset: int) -> ErrorCode:
    return ErrorCode(client.request(commit_request(group, topic, member_id, generation, offset))
                     .topics[0].partitions[0].error_code)


def fetch(client: WireClient, group: str, topic: str) -> tuple[ErrorCode, int]:
    resp = client.request(OffsetFetchRequest(group_id=group, require_stable=False, topics=(
        OffsetFetchRequestTopic(name=topic, partition_indexes=(i32(0),)),)))
    if not resp.topics:  # a group-level error carries no partitions
        return ErrorCode(resp.error_code), -1
    return ErrorCode(resp.error_code), int(resp.topics[0].partitions[0].committed_offset)


def sync(client: WireClient, group: str, member_id: str, generation: int,
         plan: dict[str, bytes] | None = None) -> SyncGroupRequest:
    assignments = tuple(SyncGroupRequestAssignment(member_id=mid, assignment=data) for mid, data in (plan or {}).items())
    return SyncGroupRequest(group_id=group, generation_id=i32(generation), member_id=member_id,
                            group_instance_id=None, assignments=assignments)


def answer_of(client: WireClient, request: Any, corr: int) -> Any:
    """The answer to a request sent earlier with `send` (the socket's timeout bounds the wait)."""
    return decode_response(request.__api_key__, request.__version__, client.read_frame(), corr)


def group_state_name(broker: Any, group: str) -> str | None:
    g = broker.call(lambda: _service(broker).group(group))
    return None if g is None else g.state.value  # type: ignore[no-any-return]


def awaiting_sync(broker: Any, group: str, member_id: str) -> bool:
    def probe() -> bool:
        g = _service(broker).group(group)
        return g is not None and member_id in g.members and g.members[member_id].awaiting_sync
    return broker.call(probe)  # type: ignore[no-any-return]
