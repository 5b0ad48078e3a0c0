"""The rebalance timeline (kaflite.coordinator.timeline) on the pure coordinator with a manual clock: every
cause triggered once for a classic and for a KIP-848 group and named by the timeline; its records survive a
reload (a coordinator restart or move) and stay bounded."""

from __future__ import annotations

import uuid
from typing import Any

from kaflite.coordinator import CoordinatorConfig, GroupCoordinator
from kaflite.coordinator import messages as m
from kaflite.coordinator.consumer_group import ConsumerHeartbeatRequest, ConsumerHeartbeatResponse
from kaflite.coordinator.records import decode_key, decode_record
from kaflite.coordinator.timeline import KEY_VERSION, RebalanceEvent, RebalanceEventKey
from kaflite.protocol.errors import ErrorCode

from .coord_harness import Harness, encode_assignment, encode_subscription

IDS = {"t": uuid.UUID(int=7), "u": uuid.UUID(int=8)}


def _events(h: Harness, since: int = 0) -> list[RebalanceEvent]:
    return h.gc.group_history("g")[since:]


def _kinds(events: list[RebalanceEvent]) -> list[tuple[str, str]]:
    return [(e.kind, e.cause) for e in events]


def _reloaded(h: Harness, **config: Any) -> GroupCoordinator:
    """A fresh coordinator that replays every record written so far (a restart, or the group's
    `__consumer_offsets` partition led by another broker), then activated at the harness's clock."""
    gc = GroupCoordinator(CoordinatorConfig(**{"group_initial_rebalance_delay_ms": 0, **config}), active=False)
    for res in h.results:
        for r in res.records:
            gc.replay(r.key, r.value)
    h.results.append(gc.activate(h.now))
    return gc


# --- classic groups ----------------------------------------------------------------------------------

def _rebalance(h: Harness, ids: list[str], protocols: dict[str, tuple[m.Protocol, ...]] | None = None) -> int:
    """Every member rejoins and the leader assigns t-i to the i-th member: the group is Stable again."""
    protocols = protocols or {}
    tokens = [h.join(mid, **({"protocols": protocols[mid]} if mid in protocols else {})) for mid in ids]
    h.advance_until(lambda: all(t in h.answers for t in tokens))
    answers = [h.answers[t] for t in tokens]
    assert all(a.error is ErrorCode.none for a in answers), answers
    gen, leader = answers[0].generation_id, answers[0].leader
    h.sync(leader, gen, {mid: encode_assignment({"t": [i]}) for i, mid in enumerate(ids)})
    for mid in ids:
        if mid != leader:
            h.sync(mid, gen)
    assert h.group().state.value == "Stable"
    return gen


def test_classic_group_names_every_cause() -> None:
    h = Harness(group_initial_rebalance_delay_ms=0)
    a, b, s = h.form_group(3, instances=[None, None, "inst-s"])
    first = _events(h)
    assert _kinds(first) == [("member-joined", "new-member"), ("rebalance-started", "new-member"),
                             ("member-joined", "new-member"), ("member-joined", "new-member"),
                             ("rebalance-completed", "new-member")]
    done = first[-1]
    assert done.generation == 1 and done.protocol == "classic" and done.duration_ms == h.now
    assert set(done.moved) == {("t", 0, "", a), ("t", 1, "", b), ("t", 2, "", s)} and done.moved_total == 3

    # subscription change: a rejoins subscribing to t and u
    mark = len(_events(h))
    changed = (m.Protocol("range", encode_subscription(["t", "u"])),)
    h.join(a, protocols=changed)
    assert _kinds(_events(h, mark))[:2] == [("subscription-changed", "subscription-change"),
                                            ("rebalance-started", "subscription-change")]
    _rebalance(h, [a, b, s], {a: changed})
    assert _events(h)[-1].kind == "rebalance-completed" and _events(h)[-1].cause == "subscription-change"

    # metadata change: the leader rejoins a Stable group with its subscription unchanged
    mark = len(_events(h))
    leader = h.group().leader_id
    h.join(leader, protocols=h.group().member(leader).protocols)
    assert _kinds(_events(h, mark)) == [("metadata-changed", "metadata-change"),
                                       ("rebalance-started", "metadata-change")]
    _rebalance(h, [a, b, s], {a: changed})

    # static member replaced: the same instance restarts under a new member id (no rebalance, KIP-345)
    mark = len(_events(h))
    h.join(instance="inst-s")
    replaced = _events(h, mark)
    assert _kinds(replaced) == [("member-replaced", "static-member-replaced")]
    s = h.group().static_members["inst-s"]
    assert s in replaced[0].detail and replaced[0].member_id == s

    # a member leaves because its poll loop was too slow (the reason of its LeaveGroup, KIP-800)
    mark = len(_events(h))
    h._collect(h.gc.handle_leave(m.LeaveGroupRequest("g", (m.MemberIdentity(
        b, None, "consumer poll timeout has expired."),)), h.now))
    assert _kinds(_events(h, mark)) == [("member-left", "max-poll-interval"),
                                       ("rebalance-started", "max-poll-interval")]
    _rebalance(h, [a, s], {a: changed})
    moved = _events(h)[-1]
    assert moved.cause == "max-poll-interval" and ("t", 2, "", "") not in moved.moved
    assert any(tp[:2] == ("t", 1) for tp in moved.moved)  # b's partition went to someone else

    # a new member, then a plain LeaveGroup
    h.join_new(client_id="late")
    late = next(mid for mid in h.group().members if mid not in (a, s))
    _rebalance(h, [a, s, late], {a: changed})
    mark = len(_events(h))
    h.leave((late, None))
    assert _kinds(_events(h, mark)) == [("member-left", "leave-group"), ("rebalance-started", "leave-group")]
    _rebalance(h, [a, s], {a: changed})

    # session timeout: s stops heartbeating while a carries on
    mark = len(_events(h))
    gen = h.group().generation_id
    h.advance_until(lambda: s not in h.group().members or h.heartbeat(a, gen) is not ErrorCode.none, step=1_000)
    assert _kinds(_events(h, mark))[:2] == [("member-left", "session-timeout"), ("rebalance-started", "session-timeout")]
    _rebalance(h, [a], {a: changed})

    # rebalance timeout: a newcomer starts a rebalance that a does not rejoin in time
    mark = len(_events(h))
    t = h.join_new(client_id="newcomer")
    gen = h.group().generation_id  # a heartbeats (REBALANCE_IN_PROGRESS) but never rejoins
    h.advance_until(lambda: t in h.answers or h.heartbeat(a, gen) is ErrorCode.none, step=1_000)
    assert h.answers[t].error is ErrorCode.none and a not in h.group().members
    assert ("member-left", "rebalance-timeout") in _kinds(_events(h, mark))
    newcomer = h.answers[t].member_id
    h.sync(newcomer, h.answers[t].generation_id, {newcomer: encode_assignment({"t": [0, 1, 2]})})
    assert _events(h)[-1].kind == "rebalance-completed" and _events(h)[-1].cause == "new-member"
    mark = len(_events(h))
    h.leave((newcomer, None))
    h.advance(1)
    assert h.group().state.value == "Empty" and _events(h)[-1].kind == "rebalance-completed"

    # forced (the test kit) and coordinator loaded (a restart)
    x, y = h.form_group(2)
    mark = len(_events(h))
    h._collect(h.gc.handle_force_rebalance("g", h.now))
    assert _kinds(_events(h, mark)) == [("rebalance-forced", "forced"), ("rebalance-started", "forced")]
    _rebalance(h, [x, y])
    before = _events(h)
    h.gc = _reloaded(h)
    after = h.gc.group_history("g")
    assert after[:-1] == before and _kinds(after[-1:]) == [("coordinator-loaded", "coordinator-loaded")]
    assert after[-1].generation == h.group().generation_id and "2 member(s)" in after[-1].detail
    causes = {e.cause for e in after}
    assert causes >= {"new-member", "subscription-change", "metadata-change", "static-member-replaced",
                      "max-poll-interval", "leave-group", "rebalance-timeout", "session-timeout", "forced",
                      "coordinator-loaded"}


def test_classic_durations_come_from_the_injected_clock() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3000)
    h.now = 1_000_000
    h.form_group(2)
    started, completed = (next(e for e in _events(h) if e.kind == k) for k in ("rebalance-started",
                                                                                "rebalance-completed"))
    assert started.time_ms == 1_000_000 and completed.time_ms == h.now
    assert completed.duration_ms == h.now - 1_000_000 >= 3000  # the initial delay is part of it


# --- KIP-848 groups ----------------------------------------------------------------------------------

class Consumer848(Harness):
    """A Harness that speaks ConsumerGroupHeartbeat with member-chosen ids and a changeable topic image."""

    def __init__(self, **config: Any) -> None:
        super().__init__(group_initial_rebalance_delay_ms=0, **config)
        self.topics = {"t": 6, "u": 2}
        self.gc.consumer.topic_source = lambda: (dict(self.topics), IDS)
        self.epoch: dict[str, int] = {}
        self.owned: dict[str, dict[str, frozenset[int]]] = {}

    def hb(self, member: str, epoch: int | None = None, topics: tuple[str, ...] | None = None,
           revoke: bool = True) -> ConsumerHeartbeatResponse:
        e = self.epoch.get(member, 0) if epoch is None else epoch
        subscribed = topics if topics is not None else (("t",) if e == 0 else None)
        req = ConsumerHeartbeatRequest("g", member, e, subscribed, self.owned.get(member, {}),
                                       rebalance_timeout_ms=20_000)
        resp: ConsumerHeartbeatResponse = self._collect(
            self.gc.handle_consumer_heartbeat(req, dict(self.topics), self.now, IDS)).response()
        if resp.error is ErrorCode.none and e >= 0:
            self.epoch[member] = resp.member_epoch
            if resp.assignment is not None and (revoke or not self.owned.get(member)):
                self.owned[member] = dict(resp.assignment)
        return resp

    def settle(self, members: list[str]) -> None:
        for _ in range(6):
            for mb in members:
                self.hb(mb)
        assert self.gc.consumer.groups["g"].state == "Stable"


def test_kip848_group_names_every_cause() -> None:
    h = Consumer848()
    h.hb("a", 0)
    first = _events(h)
    assert _kinds(first) == [("member-joined", "new-member"), ("rebalance-started", "new-member"),
                             ("rebalance-completed", "new-member")]
    assert first[-1].generation == 1 and first[-1].protocol == "consumer" and first[-1].moved_total == 6
    h.hb("b", 0)
    h.settle(["a", "b"])
    done = _events(h)[-1]
    assert done.kind == "rebalance-completed" and done.cause == "new-member" and done.generation == 2
    assert done.moved_total == 3 and all(frm == "a" and to == "b" for _t, _p, frm, to in done.moved)

    # subscription change
    mark = len(_events(h))
    h.hb("a", topics=("t", "u"))
    assert _kinds(_events(h, mark))[:2] == [("subscription-changed", "subscription-change"),
                                            ("rebalance-started", "subscription-change")]
    h.settle(["a", "b"])
    assert _events(h)[-1].kind == "rebalance-completed"

    # metadata change: t grows from 6 to 8 partitions
    mark = len(_events(h))
    h.topics["t"] = 8
    h.hb("a")
    changed = _events(h, mark)
    assert _kinds(changed)[:2] == [("metadata-changed", "metadata-change"), ("rebalance-started", "metadata-change")]
    assert "t: 6 -> 8 partitions" in changed[0].detail
    h.settle(["a", "b"])
    assert {(t, p) for t, p, _f, _to in _events(h)[-1].moved} >= {("t", 6), ("t", 7)}

    # static member replaced: a classic-protocol static member of the group restarts under a new id
    sub = (m.Protocol("range", encode_subscription(["t"])),)
    h.join(instance="inst-s", protocols=sub)
    old = next(mb.member_id for mb in h.gc.consumer.groups["g"].members.values() if mb.instance_id == "inst-s")
    mark = len(_events(h))
    h.join(instance="inst-s", protocols=sub)
    replaced = _events(h, mark)
    assert ("member-replaced", "static-member-replaced") in _kinds(replaced)
    assert old in next(e.detail for e in replaced if e.kind == "member-replaced")
    new = next(mb.member_id for mb in h.gc.consumer.groups["g"].members.values() if mb.instance_id == "inst-s")
    h._collect(h.gc.handle_leave(m.LeaveGroupRequest("g", (m.MemberIdentity(
        new, "inst-s", "the maximum poll interval (300000ms) was exceeded"),)), h.now))
    assert ("member-left", "max-poll-interval") in _kinds(_events(h, mark))
    h.settle(["a", "b"])

    # leave (member epoch -1)
    h.hb("c", 0)
    h.settle(["a", "b", "c"])
    mark = len(_events(h))
    h.hb("c", -1)
    assert _kinds(_events(h, mark))[:2] == [("member-left", "leave-group"), ("rebalance-started", "leave-group")]
    h.settle(["a", "b"])

    # rebalance timeout: a new member joins and b never gives up the partitions it must revoke
    mark = len(_events(h))
    h.hb("d", 0)
    for _ in range(3):
        h.hb("a")
        h.hb("b", revoke=False)
        h.hb("d")
    assert h.gc.consumer.groups["g"].members["b"].state == "UNREVOKED_PARTITIONS"
    for _ in range(25):  # heartbeats keep a and d alive; b's revocation deadline passes
        h.advance(1_000)
        h.hb("a")
        h.hb("d")
    assert ("member-left", "rebalance-timeout") in _kinds(_events(h, mark))
    assert "b" not in h.gc.consumer.groups["g"].members

    # session timeout: d stops heartbeating
    mark = len(_events(h))
    h.settle(["a", "d"])
    for _ in range(50):
        h.advance(1_000)
        h.hb("a")
    assert ("member-left", "session-timeout") in _kinds(_events(h, mark))
    assert _events(h)[-1].kind == "rebalance-completed"

    # forced (the test kit), then a coordinator restart
    mark = len(_events(h))
    h._collect(h.gc.handle_force_rebalance("g", h.now))
    assert _kinds(_events(h, mark)) == [("rebalance-forced", "forced"), ("rebalance-started", "forced")]
    h.hb("a")
    assert _events(h)[-1].kind == "rebalance-completed" and _events(h)[-1].cause == "forced"
    before = _events(h)
    h.gc = _reloaded(h)
    after = h.gc.group_history("g")
    assert after[:-1] == before and after[-1].kind == "coordinator-loaded"
    assert after[-1].generation == h.gc.consumer.groups["g"].group_epoch
    assert {e.cause for e in after} >= {"new-member", "subscription-change", "metadata-change",
                                        "static-member-replaced", "max-poll-interval", "leave-group",
                                        "rebalance-timeout", "session-timeout", "forced", "coordinator-loaded"}


# --- persistence ----------------------------------------------------------------------------------

def _timeline_records(h: Harness) -> list[Any]:
    return [r for r in h.results[-1].records if isinstance(r.record_key, RebalanceEventKey)]


def test_history_survives_restarts_and_rides_with_the_next_written_step() -> None:
    h = Harness(group_initial_rebalance_delay_ms=0)
    a, b = h.form_group(2)
    h.gc = _reloaded(h)  # restart 1
    assert h.results[-1].records == []  # activation writes nothing ...
    assert h.heartbeat(a, 1) is ErrorCode.none
    assert h.results[-1].records == []  # ... nor a step that writes nothing of its own (a heartbeat, a read)
    h.advance(6_000)
    h.heartbeat(a, 1)
    h.advance(4_001)  # b's session (restarted at the load) ends on the restarted coordinator
    assert h.results[-1].records == []  # a classic rebalance starting writes no group record: nor events
    events = h.gc.group_history("g")
    assert _kinds(events[-3:]) == [("coordinator-loaded", "coordinator-loaded"), ("member-left", "session-timeout"),
                                   ("rebalance-started", "session-timeout")]
    assert h.commit({("t", 0): 7}, group="other") == {("t", 0): ErrorCode.none}  # a step that writes
    written = [decode_record(r.key, r.value)[1].event.kind for r in _timeline_records(h)]  # type: ignore[union-attr]
    assert written == ["coordinator-loaded", "member-left", "rebalance-started"]
    again = _reloaded(h)  # restart 2: everything above, written, is loaded
    assert again.group_history("g")[:-1] == events
    loaded = again.group_history("g")[-1]
    assert loaded.kind == "coordinator-loaded" and "was interrupted" in loaded.detail  # the open rebalance
    assert not again.group_manager.timeline.is_open("g")


def test_a_read_never_writes_even_with_events_pending() -> None:
    """A failed write reloads the shard, which records coordinator-loaded: the reads that follow (on a
    full disk, say) must still answer without writing (tests/groups/test_offsets_append_fault.py)."""
    h = Harness(group_initial_rebalance_delay_ms=0)
    a, _b = h.form_group(2)
    h.commit({("t", 0): 5}, member_id=a, generation=1)
    h.gc = _reloaded(h)
    assert h.fetch() == {("t", 0): 5} and h.results[-1].records == []
    h._collect(h.gc.handle_describe_groups(["g"], h.now))
    h._collect(h.gc.handle_group_history("g", h.now))
    assert h.results[-1].records == [] and h.results[-1].response()[-1].kind == "coordinator-loaded"


def test_history_is_bounded_and_compaction_keeps_exactly_the_last_n() -> None:
    size = 5
    h = Harness(group_initial_rebalance_delay_ms=0, rebalance_history_size=size)
    a, b = h.form_group(2)
    for _ in range(4):
        h._collect(h.gc.handle_force_rebalance("g", h.now))
        _rebalance(h, [a, b])
    events = h.gc.group_history("g")
    assert len(events) == size and [e.seq for e in events] == list(range(events[-1].seq - size + 1,
                                                                          events[-1].seq + 1))
    latest: dict[bytes, bytes | None] = {}
    for res in h.results:
        for r in res.records:
            latest[r.key] = r.value  # what compaction keeps: the last record of each key
    timeline_keys = [k for k in latest if decode_key(k).__class__ is RebalanceEventKey]
    assert len(timeline_keys) == size and all(k[:2] == KEY_VERSION.to_bytes(2, "big") for k in timeline_keys)
    compacted = GroupCoordinator(CoordinatorConfig(rebalance_history_size=size), active=False)
    for k, v in latest.items():
        compacted.replay(k, v)
    compacted.activate(h.now)
    # the same events (the coordinator-loaded event now takes the oldest one's slot)
    assert compacted.group_history("g")[:-1] == events[1:]


def test_a_smaller_history_size_drops_and_tombstones_the_oldest_on_load() -> None:
    h = Harness(group_initial_rebalance_delay_ms=0, rebalance_history_size=50)
    a, b = h.form_group(2)
    h._collect(h.gc.handle_force_rebalance("g", h.now))
    _rebalance(h, [a, b])
    events = h.gc.group_history("g")
    assert len(events) > 3
    gc = _reloaded(h, rebalance_history_size=3)
    assert [e.seq for e in gc.group_history("g")] == [events[-2].seq, events[-1].seq, events[-1].seq + 1]
    h.gc = gc
    h.commit({("t", 0): 1}, member_id=a, generation=h.group().generation_id)  # the next step that writes
    tombstones = [r for r in _timeline_records(h) if r.value is None]
    assert tombstones  # slots of the dropped events are deleted from the log


def test_deleting_a_group_deletes_its_history() -> None:
    h = Harness(group_initial_rebalance_delay_ms=0)
    a, b = h.form_group(2)
    h.leave((a, None), (b, None))
    h.advance(1)
    assert h.group().state.value == "Empty" and h.gc.group_history("g")
    res = h._collect(h.gc.handle_delete_groups(["g"], h.now))
    assert res.response() == [("g", ErrorCode.none)]
    assert h.gc.group_history("g") == []
    assert _reloaded(h).group_history("g") == []


def test_online_upgrade_and_downgrade_are_in_one_timeline() -> None:
    """A classic group becomes a consumer group when a consumer-protocol member joins, and back when it
    leaves: one timeline across both protocols, the downgrade's rebalance caused by the leave."""
    from .test_group_migration import Mixed, classic_group

    h = Mixed()
    classic_group(h)
    mark = len(_events(h))
    h.hb("new", 0)
    upgraded = _events(h, mark)
    assert _kinds(upgraded)[:3] == [("protocol-upgraded", "protocol-migration"), ("member-joined", "new-member"),
                                    ("rebalance-started", "new-member")]
    assert upgraded[1].protocol == "consumer" and upgraded[0].generation == 1
    mark = len(_events(h))
    h.hb("new", -1)
    downgraded = _events(h, mark)
    assert _kinds(downgraded)[:2] == [("member-left", "leave-group"), ("protocol-downgraded", "protocol-migration")]
    # the rebalance the upgrade's newcomer started never completed: it goes on, as a classic one
    assert "rebalance-started" not in [k for k, _c in _kinds(downgraded)] and h.gc.group_manager.timeline.is_open("g")
    group = h.group()
    members = list(group.members)
    _rebalance(h, members)
    assert _kinds(_events(h)[-1:]) == [("rebalance-completed", "new-member")] and _events(h)[-1].protocol == "classic"


def test_a_rejoin_with_the_same_topics_is_not_a_subscription_change() -> None:
    """A cooperative member's second join (same topics, other owned partitions in its metadata) is a
    plain rejoin; the same for the leader is a metadata change; other topics are a subscription change."""
    from kaflite.assign.types import TopicPartition
    from kaflite.protocol import consumer_protocol as cp

    def owning(topics: list[str], owned: list[int]) -> tuple[m.Protocol, ...]:
        sub = cp.ConsumerSubscription(topics, None, [TopicPartition("t", p) for p in owned])
        return (m.Protocol("range", cp.encode_subscription(sub, version=1)),)

    h = Harness(group_initial_rebalance_delay_ms=0)
    ids = h.form_group(2)
    leader = h.group().leader_id
    follower = next(i for i in ids if i != leader)
    mark = len(_events(h))
    h.join(follower, protocols=owning(["t"], [1]))
    assert _kinds(_events(h, mark)) == [("member-rejoined", "member-rejoin"), ("rebalance-started", "member-rejoin")]
    t = h.join(leader)  # the follower's join is parked: the leader's completes the join phase
    gen = h.answers[t].generation_id
    h.sync(leader, gen, {mid: encode_assignment({"t": [i]}) for i, mid in enumerate(ids)})
    h.sync(follower, gen)
    assert _kinds(_events(h)[-1:]) == [("rebalance-completed", "member-rejoin")]
    mark = len(_events(h))
    h.join(follower, protocols=owning(["t", "u"], []))
    assert _kinds(_events(h, mark))[0] == ("subscription-changed", "subscription-change")
    assert _events(h, mark)[0].detail == "topics t -> t, u"


def test_a_step_writes_a_bounded_number_of_timeline_records() -> None:
    """A shard loaded with many groups records a coordinator-loaded event for each: they are written a
    bounded number per step, never as one batch too large for the log."""
    from kaflite.coordinator.timeline import MAX_RECORDS_PER_STEP

    h = Harness(group_initial_rebalance_delay_ms=0)
    groups = [f"g{i}" for i in range(MAX_RECORDS_PER_STEP + 10)]
    for g in groups:
        h.form_group(1, group=g)
    h.gc = _reloaded(h)
    counts = []
    for g in groups[:2]:
        h.commit({("t", 0): 1}, group=f"other-{g}")
        counts.append(len(_timeline_records(h)))
    assert counts == [MAX_RECORDS_PER_STEP, 10]
    again = _reloaded(h)
    assert all(again.group_history(g)[-2].kind == "coordinator-loaded" for g in groups)


def test_a_transactional_offset_commit_carries_no_timeline_record() -> None:
    """TxnOffsetCommit's records are the producer's transactional batch (aborted ones are dropped by the
    cleaner): pending timeline records wait for the next plain step."""
    h = Harness(group_initial_rebalance_delay_ms=0)
    h.form_group(1)
    h.gc = _reloaded(h)  # a coordinator-loaded event is pending
    h._collect(h.gc.handle_txn_offset_commit("g", 7, {("t", 0): (5, -1, "")}, h.now))
    assert h.results[-1].records and _timeline_records(h) == []
    h.commit({("t", 1): 1}, group="other")
    assert [r.record_value.event.kind for r in _timeline_records(h)] == ["coordinator-loaded"]
