"""Rebalance rounds computed by Apache Kafka's own assignor classes, reproduced exactly by kaflite.

The data (tests/data/kafka-harness-cases.json) comes from tools/assign-harness: random groups (racks,
static members, unequal subscriptions, members leaving and joining, unchanged groups, topic names that
share a java.util.HashMap bucket) run through Kafka's RangeAssignor, RoundRobinAssignor, StickyAssignor,
CooperativeStickyAssignor (with its follow-up rounds) and the group coordinator's UniformAssignor and
RangeAssignor, compiled from Kafka's sources. Every round is replayed here from what Kafka's leader
received, and every member's list must match Kafka's, in order (server assignments are sets: sorted).
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest

from helpers import REPO
from kaflite.assign import PartitionAssignorError, Subscription, TopicPartition, assign_group, get_assignor
from kaflite.assign.javautil import bucket_index, hashmap_order
from kaflite.assign.server import MemberSpec, ServerRangeAssignor, UniformAssignor
from kaflite.assign.types import string_hash
from kaflite.assign.userdata import encode_sticky_user_data

DATA = REPO / "tests" / "data" / "kafka-harness-cases.json"
CLIENT = ("range", "roundrobin", "sticky", "cooperative-sticky")


@cache
def load() -> dict[str, Any]:
    return dict(json.loads(DATA.read_text()))


CASES: list[dict[str, Any]] = load()["cases"]


def _tp(s: str) -> TopicPartition:
    return TopicPartition.parse(s)


def _client_round(case: dict[str, Any], rnd: dict[str, Any]) -> dict[str, list[str]]:
    topics = {t: n for t, n in case["topics"]}
    racks = case.get("partition_racks")
    partition_racks = {_tp(k): v for k, v in racks.items()} if racks else None
    subs: dict[str, Subscription] = {}
    for s in rnd["subscriptions"]:  # join order, as the JoinGroup response lists members
        gen = s["generation_id"]
        ud = s["user_data_hex"]
        subs[s["id"]] = Subscription(
            topics=list(s["topics"]), owned_partitions=[_tp(p) for p in s["owned_partitions"]],
            generation_id=gen if gen >= 0 else None,  # Java's Subscription drops a negative generation
            group_instance_id=s["instance_id"], rack_id=s["rack"],
            user_data=None if ud is None else bytes.fromhex(ud))
    # the leader's HashMap of subscriptions iterates as Java's does
    assert hashmap_order(list(subs), string_hash) == rnd["java_member_order"]
    out = assign_group(get_assignor(case["assignor"]), topics, subs, partition_racks)
    return {m: [str(tp) for tp in out.get(m, [])] for m in rnd["assignment"]}


def _server_round(case: dict[str, Any], rnd: dict[str, Any]) -> dict[str, list[str]]:
    members = {m["id"]: m for m in rnd["members"]}
    # the coordinator's HashMap of members iterates as Java's does
    order = hashmap_order(list(members), string_hash)
    assert order == rnd["java_member_order"]
    specs = {i: MemberSpec(list(members[i]["topics"]), [_tp(p) for p in members[i]["current_assignment"]],
                           members[i]["rack"], members[i]["instance_id"]) for i in order}
    wanted = {t for m in members.values() for t in m["topics"]}
    topics = {t: n for t, n in case["topics"] if t in wanted}
    assignor = UniformAssignor() if case["assignor"] == "uniform" else ServerRangeAssignor()
    out = assignor.assign(specs, topics, rnd["subscription_type"].lower(), case["topic_ids"])
    return {m: [str(tp) for tp in out.get(m, [])] for m in rnd["assignment"]}


def _check_member_side(case: dict[str, Any], rounds: list[dict[str, Any]]) -> None:
    """What kaflite's members would send is what Java's sent: the sticky user data (previous assignment
    grouped by topic in Java HashMap order, then the generation), the cooperative owned partitions."""
    for prev, rnd in zip(rounds, rounds[1:], strict=False):
        for s in rnd["subscriptions"]:
            mine = prev["assignment"].get(s["id"])
            if mine is None:
                continue
            if case["assignor"] == "sticky":
                # the member holds its list as ConsumerProtocol delivered it: grouped by topic, first seen first
                topics = list(dict.fromkeys(p.rsplit("-", 1)[0] for p in mine))
                held = sorted((_tp(p) for p in mine), key=lambda tp: topics.index(tp.topic))
                ud = encode_sticky_user_data(held, prev["generation"])
                assert ud.hex() == s["user_data_hex"], s["id"]
            elif case["assignor"] == "cooperative-sticky":
                assert s["owned_partitions"] == [str(tp) for tp in sorted(_tp(p) for p in mine)]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_kafka_harness_case(case: dict[str, Any]) -> None:
    client = case["assignor"] in CLIENT
    for i, rnd in enumerate(case["rounds"]):
        if "error" in rnd:
            with pytest.raises(PartitionAssignorError):
                _client_round(case, rnd) if client else _server_round(case, rnd)
            continue
        got = _client_round(case, rnd) if client else _server_round(case, rnd)
        assert got == rnd["assignment"], f"round {i} (state {rnd['state']})"
    if client:
        _check_member_side(case, case["rounds"])


def test_harness_data_ledger() -> None:
    """At least 1,000 cases from Kafka's classes, every assignor well represented, cooperative follow-ups
    and colliding topic names included (so the data exercises what it is meant to)."""
    data = load()
    assert data["meta"]["kafka_commit"] and len(CASES) >= 1000
    by_kind: dict[str, int] = {}
    for c in CASES:
        by_kind[c["assignor"]] = by_kind.get(c["assignor"], 0) + 1
    assert set(by_kind) == {*CLIENT, "uniform", "server-range"} and min(by_kind.values()) >= 150
    follow_ups = sum(1 for c in CASES if c["assignor"] == "cooperative-sticky"
                     for a, b in zip(c["rounds"], c["rounds"][1:], strict=False) if a["state"] == b["state"])
    assert follow_ups >= 50
    colliding = 0
    for c in CASES:
        names = [t for t, _ in c["topics"]]
        buckets = [bucket_index(string_hash(t), 16) for t in names]
        colliding += len(set(buckets)) < len(buckets)
    assert colliding >= 300
    racks = sum(1 for c in CASES if c.get("partition_racks"))
    static = sum(1 for c in CASES for r in c["rounds"][:1]
                 for s in r.get("subscriptions", r.get("members", [])) if s["instance_id"])
    assert racks >= 200 and static >= 100
