"""Online upgrade of a classic group to a KIP-848 consumer group and downgrade back (Kafka's
GroupMetadataManager: convertToConsumerGroup / classicGroup*ToConsumerGroup / convertToClassicGroup), in
the pure coordinator with a manual clock."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kaflite.assign.types import TopicPartition
from kaflite.coordinator import CoordinatorConfig, GroupCoordinator
from kaflite.coordinator import messages as m
from kaflite.coordinator.consumer_group import ConsumerHeartbeatRequest, ConsumerHeartbeatResponse
from kaflite.coordinator.consumer_records import ConsumerGroupMemberMetadataKey, ConsumerGroupMetadataKey
from kaflite.coordinator.records import GroupMetadataKey
from kaflite.coordinator.shard_context import CoordinatorRecord
from kaflite.coordinator.state import GroupState
from kaflite.coordinator.timeline import RebalanceEventKey
from kaflite.protocol import consumer_protocol as cp
from kaflite.protocol.errors import ErrorCode

from .coord_harness import Harness

TOPICS = {"t": 6}
IDS = {"t": uuid.UUID(int=7)}


def subscription(owned: list[tuple[str, int]] = ()) -> bytes:  # type: ignore[assignment]
    """A v1 consumer Subscription of topic t, owning `owned` (an eager client owns nothing when it rejoins)."""
    sub = cp.ConsumerSubscription(["t"], None, [TopicPartition(t, p) for t, p in owned])
    return cp.encode_subscription(sub, version=1)


def protocols(owned: list[tuple[str, int]] = ()) -> tuple[m.Protocol, ...]:  # type: ignore[assignment]
    return (m.Protocol("range", subscription(owned)), m.Protocol("roundrobin", subscription(owned)))


class Mixed(Harness):
    """A Harness that also speaks ConsumerGroupHeartbeat and keeps every record written."""

    def __init__(self, **config: Any) -> None:
        super().__init__(group_initial_rebalance_delay_ms=0, **config)
        self.gc.consumer.topic_source = lambda: (TOPICS, IDS)
        self.epoch: dict[str, int] = {}
        self.owned: dict[str, dict[str, frozenset[int]]] = {}

    def records(self) -> list[CoordinatorRecord]:
        return [r for res in self.results for r in res.records]

    def hb(self, member: str, epoch: int | None = None) -> ConsumerHeartbeatResponse:
        e = self.epoch.get(member, 0) if epoch is None else epoch
        req = ConsumerHeartbeatRequest("g", member, e, ("t",) if e == 0 else None, self.owned.get(member, {}),
                                       rebalance_timeout_ms=20_000)
        resp: ConsumerHeartbeatResponse = self._collect(
            self.gc.handle_consumer_heartbeat(req, TOPICS, self.now, IDS)).response()
        if resp.error is ErrorCode.none and e >= 0:
            self.epoch[member] = resp.member_epoch
            if resp.assignment is not None:
                self.owned[member] = dict(resp.assignment)
        return resp

    def classic_round(self, member: str) -> m.SyncGroupResponse | None:
        """A classic eager member's rejoin (owning nothing) and sync; its new partitions on success."""
        join = self.answers[self.join(member, protocols=protocols())]
        if join.error is not ErrorCode.none:
            return None
        sync = self.answers[self.sync(member, join.generation_id, protocol_type="consumer",
                                      protocol_name=join.protocol_name)]
        if sync.error is ErrorCode.none:
            self.owned[member] = {t: frozenset(ps) for t, ps in
                                  (cp.assignment_partitions(sync.assignment) or {}).items()}
            self.epoch[member] = join.generation_id
        return sync

    def consumer_group(self):  # noqa: ANN201
        return self.gc.consumer.groups["g"]

    def assert_single_owner(self) -> None:
        """Neither the coordinator's view nor what the clients hold ever has a partition twice."""
        seen: set[tuple[str, int]] = set()
        for mb in self.consumer_group().members.values():
            for t, ps in list(mb.assigned.items()) + list(mb.pending_revocation.items()):
                for p in ps:
                    assert (t, p) not in seen, f"{t}-{p} has two owners"
                    seen.add((t, p))
        held: set[tuple[str, int]] = set()
        for owned in self.owned.values():
            for t, ps in owned.items():
                for p in ps:
                    assert (t, p) not in held, f"{t}-{p} held by two clients"
                    held.add((t, p))


def classic_group(h: Mixed, n: int = 2) -> list[str]:
    """A Stable classic group of n eager members with t's 6 partitions spread over them."""
    tokens = [h.join_new(client_id=f"c{i}", protocols=protocols()) for i in range(n)]
    h.advance_until(lambda: all(t in h.answers for t in tokens))
    joined = [h.answers[t] for t in tokens]
    ids = [r.member_id for r in joined]
    plan = {mid: [p for p in range(6) if p % n == i] for i, mid in enumerate(ids)}
    leader = joined[0].leader
    h.sync(leader, joined[0].generation_id, {mid: cp.encode_assignment(cp.ConsumerAssignment(
        [TopicPartition("t", p) for p in ps]), version=0) for mid, ps in plan.items()})
    for mid in ids:
        if mid != leader:
            h.sync(mid, joined[0].generation_id)
        h.owned[mid] = {"t": frozenset(plan[mid])}
    assert h.group().is_in(GroupState.STABLE)
    return ids


def test_a_consumer_member_upgrades_a_classic_group_keeping_its_assignment() -> None:
    h = Mixed()
    a, b = classic_group(h)
    generation = h.group().generation_id
    first = len(h.records())
    resp = h.hb("new", 0)
    assert resp.error is ErrorCode.none
    assert "g" not in h.gc.groups  # one group per id: now a consumer group
    cg = h.consumer_group()
    assert cg.group_epoch == generation + 1 and cg.assignment_epoch == generation + 1
    for mid in (a, b):
        mb = cg.members[mid]
        assert mb.classic is not None and mb.classic.session_timeout_ms == 10_000
        assert [name for name, _ in mb.classic.protocols] == ["range", "roundrobin"]
        assert mb.member_epoch == generation and mb.assigned == h.owned[mid]
    # the newcomer gets nothing the classic members still hold
    assert not any(h.owned.get("new", {}).values())
    h.assert_single_owner()
    # records: the classic group's tombstone, then the consumer group's records
    written = h.records()[first:]
    assert written[0].record_key == GroupMetadataKey("g") and written[0].value is None
    assert any(r.record_key == ConsumerGroupMetadataKey("g") for r in written[1:])
    # the classic members learn of the new epoch by heartbeat, rejoin and reconcile
    for _ in range(4):
        for mid in (a, b):
            if h.heartbeat(mid, h.epoch.get(mid, generation)) is ErrorCode.rebalance_in_progress:
                h.owned[mid] = {}  # eager: everything revoked before the rejoin
                h.assert_single_owner()
                h.classic_round(mid)
            h.assert_single_owner()
        h.hb("new")
        h.assert_single_owner()
    held = sorted(p for o in h.owned.values() for p in o.get("t", ()))
    assert held == list(range(6)) and sorted(len(o["t"]) for o in h.owned.values()) == [2, 2, 2]
    assert cg.state == "Stable"
    assert all(h.heartbeat(mid, h.epoch[mid]) is ErrorCode.none for mid in (a, b))


def test_classic_member_commits_with_its_generation() -> None:
    h = Mixed()
    a, _b = classic_group(h)
    gen = h.group().generation_id
    h.hb("new", 0)
    assert h.commit({("t", 0): 5}, a, gen, version=8) == {("t", 0): ErrorCode.none}
    assert h.commit({("t", 0): 5}, a, gen + 5, version=8) == {("t", 0): ErrorCode.illegal_generation}
    assert h.fetch() == {("t", 0): 5}


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
def test_upgrade_refused_by_policy(policy: str) -> None:
    h = Mixed(consumer_migration_policy=policy)
    classic_group(h)
    resp = h.hb("new", 0)
    assert resp.error is ErrorCode.group_id_not_found
    assert h.group().is_in(GroupState.STABLE) and "g" not in h.gc.consumer.groups


def test_no_upgrade_of_a_non_consumer_protocol_group() -> None:
    h = Mixed()
    token = h.join_new(protocol_type="connect", protocols=(m.Protocol("default", b"x"),))
    h.advance_until(lambda: token in h.answers)
    assert h.hb("new", 0).error is ErrorCode.group_id_not_found


def test_classic_joins_into_consumer_group_and_protocol_checks() -> None:
    h = Mixed()
    h.hb("a", 0)
    first = h.answers[h.join("", protocols=protocols())]
    assert first.error is ErrorCode.member_id_required
    joined = h.answers[h.join(first.member_id, protocols=protocols())]
    assert joined.error is ErrorCode.none and joined.leader == "" and joined.protocol_name == "range"
    assert joined.generation_id == h.consumer_group().members[first.member_id].member_epoch
    # a protocol no classic member supports is refused
    other = h.answers[h.join("x", protocols=(m.Protocol("sticky", subscription()),))]
    assert other.error is ErrorCode.inconsistent_group_protocol
    # wrong generation / protocol name at sync, consumer-protocol member on the classic APIs
    assert h.answers[h.sync(first.member_id, joined.generation_id + 1)].error is ErrorCode.illegal_generation
    assert h.answers[h.sync(first.member_id, joined.generation_id, protocol_name="roundrobin")].error \
        is ErrorCode.inconsistent_group_protocol
    assert h.heartbeat("a", 1) is ErrorCode.unknown_member_id
    assert h.leave(("a", None)).members[0].error is ErrorCode.unknown_member_id
    listed = h.gc.list_groups()
    assert [(g.group_id, g.group_type) for g in listed] == [("g", "consumer")]


def test_classic_member_that_never_rejoins_is_removed_after_its_rebalance_timeout() -> None:
    h = Mixed()
    a, b = classic_group(h)
    gen = h.group().generation_id
    h.hb("new", 0)
    assert h.heartbeat(a, gen) is ErrorCode.rebalance_in_progress
    for _ in range(25):  # b rejoins when told and the newcomer heartbeats; a does not rejoin
        h.advance(1000)
        if h.heartbeat(b, h.epoch.get(b, gen)) is ErrorCode.rebalance_in_progress:
            h.owned[b] = {}
            h.classic_round(b)
        h.hb("new")
    assert a not in h.consumer_group().members and b in h.consumer_group().members


def test_last_consumer_member_leaving_downgrades_to_classic() -> None:
    h = Mixed()
    a, b = classic_group(h)
    h.hb("new", 0)
    epoch = h.consumer_group().group_epoch
    first = len(h.records())
    assert h.hb("new", -1).error is ErrorCode.none
    assert "g" not in h.gc.consumer.groups
    group = h.group()
    assert group.is_in(GroupState.PREPARING_REBALANCE) and group.protocol_type == "consumer"
    assert group.generation_id == epoch and set(group.members) == {a, b}
    # the group's records (the rebalance timeline's, kaflite's own, follow them)
    written = [r for r in h.records()[first:] if not isinstance(r.record_key, RebalanceEventKey)]
    # Kafka's order: the consumer group's tombstones, then the classic group's record
    assert all(r.value is None for r in written[:-1]) and written[-1].record_key == GroupMetadataKey("g")
    assert any(r.record_key == ConsumerGroupMetadataKey("g") for r in written[:-1])
    # the classic members are told to rejoin and form the next generation as any classic group
    assert h.heartbeat(a, epoch) is ErrorCode.rebalance_in_progress
    ta, tb = h.join(a, protocols=protocols()), h.join(b, protocols=protocols())
    assert h.answers[ta].generation_id == epoch + 1 and h.answers[tb].generation_id == epoch + 1
    assert h.answers[ta].leader in (a, b)


def test_session_expiry_of_the_last_consumer_member_downgrades() -> None:
    h = Mixed(consumer_session_timeout_ms=5000)
    a, b = classic_group(h)
    gen = h.group().generation_id
    h.hb("new", 0)
    for _ in range(8):  # only the classic members stay alive
        h.advance(1000)
        for mid in (a, b):
            h.heartbeat(mid, gen)
    assert "g" in h.gc.groups and "g" not in h.gc.consumer.groups


def test_kit_faults_on_a_mixed_group_take_the_session_timeout_path() -> None:
    """force_rebalance makes the classic members of a consumer group rejoin; expire_member of the last
    consumer-protocol member downgrades the group, as its session timeout would."""
    h = Mixed()
    a, b = classic_group(h)
    gen = h.group().generation_id
    h.hb("new", 0)
    for _ in range(10):  # the group settles: the classic members rejoin, the newcomer gets its share
        for mid in (a, b):
            if h.heartbeat(mid, h.epoch.get(mid, gen)) is ErrorCode.rebalance_in_progress:
                h.owned[mid] = {}
                h.classic_round(mid)
        h.hb("new")
    epoch = h.consumer_group().group_epoch
    assert {h.heartbeat(mid, h.epoch[mid]) for mid in (a, b)} == {ErrorCode.none}
    assert h._collect(h.gc.handle_force_rebalance("g", h.now)).response() is ErrorCode.none
    assert h.consumer_group().group_epoch == epoch + 1
    assert {h.heartbeat(mid, h.epoch[mid]) for mid in (a, b)} == {ErrorCode.rebalance_in_progress}
    assert h._collect(h.gc.handle_expire_member("g", "new", h.now)).response() is ErrorCode.none
    assert "g" not in h.gc.consumer.groups and set(h.group().members) == {a, b}


def test_downgrade_refused_by_policy_keeps_a_consumer_group_of_classic_members() -> None:
    h = Mixed(consumer_migration_policy="upgrade")
    a, b = classic_group(h)
    h.hb("new", 0)
    h.hb("new", -1)
    assert "g" in h.gc.consumer.groups and set(h.consumer_group().members) == {a, b}


def test_a_classic_member_leaving_never_downgrades() -> None:
    h = Mixed()
    a, b = classic_group(h)
    h.hb("new", 0)
    assert h.leave((a, None)).members[0].error is ErrorCode.none
    assert set(h.consumer_group().members) == {b, "new"}


def test_upgraded_group_survives_a_reload_with_its_classic_members() -> None:
    h = Mixed()
    a, b = classic_group(h)
    h.hb("new", 0)
    keys = {r.record_key for r in h.records()}
    assert ConsumerGroupMemberMetadataKey("g", a) in keys
    fresh = GroupCoordinator(CoordinatorConfig(), active=False)
    for r in h.records():
        fresh.replay(r.key, r.value)
    fresh.activate(h.now)
    assert "g" not in fresh.groups
    cg, live = fresh.consumer.groups["g"], h.consumer_group()
    for mid in (a, b, "new"):
        assert cg.members[mid].classic == live.members[mid].classic
        assert cg.members[mid].assigned == live.members[mid].assigned
        assert cg.members[mid].member_epoch == live.members[mid].member_epoch
    # and after a downgrade, the reload gives the classic group back
    h.hb("new", -1)
    fresh = GroupCoordinator(CoordinatorConfig(), active=False)
    for r in h.records():
        fresh.replay(r.key, r.value)
    fresh.activate(h.now)
    assert "g" not in fresh.consumer.groups and set(fresh.groups["g"].members) == {a, b}


def test_upgrade_during_a_rebalance_answers_parked_requests_rebalance_in_progress() -> None:
    h = Mixed()
    a, b = classic_group(h)
    gen = h.group().generation_id
    parked = h.join(a, protocols=protocols())  # a's rejoin starts a rebalance: parked until b rejoins
    assert parked not in h.answers and h.group().is_in(GroupState.PREPARING_REBALANCE)
    assert h.hb("new", 0).error is ErrorCode.none
    assert h.answers[parked].error is ErrorCode.rebalance_in_progress
    assert h.consumer_group().members[a].member_epoch == gen and h.consumer_group().members[b].assigned


def test_cooperative_classic_member_revokes_before_its_partitions_move() -> None:
    """A classic member that reports what it owns (cooperative) keeps its epoch while it must revoke:
    SyncGroup gives it the reduced set, Heartbeat asks it to rejoin, and only once its JoinGroup no longer
    reports the revoked partitions does it reach the new epoch and the newcomer get them."""
    h = Mixed()
    a, b = classic_group(h)
    gen = h.group().generation_id
    h.hb("new", 0)
    cg = h.consumer_group()
    owned_a = sorted(("t", p) for p in h.owned[a]["t"])
    join = h.answers[h.join(a, protocols=protocols(owned_a))]
    assert join.error is ErrorCode.none and join.generation_id == gen  # still revoking: old epoch
    assert cg.members[a].state == "UNREVOKED_PARTITIONS"
    sync = h.answers[h.sync(a, gen, protocol_name="range")]
    kept = {("t", p) for p in (cp.assignment_partitions(sync.assignment) or {}).get("t", [])}
    assert kept < set(owned_a)
    assert h.heartbeat(a, gen) is ErrorCode.rebalance_in_progress
    revoked = set(owned_a) - kept
    assert not any(cg.owners.get(tp) == "new" for tp in revoked)  # nobody gets them yet
    join = h.answers[h.join(a, protocols=protocols(sorted(kept)))]
    assert join.generation_id == cg.group_epoch and cg.members[a].state != "UNREVOKED_PARTITIONS"
    assert all(cg.owners.get(tp) != a for tp in revoked)


def test_static_classic_member_replacing_the_last_consumer_member_downgrades_without_rebalance() -> None:
    h = Mixed()
    req = ConsumerHeartbeatRequest("g", "s", 0, ("t",), {}, rebalance_timeout_ms=20_000, instance_id="i1")
    first = h._collect(h.gc.handle_consumer_heartbeat(req, TOPICS, h.now, IDS)).response()
    h.epoch["s"], h.owned["s"] = first.member_epoch, dict(first.assignment)
    joined = h.answers[h.join(protocols=protocols())]  # a dynamic classic member: its id first
    joined = h.answers[h.join(joined.member_id, protocols=protocols())]
    c = joined.member_id
    for _ in range(4):  # settle: s gives up what c is to get, c rejoins when told
        h.hb("s")
        if h.heartbeat(c, h.epoch.get(c, joined.generation_id)) is ErrorCode.rebalance_in_progress:
            h.classic_round(c)
        h.assert_single_owner()
    cg = h.consumer_group()
    assert cg.state == "Stable"
    s_target = cg.target["s"]
    # s restarts as a classic static member with the same instance id
    join = h.answers[h.join("", instance="i1", protocols=protocols())]
    assert join.error is ErrorCode.none and join.member_id != "s"
    assert "g" not in h.gc.consumer.groups
    group = h.group()
    assert group.is_in(GroupState.STABLE) and set(group.members) == {join.member_id, c}
    assert group.generation_id == cg.group_epoch == join.generation_id
    sync = h.answers[h.sync(join.member_id, join.generation_id, instance="i1")]
    assert sync.error is ErrorCode.none
    assert {("t", p) for p in (cp.assignment_partitions(sync.assignment) or {})["t"]} == \
        {("t", p) for p in s_target["t"]}  # its predecessor's partitions, no rebalance
    assert h.heartbeat(c, group.generation_id) is ErrorCode.none
