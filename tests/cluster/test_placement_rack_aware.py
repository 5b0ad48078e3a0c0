"""Kafka's rack-aware replica placement (cluster.placement), against cases worked out by hand from
Kafka's algorithm (AdminUtils.assignReplicasToBrokersRackAware) and its properties."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kaflite.cluster.placement import (
    assign_replicas,
    assign_replicas_rack_aware,
    assign_replicas_to_brokers,
    rack_alternated_brokers,
)
from kaflite.protocol.errors import ErrorCode, KafkaError

RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_alternated_list() -> None:
    # racks sorted (rack1, rack2, rack3), one broker of each in turn: 0 3 1, then 5 4 2
    assert rack_alternated_brokers(RACKS) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_brokers({b: r for b, r in RACKS.items() if b != 5}) == [0, 3, 1, 4, 2]
    # uneven racks: the exhausted rack is skipped
    assert rack_alternated_brokers({0: "a", 1: "a", 2: "a", 3: "b"}) == [0, 3, 1, 2]


def test_fixed_start_by_hand() -> None:
    # list [0, 3, 1, 5, 4, 2]; start 0, shift 0: partition p starts at index p; followers at
    # first + 1 + (shift*racks + k) % 5. At p6 the shift becomes 1 (x 3 racks): followers at +4, +5.
    expected = {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }
    assert assign_replicas_rack_aware(7, 3, RACKS, fixed_start_index=0) == expected
    assert assign_replicas_to_brokers(7, 3, RACKS, fixed_start_index=0) == expected


def test_skips_a_rack_that_already_has_a_replica() -> None:
    # racks a: 0 1 2, b: 3 -> list [0, 3, 1, 2]. p1 starts at 3 (rack b); its next candidate by index
    # (1 + 1 + 0) = 2 is broker 1 (rack a, free) -> taken; RF 3: candidate 3 -> broker 2, rack a again,
    # but every rack already has a replica, so it is taken.
    racks = {0: "a", 1: "a", 2: "a", 3: "b"}
    assert assign_replicas_rack_aware(2, 3, racks, fixed_start_index=0) == {0: [0, 3, 1], 1: [3, 1, 2]}
    # RF 2: p2 leads on index 2 (broker 1, rack a); candidates at index 3 (broker 2) and 0 (broker 0)
    # are rack a too, skipped while rack b holds nothing; index 1 (broker 3, rack b) is taken.
    # p3 leads on broker 2 (rack a): index 0 (broker 0, rack a) skipped, index 1 (broker 3) taken.
    assert assign_replicas_rack_aware(4, 2, racks, fixed_start_index=0) == {
        0: [0, 3],
        1: [3, 1],
        2: [1, 3],
        3: [2, 3],
    }


def test_choice_between_aware_and_unaware() -> None:
    plain = {0: None, 1: None, 2: None}
    assert assign_replicas_to_brokers(5, 2, plain, fixed_start_index=1) == assign_replicas(
        5, 2, [0, 1, 2], fixed_start_index=1
    )
    with pytest.raises(KafkaError) as e:
        assign_replicas_to_brokers(1, 1, {0: "a", 1: None})
    assert e.value.code == ErrorCode.invalid_replica_assignment and "[1]" in e.value.message
    with pytest.raises(KafkaError) as e:
        assign_replicas_rack_aware(1, 3, {0: "a", 1: "b"})
    assert e.value.code == ErrorCode.invalid_replication_factor


def test_seeded_random_start_is_reproducible() -> None:
    a = assign_replicas_rack_aware(12, 3, RACKS, rng=random.Random(42))
    b = assign_replicas_rack_aware(12, 3, RACKS, rng=random.Random(42))
    assert a == b


@given(
    n=st.integers(1, 40),
    racks=st.dictionaries(
        st.integers(0, 30), st.sampled_from(["r1", "r2", "r3", "r4"]), min_size=1, max_size=9
    ),
    rf=st.integers(1, 4),
    seed=st.integers(0, 10**6),
)
def test_rack_aware_properties(n: int, racks: dict[int, str], rf: int, seed: int) -> None:
    rf = min(rf, len(racks))
    placed = assign_replicas_rack_aware(n, rf, racks, rng=random.Random(seed))
    assert sorted(placed) == list(range(n))
    n_racks = len(set(racks.values()))
    for replicas in placed.values():
        assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= set(racks)
        # as many racks as possible
        assert len({racks[r] for r in replicas}) == min(rf, n_racks)
    leaders = Counter(r[0] for r in placed.values())
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in racks) <= 1
