"""A share group's subscription counts (ShareGroup.subscriptions, Kafka's subscribedTopicNames) and the
cost of a heartbeat that changes nothing: no look at the other members. No sockets, an explicit clock."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kaflite.coordinator.share import membership_records as mr
from kaflite.coordinator.share.group import ShareGroup, ShareGroupCoordinator
from kaflite.coordinator.share.partition import ShareConfig

TOPICS = {"t": 3, "u": 2, "v": 1}
IDS = {n: uuid.UUID(int=i + 1) for i, n in enumerate(sorted(TOPICS))}
NAMES = {i: n for n, i in IDS.items()}


def _recount(group: ShareGroup) -> dict[str, int]:
    counts: dict[str, int] = {}
    for m in group.members.values():
        for t in m.subscribed:
            counts[t] = counts.get(t, 0) + 1
    return counts


_OPS = st.lists(st.tuples(st.sampled_from(["join", "beat", "change", "leave", "expire", "import", "delete"]),
                          st.sampled_from("abcde"),
                          st.frozensets(st.sampled_from(sorted(TOPICS)), min_size=1),
                          st.integers(0, 600)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(_OPS, st.booleans())
def test_subscription_counts_equal_a_recount_after_any_sequence(ops: list[tuple[str, str, frozenset[str], int]],
                                                                initialize: bool) -> None:
    """After any joins, heartbeats, subscription changes, leaves, session expiries, imports from records
    and deletions, every group's counts are those a recount over its members gives, and the cached
    targeted partitions, where the heartbeat uses them (target assigned at the group epoch), are the
    target's."""
    c = ShareGroupCoordinator(ShareConfig(), session_timeout_ms=1000, heartbeat_interval_ms=500,
                              initialize_partitions=initialize)
    now = 0
    for op, member, topics, dt in ops:
        now += dt
        group = c.groups.get("g")
        epoch = group.members[member].member_epoch if group is not None and member in group.members else 0
        if op == "join":
            c.heartbeat("g", member, 0, sorted(topics), TOPICS, now=now)
        elif op == "beat":
            c.heartbeat("g", member, epoch, None, TOPICS, now=now)
        elif op == "change":
            c.heartbeat("g", member, epoch, sorted(topics), TOPICS, now=now)
        elif op == "leave":
            c.heartbeat("g", member, -1, None, TOPICS, now=now)
        elif op == "expire":
            c.expire(now)
        elif op == "import" and group is not None:  # as share_membership puts in a group read from records
            back = mr.group_from_records("g", mr.group_records(group, IDS), NAMES, now + 1000)
            assert back is not None
            c.groups["g"] = back
        elif op == "delete":
            c.delete_group("g")
        if initialize and c.groups.get("g") is not None:
            c.initialized("g", {t: range(n) for t, n in TOPICS.items()}, now=now)
        for g in c.groups.values():
            assert g.subscriptions == _recount(g)
            assert all(n > 0 for n in g.subscriptions.values())
            if g.assignment_epoch == g.group_epoch:
                assert g.targeted_partitions() == {(t, p) for a in g.target.values() for t, ps in a.items()
                                                   for p in ps}


class _NoScan(dict[str, Any]):
    """A group's members that refuse to be looked at as a whole (a heartbeat may only get its own)."""

    def values(self) -> Any:
        raise AssertionError("members scanned")

    def items(self) -> Any:
        raise AssertionError("members scanned")

    def __iter__(self) -> Any:
        raise AssertionError("members scanned")


def test_a_heartbeat_that_changes_nothing_looks_at_no_other_member() -> None:
    """The point of the counts: with the group Stable (every member at the group epoch, the assignment
    done, every partition initialized), a member's heartbeat reads only that member, so its cost does not
    grow with the group (bench/share_heartbeat_bench.py measures it)."""
    for initialize in (False, True):
        c = ShareGroupCoordinator(ShareConfig(), session_timeout_ms=60_000, heartbeat_interval_ms=500,
                                  initialize_partitions=initialize)
        ids = [f"m{i}" for i in range(20)]
        for i, m in enumerate(ids):
            c.heartbeat("g", m, 0, ["t", "u"], TOPICS, now=i)
        c.initialized("g", {"t": [0, 1, 2], "u": [0, 1]}, now=20)
        epochs = {m: c.heartbeat("g", m, c.groups["g"].members[m].member_epoch, None, TOPICS, now=30).member_epoch
                  for m in ids}
        epochs = {m: c.heartbeat("g", m, epochs[m], None, TOPICS, now=40).member_epoch for m in ids}
        group = c.groups["g"]
        assert group.state == "Stable" and not c.timeline.is_open("g")
        before = (group.group_epoch, {m: mb.assigned for m, mb in group.members.items()})
        c.expire(50)  # the expiry bound is known: the next calls before the deadlines scan nothing
        group.members = _NoScan(group.members)
        c.touched.clear()
        for m in ids:
            answer = c.heartbeat("g", m, epochs[m], None, TOPICS, now=60)
            assert answer.assignment is None and answer.member_epoch == epochs[m] and answer.initialize == {}
            assert c.heartbeat("g", m, epochs[m], ["u", "t"], TOPICS, now=61).assignment is None  # same set
        assert (group.group_epoch, {m: mb.assigned for m, mb in dict.items(group.members)}) == before
        assert not c.touched  # nor are the group's records written again (which goes over every member)


def test_a_heartbeat_touches_its_group_exactly_when_one_of_its_records_changes() -> None:
    """`touched` (the groups whose records the shell writes, membership_records.group_records going over
    every member) after a heartbeat: not when it changes nothing, yes when it changes the member's
    metadata (rack, client id or host, subscription), its epoch, or the group's."""
    c = ShareGroupCoordinator(ShareConfig(), session_timeout_ms=60_000, heartbeat_interval_ms=500)
    a = c.heartbeat("g", "a", 0, ["t"], TOPICS, now=0, client_id="c", client_host="/h")
    assert c.touched.keys() == {"g"}
    cases = [({}, False), ({"rack_id": "r1"}, True), ({"rack_id": "r1"}, False), ({"client_id": "c2"}, True),
             ({"client_id": "c2", "client_host": "/h2"}, True), ({"client_id": "c2", "client_host": "/h2"}, False)]
    for extra, changed in cases:
        c.touched.clear()
        kw = {"client_id": "c", "client_host": "/h", **extra}
        assert c.heartbeat("g", "a", a.member_epoch, None, TOPICS, now=1, **kw).error == 0  # type: ignore[arg-type]
        assert c.touched.keys() == ({"g"} if changed else set()), extra
    c.touched.clear()
    c.heartbeat("g", "a", a.member_epoch, ["t", "u"], TOPICS, now=2, client_id="c2", client_host="/h2")
    assert c.touched.keys() == {"g"}  # a subscription change: the group epoch and the assignment move
    c.touched.clear()
    b = c.heartbeat("g", "b", 0, ["t"], TOPICS, now=3)
    assert c.touched.keys() == {"g"}
    c.touched.clear()
    a2 = c.heartbeat("g", "a", c.groups["g"].members["a"].member_epoch, None, TOPICS, now=4, client_id="c2",
                     client_host="/h2")
    assert a2.assignment is not None and c.touched.keys() == {"g"}  # a's epoch moved to b's join
    c.touched.clear()
    assert c.heartbeat("g", "b", b.member_epoch + 5, None, TOPICS, now=5).error != 0  # fenced: no change
    assert c.heartbeat("g", "x", -1, None, TOPICS, now=5).error == 0 and not c.touched  # unknown leave
    c.heartbeat("g", "b", -1, None, TOPICS, now=6)
    assert c.touched.keys() == {"g"}
