"""`__consumer_offsets` record formats and rebuilding the coordinator by replaying its own records."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.coord_harness import Harness
from kaflite.coordinator import CoordinatorConfig, GroupCoordinator, GroupState
from kaflite.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    decode_record,
    encode_key,
    encode_value,
)
from kaflite.protocol.errors import ErrorCode


def test_offset_commit_record_layout_is_kafkas() -> None:
    key = encode_key(OffsetCommitKey("test", "t", 3))
    # int16 key version 1, then group, topic as int16-length strings, int32 partition
    assert key == struct.pack(">h", 1) + b"\x00\x04test" + b"\x00\x01t" + struct.pack(">i", 3)
    value = encode_value(OffsetCommitValue(42, "m", 1000, 7))
    # value v3: offset int64, leaderEpoch int32, metadata string, commitTimestamp int64
    assert value == struct.pack(">hqi", 3, 42, 7) + b"\x00\x01m" + struct.pack(">q", 1000)
    with_expiry = encode_value(OffsetCommitValue(42, "", 1000, -1, 5000))
    assert with_expiry[:2] == b"\x00\x01" and len(with_expiry) == 2 + 8 + 2 + 8 + 8  # v1


def test_group_metadata_record_layout_is_kafkas() -> None:
    assert encode_key(GroupMetadataKey("g")) == b"\x00\x02\x00\x01g"
    member = MemberMetadata("m1", None, "c", "/h", 300, 100, b"S", b"A")
    value = encode_value(GroupMetadataValue("consumer", 5, "range", "m1", 9, (member,)))
    expected = (struct.pack(">h", 3) + b"\x00\x08consumer" + struct.pack(">i", 5) + b"\x00\x05range"
                + b"\x00\x02m1" + struct.pack(">q", 9) + struct.pack(">i", 1)
                + b"\x00\x02m1" + b"\xff\xff" + b"\x00\x01c" + b"\x00\x02/h" + struct.pack(">ii", 300, 100)
                + struct.pack(">i", 1) + b"S" + struct.pack(">i", 1) + b"A")
    assert value == expected


def test_flexible_v4_values_are_read() -> None:
    # OffsetCommitValue v4: compact string (length+1 as uvarint) and an empty tagged-field section
    data = struct.pack(">hqi", 4, 10, 2) + bytes([3]) + b"ab" + struct.pack(">q", 77) + b"\x00"
    _, value = decode_record(encode_key(OffsetCommitKey("g", "t", 0)), data)
    assert value == OffsetCommitValue(10, "ab", 77, 2)


def test_unknown_versions_are_refused_clearly() -> None:
    # 3-8 are KIP-848's, 9-15 share groups' (membership, initialized share partitions); 16 (streams) not read
    with pytest.raises(RecordFormatError, match="key version 16"):
        decode_record(struct.pack(">h", 16) + b"\x00\x01g", None)
    with pytest.raises(RecordFormatError, match="truncated"):
        decode_record(encode_key(GroupMetadataKey("g"))[:-1], None)


names = st.text(min_size=0, max_size=20)


@given(names, names, st.integers(0, 2**31 - 1), st.integers(-1, 2**62), names, st.integers(-1, 2**40),
       st.integers(-1, 2**31 - 1))
def test_offset_records_round_trip(group: str, topic: str, partition: int, offset: int, metadata: str,
                                   ts: int, epoch: int) -> None:
    key, value = OffsetCommitKey(group, topic, partition), OffsetCommitValue(offset, metadata, ts, epoch)
    assert decode_record(encode_key(key), encode_value(value)) == (key, value)
    assert decode_record(encode_key(key), None) == (key, None)


@given(names, st.integers(0, 1000), st.lists(st.tuples(names, st.none() | names, st.binary(max_size=30)), max_size=4))
def test_group_records_round_trip(group: str, generation: int, members: list[tuple[str, str | None, bytes]]) -> None:
    value = GroupMetadataValue("consumer", generation, "range", members[0][0] if members else None, 123,
                               tuple(MemberMetadata(mid, iid, "c", "/127.0.0.1", 5, 6, data, data[::-1])
                                     for mid, iid, data in members))
    assert decode_record(encode_key(GroupMetadataKey(group)), encode_value(value)) == (GroupMetadataKey(group), value)


def _reload(h: Harness) -> GroupCoordinator:
    """A fresh coordinator fed every record the first one wrote, in order (what a restart does)."""
    fresh = GroupCoordinator(h.gc.config, active=False)
    for result in h.results:
        for record in result.records:
            assert record.partition == h.gc.partition_for(record.record_key.group)
            fresh.replay(record.key, record.value)
    fresh.activate(h.now)
    return fresh


def test_replay_rebuilds_stable_group_and_offsets() -> None:
    h = Harness(group_initial_rebalance_delay_ms=0)
    ids = h.form_group(3, instances=["a", None, None])
    assert h.commit({("t", 0): 5, ("t", 1): 9}, member_id=ids[0], generation=1, instance="a") == \
        {("t", 0): ErrorCode.none, ("t", 1): ErrorCode.none}
    h.commit({("t", 0): 6}, member_id=ids[1], generation=1)
    h.commit({("x", 0): 1}, group="simple")
    fresh = _reload(h)
    group = fresh.groups["g"]
    assert group.state is GroupState.STABLE and group.generation_id == 1
    assert group.leader_id == h.group().leader_id and group.protocol_name == "range"
    assert list(group.members) == ids and group.static_members == {"a": ids[0]}
    assert [mem.assignment for mem in group.members.values()] == \
        [mem.assignment for mem in h.group().members.values()]
    assert {k: v.offset for k, v in fresh.offsets["g"].items()} == {("t", 0): 6, ("t", 1): 9}
    assert fresh.groups["simple"].is_in(GroupState.EMPTY) and fresh.offsets["simple"][("x", 0)].offset == 1
    # loaded members must heartbeat again: each has a session timer from the load time
    for mid in ids:
        assert fresh.timer_deadline(("heartbeat", "g", mid)) == h.now + 10_000


def test_replay_applies_deletes_and_empty_groups() -> None:
    h = Harness(group_initial_rebalance_delay_ms=0)
    [mid] = h.form_group(1)
    h.commit({("t", 0): 3}, member_id=mid, generation=1)
    h.leave((mid, None))
    h.commit({("t", 1): 4}, group="gone")
    h._collect(h.gc.handle_delete_groups(["gone"], h.now))
    fresh = _reload(h)
    assert fresh.groups["g"].is_in(GroupState.EMPTY) and fresh.groups["g"].generation_id == 2
    assert fresh.offsets["g"][("t", 0)].offset == 3
    assert "gone" not in fresh.groups and "gone" not in fresh.offsets


def test_static_member_restart_is_replayed_with_its_new_id() -> None:
    h = Harness(group_initial_rebalance_delay_ms=0)
    h.form_group(2, instances=["a", "b"])
    new_id = h.answers[h.join(instance="b")].member_id
    fresh = _reload(h)
    assert fresh.groups["g"].static_members["b"] == new_id


def test_inactive_coordinator_refuses_until_loaded() -> None:
    gc = GroupCoordinator(CoordinatorConfig(), active=False)
    h = Harness()
    h.gc = gc
    assert h.answers[h.join()].error is ErrorCode.coordinator_not_available
    assert h.heartbeat("m", 1) is ErrorCode.coordinator_not_available
    gc.activate(0)
    assert h.answers[h.join()].error is ErrorCode.member_id_required


def test_offsets_expire_after_retention_once_group_is_empty() -> None:
    h = Harness(group_initial_rebalance_delay_ms=0, offsets_retention_minutes=1,
                offsets_retention_check_interval_ms=1000)
    h.gc.activate(0)
    [mid] = h.form_group(1, session=60_000)
    h.commit({("t", 0): 3}, member_id=mid, generation=1)
    for _ in range(5):  # a Stable group subscribed to "t" keeps its offsets however old
        h.advance(30_000)
        assert h.heartbeat(mid, 1) is ErrorCode.none
    assert h.fetch(topics={"t": [0]}) == {("t", 0): 3}
    h.leave((mid, None))
    h.advance(59_000)
    assert h.fetch(topics={"t": [0]}) == {("t", 0): 3}
    h.advance(2_000)  # a minute after the group became Empty: offsets go, then the group
    assert h.fetch(topics={"t": [0]}) == {("t", 0): -1}
    h.advance(1_000)
    assert "g" not in h.gc.groups


def test_explicit_retention_time_of_old_commit_versions() -> None:
    h = Harness(offsets_retention_check_interval_ms=1000)
    h.gc.activate(0)
    from kaflite.coordinator import messages as m

    req = m.OffsetCommitRequest("s", (("t", (m.OffsetCommitPartition(0, 8),)),), retention_time_ms=5000, version=2)
    h._collect(h.gc.handle_offset_commit(req, h.now))
    h.advance(4000)
    assert h.fetch("s", {"t": [0]}) == {("t", 0): 8}
    h.advance(1000)
    assert h.fetch("s", {"t": [0]}) == {("t", 0): -1}
