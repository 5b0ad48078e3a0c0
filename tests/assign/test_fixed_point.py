"""Rebalancing an unchanged group settles: the fixed-point property, on random groups (hypothesis).

What Kafka's assignors do — and kaflite, being exact to them, does (tools/assign-harness checks the
same groups against Kafka's Java classes):
- without racks, every strategy: a rebalance of an unchanged group, every member reporting what it
  owns, hands everybody exactly what they had (cooperative-sticky: no revocation, no follow-up round);
  a fresh cooperative group is settled after at most one follow-up round;
- with racks (KIP-881) and equal subscriptions: the first rebalance of an unchanged group may still
  move partitions towards their racks (once: cooperative-sticky in one revoke + follow-up), and from
  then on nothing changes;
- with racks and unequal subscriptions the sticky assignors' general path does NOT always settle in
  Kafka: a few groups in a thousand (docs/assignors.md) move the same partitions back and forth in every
  rebalance — confirmed with Kafka's own classes (the `h-nonconvergent-*` harness cases, reproduced
  exactly in test_harness_cases.py, and pinned below). kaflite follows Kafka there; for those groups
  this file checks validity and cooperative safety of every round instead.
Range, round robin and the server-side assignors settle at once in every case.
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import REPO
from kaflite.assign.simulate import ALL_STRATEGIES, Group, Member, Round, rebalance
from kaflite.assign.types import TopicPartition

RACKS = ("a", "b", "c")
STICKY = ("sticky", "cooperative-sticky")
# 2,100 examples in all here (about 25 s of CPU); the slow-marked test below runs 400 more groups in the
# default suite and 2,000 under KAFLITE_SOAK=1 (2,000 cost ~35 s of a suite that must stay under 30 minutes)
SOAK = os.environ.get("KAFLITE_SOAK", "") not in ("", "0")
EXAMPLES = settings(max_examples=700, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MANY = settings(max_examples=2000 if SOAK else 400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def groups(draw: st.DrawFn, racks: bool, equal: bool | None = None) -> Group:
    topics = {f"t{i}": draw(st.integers(1, 12)) for i in range(draw(st.integers(1, 5)))}
    names = list(topics)
    same = draw(st.booleans()) if equal is None else equal
    common = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
    members: dict[str, Member] = {}
    for i in range(draw(st.integers(1, 8))):
        mine = common if same else draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
        rack = draw(st.sampled_from((None,) + RACKS)) if racks else None
        static = draw(st.booleans())
        members[draw(st.sampled_from(("m", "consumer-", "C"))) + str(i)] = Member(
            list(mine), rack, f"instance-{draw(st.integers(0, 99))}-{i}" if static else None)
    partition_racks: dict[TopicPartition, list[str | None]] = {}
    if racks:
        for t, n in topics.items():
            for p in range(n):
                partition_racks[TopicPartition(t, p)] = list(draw(st.lists(st.sampled_from(RACKS), min_size=1,
                                                                             max_size=3, unique=True)))
    return Group(topics, members, partition_racks)


def _sets(a: dict[str, list[TopicPartition]]) -> dict[str, list[TopicPartition]]:
    return {m: sorted(v) for m, v in a.items()}


def _valid(group: Group, assignment: dict[str, list[TopicPartition]]) -> None:
    seen: set[TopicPartition] = set()
    for m, tps in assignment.items():
        for tp in tps:
            assert tp.topic in group.members[m].topics and tp not in seen
            seen.add(tp)


def _cooperative_safe(before: dict[str, list[TopicPartition]], rounds: list[Round]) -> None:
    """No partition is revoked from one member and given to another in the same round."""
    owned = {m: set(v) for m, v in before.items()}
    for rnd in rounds:
        revoked = {tp for m, tps in owned.items() for tp in tps if tp not in set(rnd.assignment.get(m, []))}
        added = {tp for m, tps in rnd.assignment.items() for tp in tps if tp not in owned.get(m, set())}
        assert not revoked & added
        owned = {m: set(v) for m, v in rnd.assignment.items()}


def _settled(strategy: str, group: Group, previous: dict[str, list[TopicPartition]], generation: int) -> bool:
    again = rebalance(strategy, group, previous, generation)
    return len(again.rounds) == 1 and _sets(again.final) == _sets(previous)


@EXAMPLES
@given(groups(racks=False))
def test_without_racks_an_unchanged_group_is_a_fixed_point_at_once(group: Group) -> None:
    for strategy in ALL_STRATEGIES:
        first = rebalance(strategy, group)
        _valid(group, first.final)
        if strategy == "cooperative-sticky":
            assert len(first.rounds) <= 2, "a fresh group needs at most one follow-up round"
        assert _settled(strategy, group, first.final, 5), strategy


@EXAMPLES
@given(groups(racks=True, equal=True))
def test_with_racks_and_equal_subscriptions_at_most_one_rebalance_moves_anything(group: Group) -> None:
    for strategy in ALL_STRATEGIES:
        first = rebalance(strategy, group)
        if strategy == "cooperative-sticky":
            assert len(first.rounds) <= 2
        second = rebalance(strategy, group, first.final, 5)
        if strategy not in STICKY:
            assert len(second.rounds) == 1 and _sets(second.final) == _sets(first.final), strategy
        if strategy == "cooperative-sticky":
            assert len(second.rounds) <= 2  # a move towards a rack: revoke, then one follow-up
            _cooperative_safe(first.final, second.rounds)
        assert _settled(strategy, group, second.final, 10), strategy


@EXAMPLES
@given(groups(racks=True, equal=False))
def test_with_racks_and_unequal_subscriptions(group: Group) -> None:
    """Range, round robin and the server-side assignors settle at once; the sticky ones stay valid and
    cooperative-safe in every round (Kafka's general path may keep moving partitions: see the docstring)."""
    for strategy in ALL_STRATEGIES:
        first = rebalance(strategy, group)
        _valid(group, first.final)
        if strategy not in STICKY:
            assert _settled(strategy, group, first.final, 5), strategy
            continue
        previous, generation = first.final, 5
        for _ in range(2):
            nxt = rebalance(strategy, group, previous, generation)
            _valid(group, nxt.final)
            if strategy == "cooperative-sticky":
                _cooperative_safe(previous, nxt.rounds)
            previous, generation = nxt.final, generation + len(nxt.rounds)


@pytest.mark.slow
@MANY
@given(st.booleans().flatmap(lambda racks: groups(racks=racks, equal=True if racks else None)))
def test_fixed_point_many_more_groups(group: Group) -> None:
    """The same properties on 400 more groups, 2,000 under KAFLITE_SOAK=1 (without racks: at once; with
    racks and equal subscriptions: after at most one moving rebalance)."""
    for strategy in ALL_STRATEGIES:
        first = rebalance(strategy, group)
        if strategy == "cooperative-sticky":
            assert len(first.rounds) <= 2
        second = rebalance(strategy, group, first.final, 5)
        if not group.partition_racks or strategy not in STICKY:
            assert len(second.rounds) == 1 and _sets(second.final) == _sets(first.final), strategy
        assert _settled(strategy, group, second.final, 10), strategy


def _harness_group(case_id: str) -> Group:
    data = json.loads((REPO / "tests" / "data" / "kafka-harness-cases.json").read_text())
    case = next(c for c in data["cases"] if c["id"] == case_id)
    subs = case["rounds"][0]["subscriptions"]
    return Group({t: n for t, n in case["topics"]},
                 {s["id"]: Member(list(s["topics"]), s["rack"], s["instance_id"]) for s in subs},
                 {TopicPartition.parse(k): v for k, v in case["partition_racks"].items()})


def test_kafka_never_settles_this_rack_aware_group_and_neither_does_kaflite() -> None:
    """A group Kafka's own sticky assignors never settle (h-nonconvergent-*, run through Kafka's classes
    with six unchanged states): eager sticky moves 3 partitions in every rebalance, cooperative-sticky
    revokes 3 and hands them back in every one. kaflite reproduces it (exactly, round by round, in
    test_harness_cases.py); this pins the behaviour so that a change to it is a deliberate one."""
    group = _harness_group("h-nonconvergent-sticky")
    previous = rebalance("sticky", group).final
    for generation in range(2, 6):
        nxt = rebalance("sticky", group, previous, generation).final
        moved = sum(1 for m, tps in nxt.items() for tp in tps if tp not in previous.get(m, []))
        assert moved > 0  # Kafka: 2 in the first repeat, then 3 every time
        previous = nxt
    previous = rebalance("cooperative-sticky", group).final
    generation = 2
    for _ in range(4):
        again = rebalance("cooperative-sticky", group, previous, generation)
        # (Kafka: 3 rounds in the first repeat, then revoke 3 + one follow-up every time)
        assert len(again.rounds) >= 2 and any(again.rounds[0].revoked.values())
        _cooperative_safe(previous, again.rounds)
        previous, generation = again.final, generation + len(again.rounds)
