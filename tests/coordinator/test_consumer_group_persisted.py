"""KIP-848 groups persisted (Kafka's consumer-group records, keys 3-8): every step writes what changed,
and replaying the written records (all of them, or only what compaction keeps) into a fresh shard gives
back the same groups, epochs, targets and current assignments, which then carry on without a rebalance."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaflite.coordinator import CoordinatorConfig, GroupCoordinator
from kaflite.coordinator import messages as m
from kaflite.coordinator.consumer_group import ConsumerHeartbeatRequest, ConsumerHeartbeatResponse
from kaflite.coordinator.consumer_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
)
from kaflite.coordinator.records import decode_record, encode_key, encode_value
from kaflite.coordinator.shard_context import CoordinatorRecord
from kaflite.protocol.errors import ErrorCode

TOPICS = {"t": 6, "u": 3}
IDS = {"t": uuid.UUID(int=1), "u": uuid.UUID(int=2)}


class Cluster:
    """Consumers driving one shard; every record written is kept, as __consumer_offsets would."""

    def __init__(self) -> None:
        self.gc = GroupCoordinator(CoordinatorConfig())
        self.now = 0
        self.log: list[CoordinatorRecord] = []
        self.owned: dict[str, dict[str, frozenset[int]]] = {}
        self.epoch: dict[str, int] = {}

    def hb(self, member: str, leave: bool = False) -> ConsumerHeartbeatResponse:
        e = -1 if leave else self.epoch.get(member, 0)
        req = ConsumerHeartbeatRequest("g", member, e, ("t", "u") if e == 0 else None,
                                       self.owned.get(member, {}), rebalance_timeout_ms=5000,
                                       rack_id=f"rack-{member}", server_assignor="range" if e == 0 else None)
        result = self.gc.handle_consumer_heartbeat(req, TOPICS, self.now, IDS)
        self.log += result.records
        resp: ConsumerHeartbeatResponse = result.response()
        if resp.error is ErrorCode.none and not leave:
            self.epoch[member] = resp.member_epoch
            if resp.assignment is not None:
                self.owned[member] = dict(resp.assignment)
        return resp

    def settle(self, members: list[str]) -> None:
        for _ in range(6):
            for mb in members:
                assert self.hb(mb).error is ErrorCode.none
            self.now += 100


def _state(gc: GroupCoordinator) -> dict:
    out = {}
    for gid, g in gc.consumer.groups.items():
        out[gid] = (g.group_epoch, g.assignment_epoch, g.assignor, dict(g.target), dict(g.owners),
                    {mid: (mb.member_epoch, mb.previous_epoch, mb.state, dict(mb.assigned),
                           dict(mb.pending_revocation), mb.subscribed, mb.rack_id, mb.client_id)
                     for mid, mb in g.members.items()})
    return out


def _reload(records: list[CoordinatorRecord], now: int) -> GroupCoordinator:
    fresh = GroupCoordinator(CoordinatorConfig(), active=False)
    for r in records:
        fresh.replay(r.key, r.value)
    fresh.activate(now)
    return fresh


def _compacted(records: list[CoordinatorRecord]) -> list[CoordinatorRecord]:
    """What the log cleaner keeps: the last record of each key, tombstones dropped."""
    last: dict[bytes, CoordinatorRecord] = {}
    for r in records:
        last.pop(r.key, None)
        last[r.key] = r
    return [r for r in last.values() if r.value is not None]


def test_three_members_survive_a_reload_with_their_epochs_and_assignments() -> None:
    c = Cluster()
    c.settle(["a", "b", "c"])
    before = _state(c.gc)
    assert before["g"][1] == before["g"][0]  # the target is the latest epoch
    assert {mb[2] for mb in before["g"][5].values()} == {"STABLE"}
    assert {mb[6] for mb in before["g"][5].values()} == {"rack-a", "rack-b", "rack-c"}
    assert before["g"][2] == "range"
    for records in (c.log, _compacted(c.log)):
        fresh = _reload(records, c.now)
        assert _state(fresh) == before
        # the members carry on with the same epochs
        for mb in ("a", "b", "c"):
            req = ConsumerHeartbeatRequest("g", mb, c.epoch[mb], None, c.owned[mb])
            resp = fresh.handle_consumer_heartbeat(req, TOPICS, c.now, IDS).response()
            # the assignment may be repeated once (the reloaded shard does not know what it last sent): it
            # is what the member already owns, so nothing is revoked
            assert (resp.error, resp.member_epoch) == (ErrorCode.none, c.epoch[mb])
            assert resp.assignment in (None, c.owned[mb])
        assert _state(fresh) == before


def test_a_member_leaving_and_a_deleted_group_are_persisted() -> None:
    c = Cluster()
    c.settle(["a", "b"])
    c.hb("b", leave=True)
    c.settle(["a"])
    assert _state(_reload(c.log, c.now)) == _state(c.gc)
    assert set(_reload(_compacted(c.log), c.now).consumer.groups["g"].members) == {"a"}
    c.hb("a", leave=True)
    deleted = c.gc.handle_delete_groups(["g"], c.now)
    c.log += deleted.records
    assert deleted.response() == [("g", ErrorCode.none)]
    assert c.gc.handle_delete_groups(["g"], c.now).response() == [("g", ErrorCode.group_id_not_found)]
    assert _reload(c.log, c.now).consumer.groups == {}
    assert not [r for r in _compacted(c.log) if r.key[:2] in (b"\x00\x03", b"\x00\x05", b"\x00\x08")]


def test_a_heartbeat_that_changes_nothing_writes_nothing() -> None:
    c = Cluster()
    c.settle(["a"])
    n = len(c.log)
    c.hb("a")
    assert len(c.log) == n


names = st.text(max_size=8)
tps = st.lists(st.tuples(st.uuids(), st.lists(st.integers(0, 2**31 - 1), max_size=4).map(tuple)), max_size=3).map(tuple)


@settings(max_examples=60, deadline=None)
@given(names, names, st.integers(-1, 2**31 - 1), st.one_of(st.none(), names), tps, tps,
       st.lists(names, max_size=3).map(tuple))
def test_records_round_trip(group: str, member: str, n: int, maybe: str | None, a, b, subscribed) -> None:
    for key, value in [
        (ConsumerGroupMetadataKey(group), ConsumerGroupMetadataValue(n)),
        (ConsumerGroupPartitionMetadataKey(group), ConsumerGroupPartitionMetadataValue(((uuid.UUID(int=n + 1), member, n),))),
        (ConsumerGroupMemberMetadataKey(group, member),
         ConsumerGroupMemberMetadataValue(maybe, maybe, member, group, subscribed, maybe, n, maybe)),
        (ConsumerGroupMemberMetadataKey(group, member),
         ConsumerGroupMemberMetadataValue(maybe, maybe, member, group, subscribed, maybe, n, maybe,
                                          (n, tuple((t, member.encode()) for t in subscribed)))),
        (ConsumerGroupTargetAssignmentMemberKey(group, member), ConsumerGroupTargetAssignmentMemberValue(a)),
        (ConsumerGroupCurrentMemberAssignmentKey(group, member),
         ConsumerGroupCurrentMemberAssignmentValue(n, -1, 2, a, b)),
    ]:
        assert decode_record(encode_key(key), encode_value(value)) == (key, value)
        assert decode_record(encode_key(key), None) == (key, None)


def test_key_layout_is_kafkas() -> None:
    # key 5: int16 version 5, then group and member as int16-length strings (non-flexible)
    assert encode_key(ConsumerGroupMemberMetadataKey("g", "m")) == b"\x00\x05\x00\x01g\x00\x01m"
    # value v0 of ConsumerGroupMetadataValue: int16 version 0, int32 epoch, empty tagged fields
    assert encode_value(ConsumerGroupMetadataValue(7)) == b"\x00\x00\x00\x00\x00\x07\x00"


def _empty_group_with_offsets() -> Cluster:
    c = Cluster()
    c.settle(["a"])
    commit = m.OffsetCommitRequest("g", (("t", (m.OffsetCommitPartition(0, 5), m.OffsetCommitPartition(1, 7))),),
                                   generation_id=c.epoch["a"], member_id="a", version=9)
    result = c.gc.handle_offset_commit(commit, c.now)
    assert {e for _p, e in result.response().topics[0][1]} == {ErrorCode.none}
    c.log += result.records
    c.hb("a", leave=True)
    return c


def test_a_deleted_group_leaves_memory_only_as_its_tombstones_are_applied() -> None:
    """DeleteGroups changes nothing itself: the group goes when its ConsumerGroupMetadata tombstone is
    applied (the same replay as loading), after its offsets' tombstones, so the shard never holds less
    than the records written so far say (Kafka changes its timeline in replay, not in validation)."""
    c = _empty_group_with_offsets()
    seen: list[tuple[str, bool, bool]] = []
    apply = c.gc.ctx.apply

    def spy(key: Any, value: Any) -> None:
        seen.append((type(key).__name__, "g" in c.gc.consumer.groups, "g" in c.gc.offsets))
        apply(key, value)
    c.gc.ctx.apply = spy
    deleted = c.gc.handle_delete_groups(["g"], c.now)
    assert deleted.response() == [("g", ErrorCode.none)]
    kinds = [kind for kind, _g, _o in seen]
    assert kinds[:2] == ["OffsetCommitKey", "OffsetCommitKey"] and kinds[-1] == "GroupMetadataKey"
    last = kinds.index("ConsumerGroupMetadataKey")
    assert all(group for _k, group, _o in seen[: last + 1])  # there until its own tombstone is applied
    assert not any(group for _k, group, _o in seen[last + 1:])
    assert seen[0][2] and not seen[2][2]  # the offsets went with their tombstones
    c.log += deleted.records
    fresh = _reload(c.log, c.now)
    assert (_state(fresh), fresh.offsets, list(fresh.groups)) == (_state(c.gc), c.gc.offsets, list(c.gc.groups)) == (
        {}, {}, [])


def test_a_deletion_whose_write_fails_leaves_the_group() -> None:
    """The first tombstone cannot be written (the step fails there): the group and its offsets are all
    still in memory, and a later DeleteGroups deletes them."""
    c = _empty_group_with_offsets()
    before = (_state(c.gc), dict(c.gc.offsets))
    apply = c.gc.ctx.apply

    def failing(key: Any, value: Any) -> None:
        raise OSError(28, "No space left on device")
    c.gc.ctx.apply = failing
    with pytest.raises(OSError):
        c.gc.handle_delete_groups(["g"], c.now)
    c.gc.ctx.end()
    assert (_state(c.gc), dict(c.gc.offsets)) == before
    c.gc.ctx.apply = apply
    deleted = c.gc.handle_delete_groups(["g"], c.now)
    assert deleted.response() == [("g", ErrorCode.none)]
    assert _state(_reload(c.log + deleted.records, c.now)) == _state(c.gc) == {}
