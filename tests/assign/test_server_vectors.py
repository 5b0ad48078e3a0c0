"""Reference vectors of Kafka's KIP-848 server-side assignors (uniform, range)."""

from __future__ import annotations

from typing import Any

import pytest

from assign._vectors import tp
from helpers import vectors_of_kind
from kaflite.assign import PartitionAssignorError
from kaflite.assign.server import MemberSpec, ServerRangeAssignor, UniformAssignor

UNIFORM = vectors_of_kind("assignor.server.uniform")
RANGE = vectors_of_kind("assignor.server.range")

# The fixed topic ids of Kafka's assignor tests: Java iterates HashSet<Uuid>, so they fix the order.
TOPIC_IDS = {
    "topic1": "T1-A4s3VTwiI5CTbEp6POw",
    "topic2": "T2-B4s3VTwiI5YHbPp6YUe",
    "topic3": "T3-CU8fVTLCz5YMkLoDQsa",
    "topic4": "T4-Tw9fVTLCz5HbPp6YQsa",
}


def members_of(inp: dict[str, Any]) -> dict[str, MemberSpec]:
    return {
        m: MemberSpec(subscribed_topics=list(s["subscribed_topics"]),
                      current_assignment=[tp(p) for p in s["current_assignment"]],
                      rack_id=s["rack_id"], instance_id=s["instance_id"])
        for m, s in inp["members"].items()
    }


def run(assignor: Any, inp: dict[str, Any]) -> dict[str, list[str]]:
    out = assignor.assign(members_of(inp), inp["topics"], inp["subscription_type"].lower(), TOPIC_IDS)
    return {m: [str(p) for p in ps] for m, ps in out.items()}


def balanced_and_valid(inp: dict[str, Any], got: dict[str, list[str]]) -> None:
    seen: set[str] = set()
    for m, parts in got.items():
        for p in parts:
            assert p.rsplit("-", 1)[0] in inp["members"][m]["subscribed_topics"]
            assert p not in seen
            seen.add(p)
    everything = {f"{t}-{p}" for t, n in inp["topics"].items() for p in range(n)
                  if any(t in s["subscribed_topics"] for s in inp["members"].values())}
    assert seen == everything
    sizes = [len(v) for v in got.values()]
    assert max(sizes) - min(sizes) <= 1


def check(case: dict[str, Any], assignor: Any) -> None:
    exp = case["expected"]
    if exp["pinned_by_test"] == "exception":
        with pytest.raises(PartitionAssignorError):
            run(assignor, case["input"])
        return
    got = run(assignor, case["input"])
    if exp["pinned_by_test"] == "properties":
        balanced_and_valid(case["input"], got)
        return
    want = {m: sorted(v) for m, v in exp["assignment"].items()}
    assert {m: sorted(v) for m, v in got.items() if v or m in want} == want


@pytest.mark.parametrize("case", UNIFORM, ids=[c["id"] for c in UNIFORM])
def test_uniform_vector(case: dict[str, Any]) -> None:
    check(case, UniformAssignor())


@pytest.mark.parametrize("case", RANGE, ids=[c["id"] for c in RANGE])
def test_server_range_vector(case: dict[str, Any]) -> None:
    check(case, ServerRangeAssignor())


def test_server_range_static_member_keeps_partitions_relation() -> None:
    """relation cases: a static member rejoining under a new member id gets exactly its old partitions."""
    by_test: dict[str, list[dict[str, Any]]] = {}
    for c in RANGE:
        if c["expected"]["pinned_by_test"] == "relation":
            by_test.setdefault(c["source_test"], []).append(c)
    assert len(by_test) == 2
    for calls in by_test.values():
        before = run(ServerRangeAssignor(), calls[0]["input"])
        after = run(ServerRangeAssignor(), calls[1]["input"])
        inst_before = {calls[0]["input"]["members"][m]["instance_id"] or m: v for m, v in before.items()}
        inst_after = {calls[1]["input"]["members"][m]["instance_id"] or m: v for m, v in after.items()}
        assert inst_before == inst_after
