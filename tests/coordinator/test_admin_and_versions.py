"""Admin views (DescribeGroups, ListGroups, OffsetDelete) and version-dependent answers of the coordinator."""

from __future__ import annotations

from coordinator.coord_harness import Harness
from kaflite.coordinator import GroupState
from kaflite.coordinator import messages as m
from kaflite.protocol.consumer_protocol import assignment_partitions, subscription_topics
from kaflite.protocol.errors import ErrorCode


def test_static_leader_restart_on_joingroup_v9_skips_assignment() -> None:
    h = Harness(group_initial_rebalance_delay_ms=0)
    leader, follower = h.form_group(2, instances=["a", "b"])
    resp = h.answers[h.join(instance="a", version=9)]
    # v9 (KIP-814): the restarted leader learns it leads, gets the members, and is told not to reassign
    assert resp.error is ErrorCode.none and resp.leader == resp.member_id != leader
    assert resp.skip_assignment and {mb.member_id for mb in resp.members} == {resp.member_id, follower}
    assert h.group().is_in(GroupState.STABLE) and h.group().generation_id == 1


def test_describe_and_list_show_kafka_state_names() -> None:
    h = Harness(group_initial_rebalance_delay_ms=0)
    ids = h.form_group(2)
    h.commit({("x", 0): 1}, group="simple")
    [stable, simple, unknown] = h.gc.describe_groups(["g", "simple", "nope"])
    assert (stable.state, stable.protocol_type, stable.protocol) == ("Stable", "consumer", "range")
    assert [d.member_id for d in stable.members] == ids
    assert subscription_topics(stable.members[0].metadata) == ["t"]
    assert assignment_partitions(stable.members[1].assignment) == {"t": [1]}
    assert (simple.state, simple.protocol_type, simple.members) == ("Empty", "", ())
    assert (unknown.error, unknown.state) == (ErrorCode.none, "Dead")
    h.join(member_id=ids[0])  # the leader rejoins: a rebalance starts, metadata is no longer shown
    [preparing] = h.gc.describe_groups(["g"])
    assert preparing.state == "PreparingRebalance" and preparing.protocol == ""
    assert all(d.metadata == b"" and d.assignment == b"" for d in preparing.members)
    assert {g.group_id for g in h.gc.list_groups()} == {"g", "simple"}
    assert [g.group_id for g in h.gc.list_groups(["EMPTY"])] == ["simple"]
    assert [g.group_id for g in h.gc.list_groups(["preparingrebalance", "Stable"])] == ["g"]


def test_offset_delete_rules() -> None:
    h = Harness(group_initial_rebalance_delay_ms=0)
    [mid] = h.form_group(1)
    h.commit({("t", 0): 3, ("other", 0): 4}, member_id=mid, generation=1)

    def delete(group: str, topic: str) -> m.OffsetDeleteResponse:
        req = m.OffsetDeleteRequest(group, ((topic, (0,)),))
        resp: m.OffsetDeleteResponse = h.gc.handle_offset_delete(req, h.now).response()
        return resp

    assert delete("g", "t").topics == (("t", ((0, ErrorCode.group_subscribed_to_topic),)),)
    assert delete("g", "other").topics == (("other", ((0, ErrorCode.none),)),)
    assert h.fetch(topics={"t": [0], "other": [0]}) == {("t", 0): 3, ("other", 0): -1}
    assert delete("nope", "t").error is ErrorCode.group_id_not_found


def test_lenient_consumer_protocol_readers_answer_none_for_other_bytes() -> None:
    """The coordinator reads any group's member bytes with the one codec's lenient readers: not a consumer
    subscription/assignment -> None (counted as "may subscribe to anything"), never an exception."""
    from coordinator.coord_harness import encode_assignment, encode_subscription

    assert subscription_topics(encode_subscription(["a", "b"])) == ["a", "b"]
    assert assignment_partitions(encode_assignment({"a": [0, 2], "b": [1]})) == {"a": [0, 2], "b": [1]}
    assert assignment_partitions(b"") == {}
    for junk in (b"\x00", b"\x00\x00\x00\x00\x00\x05ab", b"\xff\xff", b"\x00\x00\x00\x00\x00\x01\x00\x02\xff\xfe"):
        assert subscription_topics(junk) is None
        assert assignment_partitions(junk) is None
