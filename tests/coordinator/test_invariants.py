"""Random sequences of member actions and clock moves (hypothesis): the coordinator's invariants hold after
every step, and no parked JoinGroup/SyncGroup is ever forgotten (a forgotten one would hang a client)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.coord_harness import Harness
from kaflite.coordinator import GroupState
from kaflite.coordinator import messages as m

ACTIONS = st.lists(
    st.tuples(st.sampled_from(["join", "rejoin", "sync", "leader_sync", "heartbeat", "leave", "commit", "advance",
                               "static_join"]),
              st.integers(0, 4), st.sampled_from([0, 50, 1_000, 6_000, 20_000])),
    min_size=1, max_size=60,
)


def check(h: Harness, issued: set[int]) -> None:
    gc = h.gc
    for group in gc.groups.values():
        members = group.members
        assert group.num_awaiting_join == sum(mb.awaiting_join for mb in members.values())
        assert (group.leader_id is None) == (not members)
        assert group.leader_id is None or group.leader_id in members
        for instance, mid in group.static_members.items():
            assert mid in members and members[mid].group_instance_id == instance
        expected = Counter(name for mb in members.values() for name in mb.protocol_names())
        assert +group.supported_protocols == expected
        if group.is_in(GroupState.EMPTY):
            assert not members
        assert group.pending_sync_members <= set(members)
        for mb in members.values():
            assert mb.join_token is None or mb.awaiting_join
            assert mb.sync_token is None or mb.awaiting_sync
    # every parked request is either answered or still held by a member that awaits
    parked = {mb.join_token for g in gc.groups.values() for mb in g.members.values() if mb.join_token is not None}
    parked |= {mb.sync_token for g in gc.groups.values() for mb in g.members.values() if mb.sync_token is not None}
    assert issued <= set(h.answers) | parked, issued - set(h.answers) - parked


@settings(max_examples=150, deadline=None)
@given(ACTIONS)
def test_random_member_behaviour_keeps_invariants(actions: list[tuple[str, int, int]]) -> None:
    h = Harness(group_initial_rebalance_delay_ms=100, group_min_session_timeout_ms=1000)
    ids: dict[int, str] = {}  # client number -> its current member id
    generation: dict[int, int] = {}
    issued: set[int] = set()
    for action, who, ms in actions:
        member_id = ids.get(who, "")
        if action in ("join", "rejoin", "static_join"):
            instance = f"i{who}" if action == "static_join" else None
            t = h.join(member_id="" if action == "join" else member_id, instance=instance, client_id=f"c{who}",
                       session=6_000, rebalance=10_000)
            issued.add(t)
            resp = h.answers.get(t)
            if resp is not None and resp.member_id:
                ids[who] = resp.member_id
                generation[who] = resp.generation_id
        elif action in ("sync", "leader_sync"):
            group = h.gc.groups.get("g")
            plan = {mid: b"x" for mid in group.members} if group and action == "leader_sync" else {}
            issued.add(h.sync(member_id, generation.get(who, -1), plan))
        elif action == "heartbeat":
            h.heartbeat(member_id, generation.get(who, -1))
        elif action == "leave":
            h.leave((member_id, None))
        elif action == "commit":
            h.commit({("t", 0): ms}, member_id=member_id, generation=generation.get(who, -1))
        else:
            h.advance(ms)
        for token in list(issued):  # learn generations from answers that arrived later
            resp = h.answers.get(token)
            if isinstance(resp, m.JoinGroupResponse) and resp.member_id:
                for k, v in ids.items():
                    if v == resp.member_id:
                        generation[k] = resp.generation_id
        check(h, issued)
    # given enough time without anyone acting, everything parked is answered and the group empties
    h.advance(400_000)
    h.advance(400_000)
    check(h, issued)
    assert issued <= set(h.answers)
    group = h.gc.groups.get("g")
    assert group is None or not group.members
