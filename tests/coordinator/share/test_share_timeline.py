"""The share-group coordinator's rebalance timeline (kaflite.coordinator.share.group's rules, last bullet):
every cause that applies to a share group, triggered once on the pure coordinator with an explicit clock,
is named; rebalances carry their start, end, duration, group epoch and moved partitions; the history is
bounded and goes with the group."""

from __future__ import annotations

from kaflite.coordinator.share.group import ShareGroupCoordinator
from kaflite.coordinator.share.partition import ShareConfig
from kaflite.coordinator.timeline import RebalanceEvent


def coord(history_size: int = 100) -> ShareGroupCoordinator:
    return ShareGroupCoordinator(ShareConfig(record_lock_duration_ms=1000, delivery_count_limit=3),
                                 session_timeout_ms=10_000, heartbeat_interval_ms=500, history_size=history_size)


def kinds(events: list[RebalanceEvent]) -> list[tuple[str, str, str]]:
    return [(e.kind, e.cause, e.member_id) for e in events]


def test_share_group_names_every_cause() -> None:
    c = coord()
    topics = {"t": 2, "u": 1}
    c.heartbeat("g", "a", 0, ["t"], topics, now=1000)  # new-member
    c.heartbeat("g", "b", 0, ["t"], topics, now=1100)  # new-member (a rebalance is open: no second start)
    c.heartbeat("g", "a", 1, None, topics, now=1200)  # a catches up to epoch 2: Stable, the rebalance ends
    c.heartbeat("g", "b", 2, ["t", "u"], topics, now=2000)  # subscription-change
    c.heartbeat("g", "a", 2, None, topics, now=2100)  # Stable again
    grown = {"t": 3, "u": 1}
    c.heartbeat("g", "a", 3, None, grown, now=3000)  # metadata-change (t: 2 -> 3)
    c.heartbeat("g", "b", 3, None, grown, now=3050)
    c.heartbeat("g", "b", 0, ["t", "u"], grown, now=3100)  # member-rejoin: no epoch bump, no rebalance
    c.heartbeat("g", "b", -1, None, grown, now=4000)  # leave-group
    c.heartbeat("g", "a", 4, None, grown, now=4100)
    c.expire(now=4100 + 10_000)  # session-timeout of a: the group is Empty, the rebalance ends at once
    events = c.history("g")
    assert events is not None
    assert [(e.kind, e.cause) for e in events if e.kind not in ("rebalance-started", "rebalance-completed")] == [
        ("member-joined", "new-member"), ("member-joined", "new-member"),
        ("subscription-changed", "subscription-change"), ("metadata-changed", "metadata-change"),
        ("member-rejoined", "member-rejoin"), ("member-left", "leave-group"), ("member-left", "session-timeout")]
    assert all(e.protocol == "share" for e in events)
    assert [e.seq for e in events] == list(range(len(events)))
    by_kind = {(e.kind, e.cause): e for e in events}
    assert by_kind[("metadata-changed", "metadata-change")].detail == "t: 2 -> 3 partitions"
    assert by_kind[("subscription-changed", "subscription-change")].detail == "t -> t, u"
    assert by_kind[("member-left", "session-timeout")].time_ms == 14_100  # the clock of the call
    completed = [e for e in events if e.kind == "rebalance-completed"]
    started = [e for e in events if e.kind == "rebalance-started"]
    assert [e.cause for e in started] == [e.cause for e in completed] == [
        "new-member", "new-member", "subscription-change", "metadata-change", "leave-group", "session-timeout"]
    # a alone: it gets its assignment in the join's answer, so the rebalance ends in the same call
    assert (completed[0].duration_ms, completed[0].moved) == (0, (("t", 0, "", "a"), ("t", 1, "", "a")))
    # b's join opens one at 1100 (group epoch 2), ended when a caught up at 1200: t-1 moved from a to b
    second = completed[1]
    assert (started[1].time_ms, second.time_ms, second.duration_ms, second.generation) == (1100, 1200, 100, 2)
    assert second.moved == (("t", 1, "a", "b"),) and second.moved_total == 1
    # b subscribed to u too: only u-0 moved (to b); t stays spread as before
    assert completed[2].moved == (("u", 0, "", "b"),) and completed[2].duration_ms == 100
    # t grew: t-2 appeared; generation is the group epoch
    assert completed[3].generation == 4 and completed[3].moved == (("t", 2, "", "a"),)
    # b left: its partitions went to a (u-0 to nobody: a does not subscribe to u)
    assert completed[4].moved == (("t", 1, "b", "a"), ("u", 0, "b", ""))
    # a timed out: the group is Empty, the rebalance ends at once, everything moved to nobody
    assert completed[5].moved_total == 3 and all(m[3] == "" for m in completed[5].moved)
    assert completed[5].duration_ms == 0 and c.groups["g"].state == "Empty"
    assert not any(e.kind == "rebalance-started" and e.time_ms == 3100 for e in events)  # the rejoin


def test_a_partition_shared_by_several_members_names_them_all() -> None:
    c = coord()
    c.heartbeat("g", "a", 0, ["t"], {"t": 1}, now=0)
    c.heartbeat("g", "b", 0, ["t"], {"t": 1}, now=5)
    c.heartbeat("g", "a", 1, None, {"t": 1}, now=9)
    events = c.history("g")
    assert events is not None
    done = [e for e in events if e.kind == "rebalance-completed"]
    assert [(d.moved, d.duration_ms) for d in done] == [((("t", 0, "", "a"),), 0), ((("t", 0, "a", "a,b"),), 4)]


def test_history_is_bounded_and_deleted_with_the_group() -> None:
    c = coord(history_size=4)
    assert c.history("g") is None  # no such share group
    for i in range(5):
        c.heartbeat("g", f"m{i}", 0, ["t"], {"t": 1}, now=i)
        c.heartbeat("g", f"m{i}", -1, None, {"t": 1}, now=i)
    events = c.history("g")
    assert events is not None and len(events) == 4
    assert [e.seq for e in events] == [26, 27, 28, 29]  # the last 4 of 30 (join + leave: 3 events each)
    assert c.timeline.drain() == []  # in memory only: nothing is queued for writing
    assert c.delete_group("g").value == 0
    assert c.history("g") is None and c.timeline.history("g") == []
