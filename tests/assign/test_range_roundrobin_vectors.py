"""Reference vectors of Kafka's client RangeAssignor and RoundRobinAssignor, reproduced exactly."""

from __future__ import annotations

from typing import Any

import pytest

from assign._vectors import run_client_assignor
from helpers import vectors_of_kind
from kaflite.assign.range import RangeAssignor
from kaflite.assign.roundrobin import RoundRobinAssignor

RANGE = vectors_of_kind("assignor.client.range")
ROUNDROBIN = vectors_of_kind("assignor.client.roundrobin")


def _check(case: dict[str, Any], got: dict[str, list[str]]) -> None:
    exp = case["expected"]["assignment"]
    pinned = case["expected"]["pinned_by_test"]
    assert set(got) == set(exp)
    if pinned == "exact_ordered":
        assert got == exp
    else:
        assert {m: sorted(v) for m, v in got.items()} == {m: sorted(v) for m, v in exp.items()}


@pytest.mark.parametrize("case", RANGE, ids=[c["id"] for c in RANGE])
def test_range_vector(case: dict[str, Any]) -> None:
    a = RangeAssignor(prefer_rack_aware_logic=case["input"].get("prefer_rack_aware_logic", False))
    _check(case, run_client_assignor(a, case["input"]))


@pytest.mark.parametrize("case", ROUNDROBIN, ids=[c["id"] for c in ROUNDROBIN])
def test_roundrobin_vector(case: dict[str, Any]) -> None:
    _check(case, run_client_assignor(RoundRobinAssignor(), case["input"]))


def test_vector_counts() -> None:
    assert len(RANGE) == 97 and len(ROUNDROBIN) == 15
