"""Replica placement (cluster.placement): Kafka's rack-unaware algorithm and the textbook round robin."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kaflite.cluster.placement import assign_replicas, assign_replicas_round_robin
from kaflite.protocol.errors import ErrorCode, KafkaError


def test_kafka_example_five_brokers_ten_partitions() -> None:
    # Kafka's AdminUtilsTest.testReplicaAssignment (fixed start index 0)
    expected = {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2],
    }
    assert assign_replicas(10, 3, [4, 2, 0, 3, 1], fixed_start_index=0) == expected


def test_round_robin_textbook_rule() -> None:
    assert assign_replicas_round_robin(4, 2, [2, 0, 1]) == {0: [0, 1], 1: [1, 2], 2: [2, 0], 3: [0, 1]}


@given(
    n=st.integers(1, 60), brokers=st.sets(st.integers(0, 50), min_size=1, max_size=8), seed=st.integers(0, 10**6)
)
def test_properties(n: int, brokers: set[int], seed: int) -> None:
    rf = min(len(brokers), 3)
    placed = assign_replicas(n, rf, brokers, rng=random.Random(seed))
    assert sorted(placed) == list(range(n))
    for replicas in placed.values():
        assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= brokers
    leaders = Counter(r[0] for r in placed.values())
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in brokers) <= 1  # leaders spread evenly


def test_refusals() -> None:
    with pytest.raises(KafkaError) as e:
        assign_replicas(3, 2, [0])
    assert e.value.code == ErrorCode.invalid_replication_factor
    with pytest.raises(KafkaError) as e:
        assign_replicas(0, 1, [0])
    assert e.value.code == ErrorCode.invalid_partitions
