"""A share group's membership as `__consumer_offsets` records (kaflite.coordinator.share.membership_records):
Kafka's byte layout, the diff a step writes, and replay giving back the group. No sockets, an explicit clock."""

from __future__ import annotations

import dataclasses
import struct
import uuid
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from kaflite.coordinator.coordinator import GroupCoordinator
from kaflite.coordinator.records import decode_record, encode_key, encode_value
from kaflite.coordinator.share import membership_records as mr
from kaflite.coordinator.share.group import ShareGroup, ShareGroupCoordinator
from kaflite.coordinator.share.partition import ShareConfig

TOPICS = {"t": 3, "u": 2}
IDS = {"t": uuid.UUID(int=1), "u": uuid.UUID(int=2)}
NAMES = {i: n for n, i in IDS.items()}


def coord(initialize: bool = False) -> ShareGroupCoordinator:
    return ShareGroupCoordinator(ShareConfig(), session_timeout_ms=10_000, heartbeat_interval_ms=500,
                                 initialize_partitions=initialize)


def _with_deadline(group: ShareGroup, deadline: int) -> ShareGroup:
    out = dataclasses.replace(group, members={m: dataclasses.replace(mb, deadline_ms=deadline)
                                              for m, mb in group.members.items()})
    out.target = {m: a for m, a in group.target.items() if m in group.members}
    return out


def test_key_and_value_bytes_are_kafkas_layout() -> None:
    # key: int16 version (the record type), then int16-length strings
    key = mr.ShareGroupMemberMetadataKey("g", "m1")
    assert encode_key(key) == struct.pack(">h", 10) + b"\x00\x01g" + b"\x00\x02m1"
    assert encode_key(mr.ShareGroupMetadataKey("g")) == struct.pack(">h", 11) + b"\x00\x01g"
    # value: int16 version 0, flexible: compact strings (length + 1), compact arrays, tagged fields (0)
    value = mr.ShareGroupMemberMetadataValue(None, "c", "/h", ("t",))
    assert encode_value(value) == b"\x00\x00" + b"\x00" + b"\x02c" + b"\x03/h" + b"\x02\x02t" + b"\x00"
    assert encode_value(mr.ShareGroupMetadataValue(7)) == b"\x00\x00" + struct.pack(">i", 7) + b"\x00"
    assigned = mr.ShareGroupCurrentMemberAssignmentValue(3, 3, 0, ((IDS["t"], (0, 2)),))
    assert encode_value(assigned) == (b"\x00\x00" + struct.pack(">iib", 3, 3, 0) + b"\x02" + IDS["t"].bytes
                                      + b"\x03" + struct.pack(">ii", 0, 2) + b"\x00" + b"\x00")
    records = [
        (key, value),
        (mr.ShareGroupMetadataKey("g"), mr.ShareGroupMetadataValue(7)),
        (mr.ShareGroupPartitionMetadataKey("g"), mr.ShareGroupPartitionMetadataValue(((IDS["t"], "t", 3),))),
        (mr.ShareGroupTargetAssignmentMetadataKey("g"), mr.ShareGroupTargetAssignmentMetadataValue(7)),
        (mr.ShareGroupTargetAssignmentMemberKey("g", "m1"),
         mr.ShareGroupTargetAssignmentMemberValue(((IDS["t"], (1,)),))),
        (mr.ShareGroupCurrentMemberAssignmentKey("g", "m1"), assigned),
        (mr.ShareGroupStatePartitionMetadataKey("g"), mr.ShareGroupStatePartitionMetadataValue(
            ((IDS["u"], "u", (1,)),), ((IDS["t"], "t", (0, 2)),), ((IDS["u"], "u"),))),
    ]
    for k, v in records:
        assert decode_record(encode_key(k), encode_value(v)) == (k, v)
        assert decode_record(encode_key(k), None) == (k, None)  # a tombstone


def test_initialized_partitions_record_is_kafkas_key_15_layout() -> None:
    """Kafka 4.1+'s ShareGroupStatePartitionMetadata: key version 15 {group}; value version 0, flexible:
    initializing topics [{topic id, name, [int32]}], initialized topics (same), deleting topics [{id, name}]."""
    key = mr.ShareGroupStatePartitionMetadataKey("g")
    assert encode_key(key) == struct.pack(">h", 15) + b"\x00\x01g"
    value = mr.ShareGroupStatePartitionMetadataValue(((IDS["u"], "u", (1,)),), ((IDS["t"], "t", (0, 2)),))
    assert encode_value(value) == (b"\x00\x00"
                                   + b"\x02" + IDS["u"].bytes + b"\x02u" + b"\x02" + struct.pack(">i", 1) + b"\x00"
                                   + b"\x02" + IDS["t"].bytes + b"\x02t" + b"\x03" + struct.pack(">ii", 0, 2) + b"\x00"
                                   + b"\x01" + b"\x00")
    c = coord(initialize=True)
    answer = c.heartbeat("g", "a", 0, ["t"], TOPICS, now=0)
    assert answer.initialize == {"t": frozenset({0, 1, 2})} and answer.assignment == {}
    c.initialized("g", {"t": [0, 2]}, now=1)
    group = c.groups["g"]
    records = mr.group_records(group, IDS)
    assert records[key] == mr.ShareGroupStatePartitionMetadataValue(((IDS["t"], "t", (1,)),),
                                                                    ((IDS["t"], "t", (0, 2)),))
    back = mr.group_from_records("g", records, NAMES, deadline_ms=5)
    assert back is not None and back.initialized == {"t": frozenset({0, 2})}
    assert back.initializing == {"t": frozenset({1})} and back.initializing_since == {}
    # a topic gone from the image (its id unknown) is dropped from both
    assert mr.group_from_records("g", records, {}, deadline_ms=5).initialized == {}  # type: ignore[union-attr]


def test_a_group_replays_from_its_records_with_deadlines_from_load() -> None:
    c = coord()
    c.heartbeat("g", "a", 0, ["t"], TOPICS, now=0, rack_id="r1", client_id="ca", client_host="/h")
    c.heartbeat("g", "b", 0, ["t", "u"], TOPICS, now=5)
    c.heartbeat("g", "a", 1, None, TOPICS, now=6)
    group = c.groups["g"]
    records = mr.group_records(group, IDS)
    back = mr.group_from_records("g", records, NAMES, deadline_ms=99_000)
    assert back == _with_deadline(group, 99_000)
    assert back is not None and back.members["a"].rack_id == "r1" and back.group_epoch == group.group_epoch
    # a member heartbeating with its epoch after the reload is accepted, with no epoch bump
    c2 = coord()
    c2.groups["g"] = back
    epoch = back.members["b"].member_epoch
    answer = c2.heartbeat("g", "b", epoch, None, TOPICS, now=100)
    assert answer.error.value == 0 and answer.member_epoch == epoch and c2.groups["g"].group_epoch == epoch


def test_leave_writes_member_tombstones_and_delete_writes_the_group_epoch_last() -> None:
    c = coord()
    c.heartbeat("g", "a", 0, ["t"], TOPICS, now=0)
    c.heartbeat("g", "b", 0, ["t"], TOPICS, now=0)
    before = mr.group_records(c.groups["g"], IDS)
    c.heartbeat("g", "b", -1, None, TOPICS, now=1)
    c.heartbeat("g", "a", 2, None, TOPICS, now=1)  # the target without b
    changes = mr.diff(before, mr.group_records(c.groups["g"], IDS))
    tombstones = [k for k, v in changes if v is None]
    assert tombstones == [mr.ShareGroupCurrentMemberAssignmentKey("g", "b"),
                          mr.ShareGroupTargetAssignmentMemberKey("g", "b"),
                          mr.ShareGroupMemberMetadataKey("g", "b")]
    assert (mr.ShareGroupMetadataKey("g"), mr.ShareGroupMetadataValue(3)) in changes
    c.heartbeat("g", "a", -1, None, TOPICS, now=2)
    last = mr.group_records(c.groups["g"], IDS)
    c.delete_group("g")
    deleted = mr.diff(last, mr.group_records(c.groups.get("g"), IDS))
    assert all(v is None for _k, v in deleted) and deleted[-1][0] == mr.ShareGroupMetadataKey("g")
    store: dict[str, mr.ShareRecords] = {"g": dict(last)}
    for k, v in deleted:
        mr.apply(store, k, v)
    assert store == {}


def test_the_shard_writes_the_difference_and_replays_it() -> None:
    shard = GroupCoordinator()
    c = coord()
    c.heartbeat("g", "a", 0, ["t"], TOPICS, now=0)
    first = shard.handle_share_group_write("g", mr.group_records(c.groups["g"], IDS), 10)
    assert len(first.records) == 6 and first.response() is not None
    again = shard.handle_share_group_write("g", mr.group_records(c.groups["g"], IDS), 11)
    assert again.records == []  # nothing changed: nothing written
    # a fresh shard replaying the bytes written holds the same records
    fresh = GroupCoordinator()
    for rec in first.records:
        fresh.replay(rec.key, rec.value)
    assert fresh.share_records == shard.share_records


_ops = st.lists(st.tuples(st.sampled_from(["join", "beat", "leave", "resubscribe", "expire", "grow",
                                           "initialized", "init-failed", "topic-deleted"]),
                          st.sampled_from(["m1", "m2", "m3"]),
                          st.sampled_from([("t",), ("u",), ("t", "u")])), max_size=25)


def _step(c: Any, topics: dict[str, int], op: str, member: str, subs: Any, now: int) -> int:
    """One operation of the generated sequences on group "g" (a heartbeat of some kind, an expiry, a topic
    grown or deleted, an initialization answered, the group deleted once empty); the clock after it."""
    now += 1000
    group = c.groups.get("g")
    mb = group.members.get(member) if group is not None else None
    if op == "join":
        c.heartbeat("g", member, 0, list(subs), topics, now=now)
    elif op == "beat" and mb is not None:
        c.heartbeat("g", member, mb.member_epoch, None, topics, now=now)
    elif op == "leave" and mb is not None:
        c.heartbeat("g", member, -1, None, topics, now=now)
    elif op == "resubscribe" and mb is not None:
        c.heartbeat("g", member, mb.member_epoch, list(subs), topics, now=now)
    elif op == "expire":
        c.expire(now + 20_000)
        now += 20_000
    elif op == "grow":
        topics["u"] += 1
    elif op in ("initialized", "init-failed") and group is not None:
        some = {t: sorted(ps)[:1] for t, ps in group.initializing.items()}
        if op == "initialized":
            c.initialized("g", some, now)
        else:
            c.initialize_failed("g", some)
    elif op == "topic-deleted":
        c.uninitialize_topics(list(subs))
    elif op == "delete" and group is not None and not group.members:
        c.delete_group("g")
    return now


@settings(max_examples=60, deadline=None)
@given(_ops)
def test_replaying_the_written_records_gives_the_group(ops: list[tuple[str, str, tuple[str, ...]]]) -> None:
    """After every step: the diffs written so far, replayed through their bytes (all of them, or only the
    last record of each key as compaction leaves), give back exactly the group in memory (with its
    initializing and initialized share partitions, key 15)."""
    c = coord(initialize=True)
    topics = dict(TOPICS)
    store: dict[str, mr.ShareRecords] = {}
    compacted: dict[bytes, bytes | None] = {}
    now = 0
    for op, member, subs in ops:
        now = _step(c, topics, op, member, subs, now)
        for k, v in mr.diff(store.get("g", {}), mr.group_records(c.groups.get("g"), IDS)):
            kb, vb = encode_key(k), None if v is None else encode_value(v)
            dk, dv = decode_record(kb, vb)
            mr.apply(store, dk, dv)  # type: ignore[arg-type]
            compacted[kb] = vb
        from_compacted: dict[str, mr.ShareRecords] = {}
        for kb, vb in compacted.items():
            dk, dv = decode_record(kb, vb)
            mr.apply(from_compacted, dk, dv)  # type: ignore[arg-type]
        assert from_compacted == store
        group = c.groups.get("g")
        back = mr.group_from_records("g", store.get("g", {}), NAMES, 5)
        assert back == (None if group is None else _with_deadline(group, 5))


def test_a_partial_write_covers_the_groups_own_records_and_the_named_members_only() -> None:
    c = coord()
    for m in ("a", "b", "c"):
        c.heartbeat("g", m, 0, ["t"], TOPICS, now=0)
    group = c.groups["g"]
    whole = mr.group_records(group, IDS)
    part = mr.group_records(group, IDS, {"b", "gone"})  # a member not in the group has no records
    assert set(part) == set(mr.record_keys("g", ["b"])) & set(whole)
    assert all(whole[k] == v for k, v in part.items()) and list(part) == [k for k in whole if k in part]
    # the other members' records are kept as written; a covered member absent from `new` is tombstoned
    shard = GroupCoordinator()
    shard.handle_share_group_write("g", whole, 1)
    c.heartbeat("g", "b", -1, None, TOPICS, now=2)
    written = shard.handle_share_group_write("g", mr.group_records(c.groups["g"], IDS, {"b"}), 3,
                                             mr.record_keys("g", ["b"]))
    assert {type(r.record_key).__name__ for r in written.records if r.value is None} == {
        "ShareGroupMemberMetadataKey", "ShareGroupTargetAssignmentMemberKey",
        "ShareGroupCurrentMemberAssignmentKey"}
    assert all(isinstance(r.record_key, mr.ShareGroupMetadataKey) or getattr(r.record_key, "member", None) == "b"
               for r in written.records)
    assert shard.share_records["g"] == {**{k: v for k, v in whole.items() if getattr(k, "member", "") != "b"},
                                        **mr.group_records(c.groups["g"], IDS, ())}


_partial_ops = st.lists(st.tuples(st.sampled_from(["join", "beat", "leave", "resubscribe", "expire", "grow",
                                                   "initialized", "init-failed", "topic-deleted", "delete"]),
                                  st.sampled_from(["m1", "m2", "m3", "m4"]),
                                  st.sampled_from([("t",), ("u",), ("t", "u")])), max_size=30)


@settings(max_examples=120, deadline=None)
@given(_partial_ops, st.booleans())
@example([("join", "m1", ("t",)), ("join", "m2", ("t",))], False)  # m1's target moves at m2's join
@example([("join", "m1", ("t",)), ("join", "m2", ("u",)), ("leave", "m1", ()), ("delete", "m1", ()),
          ("join", "m1", ("t", "u"))], True)
def test_writing_only_the_touched_members_keeps_the_shard_equal_to_the_whole_groups_records(
        ops: list[tuple[str, str, tuple[str, ...]]], initialize: bool) -> None:
    """The shell's partial writes (`take_touched`: the group's own records and the members named): after
    every step the shard holds exactly the records a whole write would have left (every member's record,
    not only the group replayed from them), and a fresh shard replaying the bytes gives back the group.
    `initialize` False: every partition assignable at once, so targets move at every join."""
    c = coord(initialize=initialize)
    topics = dict(TOPICS)
    shard = GroupCoordinator()
    written: list[tuple[bytes, bytes | None]] = []
    now = 0
    for op, member, subs in ops:
        now = _step(c, topics, op, member, subs, now)
        for group_id, members in c.take_touched().items():
            group = c.groups.get(group_id)
            if members is None or group is None:
                result = shard.handle_share_group_write(group_id, mr.group_records(group, IDS), now)
            else:
                result = shard.handle_share_group_write(group_id, mr.group_records(group, IDS, members), now,
                                                        mr.record_keys(group_id, members))
            written += [(r.key, r.value) for r in result.records]
        group = c.groups.get("g")
        assert shard.share_records.get("g", {}) == mr.group_records(group, IDS)
    fresh = GroupCoordinator()
    for kb, vb in written:
        fresh.replay(kb, vb)
    assert fresh.share_records == shard.share_records
    group = c.groups.get("g")
    back = mr.group_from_records("g", fresh.share_records.get("g", {}), NAMES, 5)
    assert back == (None if group is None else _with_deadline(group, 5))
