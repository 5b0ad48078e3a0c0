"""The share-group coordinator (kaflite.coordinator.share.group): membership, epochs, session timeout,
the simple assignor, share sessions, routing to the share partitions. No sockets, an explicit clock."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from coordinator.share.expiry_reference import ScanEveryCall
from kaflite.coordinator.share.group import ShareGroupCoordinator, simple_assign
from kaflite.coordinator.share.partition import RecordState, ShareConfig
from kaflite.protocol.errors import ErrorCode

TOPICS = {"t": 3, "u": 1}


def coord(**kw: int) -> ShareGroupCoordinator:
    return ShareGroupCoordinator(ShareConfig(record_lock_duration_ms=1000, delivery_count_limit=3),
                                 session_timeout_ms=kw.get("session", 10_000), heartbeat_interval_ms=500)


def test_join_assigns_and_bumps_epochs() -> None:
    c = coord()
    a = c.heartbeat("g", "a", 0, ["t"], TOPICS, now=0)
    assert a.error is ErrorCode.none and a.member_epoch == 1 and a.heartbeat_interval_ms == 500
    assert a.assignment == {"t": frozenset({0, 1, 2})}
    # an unchanged heartbeat answers no assignment (null: unchanged)
    again = c.heartbeat("g", "a", 1, None, TOPICS, now=10)
    assert again.member_epoch == 1 and again.assignment is None
    b = c.heartbeat("g", "b", 0, ["t"], TOPICS, now=20)
    assert b.member_epoch == 2
    a2 = c.heartbeat("g", "a", 1, None, TOPICS, now=30)
    assert a2.member_epoch == 2 and a2.assignment is not None
    assert sorted(a2.assignment["t"] | b.assignment["t"]) == [0, 1, 2]  # type: ignore[index]
    assert c.groups["g"].state == "Stable"


def test_join_needs_member_id_and_subscription() -> None:
    c = coord()
    assert c.heartbeat("g", "", 0, ["t"], TOPICS, now=0).error is ErrorCode.invalid_request
    assert c.heartbeat("g", "a", 0, None, TOPICS, now=0).error is ErrorCode.invalid_request
    assert c.heartbeat("g", "a", 0, [], TOPICS, now=0).error is ErrorCode.invalid_request
    assert "g" not in c.groups


def test_unknown_member_and_fenced_epoch() -> None:
    c = coord()
    assert c.heartbeat("g", "x", 3, None, TOPICS, now=0).error is ErrorCode.unknown_member_id
    c.heartbeat("g", "a", 0, ["t"], TOPICS, now=0)
    assert c.heartbeat("g", "a", 7, None, TOPICS, now=1).error is ErrorCode.fenced_member_epoch
    assert c.heartbeat("g", "a", 1, None, TOPICS, now=2).error is ErrorCode.none


def test_subscription_and_partition_count_changes_bump_the_group_epoch() -> None:
    c = coord()
    c.heartbeat("g", "a", 0, ["t"], TOPICS, now=0)
    r = c.heartbeat("g", "a", 1, ["t", "u"], TOPICS, now=1)
    assert r.member_epoch == 2 and r.assignment == {"t": frozenset({0, 1, 2}), "u": frozenset({0})}
    r = c.heartbeat("g", "a", 2, None, {"t": 4, "u": 1}, now=2)
    assert r.member_epoch == 3 and r.assignment is not None and r.assignment["t"] == frozenset({0, 1, 2, 3})
    r = c.heartbeat("g", "a", 3, ["t", "u"], {"t": 4, "u": 1}, now=3)  # same subscription: no change
    assert r.member_epoch == 3 and r.assignment is None


def test_leave_releases_what_the_member_holds() -> None:
    c = coord()
    c.heartbeat("g", "a", 0, ["t"], TOPICS, now=0)
    c.heartbeat("g", "b", 0, ["t"], TOPICS, now=0)
    c.share_partition("g", "t", 0, log_start_offset=0, high_watermark=0)  # first seen empty (latest: SPSO 0)
    got = c.acquire("g", "a", "t", 0, [(0, 4)], log_start_offset=0, high_watermark=5, max_records=10, now=0)
    assert got[0].first_offset == 0 and got[0].last_offset == 4
    assert c.acquire("g", "b", "t", 0, [(0, 4)], log_start_offset=0, high_watermark=5, max_records=10,
                     now=1) == []
    left = c.heartbeat("g", "a", -1, None, TOPICS, now=2)
    assert left.error is ErrorCode.none and left.member_epoch == -1
    assert c.groups["g"].group_epoch == 3
    again = c.acquire("g", "b", "t", 0, [(0, 4)], log_start_offset=0, high_watermark=5, max_records=10, now=3)
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in again] == [(0, 4, 2)]



def _holding(c: ShareGroupCoordinator, member: str, offsets: tuple[int, int], now: int) -> None:
    """`member` joined, opened a share session on t-0 and acquired `offsets` there."""
    c.heartbeat("g", member, 0, ["t"], TOPICS, now=now)
    assert c.session("g", member, 0, [("t", 0)], [], now=now).error is ErrorCode.none
    if ("g", "t", 0) not in c.partitions:
        c.share_partition("g", "t", 0, log_start_offset=0, high_watermark=0)
    got = c.acquire("g", member, "t", 0, [offsets], log_start_offset=0, high_watermark=offsets[1] + 1,
                    max_records=100, now=now)
    assert [(r.first_offset, r.last_offset) for r in got] == [offsets]


def test_a_leave_before_the_closing_request_keeps_the_session_and_its_records() -> None:
    """librdkafka's close: the leaving heartbeat may be handled before the closing (-1) ShareAcknowledge.
    That session still closes, its acknowledgements apply, and what is left is released at the close."""
    c = coord()
    _holding(c, "a", (0, 3), now=0)
    c.heartbeat("g", "a", -1, None, TOPICS, now=1)
    assert "a" not in c.groups["g"].members
    sp = c.partitions[("g", "t", 0)]
    assert sp.state_of(0)[0] is RecordState.ACQUIRED  # not released by the leave: its session is open
    closed = c.session("g", "a", -1, [], [], now=2)
    assert closed.closed and closed.error is ErrorCode.none and closed.partitions == (("t", 0),)
    assert c.acknowledge("g", "a", "t", 0, [(0, 1, 1)], now=2).error_code == 0  # ACCEPT 0..1
    c.release_session("g", "a", closed.partitions)
    assert sp.start_offset == 2  # 0..1 accepted: the start moved past them
    assert [sp.state_of(o) for o in (2, 3)] == [(RecordState.AVAILABLE, 1, None)] * 2
    assert c.session("g", "a", -1, [], [], now=3).error is ErrorCode.share_session_not_found


def test_a_left_members_session_never_closed_is_released_after_the_lock_duration() -> None:
    c = coord()  # record lock 1000 ms
    _holding(c, "a", (0, 1), now=0)
    c.heartbeat("g", "a", -1, None, TOPICS, now=500)
    sp = c.partitions[("g", "t", 0)]
    c.expire(1499)
    assert sp.state_of(0)[0] is RecordState.ACQUIRED
    c.expire(1500)  # the leave + the lock duration: the session is dropped, its records released
    assert sp.state_of(0) == (RecordState.AVAILABLE, 1, None)
    assert c.session("g", "a", -1, [], [], now=1501).error is ErrorCode.share_session_not_found


def test_a_rejoin_keeps_the_left_session_past_the_leave_deadline() -> None:
    c = coord()
    _holding(c, "a", (0, 1), now=0)
    c.heartbeat("g", "a", -1, None, TOPICS, now=10)
    c.heartbeat("g", "a", 0, ["t"], TOPICS, now=20)  # back with the same id before its session closed
    c.expire(5000)
    assert c.session("g", "a", 1, [], [], now=5000).error is ErrorCode.none


def test_closing_a_session_releases_what_it_holds_in_its_partitions_only() -> None:
    c = coord()
    _holding(c, "a", (0, 1), now=0)
    c.share_partition("g", "u", 0, log_start_offset=0, high_watermark=0)
    assert c.acquire("g", "a", "u", 0, [(0, 0)], log_start_offset=0, high_watermark=1, max_records=10, now=0)
    closed = c.session("g", "a", -1, [], [], now=1)
    c.release_session("g", "a", closed.partitions)
    assert c.partitions[("g", "t", 0)].state_of(0)[0] is RecordState.AVAILABLE
    assert c.partitions[("g", "u", 0)].state_of(0)[0] is RecordState.ACQUIRED  # not in that session

def test_session_timeout_removes_member_releases_records_and_ends_its_share_session() -> None:
    c = coord(session=100)
    c.heartbeat("g", "a", 0, ["t"], TOPICS, now=0)
    c.heartbeat("g", "b", 0, ["t"], TOPICS, now=0)
    assert c.session("g", "a", 0, [("t", 0)], [], now=0).error is ErrorCode.none
    c.share_partition("g", "t", 0, log_start_offset=0, high_watermark=0)
    c.acquire("g", "a", "t", 0, [(0, 1)], log_start_offset=0, high_watermark=2, max_records=10, now=0)
    c.heartbeat("g", "b", 2, None, TOPICS, now=60)
    assert c.expire(99) == []  # a's deadline is 100
    c.heartbeat("g", "b", 2, None, TOPICS, now=99)
    assert c.expire(100) == [("g", "a")]
    assert set(c.groups["g"].members) == {"b"}
    assert c.partitions[("g", "t", 0)].state_of(0) == (RecordState.AVAILABLE, 1, None)
    assert c.session("g", "a", 1, [], [], now=101).error is ErrorCode.unknown_member_id
    assert c.next_deadline() == 199


def test_share_session_epochs() -> None:
    c = coord()
    c.heartbeat("g", "a", 0, ["t"], TOPICS, now=0)
    assert c.session("g", "a", 1, [], [], now=0).error is ErrorCode.share_session_not_found
    opened = c.session("g", "a", 0, [("t", 0), ("t", 1)], [], now=0)
    assert opened.error is ErrorCode.none and opened.partitions == (("t", 0), ("t", 1))
    assert c.session("g", "a", 2, [], [], now=0).error is ErrorCode.invalid_share_session_epoch
    nxt = c.session("g", "a", 1, [("u", 0)], [("t", 0)], now=0)
    assert nxt.partitions == (("t", 1), ("u", 0))
    assert c.session("g", "a", 2, [], [], now=0).error is ErrorCode.none
    closed = c.session("g", "a", -1, [], [], now=0)
    assert closed.closed and closed.error is ErrorCode.none
    assert c.session("g", "a", 3, [], [], now=0).error is ErrorCode.share_session_not_found
    assert c.session("g", "stranger", 0, [], [], now=0).error is ErrorCode.unknown_member_id


def test_a_leader_without_the_membership_opens_sessions_for_any_member() -> None:
    """A share-partition leader that is not the group coordinator (a cluster) does not hold the group's
    members: with check_member=False its sessions follow the epoch rules alone, as Kafka's leaders."""
    c = coord()
    opened = c.session("g", "elsewhere", 0, [("t", 0)], [], now=0, check_member=False)
    assert opened.error is ErrorCode.none and opened.partitions == (("t", 0),)
    assert c.session("g", "elsewhere", 2, [], [], now=0, check_member=False).error is \
        ErrorCode.invalid_share_session_epoch
    assert c.session("g", "elsewhere", 1, [], [], now=0, check_member=False).error is ErrorCode.none
    assert c.session("g", "elsewhere", 2, [], [], now=0).error is ErrorCode.unknown_member_id
    sp = c.install("g", "t", 0, None, log_start_offset=3, high_watermark=8)
    assert c.partitions[("g", "t", 0)] is sp and sp.start_offset == 8  # share.auto.offset.reset=latest
    assert c.acquire("g", "elsewhere", "t", 0, [(8, 9)], log_start_offset=3, high_watermark=10,
                     max_records=10, now=0)


def test_release_session_releases_the_members_records_and_keeps_it_a_member() -> None:
    """A share session ending at a leader (epoch -1, its connection closed) releases what its member holds
    in the group's share partitions there; the member stays; without sessions the group is empty there,
    and its written share partitions can be forgotten (an unwritten change is kept)."""
    c = coord()
    c.heartbeat("g", "a", 0, ["t"], TOPICS, now=0)
    c.heartbeat("g", "b", 0, ["t"], TOPICS, now=0)
    for m in ("a", "b"):
        assert c.session("g", m, 0, [("t", 0), ("t", 1)], [], now=0).error is ErrorCode.none
    for p in (0, 1):
        c.share_partition("g", "t", p, log_start_offset=0, high_watermark=0)
    c.acquire("g", "a", "t", 0, [(0, 4)], log_start_offset=0, high_watermark=5, max_records=10, now=0)
    c.acquire("g", "b", "t", 1, [(0, 1)], log_start_offset=0, high_watermark=2, max_records=10, now=0)
    for sp in c.partitions.values():
        sp.changed = False
    assert c.release_session("g", "a") == [("t", 0)]
    assert not c.has_session("g", "a") and c.has_session("g", "b") and c.has_sessions("g")
    assert c.is_member("g", "a")
    again = c.acquire("g", "b", "t", 0, [(0, 4)], log_start_offset=0, high_watermark=5, max_records=10, now=1)
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in again] == [(0, 4, 2)]
    assert c.partitions[("g", "t", 1)].acquired_by("b") == [0, 1]  # b's own records untouched
    assert c.release_session("g", "b") == [("t", 0), ("t", 1)]
    assert not c.has_sessions("g")
    c.partitions[("g", "t", 1)].changed = False  # written; ("t", 0)'s release is not
    assert c.forget_share_partitions("g") == [("t", 1)]
    assert list(c.partitions) == [("g", "t", 0)]


def test_acknowledge_in_a_partition_never_fetched_is_invalid_record_state() -> None:
    c = coord()
    assert c.acknowledge("g", "a", "t", 0, [(0, 0, 1)], now=0).error_code == ErrorCode.invalid_record_state.value


def test_delete_group() -> None:
    c = coord()
    assert c.delete_group("g") is ErrorCode.group_id_not_found
    c.heartbeat("g", "a", 0, ["t"], TOPICS, now=0)
    assert c.delete_group("g") is ErrorCode.non_empty_group
    c.heartbeat("g", "a", -1, None, TOPICS, now=1)
    assert c.delete_group("g") is ErrorCode.none and "g" not in c.groups


def test_simple_assign_examples() -> None:
    subs = {m: frozenset({"t"}) for m in ("a", "b", "c", "d", "e")}
    got = simple_assign(subs, {"t": 2})
    assert [sorted(got[m]["t"]) for m in sorted(got)] == [[0], [1], [0], [1], [0]]
    got = simple_assign({"a": frozenset({"t"}), "b": frozenset({"t"})}, {"t": 5})
    assert got == {"a": {"t": frozenset({0, 2, 4})}, "b": {"t": frozenset({1, 3})}}
    # heterogeneous: each topic among its own subscribers
    got = simple_assign({"a": frozenset({"t"}), "b": frozenset({"t", "u"})}, {"t": 2, "u": 1})
    assert got == {"a": {"t": frozenset({0})}, "b": {"t": frozenset({1}), "u": frozenset({0})}}
    assert simple_assign({"a": frozenset({"missing"})}, {"t": 1}) == {"a": {}}


@given(st.dictionaries(st.text("abcdef", min_size=1, max_size=3), st.frozensets(st.sampled_from("tuv"), min_size=1),
                       min_size=1, max_size=8),
       st.dictionaries(st.sampled_from("tuv"), st.integers(0, 6)))
def test_simple_assign_covers_every_partition_and_member(subs: dict[str, frozenset[str]],
                                                         topics: dict[str, int]) -> None:
    got = simple_assign(subs, topics)
    assert set(got) == set(subs)
    for member, assigned in got.items():
        assert set(assigned) <= subs[member]  # only subscribed topics
        for t, ps in assigned.items():
            assert ps and ps <= set(range(topics[t]))
    for t, n in topics.items():
        subscribers = [m for m in subs if t in subs[m]]
        if subscribers:  # every partition of a subscribed topic has at least one member
            assert {p for m in subscribers for p in got[m].get(t, ())} == set(range(n))
    total = sum(n for t, n in topics.items() if any(t in s for s in subs.values()))
    if total >= len(subs) and all(topics.get(t, 0) for s in subs.values() for t in s) \
            and len(set(subs.values())) == 1:
        assert all(got[m] for m in subs)  # enough partitions: nobody idle (homogeneous subscriptions)


def test_group_configs_override_the_broker_keys() -> None:
    c = coord(session=10_000)
    c.set_group_configs("g", {"share.auto.offset.reset": "earliest", "share.delivery.count.limit": "7",
                              "share.session.timeout.ms": "50", "share.heartbeat.interval.ms": "20"})
    cfg = c.config_for("g")
    assert (cfg.auto_offset_reset, cfg.delivery_count_limit, cfg.record_lock_duration_ms) == ("earliest", 7, 1000)
    assert c.config_for("other") is c.share_config
    # earliest: a share partition first seen with records in the log starts at the log start
    assert c.share_partition("g", "t", 0, log_start_offset=3, high_watermark=9).start_offset == 3
    assert c.share_partition("other", "t", 0, log_start_offset=3, high_watermark=9).start_offset == 9
    assert c.heartbeat("g", "a", 0, ["t"], TOPICS, now=0).heartbeat_interval_ms == 20
    assert c.expire(50) == [("g", "a")]  # the group's session timeout, not the broker's 10 s
    c.set_group_configs("g", {"share.auto.offset.reset": None})
    assert c.group_configs == {}


def test_group_configs_refuse_unknown_keys_and_bad_values_whole() -> None:
    c = coord()
    c.set_group_configs("g", {"share.delivery.count.limit": "4"})
    for bad in ({"share.delivery.count.limit": "1"}, {"share.record.lock.duration.ms": "999"},
                {"share.auto.offset.reset": "by_duration:PT1H"}, {"share.isolation.level": "x"},
                {"consumer.session.timeout.ms": "45000"}, {"share.delivery.count.limit": "two"}):
        try:
            c.set_group_configs("g", {"share.heartbeat.interval.ms": "9", **bad})
        except ValueError:
            pass
        else:
            raise AssertionError(bad)
        assert c.group_configs == {"g": {"share.delivery.count.limit": "4"}}


def test_isolation_and_lock_duration_changes_reach_share_partitions_in_use() -> None:
    c = coord()
    sp = c.share_partition("g", "t", 0, log_start_offset=0, high_watermark=0)
    c.set_group_configs("g", {"share.isolation.level": "read_committed", "share.record.lock.duration.ms": "5000",
                              "share.delivery.count.limit": "9"})
    assert sp.config.isolation_level == "read_committed" and sp.config.record_lock_duration_ms == 5000
    assert sp.config.delivery_count_limit == 3  # unchanged in use: a lower limit could break its rules
    # read_committed now: nothing past the last stable offset is acquired
    got = c.acquire("g", "a", "t", 0, [(0, 4)], log_start_offset=0, high_watermark=5, max_records=10, now=0,
                    last_stable_offset=2)
    assert [(r.first_offset, r.last_offset) for r in got] == [(0, 1)]
    assert c.partitions[("g", "t", 0)].next_deadline() == 5000


def test_group_max_size() -> None:
    c = ShareGroupCoordinator(ShareConfig(), max_size=2)
    assert c.heartbeat("g", "a", 0, ["t"], TOPICS, now=0).error is ErrorCode.none
    assert c.heartbeat("g", "b", 0, ["t"], TOPICS, now=0).error is ErrorCode.none
    full = c.heartbeat("g", "c", 0, ["t"], TOPICS, now=0)
    assert full.error is ErrorCode.group_max_size_reached and set(c.groups["g"].members) == {"a", "b"}
    assert c.heartbeat("g", "a", 0, None, TOPICS, now=1).error is ErrorCode.none  # a member rejoining is fine
    assert c.heartbeat("other", "c", 0, ["t"], TOPICS, now=0).error is ErrorCode.none


def test_touched_is_one_map_of_groups_to_the_members_changed_and_rewrite_all_waits_for_a_change() -> None:
    """`touched` holds the groups to write and, per group, the members whose records changed, in one map: a
    group cleared and touched again names only the members of the new change. After `rewrite_all` a touched
    group is written whole, an untouched one stays untouched until its next change, which is written whole
    once; the groups being written whole at that moment (`written`) are left as they are."""
    c = coord()

    def a_heartbeat(now: int, **kw: str) -> None:
        a = c.groups["g"].members["a"]
        assert c.heartbeat("g", "a", a.member_epoch, None, TOPICS, now=now, **kw).error == 0  # type: ignore[arg-type]

    c.heartbeat("g", "a", 0, ["t"], TOPICS, now=0)
    c.heartbeat("g", "b", 0, ["t"], TOPICS, now=1)  # a's target moves too: both named
    c.touched.clear()
    a_heartbeat(2, rack_id="r1")  # a's own record only
    assert c.take_touched() == {"g": frozenset({"a"})}
    c.heartbeat("h", "x", 0, ["t"], TOPICS, now=3)
    c.rewrite_all(written=["k"])
    assert c.touched == {"h": None}  # g waits for its next change
    a_heartbeat(4, rack_id="r2")
    assert c.take_touched() == {"h": None, "g": None}
    a_heartbeat(5, rack_id="r3")
    assert c.take_touched() == {"g": frozenset({"a"})}  # whole once only
    c.rewrite_all(written=["g", "h"])  # both written whole now: nothing left for later
    a_heartbeat(6, rack_id="r4")
    assert c.take_touched() == {"g": frozenset({"a"})}


def test_touched_names_the_groups_to_write_and_session_timeout_for_reads_the_group_config() -> None:
    c = coord(session=1000)
    c.heartbeat("g", "a", 0, ["t"], TOPICS, now=0)
    c.heartbeat("h", "b", 0, ["t"], TOPICS, now=0)
    assert c.touched.keys() == {"g", "h"}
    c.touched.clear()
    c.heartbeat("g", "a", 1, None, TOPICS, now=2000)  # b's session (group h) ended meanwhile: removed
    assert c.touched.keys() == {"g", "h"} and "b" not in c.groups["h"].members
    c.touched.clear()
    c.heartbeat("g", "a", 1, None, TOPICS, now=2100)  # a expired too: UNKNOWN_MEMBER_ID, nothing changed
    assert c.delete_group("h").value == 0 and c.touched.keys() == {"h"}
    c.set_group_configs("g", {"share.session.timeout.ms": "777"})
    assert (c.session_timeout_for("g"), c.session_timeout_for("h")) == (777, 1000)


def _view(c: ShareGroupCoordinator) -> tuple[object, ...]:
    return (sorted((g.group_id, g.group_epoch, sorted((m.member_id, m.deadline_ms) for m in g.members.values()))
                   for g in c.groups.values()),
            sorted(k for k in (("g", m) for m in "abcd") if c.has_session(*k)),
            sorted((k, sp.state_of(0)) for k, sp in c.partitions.items()))


_OPS = st.lists(st.tuples(st.sampled_from(["hb", "leave", "open", "close", "acquire", "expire", "session",
                                           "lock", "import"]),
                          st.sampled_from("abcd"), st.integers(0, 700)), max_size=40)


@given(_OPS)
def test_expiry_with_its_bound_removes_what_a_scan_every_call_removes(ops: list[tuple[str, str, int]]) -> None:
    """Members time out, and left sessions release, at the same `now` as with a scan at every call, whatever
    the heartbeats, leaves, sessions, group configs (session timeout, lock duration) and imports between."""
    fast, ref = coord(session=1000), ScanEveryCall(ShareConfig(record_lock_duration_ms=1000, delivery_count_limit=3),
                                                     session_timeout_ms=1000, heartbeat_interval_ms=500)
    now = 0
    for op, member, dt in ops:
        now += dt
        results = []
        for c in (fast, ref):
            group = c.groups.get("g")
            epoch = group.members[member].member_epoch if group is not None and member in group.members else 0
            if op == "hb":
                results.append(c.heartbeat("g", member, epoch, ["t"], TOPICS, now=now).error)
            elif op == "leave":
                results.append(c.heartbeat("g", member, -1, None, TOPICS, now=now).error)
            elif op == "open":
                results.append(c.session("g", member, 0, [("t", 0)], [], now=now).error)
            elif op == "close":
                results.append(c.session("g", member, -1, [], [], now=now).error)
            elif op == "acquire" and c.is_member("g", member):
                results.append(c.acquire("g", member, "t", 0, [(0, 4)], log_start_offset=0, high_watermark=5,
                                         max_records=2, now=now))
            elif op == "expire":
                results.append(c.expire(now))
            elif op == "session":  # a shorter or longer session timeout: from each member's next heartbeat
                c.set_group_configs("g", {"share.session.timeout.ms": str(200 + 3 * dt)})
            elif op == "lock":  # a left session's release follows the lock duration at once
                c.set_group_configs("g", {"share.record.lock.duration.ms": str(1000 + 3 * dt)})
            elif op == "import" and group is not None:  # as share_membership puts in a group read from records
                members = {m: replace(mb, deadline_ms=now + dt // 2) for m, mb in group.members.items()}
                c.groups["g"] = replace(group, members=members)
        assert results[0] == results[1] if len(results) == 2 else True
        assert _view(fast) == _view(ref)
    assert fast.expire(now + 10_000) == ref.expire(now + 10_000) and _view(fast) == _view(ref)


def test_expire_before_the_earliest_deadline_looks_at_no_member() -> None:
    """The point of the bound: a share-session step (every ShareFetch) before the earliest deadline does
    not look at the members. Shown by a deadline changed behind the coordinator's back (which the rules do
    not allow: every deadline is set by a heartbeat or an import): not seen before the bound, seen at it."""
    c = coord(session=1000)
    for i in range(50):
        c.heartbeat("g", f"m{i}", 0, ["t"], TOPICS, now=i)  # deadlines 1000..1049
    c.expire(10)  # a scan: the bound is now the earliest deadline, 1000
    c.groups["g"].members["m7"].deadline_ms = 400
    assert c.session("g", "m3", 0, [("t", 0)], [], now=500).error is ErrorCode.none
    assert c.expire(999) == []  # a scan would have removed m7
    assert c.expire(1000) == [("g", "m0"), ("g", "m7")]


# --- share-state initialization before assignment (Kafka 4.1+) ----------------------------------------

def _init_coord() -> ShareGroupCoordinator:
    return ShareGroupCoordinator(ShareConfig(), session_timeout_ms=60_000, heartbeat_interval_ms=500,
                                 initialize_partitions=True, initialize_retry_ms=30_000)


def test_only_initialized_partitions_are_assigned_so_two_members_joining_apart_share_them() -> None:
    """librdkafka's 0172 mixed_ack_mode: two members joining 6 ms apart must both get partitions. The first
    join starts the initialization and is answered without them; the second join finds them initializing
    (not sent twice); once initialized, the next heartbeat bumps the group epoch and assigns them over
    both members."""
    c = _init_coord()
    a = c.heartbeat("g", "a", 0, ["t"], TOPICS, now=0)
    assert a.assignment == {} and a.initialize == {"t": frozenset({0, 1, 2})} and a.state_epoch == 1
    assert c.groups["g"].initializing == {"t": frozenset({0, 1, 2})} and "g" in c.touched
    b = c.heartbeat("g", "b", 0, ["t"], TOPICS, now=6)
    assert b.assignment == {} and b.initialize == {}  # already initializing: not sent again
    assert c.heartbeat("g", "a", 1, None, TOPICS, now=7).assignment is not None  # epoch 1 -> 2: still {}
    assert c.groups["g"].members["a"].assigned == {}
    c.initialized("g", {"t": [0, 1, 2]}, now=10)
    group = c.groups["g"]
    assert group.initialized == {"t": frozenset({0, 1, 2})} and group.initializing == {}
    epoch = group.group_epoch
    got_a = c.heartbeat("g", "a", 2, None, TOPICS, now=500)
    assert c.groups["g"].group_epoch == epoch + 1 and got_a.member_epoch == epoch + 1  # the pending bump
    bump = [e for e in c.history("g") or [] if e.kind == "metadata-changed"]
    assert [(e.cause, e.generation, e.detail) for e in bump] == [
        ("metadata-change", epoch + 1, "initialized: t-0, t-1, t-2")]
    got_b = c.heartbeat("g", "b", 2, None, TOPICS, now=501)
    assert got_a.assignment and got_b.assignment
    assert sorted(got_a.assignment["t"] | got_b.assignment["t"]) == [0, 1, 2]
    assert not got_a.assignment["t"] & got_b.assignment["t"]
    # nothing pending any more: no further bump
    assert c.heartbeat("g", "a", epoch + 1, None, TOPICS, now=600).assignment is None
    assert c.groups["g"].group_epoch == epoch + 1


def test_initialization_is_sent_again_after_a_failure_or_the_retry_interval() -> None:
    c = _init_coord()
    assert c.heartbeat("g", "a", 0, ["t"], TOPICS, now=0).initialize == {"t": frozenset({0, 1, 2})}
    c.initialized("g", {"t": [0]}, now=1)
    c.initialize_failed("g", {"t": [1]})
    again = c.heartbeat("g", "a", 1, None, TOPICS, now=100)
    assert again.initialize == {"t": frozenset({1})}  # 2 still initializing within the retry interval
    assert again.assignment == {"t": frozenset({0})}  # 0 initialized: the epoch bumped, assigned
    later = c.heartbeat("g", "a", again.member_epoch, None, TOPICS, now=30_000)
    assert later.initialize == {"t": frozenset({2})}  # 30 s without an answer: sent again
    # a partition that grows in is initialized too; a late answer for a partition not initializing is ignored
    c.initialized("g", {"u": [0]}, now=30_001)
    assert "u" not in c.groups["g"].initialized
    assert c.heartbeat("g", "a", later.member_epoch, None, {"t": 4, "u": 1}, now=30_002).initialize == {
        "t": frozenset({3})}


def test_a_deleted_topic_is_uninitialized_and_initialized_again_when_back() -> None:
    c = _init_coord()
    c.heartbeat("g", "a", 0, ["t"], TOPICS, now=0)
    c.initialized("g", {"t": [0, 1, 2]}, now=1)
    epoch = c.heartbeat("g", "a", 1, None, TOPICS, now=2).member_epoch
    assert c.groups["g"].members["a"].assigned == {"t": frozenset({0, 1, 2})}
    c.touched.clear()
    c.uninitialize_topics(["t"])
    assert c.groups["g"].initialized == {} and c.touched.keys() == {"g"}
    # the topic created again (same name): its partitions are initialized again before being assigned
    answer = c.heartbeat("g", "a", epoch, None, {"t": 2}, now=3)
    assert answer.initialize == {"t": frozenset({0, 1})} and answer.assignment == {}
    # AlterShareGroupOffsets wrote a state: initialized at once
    c.mark_initialized("g", "t", [1])
    assert c.groups["g"].initialized == {"t": frozenset({1})} and c.groups["g"].initializing == {"t": frozenset({0})}


def test_without_initialization_every_partition_is_assigned_at_the_join() -> None:
    c = coord()
    answer = c.heartbeat("g", "a", 0, ["t"], TOPICS, now=0)
    assert answer.assignment == {"t": frozenset({0, 1, 2})} and answer.initialize == {}
