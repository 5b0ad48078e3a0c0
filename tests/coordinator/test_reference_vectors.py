"""Kafka's classic group coordinator cases (tests/data/kafka-reference-cases.json, kinds `coordinator.*`), reproduced.

Each case id maps to a scenario that drives our pure coordinator to the state the Kafka test built and
returns what we observed; the test then compares it with the case's `expected` (error codes straight
from the vectors file, never restated here). Behaviour-only cases assert the described behaviour.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from coordinator.coord_harness import RANGE_RR, Harness, encode_assignment
from helpers import vectors_of_kind
from kaflite.coordinator import (
    ClassicGroup,
    ClassicGroupMember,
    GroupState,
    IllegalStateError,
    can_rebalance,
    java_string_hashcode,
    partition_for,
)
from kaflite.coordinator import messages as m
from kaflite.coordinator.timeline import RebalanceEventKey
from kaflite.protocol.errors import ErrorCode

CASES = vectors_of_kind("coordinator.")
SCENARIOS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {}
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def scenario(*ids: str) -> Callable[[Callable[[dict[str, Any]], dict[str, Any]]], Callable[[dict[str, Any]], dict[str, Any]]]:
    def register(fn: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
        for case_id in ids:
            SCENARIOS[case_id] = fn
        return fn
    return register


def err(code: ErrorCode) -> dict[str, Any]:
    return {"error": code.name.upper(), "error_code": int(code)}


def proto(*names: str) -> tuple[m.Protocol, ...]:
    return tuple(m.Protocol(n, b"meta-" + n.encode()) for n in names)


def member(member_id: str, protocols: tuple[m.Protocol, ...] = RANGE_RR, instance: str | None = None) -> ClassicGroupMember:
    return ClassicGroupMember(member_id, instance, "client", "/127.0.0.1", 30_000, 10_000, "consumer", protocols)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_reference_case(case: dict[str, Any]) -> None:
    run = SCENARIOS.get(case["id"]) or SCENARIOS.get(case["kind"])
    assert run is not None, f"no scenario for {case['id']}"
    observed = run(case)
    expected = case["expected"]
    for key in ("error", "error_code"):
        if key in expected:
            assert observed[key] == expected[key], (case["id"], observed)
    for key, want in expected.get("result", {}).items():
        if key != "records":  # "records: none" is asserted inside the scenario
            assert observed[key] == want, (case["id"], key, observed)

def test_every_case_has_a_scenario() -> None:
    assert len(CASES) == 138
    missing = [c["id"] for c in CASES if c["id"] not in SCENARIOS and c["kind"] not in SCENARIOS]
    assert not missing


# --- offsets topic partition ---------------------------------------------------------------------

@scenario("coordinator.offsets_topic_partition")
def _partition(case: dict[str, Any]) -> dict[str, Any]:
    group_id = case["input"]["group_id"]
    assert java_string_hashcode(group_id) == case["expected"]["java_string_hashcode"]
    ns = case["input"]["offsets_topic_num_partitions"]
    if isinstance(ns, int):
        assert partition_for(group_id, ns) == case["expected"]["partition"]
    else:
        for n in ns:
            assert partition_for(group_id, n) == case["expected"]["partition"][str(n)]
    if "before_startup" in case["expected"]:
        # FindCoordinator before __consumer_offsets is loaded: our coordinator refuses while inactive
        h = Harness(offsets_topic_num_partitions=ns)
        h.gc.active = False
        assert h.answers[h.join(group=group_id)].error is ErrorCode.coordinator_not_available
        assert h.gc.partition_for(group_id) == case["expected"]["partition"]
    return {}


# --- states --------------------------------------------------------------------------------------

@scenario("coordinator.classic.state_transition")
def _transition(case: dict[str, Any]) -> dict[str, Any]:
    group = ClassicGroup("g", state=GroupState.parse(case["input"]["from"]))
    target = GroupState.parse(case["input"]["to"])
    try:
        group.transition_to(target, 0)
        valid = True
        assert group.state is target
    except IllegalStateError:
        valid = False
    assert valid == case["expected"]["valid"]
    return {}


@scenario("coordinator.classic.can_rebalance")
def _can_rebalance(case: dict[str, Any]) -> dict[str, Any]:
    assert can_rebalance(GroupState.parse(case["input"]["state"])) == case["expected"]["can_rebalance"]
    return {}


@scenario("coordinator.classic.select_protocol")
def _select(case: dict[str, Any]) -> dict[str, Any]:
    group = ClassicGroup("g")
    for mid, names in case["input"]["members_protocols_in_preference_order"].items():
        group.add(member(mid, proto(*names)))
    exp = case["expected"]
    if "exception" in exp:
        with pytest.raises(IllegalStateError):
            group.select_protocol()
        return {}
    if "selected" in exp:
        assert group.select_protocol() == exp["selected"]
    if "selected_one_of" in exp:
        assert group.select_protocol() in exp["selected_one_of"]
        for mid, names in exp["then_add"].items():
            group.add(member(mid, proto(*names)))
        assert group.select_protocol() == exp["selected_after"]
    return {}


@scenario("coordinator.classic.supports_protocols")
def _supports(case: dict[str, Any]) -> dict[str, Any]:
    group = ClassicGroup("g")
    queries = case["input"]["queries"]
    results = [group.supports_protocols(queries[0][0], queries[0][1])]
    group.add(member("member1", proto("range", "roundrobin")))
    group.transition_to(GroupState.PREPARING_REBALANCE, 0)
    results += [group.supports_protocols(t, names) for t, names in queries[1:]]
    assert results == case["expected"]["results"]
    return {}


# --- offset commit -------------------------------------------------------------------------------

def _validate_offset_commit_steps() -> list[ErrorCode | None]:
    """ClassicGroupTest#testValidateOffsetCommit, step by step."""
    group = ClassicGroup("g")
    out = [group.validate_offset_commit("", "", -1)]
    group.add(member("member-id", instance="instance-id"))
    group.transition_to(GroupState.PREPARING_REBALANCE, 0)
    group.init_next_generation(0)
    out.append(group.validate_offset_commit("", None, -1))
    out.append(group.validate_offset_commit("", None, -1, transactional=True))
    out.append(group.validate_offset_commit("unknown", "unknown", -1))
    out.append(group.validate_offset_commit("member-id", "unknown", -1))
    out.append(group.validate_offset_commit("member-id", "instance-id", 0))
    out.append(group.validate_offset_commit("member-id", "instance-id", 1))
    group.transition_to(GroupState.STABLE, 0)
    out.append(group.validate_offset_commit("member-id", "instance-id", 1))
    group.replace_static_member("instance-id", "member-id", "new-member-id")
    out.append(group.validate_offset_commit("member-id", "instance-id", 1))
    group.transition_to(GroupState.DEAD, 0)
    out.append(group.validate_offset_commit("new-member-id", "instance-id", 1))
    return out


@scenario(*[f"coordinator.classic.offset_commit/testValidateOffsetCommit/{i}" for i in range(10)])
def _validate_offset_commit(case: dict[str, Any]) -> dict[str, Any]:
    step = int(case["id"].rsplit("/", 1)[1])
    return err(_validate_offset_commit_steps()[step] or ErrorCode.none)


def _commit_error(h: Harness, **kw: Any) -> dict[str, Any]:
    errors = set(h.commit({("foo", 0): 100}, **kw).values())
    assert len(errors) == 1
    return err(errors.pop())


@scenario("coordinator.classic.offset_commit/testOffsetCommitWithUnknownGroup/GROUP_ID_NOT_FOUND",
          "coordinator.classic.offset_commit/testOffsetCommitWithUnknownGroup/ILLEGAL_GENERATION")
def _commit_unknown_group(case: dict[str, Any]) -> dict[str, Any]:
    version = 9 if case["id"].endswith("GROUP_ID_NOT_FOUND") else 8
    return _commit_error(Harness(), group="foo", member_id="member", generation=10, version=version)


@scenario("coordinator.classic.offset_commit/testSimpleGroupOffsetCommit/NONE")
def _commit_simple(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness()
    out = _commit_error(h, group="foo", member_id="", generation=-1)
    assert h.fetch("foo") == {("foo", 0): 100}
    assert h.gc.groups["foo"].is_in(GroupState.EMPTY)
    return out


def _group_with_member(h: Harness, state: GroupState | None = None, instance: str | None = None) -> ClassicGroup:
    group = ClassicGroup("foo")
    h.gc.groups["foo"] = group
    if state is GroupState.EMPTY:
        return group
    group.add(member("member", instance=instance))
    group.transition_to(GroupState.PREPARING_REBALANCE, 0)
    group.init_next_generation(0)  # generation 1, CompletingRebalance
    if state is not None:
        group.transition_to(state, 0)
    return group


@scenario("coordinator.classic.offset_commit/testGenericGroupOffsetCommitWithDeadGroup/COORDINATOR_NOT_AVAILABLE")
def _commit_dead(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness()
    _group_with_member(h, GroupState.DEAD)
    return _commit_error(h, group="foo", member_id="member", generation=10)


@scenario("coordinator.classic.offset_commit/testGenericGroupOffsetCommitWithUnknownMemberId/UNKNOWN_MEMBER_ID")
def _commit_unknown_member(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness()
    _group_with_member(h, GroupState.EMPTY)
    return _commit_error(h, group="foo", member_id="member", generation=10)


@scenario("coordinator.classic.offset_commit/testGenericGroupOffsetCommitWithIllegalGeneration/ILLEGAL_GENERATION")
def _commit_illegal_generation(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness()
    _group_with_member(h, instance="new-instance-id")
    return _commit_error(h, group="foo", member_id="member", generation=10)


@scenario("coordinator.classic.offset_commit/testGenericGroupOffsetCommitWithUnknownInstanceId/UNKNOWN_MEMBER_ID")
def _commit_unknown_instance(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness()
    _group_with_member(h)
    return _commit_error(h, group="foo", member_id="member", generation=10, instance="instanceid")


@scenario("coordinator.classic.offset_commit/testGenericGroupOffsetCommitWithFencedInstanceId/UNKNOWN_MEMBER_ID")
def _commit_fenced_instance(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness()
    _group_with_member(h, instance="new-instance-id")
    return _commit_error(h, group="foo", member_id="member", generation=10, instance="old-instance-id")


@scenario("coordinator.classic.offset_commit/testGenericGroupOffsetCommitWhileInCompletingRebalanceState/REBALANCE_IN_PROGRESS")
def _commit_completing(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness()
    _group_with_member(h)
    return _commit_error(h, group="foo", member_id="member", generation=1)


@scenario("coordinator.classic.offset_commit/testGenericGroupOffsetCommitWithoutMemberIdAndGeneration/UNKNOWN_MEMBER_ID")
def _commit_no_member(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness()
    _group_with_member(h, GroupState.STABLE)
    return _commit_error(h, group="foo", member_id="", generation=-1)


@scenario("coordinator.classic.offset_commit/metadata_too_large")
def _commit_metadata_too_large(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness()
    limit = h.gc.config.offset_metadata_max_bytes
    ok = h.commit({("t", 0): 5}, metadata="x" * limit)
    too_large = h.commit({("t", 1): 7}, metadata="x" * (limit + 1))
    assert ok == {("t", 0): ErrorCode.none}
    assert h.fetch(topics={"t": [0, 1]}) == {("t", 0): 5, ("t", 1): -1}  # the other partition stays
    return err(too_large[("t", 1)])


# --- delete group --------------------------------------------------------------------------------

@scenario("coordinator.classic.delete_group")
def _delete_group(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness()
    state = GroupState.parse(case["input"]["group_state"])
    group = ClassicGroup("g")
    h.gc.groups["g"] = group
    if state is not GroupState.EMPTY:
        group.add(member("m"))
        group.transition_to(GroupState.PREPARING_REBALANCE, 0)
        if state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            group.init_next_generation(0)
        if state is GroupState.STABLE:
            group.transition_to(state, 0)
        if state is GroupState.DEAD:
            group.transition_to(state, 0)
    [(group_id, code)] = h.gc.handle_delete_groups(["g"], 0).response()
    if code is ErrorCode.none:
        assert "g" not in h.gc.groups
    return err(code)


# --- JoinGroup -----------------------------------------------------------------------------------

@scenario("coordinator.classic.join_group/invalid_session_timeout_low",
          "coordinator.classic.join_group/invalid_session_timeout_high")
def _join_bad_session(case: dict[str, Any]) -> dict[str, Any]:
    cfg = case["input"]["config"]
    h = Harness(group_min_session_timeout_ms=cfg["group.min.session.timeout.ms"],
                group_max_session_timeout_ms=cfg["group.max.session.timeout.ms"])
    t = h.join(session=case["input"]["session_timeout_ms"])
    assert "g" not in h.gc.groups  # checked before the group is looked up
    return err(h.answers[t].error)


@scenario("coordinator.classic.join_group/invalid_group_id")
def _join_bad_group(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness()
    t = h.join(group=case["input"]["group_id"])
    out = err(h.answers[t].error)
    assert h.answers[t].member_id == case["expected"]["member_id"]
    h2 = Harness()
    assert h2.answers.get(h2.join(group="")) .error is h.answers[t].error  # "" is as invalid as null
    return out


@scenario("coordinator.classic.join_group/coordinator_not_started")
def _join_not_started(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness()
    h.gc.active = False
    return err(h.answers[h.join()].error)


@scenario("coordinator.classic.join_group/member_id_required")
def _join_member_id_required(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(uuids=True)
    client = case["input"]["client_id"]
    t = h.join(client_id=client, version=4)
    resp = h.answers[t]
    assert re.fullmatch(re.escape(client) + "-" + UUID, resp.member_id)
    assert h.group().is_pending_member(resp.member_id) and not h.group().has_member(resp.member_id)
    h.join(member_id=resp.member_id, client_id=client, version=4)
    assert h.group().has_member(resp.member_id) and not h.group().pending_join_members
    assert h.group().is_in(GroupState.PREPARING_REBALANCE)
    return err(resp.error)


@scenario("coordinator.classic.join_group/no_member_id_required_old_version")
def _join_old_version(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness()
    t = h.join(version=3)
    assert t not in h.answers  # parked in the join phase, no round trip
    assert h.group().size() == 1 and not h.group().pending_join_members
    return {}


@scenario("coordinator.classic.join_group/static_member_no_member_id_required")
def _join_static_new(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(uuids=True)
    instance = case["input"]["group_instance_id"]
    t = h.join(instance=instance, version=5)
    assert t not in h.answers
    [member_id] = h.group().members
    assert re.fullmatch(re.escape(instance) + "-" + UUID, member_id)
    assert h.group().static_members == {instance: member_id}
    return {}


@scenario("coordinator.classic.join_group/known_member_unknown_group")
def _join_known_member_unknown_group(case: dict[str, Any]) -> dict[str, Any]:
    codes = set()
    for instance in case["input"]["group_instance_id"]:
        h = Harness()
        codes.add(h.answers[h.join(member_id=case["input"]["member_id"], instance=instance)].error)
    assert len(codes) == 1
    return err(codes.pop())


@scenario("coordinator.classic.join_group/inconsistent_protocol_type")
def _join_inconsistent_type(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    h.form_group(1)
    new = case["input"]["new_member"]
    return err(h.answers[h.join(protocol_type=new["protocol_type"], protocols=proto(*new["protocols"]))].error)


@scenario("coordinator.classic.join_group/empty_protocol_type", "coordinator.classic.join_group/empty_protocols")
def _join_empty_protocol(case: dict[str, Any]) -> dict[str, Any]:
    new = case["input"]["new_member"]
    codes = set()
    for instance in [None, "instance"] if case["input"].get("also_static") else [None]:
        h = Harness()
        t = h.join(protocol_type=new["protocol_type"], protocols=proto(*new["protocols"]), instance=instance)
        codes.add(h.answers[t].error)
    assert len(codes) == 1
    return err(codes.pop())


@scenario("coordinator.classic.join_group/second_member_no_common_protocol")
def _join_no_common_protocol(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness()
    t1 = h.join_new(protocols=proto(*case["input"]["member1"]))
    t2 = h.join_new(protocols=proto(*case["input"]["member2"]))
    out = err(h.answers[t2].error)
    assert t1 not in h.answers
    h.advance(h.gc.config.group_initial_rebalance_delay_ms)
    assert h.answers[t1].error is ErrorCode.none
    return out


@scenario("coordinator.classic.join_group/group_max_size")
def _join_max_size(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_max_size=case["input"]["group.max.size"])
    tokens = [h.join_new(client_id=f"c{i}") for i in range(case["input"]["joins"])]
    assert all(t not in h.answers for t in tokens[:-1])
    h.advance_until(lambda: all(t in h.answers for t in tokens[:-1]))
    assert h.group().size() == case["input"]["group.max.size"]
    return err(h.answers[tokens[-1]].error)


@scenario("coordinator.classic.join_group/existing_member_dead_group")
def _join_dead(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    [mid] = h.form_group(1)
    h.group().transition_to(GroupState.DEAD, h.now)
    return err(h.answers[h.join(member_id=mid)].error)


@scenario("coordinator.classic.join_group/existing_member_empty_group")
def _join_empty_known(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    [mid] = h.form_group(1)
    h.leave((mid, None))
    assert h.group().is_in(GroupState.EMPTY)
    resp = h.answers[h.join(member_id=mid)]
    assert resp.generation_id == case["expected"]["generation_id"]
    return err(resp.error)


def _static_pair(h: Harness) -> list[str]:
    return h.form_group(2, instances=["leader-instance-id", "follower-instance-id"])


@scenario("coordinator.classic.join_group/static_unknown_instance_known_member")
def _join_static_unknown_instance(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    leader, _ = _static_pair(h)
    return err(h.answers[h.join(member_id=leader, instance=case["input"]["group_instance_id"])].error)


@scenario("coordinator.classic.join_group/static_mismatched_instance")
def _join_static_mismatch(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    _, follower = _static_pair(h)
    return err(h.answers[h.join(member_id=follower, instance=case["input"]["group_instance_id"])].error)


@scenario("coordinator.classic.join_group/generation_increments")
def _join_generations(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    [mid] = h.form_group(1)
    generations = [h.group().generation_id]
    t = h.join(member_id=mid)
    h.advance(0)
    generations.append(h.answers[t].generation_id)
    assert generations == case["expected"]["generation_ids"]
    return {}


@scenario("coordinator.classic.join_group/leader_is_first_joiner")
def _join_leader(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness()
    h.join_new(client_id="first")
    h.join_new(client_id="second")
    first = next(iter(h.group().members))
    assert first.startswith("first-") and h.group().leader_id == first
    h.leave((first, None))  # the leader leaves: the next member takes over
    assert h.group().leader_id is not None and h.group().leader_id.startswith("second-")
    return {}


def _join_completion_time(h: Harness, joins_at: dict[int, int], limit: int) -> int:
    """Members join at the given times; return when the first JoinGroup answer appears."""
    tokens = []
    for t in range(0, limit + 1):
        h.now = t
        h._collect(h.gc.poll_timers(t))
        if any(tok in h.answers for tok in tokens):
            return t
        for _ in range(joins_at.get(t, 0)):
            tokens.append(h.join(version=3, rebalance=h.rebalance_timeout))
    raise AssertionError("join phase never completed")


@scenario("coordinator.classic.join_group/initial_rebalance_delay",
          "coordinator.classic.join_group/initial_rebalance_delay_extended",
          "coordinator.classic.join_group/initial_rebalance_delay_capped")
def _join_initial_delay(case: dict[str, Any]) -> dict[str, Any]:
    inp = case["input"]
    h = Harness(group_initial_rebalance_delay_ms=inp["group.initial.rebalance.delay.ms"])
    h.rebalance_timeout = inp.get("rebalance_timeout_ms", 60_000)  # type: ignore[attr-defined]
    joins = {0: 1}
    if "second_member_joins_at_ms" in inp:
        joins[inp["second_member_joins_at_ms"]] = 1
    if "third_member_joins_at_ms" in inp:
        joins[0] = 2
        joins[inp["third_member_joins_at_ms"]] = 1
    done_at = _join_completion_time(h, joins, 20_000)
    expected = case["expected"]
    if "not_completed_at_ms" in expected:
        assert done_at > expected["not_completed_at_ms"]
    # completes at the deadline (the Kafka test observes it after advancing to join_completes_after_ms)
    assert expected["join_completes_after_ms"] - 1 <= done_at <= expected["join_completes_after_ms"]
    assert h.group().size() == sum(joins.values())
    return {}


@scenario("coordinator.classic.join_group/new_member_join_timeout")
def _join_new_member_timeout(case: dict[str, Any]) -> dict[str, Any]:
    timeout = case["input"]["group.new.member.join.timeout.ms"]
    h = Harness(group_initial_rebalance_delay_ms=0, group_new_member_join_timeout_ms=timeout)
    [first] = h.form_group(1, session=timeout + 100_000, rebalance=2 * timeout)
    t2 = h.join_new(client_id="second", session=timeout + 100_000, rebalance=2 * timeout)
    assert h.group().is_in(GroupState.PREPARING_REBALANCE) and t2 not in h.answers  # waits for `first`
    h.advance(timeout - 1)
    assert t2 not in h.answers
    h.advance(1)
    assert h.group().size() == 1 and first in h.group().members
    return err(h.answers[t2].error)


def _two_member_group(h: Harness) -> tuple[str, str]:
    leader, follower = h.form_group(2)
    assert h.group().is_in(GroupState.STABLE) and h.group().leader_id == leader
    return leader, follower


@scenario("coordinator.classic.join_group/follower_rejoin_stable_no_change")
def _join_follower_same(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    leader, follower = _two_member_group(h)
    resp = h.answers[h.join(member_id=follower)]
    assert resp.error is ErrorCode.none and resp.generation_id == 1 and resp.leader == leader
    assert resp.members == () and h.group().is_in(GroupState.STABLE)
    return {}


@scenario("coordinator.classic.join_group/leader_rejoin_stable", "coordinator.classic.join_group/member_changed_metadata_stable")
def _join_triggers_rebalance(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    leader, follower = _two_member_group(h)
    if case["input"]["member"] == "leader":
        t = h.join(member_id=leader)
    else:
        t = h.join(member_id=follower, protocols=proto("range", "roundrobin"))  # new metadata bytes
    assert t not in h.answers and h.group().is_in(GroupState.PREPARING_REBALANCE)
    return {}


@scenario("coordinator.classic.join_group/complete_join_removes_non_rejoined",
          "coordinator.classic.join_group/static_member_timeout_kept")
def _join_removes_non_rejoined(case: dict[str, Any]) -> dict[str, Any]:
    static = "static" in case["id"]
    h = Harness(group_initial_rebalance_delay_ms=0)
    kw = {"session": 60_000, "rebalance": 5_000}
    instances = ["i-leader", "i-follower"] if static else [None, None]
    leader, follower = h.form_group(2, instances=instances, **kw)
    t = h.join(member_id=leader, instance=instances[0], **kw)
    h.advance(4_999)
    assert t not in h.answers
    h.advance(1)
    assert h.answers[t].error is ErrorCode.none and h.answers[t].generation_id == 2
    assert h.group().is_in(GroupState.COMPLETING_REBALANCE)
    assert (follower in h.group().members) is static
    return {}


def _group_records(h: Harness) -> int:
    """Records written so far, but the rebalance timeline's (kaflite's own, not in Kafka's cases)."""
    return sum(1 for r in h.results for rec in r.records if not isinstance(rec.record_key, RebalanceEventKey))


@scenario("coordinator.classic.join_group/static_replace_stable_no_protocol_change")
def _join_static_replace(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    leader, follower = _static_pair(h)
    old_assignment = h.group().member(leader).assignment
    records_before = _group_records(h)
    t = h.join(instance="leader-instance-id")  # the leader restarts with no member id
    resp = h.answers[t]
    new_id = resp.member_id
    assert resp.error is ErrorCode.none and new_id.startswith("leader-instance-id-") and new_id != leader
    assert resp.generation_id == 1 and h.group().is_in(GroupState.STABLE)  # no rebalance
    assert resp.leader == leader and resp.members == ()  # old leader id: it will not reassign
    assert _group_records(h) == records_before + 1  # new member id persisted
    assert h.heartbeat(leader, 1, instance="leader-instance-id") is ErrorCode.fenced_instance_id
    assert h.heartbeat(follower, 1, instance="follower-instance-id") is ErrorCode.none
    s = h.sync(new_id, 1, instance="leader-instance-id")
    assert h.answers[s].assignment == old_assignment
    return {}


@scenario("coordinator.classic.join_group/static_replace_stable_protocol_change")
def _join_static_replace_protocol(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    _static_pair(h)
    assert h.group().protocol_name == "range"
    t = h.join(instance="follower-instance-id", protocols=proto("roundrobin"))
    assert t not in h.answers and h.group().is_in(GroupState.PREPARING_REBALANCE)
    return {}


@scenario("coordinator.classic.join_group/static_replace_completing")
def _join_static_replace_completing(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    leader, follower = h.form_group(2, instances=["a", "b"], assign=False)
    assert h.group().is_in(GroupState.COMPLETING_REBALANCE)
    s = h.sync(follower, 1, instance="b")  # parked, waiting for the leader
    t = h.join(instance="b")
    assert h.answers[s].error is ErrorCode.fenced_instance_id  # the old incarnation is fenced
    assert t not in h.answers and h.group().is_in(GroupState.PREPARING_REBALANCE)
    return {}


# --- SyncGroup -----------------------------------------------------------------------------------

@scenario("coordinator.classic.sync_group/testSyncGroupFromUnknownGroup")
def _sync_unknown_group(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness()
    return err(h.answers[h.sync("member", 1)].error)


def _completing_pair(h: Harness) -> tuple[str, str]:
    leader, follower = h.form_group(2, assign=False)
    assert h.group().is_in(GroupState.COMPLETING_REBALANCE)
    return leader, follower


@scenario("coordinator.classic.sync_group/testSyncGroupFromUnknownMember",
          "coordinator.classic.sync_group/testSyncGroupFromIllegalGeneration",
          "coordinator.classic.sync_group/testSyncGroupReturnsAnErrorWhenProtocolTypeIsInconsistent",
          "coordinator.classic.sync_group/testSyncGroupReturnsAnErrorWhenProtocolNameIsInconsistent",
          "coordinator.classic.sync_group/preparing_rebalance")
def _sync_errors(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    leader, follower = _completing_pair(h)
    name = case["id"].rsplit("/", 1)[1]
    if name.endswith("UnknownMember"):
        t = h.sync("unknown-member", 1)
    elif name.endswith("IllegalGeneration"):
        t = h.sync(leader, 2)
    elif name.endswith("TypeIsInconsistent"):
        t = h.sync(leader, 1, protocol_type="connect")
    elif name.endswith("NameIsInconsistent"):
        t = h.sync(leader, 1, protocol_type="consumer", protocol_name="roundrobin")
    else:
        h.join_new(client_id="newcomer")
        assert h.group().is_in(GroupState.PREPARING_REBALANCE)
        t = h.sync(follower, 1)
    assert h.group().generation_id == 1
    return err(h.answers[t].error)


@scenario("coordinator.classic.sync_group/empty_assignment")
def _sync_empty_assignment(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    leader, follower = _completing_pair(h)
    tf = h.sync(follower, 1)
    tl = h.sync(leader, 1, {})
    for t in (tf, tl):
        assert h.answers[t].error is ErrorCode.none and h.answers[t].assignment == b""
    assert h.group().is_in(GroupState.STABLE)
    return {}


@scenario("coordinator.classic.sync_group/rebalance_timeout_no_sync")
def _sync_timeout(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    leader, follower = h.form_group(2, assign=False, session=60_000, rebalance=5_000)
    h.sync(leader, 1, {leader: encode_assignment({"t": [0]}), follower: encode_assignment({"t": [1]})})
    assert h.group().is_in(GroupState.STABLE)
    deadline = h.gc.timer_deadline(("sync", "g"))
    assert deadline is not None
    h.advance(deadline - 1 - h.now)
    assert follower in h.group().members
    h.advance(1)
    assert follower not in h.group().members and h.group().is_in(GroupState.PREPARING_REBALANCE)
    return {}


# --- Heartbeat -----------------------------------------------------------------------------------

@scenario("coordinator.classic.heartbeat/testHeartbeatUnknownGroup")
def _hb_unknown_group(case: dict[str, Any]) -> dict[str, Any]:
    return err(Harness().heartbeat("member", 1))


@scenario("coordinator.classic.heartbeat/testHeartbeatDeadGroup")
def _hb_dead(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    [mid] = h.form_group(1)
    h.group().transition_to(GroupState.DEAD, 0)
    return err(h.heartbeat(mid, 1))


@scenario("coordinator.classic.heartbeat/testHeartbeatEmptyGroup")
def _hb_empty(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness()
    group = ClassicGroup("g")
    h.gc.groups["g"] = group
    group.add(member("member-id"), awaiting=False)
    assert group.is_in(GroupState.EMPTY) and group.generation_id == 0
    return err(h.heartbeat("member-id", 0))


@scenario("coordinator.classic.heartbeat/testHeartbeatUnknownMemberExistingGroup",
          "coordinator.classic.heartbeat/testHeartbeatIllegalGeneration",
          "coordinator.classic.heartbeat/testValidHeartbeat")
def _hb_stable(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    [mid] = h.form_group(1)
    name = case["id"].rsplit("/", 1)[1]
    if "Unknown" in name:
        return err(h.heartbeat("unknown", 1))
    if "Illegal" in name:
        return err(h.heartbeat(mid, 2))
    return err(h.heartbeat(mid, 1))


@scenario("coordinator.classic.heartbeat/testHeartbeatDuringPreparingRebalance")
def _hb_preparing(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    leader, follower = _two_member_group(h)
    h.join(member_id=leader)
    deadline = h.gc.timer_deadline(("heartbeat", "g", follower))
    h.advance(10)
    out = err(h.heartbeat(follower, 1))
    assert deadline is not None and h.gc.timer_deadline(("heartbeat", "g", follower)) == h.now + 10_000
    return out


@scenario("coordinator.classic.heartbeat/testHeartbeatDuringCompletingRebalance")
def _hb_completing(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    leader, follower = _completing_pair(h)
    return err(h.heartbeat(follower, 1))


@scenario("coordinator.classic.heartbeat/testHeartbeatDuringRebalanceCausesRebalanceInProgress")
def _hb_rebalance_in_progress(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    [leader] = h.form_group(1, assign=False)
    assert h.group().is_in(GroupState.COMPLETING_REBALANCE) and h.group().generation_id == 1
    h.join_new(client_id="newcomer")
    assert h.group().is_in(GroupState.PREPARING_REBALANCE)
    return err(h.heartbeat(leader, 1))


@scenario("coordinator.classic.heartbeat/session_timeout")
def _hb_session_timeout(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    [mid] = h.form_group(1, session=6_000)
    h.advance(5_999)
    assert mid in h.group().members
    h.advance(1)
    assert mid not in h.group().members
    assert h.group().is_in(GroupState.EMPTY) and h.group().generation_id == 2  # the rebalance ran
    code = h.heartbeat(mid, 1)
    assert int(code) == case["expected"]["error_code_after"]
    return {}


@scenario("coordinator.classic.heartbeat/heartbeat_maintains_session")
def _hb_keeps(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    [mid] = h.form_group(1, session=6_000)
    for _ in range(10):
        h.advance(5_000)
        assert h.heartbeat(mid, 1) is ErrorCode.none
    assert mid in h.group().members and h.group().is_in(GroupState.STABLE)
    return {}


# --- LeaveGroup ----------------------------------------------------------------------------------

def _leave_result(resp: m.LeaveGroupResponse) -> dict[str, Any]:
    out: dict[str, Any] = {"top_level": err(resp.error), "error": resp.error.name.upper(),
                           "error_code": int(resp.error)}
    if resp.members:
        [member_resp] = resp.members
        out["member"] = err(member_resp.error)
    return out


@scenario("coordinator.classic.leave_group/testLeaveGroupUnknownGroup")
def _leave_unknown_group(case: dict[str, Any]) -> dict[str, Any]:
    resp = Harness().leave(("member", None))
    assert resp.members == ()
    return _leave_result(resp)


@scenario("coordinator.classic.leave_group/testLeaveDeadGroup")
def _leave_dead(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    [mid] = h.form_group(1)
    h.group().transition_to(GroupState.DEAD, 0)
    return _leave_result(h.leave((mid, None)))


@scenario("coordinator.classic.leave_group/testLeaveGroupUnknownMemberIdExistingGroup",
          "coordinator.classic.leave_group/testLeaveGroupWithFencedInstanceId",
          "coordinator.classic.leave_group/testLeaveGroupStaticMemberWithUnknownMemberId",
          "coordinator.classic.leave_group/testStaticMembersUnknownInstanceBatchLeaveGroup")
def _leave_static(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    leader, follower = _static_pair(h)
    name = case["id"].rsplit("/", 1)[1]
    if "UnknownMemberIdExisting" in name:
        resp = h.leave(("unknown-member", None))
    elif "Fenced" in name:
        resp = h.leave((follower, "leader-instance-id"))
    elif "StaticMemberWithUnknownMemberId" in name:
        resp = h.leave(("", "follower-instance-id"))
        assert follower not in h.group().members and h.group().is_in(GroupState.PREPARING_REBALANCE)
    else:
        resp = h.leave(("", "unknown-instance-id"))
    out = _leave_result(resp)
    assert out["top_level"] == err(ErrorCode.none)
    return out


@scenario("coordinator.classic.leave_group/testPendingMembersLeaveGroup")
def _leave_pending(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    leader, follower = _two_member_group(h)
    pending = h.answers[h.join(client_id="pending")].member_id
    assert h.group().is_pending_member(pending)
    t1, t2 = h.join(member_id=leader), h.join(member_id=follower)
    assert h.group().is_in(GroupState.PREPARING_REBALANCE)  # blocked by the pending member id
    out = _leave_result(h.leave((pending, None)))
    out["group_state_after"] = h.group().state.value
    out["pending_join_members_after"] = len(h.group().pending_join_members)
    assert h.last.records == []
    assert h.answers[t1].error is ErrorCode.none and h.answers[t2].error is ErrorCode.none
    return out


@scenario("coordinator.classic.leave_group/testValidLeaveGroup")
def _leave_valid(case: dict[str, Any]) -> dict[str, Any]:
    h = Harness(group_initial_rebalance_delay_ms=0)
    [mid] = h.form_group(1)
    out = _leave_result(h.leave((mid, None)))
    out["group_state_after"] = h.group().state.value
    out["generation_after"] = h.group().generation_id
    return out
