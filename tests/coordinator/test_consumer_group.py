"""KIP-848 consumer groups (ConsumerGroupHeartbeat) in the pure coordinator, with a manual clock."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kaflite.coordinator import CoordinatorConfig, GroupCoordinator
from kaflite.coordinator import messages as m
from kaflite.coordinator.consumer_group import ConsumerHeartbeatRequest, ConsumerHeartbeatResponse
from kaflite.protocol.errors import ErrorCode

TOPICS = {"t": 6}


class Driver:
    def __init__(self, **cfg: int) -> None:
        self.gc = GroupCoordinator(CoordinatorConfig(**cfg))
        self.now = 0
        self.owned: dict[str, dict[str, frozenset[int]]] = {}  # what each client believes it owns
        self.epoch: dict[str, int] = {}

    def hb(self, member: str, epoch: int | None = None, topics: tuple[str, ...] | None = None,
           owned: dict[str, frozenset[int]] | None = None, assignor: str | None = None) -> ConsumerHeartbeatResponse:
        e = self.epoch.get(member, 0) if epoch is None else epoch
        req = ConsumerHeartbeatRequest("g", member, e, topics if e != 0 or topics else ("t",),
                                       owned if owned is not None else self.owned.get(member, {}),
                                       rebalance_timeout_ms=5000, server_assignor=assignor)
        resp: ConsumerHeartbeatResponse = self.gc.handle_consumer_heartbeat(req, TOPICS, self.now).response()
        if resp.error is ErrorCode.none:
            self.epoch[member] = resp.member_epoch
            if resp.assignment is not None:  # the client revokes/adds as told, then reports it
                self.owned[member] = dict(resp.assignment)
        return resp

    def group(self):  # noqa: ANN201
        return self.gc.consumer.groups["g"]

    def assert_single_owner(self) -> None:
        seen: set[tuple[str, int]] = set()
        for mb in self.group().members.values():
            for t, ps in list(mb.assigned.items()) + list(mb.pending_revocation.items()):
                for p in ps:
                    assert (t, p) not in seen, f"{t}-{p} has two owners"
                    seen.add((t, p))

    def settle(self, members: list[str], rounds: int = 6) -> None:
        for _ in range(rounds):
            for mb in members:
                assert self.hb(mb).error is ErrorCode.none
                self.assert_single_owner()


def test_first_member_gets_everything_at_epoch_1() -> None:
    d = Driver()
    resp = d.hb("a", 0)
    assert resp.error is ErrorCode.none and resp.member_epoch == 1
    assert resp.assignment == {"t": frozenset(range(6))}
    assert resp.heartbeat_interval_ms == 5000
    assert d.hb("a").assignment is None  # unchanged: not repeated
    assert d.group().state == "Stable"


def test_new_member_waits_for_revocation_then_gets_its_share() -> None:
    d = Driver()
    d.hb("a", 0)
    d.hb("a")
    b = d.hb("b", 0)
    assert b.member_epoch == 2
    # b's target partitions are still a's: nothing for b until a revokes them
    assert not any(d.owned.get("b", {}).values())
    d.assert_single_owner()
    a = d.hb("a")  # a is told to give up half (its epoch stays until it does)
    assert a.assignment is not None and len(a.assignment["t"]) == 3 and a.member_epoch == 1
    assert d.group().state == "Reconciling"
    d.settle(["a", "b"])
    assert {p for o in d.owned.values() for p in o.get("t", ())} == set(range(6))
    assert [len(d.owned[x]["t"]) for x in "ab"] == [3, 3]
    assert d.group().state == "Stable" and set(d.epoch.values()) == {2}


def test_three_members_balance_and_a_leave_moves_partitions() -> None:
    d = Driver()
    for x in "abc":
        d.hb(x, 0)
        d.settle(["a", "b", "c"][: "abc".index(x) + 1])
    assert sorted(len(d.owned[x]["t"]) for x in "abc") == [2, 2, 2]
    resp = d.hb("b", -1)
    assert resp.error is ErrorCode.none and resp.member_epoch == -1
    d.owned.pop("b")
    d.settle(["a", "c"])
    assert sorted(p for x in "ac" for p in d.owned[x]["t"]) == list(range(6))


def test_fencing_and_unknown_members() -> None:
    d = Driver()
    d.hb("a", 0)
    d.hb("a")
    d.hb("b", 0)
    d.settle(["a", "b"])
    assert d.hb("a", epoch=d.epoch["a"] + 5).error is ErrorCode.fenced_member_epoch
    assert d.hb("nobody", epoch=3).error is ErrorCode.unknown_member_id
    assert d.hb("a", epoch=-1).error is ErrorCode.none
    assert d.hb("a", epoch=-1).error is ErrorCode.unknown_member_id
    assert d.hb("x", 0, assignor="sticky").error is ErrorCode.unsupported_assignor


def test_session_expiry_and_slow_revocation_remove_members() -> None:
    d = Driver(consumer_session_timeout_ms=3000)
    d.hb("a", 0)
    d.hb("a")
    d.hb("b", 0)
    d.now = 2000
    d.gc.poll_timers(d.now)
    d.hb("a")  # a is asked to revoke, but never confirms
    d.now = 2000 + 5000
    d.gc.poll_timers(d.now)  # rebalance timeout (5 s) passed: a is fenced
    assert "a" not in d.group().members
    d.now += 3000
    d.gc.poll_timers(d.now)  # b never heartbeat again: its session is over too
    assert not d.group().members and d.group().state == "Empty"


def test_kit_expire_member_fences_it_and_force_rebalance_bumps_the_group_epoch() -> None:
    """The test kit's group faults on a KIP-848 group (EmbeddedBroker.expire_member / force_rebalance)."""
    from kaflite.coordinator.consumer_records import ConsumerGroupMetadataKey

    d = Driver()
    d.hb("a", 0)
    d.hb("a")
    d.hb("b", 0)
    d.settle(["a", "b"])
    epoch = d.group().group_epoch
    assert d.gc.handle_expire_member("g", "a", d.now).response() is ErrorCode.none
    assert "a" not in d.group().members and d.group().group_epoch == epoch + 1
    assert "a" not in d.group().owners.values()  # its partitions are free for b
    assert d.hb("a").error is ErrorCode.unknown_member_id  # its next heartbeat: it must rejoin at 0
    d.settle(["b"])
    assert d.owned["b"]["t"] == frozenset(range(6)) and d.epoch["b"] == epoch + 1
    assert d.hb("a", 0).error is ErrorCode.none  # rejoined
    d.settle(["a", "b"])
    assert [len(d.owned[x]["t"]) for x in "ab"] == [3, 3] and set(d.epoch.values()) == {epoch + 2}
    assert d.gc.handle_expire_member("g", "nobody", d.now).response() is ErrorCode.unknown_member_id
    assert d.gc.handle_expire_member("other", "a", d.now).response() is ErrorCode.group_id_not_found

    result = d.gc.handle_force_rebalance("g", d.now)
    assert result.response() is ErrorCode.none and d.group().group_epoch == epoch + 3
    assert any(isinstance(r.record_key, ConsumerGroupMetadataKey) for r in result.records)  # the new epoch persisted
    assert d.group().state != "Stable"
    d.settle(["a", "b"])
    assert set(d.epoch.values()) == {epoch + 3} and d.group().assignment_epoch == epoch + 3
    assert d.group().state == "Stable"
    assert d.gc.handle_force_rebalance("other", d.now).response() is ErrorCode.group_id_not_found


def test_offset_commits_check_the_member_epoch() -> None:
    d = Driver()
    d.hb("a", 0)

    def commit(member: str, epoch: int, version: int = 9) -> ErrorCode:
        req = m.OffsetCommitRequest("g", (("t", (m.OffsetCommitPartition(0, 5),)),), epoch, member, None, -1, version)
        resp = d.gc.handle_offset_commit(req, d.now).response()
        return resp.topics[0][1][0][1]

    assert commit("a", 1) is ErrorCode.none
    assert commit("a", 0) is ErrorCode.stale_member_epoch
    assert commit("a", 2) is ErrorCode.fenced_member_epoch
    assert commit("z", 1) is ErrorCode.unknown_member_id
    assert commit("a", 1, version=8) is ErrorCode.unsupported_version
    assert commit("", -1) is ErrorCode.unknown_member_id  # admin commits only into an empty group


def test_a_classic_join_into_a_consumer_group_is_one_group() -> None:
    d = Driver()
    d.hb("a", 0)
    # a classic member joins the consumer group (KIP-848 online upgrade path): first its member id
    join = m.JoinGroupRequest("g", "", "consumer", (m.Protocol("range", b""),), 10_000, token=1)
    assert d.gc.handle_join(join, 0).response(1).error is ErrorCode.member_id_required
    bad = m.JoinGroupRequest("g", "", "connect", (m.Protocol("range", b""),), 10_000, token=2)
    assert d.gc.handle_join(bad, 0).response(2).error is ErrorCode.inconsistent_group_protocol
    listed = d.gc.list_groups()
    assert [(g.group_id, g.group_type, g.state) for g in listed] == [("g", "consumer", "Stable")]
    [described] = d.gc.describe_groups(["g"])
    assert described.state == "Stable" and described.members[0].member_id == "a"


ACTIONS = st.lists(st.tuples(st.sampled_from(["join", "hb", "hb", "hb", "leave", "advance", "stale"]),
                             st.integers(0, 3), st.sampled_from([100, 1000, 6000])), min_size=1, max_size=50)


@settings(max_examples=120, deadline=None)
@given(ACTIONS)
def test_random_members_never_share_a_partition_and_converge(actions: list[tuple[str, int, int]]) -> None:
    d = Driver(consumer_session_timeout_ms=5000)
    names = ["m0", "m1", "m2", "m3"]
    for action, who, ms in actions:
        name = names[who]
        joined = "g" in d.gc.consumer.groups and name in d.group().members
        if action == "join" and not joined:
            d.owned.pop(name, None)
            d.hb(name, 0)
        elif action == "hb" and joined:
            d.hb(name)
        elif action == "leave" and joined:
            d.hb(name, -1)
            d.owned.pop(name, None)
        elif action == "stale" and joined:
            assert d.hb(name, epoch=d.epoch[name] + 1).error is ErrorCode.fenced_member_epoch
        elif action == "advance":
            d.now += ms
            d.gc.poll_timers(d.now)
        if "g" in d.gc.consumer.groups:
            d.assert_single_owner()
            # what the clients believe they own never overlaps either (they revoke before they are given more)
            alive = [x for x in names if x in d.group().members]
            flat = [(t, p) for x in alive for t, ps in d.owned.get(x, {}).items() for p in ps]
            assert len(flat) == len(set(flat))
    if "g" not in d.gc.consumer.groups or not d.group().members:
        return
    alive = list(d.group().members)
    d.settle(alive, rounds=4)
    assert d.group().state == "Stable"
    assert sorted(p for x in alive for p in d.owned[x].get("t", ())) == list(range(6))
    sizes = [len(d.owned[x].get("t", ())) for x in alive]
    assert max(sizes) - min(sizes) <= 1


def test_consumer_group_describe() -> None:
    d = Driver()
    d.hb("a", 0)
    d.hb("b", 0)
    d.settle(["a", "b"])
    (gid, err, msg, cg), missing = d.gc.describe_consumer_groups(["g", "nosuch"])
    assert (gid, err, msg) == ("g", ErrorCode.none, None)
    assert cg is not None and cg.state == "Stable" and set(cg.members) == {"a", "b"}
    owned = [p for mb in cg.members.values() for p in mb.assigned.get("t", ())]
    assert sorted(owned) == list(range(6))  # every partition once
    assert {mid: cg.target[mid] for mid in cg.members} == {mid: mb.assigned for mid, mb in cg.members.items()}
    assert missing == ("nosuch", ErrorCode.group_id_not_found, "Group nosuch not found.", None)


def test_consumer_group_describe_of_a_classic_group() -> None:
    d = Driver(group_initial_rebalance_delay_ms=0)
    d.gc.handle_join(m.JoinGroupRequest("classic", "", "consumer", (m.Protocol("range", b""),), 10_000, 10_000,
                                        version=3, token="j"), 0)
    assert "classic" in d.gc.groups
    ((gid, err, msg, cg),) = d.gc.describe_consumer_groups(["classic"])
    assert (err, cg) == (ErrorCode.group_id_not_found, None) and msg == "Group classic is not a consumer group."


def _static_hb(d: Driver, member: str, instance: str, epoch: int) -> ConsumerHeartbeatResponse:
    req = ConsumerHeartbeatRequest("g", member, epoch, ("t",) if epoch == 0 else None,
                                   d.owned.get(member, {}) if epoch > 0 else None, rebalance_timeout_ms=5000,
                                   instance_id=instance)
    resp: ConsumerHeartbeatResponse = d.gc.handle_consumer_heartbeat(req, TOPICS, d.now).response()
    if resp.error is ErrorCode.none and epoch >= 0:
        d.epoch[member] = resp.member_epoch
        if resp.assignment is not None:
            d.owned[member] = dict(resp.assignment)
    return resp


def test_a_static_member_leaves_with_epoch_minus_2_and_its_new_incarnation_takes_its_place() -> None:
    """KIP-848 static membership (Kafka's consumerGroupStaticMemberGroupLeave / consumerGroupJoin): a
    member with an instance id leaving with epoch -2 keeps its partitions (no rebalance); rejoining under a
    new member id with that instance id it gets them back at its old epoch; while the old one is still in
    the group the instance id is refused (UNRELEASED_INSTANCE_ID); one that never comes back is removed at
    its session timeout."""
    d = Driver(consumer_session_timeout_ms=3000)
    _static_hb(d, "a1", "inst-a", 0)
    d.hb("b", 0)
    for _ in range(6):
        _static_hb(d, "a1", "inst-a", d.epoch["a1"])
        d.hb("b")
    group_epoch, a_parts = d.group().group_epoch, d.owned["a1"]["t"]
    assert len(a_parts) == 3 and d.group().state == "Stable"
    # the instance id is in use: another incarnation is refused
    assert _static_hb(d, "a2", "inst-a", 0).error is ErrorCode.unreleased_instance_id
    # a temporary leave: no new group epoch, a1 keeps its partitions (b cannot take them)
    assert _static_hb(d, "a1", "inst-a", -2).error is ErrorCode.none
    assert d.group().group_epoch == group_epoch and d.group().members["a1"].member_epoch == -2
    assert set(d.group().members["a1"].assigned["t"]) == set(a_parts)
    assert d.hb("b").error is ErrorCode.none and len(d.owned["b"]["t"]) == 3
    # the new incarnation: same partitions, same epoch, no rebalance; the old member id is gone
    back = _static_hb(d, "a2", "inst-a", 0)
    assert back.error is ErrorCode.none and back.member_epoch == d.epoch["b"]
    assert back.assignment == {"t": a_parts} and d.group().group_epoch == group_epoch
    assert set(d.group().members) == {"a2", "b"} and d.group().state == "Stable"
    assert _static_hb(d, "a1", "inst-a", d.epoch["a2"]).error is ErrorCode.unknown_member_id
    d.assert_single_owner()
    # a static member that leaves and never returns is removed when its session times out
    assert _static_hb(d, "a2", "inst-a", -2).error is ErrorCode.none
    d.now += 3500
    d.hb("b")
    d.gc.poll_timers(d.now)
    assert set(d.group().members) == {"b"} and d.group().group_epoch == group_epoch + 1
    for _ in range(4):
        d.hb("b")
    assert d.owned["b"]["t"] == frozenset(range(6))
