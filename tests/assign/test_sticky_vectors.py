"""Reference vectors of Kafka's StickyAssignor and CooperativeStickyAssignor.

exact_ordered: every member's list in order; exact_set: every member's set; partial: the partitions the
Kafka test pins (stored as the expected assignment) as sets, plus validity; properties: validity and
balance as Kafka's verifyValidityAndBalance checks them (the stored assignment may depend on Java's
HashMap order, which Kafka's own test does not pin).
"""

from __future__ import annotations

from typing import Any

import pytest

from assign._vectors import as_strings, racks_of, subscriptions_of
from helpers import vectors_of_kind
from kaflite.assign.sticky import CooperativeStickyAssignor, StickyAssignor

# Truncated cases (inputs too large to store) are regenerated in test_sticky_large.py.
STICKY = [c for c in vectors_of_kind("assignor.client.sticky") if not c["input"].get("truncated")]
COOP = [c for c in vectors_of_kind("assignor.client.cooperative-sticky") if not c["input"].get("truncated")]


def run(assignor: Any, inp: dict[str, Any]) -> tuple[dict[str, list[str]], Any]:
    subs = subscriptions_of(inp)
    racks = None if inp.get("entry_point") == "assign" else racks_of(inp)
    res = assignor.assign_with_details(dict(inp["partitions_per_topic"]), subs, racks)
    return as_strings(res.assignment), res


def verify_validity_and_balance(inp: dict[str, Any], got: dict[str, list[str]]) -> None:
    subs = inp["subscriptions"]
    seen: dict[str, str] = {}
    for member, parts in got.items():
        for p in parts:
            topic = p.rsplit("-", 1)[0]
            assert topic in subs[member]["topics"], f"{member} got {p} without subscribing to {topic}"
            assert p not in seen, f"{p} assigned to {seen[p]} and {member}"
            seen[p] = member
    members = sorted(got)
    for i, a in enumerate(members):
        for b in members[i + 1:]:
            la, lb = len(got[a]), len(got[b])
            if abs(la - lb) > 1:
                big, small = (a, b) if la > lb else (b, a)
                small_topics = set(subs[small]["topics"])
                shared = [p for p in got[big] if p.rsplit("-", 1)[0] in small_topics]
                assert not shared, f"{small} ({len(got[small])}) could take {shared[0]} from {big} ({len(got[big])})"


def cooperative_final_state(inp: dict[str, Any], got: dict[str, list[str]]) -> dict[str, list[str]]:
    """Kafka's CooperativeStickyAssignorTest: while something was revoked, members rejoin owning what they
    were given (one generation later) and the assignor runs again; at most 4 follow-ups."""
    from kaflite.assign.types import Subscription, TopicPartition

    subs = subscriptions_of(inp)
    racks = racks_of(inp)
    for _ in range(5):
        revoked = any(set(s.owned_partitions) - {TopicPartition.parse(p) for p in got[m]} for m, s in subs.items())
        if not revoked:
            return got
        subs = {m: Subscription(topics=s.topics, owned_partitions=[TopicPartition.parse(p) for p in got[m]],
                                generation_id=1, rack_id=s.rack_id) for m, s in subs.items()}
        a = CooperativeStickyAssignor(prefer_rack_aware_logic=inp.get("prefer_rack_aware_logic", False))
        got = as_strings(a.assign_partitions(dict(inp["partitions_per_topic"]), subs, racks))
    raise AssertionError("still revoking after 4 follow-up rebalances")


def check(case: dict[str, Any], got: dict[str, list[str]], res: Any) -> None:
    exp = case["expected"]
    pinned = exp["pinned_by_test"]
    assert set(got) == set(exp["assignment"])
    if pinned == "exact_ordered":
        assert got == exp["assignment"]
    elif pinned in ("exact_set", "partial"):
        assert {m: sorted(v) for m, v in got.items()} == {m: sorted(v) for m, v in exp["assignment"].items()}
    else:
        assert pinned == "properties"
        if "cooperative" in case["kind"]:
            got = cooperative_final_state(case["input"], got)
        verify_validity_and_balance(case["input"], got)
    if pinned != "properties" and "partitions_transferring_ownership" in exp and res.used_constrained_path:
        assert {str(k): v for k, v in res.partitions_transferring_ownership.items()} == exp["partitions_transferring_ownership"]


@pytest.mark.parametrize("case", STICKY, ids=[c["id"] for c in STICKY])
def test_sticky_vector(case: dict[str, Any]) -> None:
    a = StickyAssignor(prefer_rack_aware_logic=case["input"].get("prefer_rack_aware_logic", False))
    got, res = run(a, case["input"])
    check(case, got, res)


@pytest.mark.parametrize("case", COOP, ids=[c["id"] for c in COOP])
def test_cooperative_sticky_vector(case: dict[str, Any]) -> None:
    a = CooperativeStickyAssignor(prefer_rack_aware_logic=case["input"].get("prefer_rack_aware_logic", False))
    got, res = run(a, case["input"])
    check(case, got, res)
    assert_cooperative_validity(case["input"]["subscriptions"], got)


def assert_cooperative_validity(subs: dict[str, Any], got: dict[str, list[str]]) -> bool:
    """Kafka's verifyCooperativeValidity: no partition is both revoked from a member and added to another
    in the same rebalance (so it never has two owners). Returns whether anything is revoked."""
    added: set[str] = set()
    revoked: set[str] = set()
    for member, parts in got.items():
        owned = set(subs[member]["owned_partitions"])
        added |= set(parts) - owned
        revoked |= owned - set(parts)
    assert not added & revoked, f"handed over in the same round: {sorted(added & revoked)}"
    return bool(revoked)


def test_vector_counts() -> None:
    """Ledger: 509 stored sticky/cooperative cases run here; the 24 truncated ones in test_sticky_large."""
    total = len(vectors_of_kind("assignor.client.sticky")) + len(vectors_of_kind("assignor.client.cooperative-sticky"))
    assert len(STICKY) + len(COOP) == 509 and total == 533
