"""murmur2, Utils.abs and the producer partitioners against Kafka's reference vectors (S-4..S-12, E-7)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import vectors_of_kind
from kaflite.assign import java_string_hashcode, murmur2, partition_for_key, to_positive, utils_abs
from kaflite.assign.partitioners import (
    BuiltInPartitioner,
    DefaultPartitioner,
    InvalidRecordError,
    MyPartition,
    PartitionMeta,
    RoundRobinPartitioner,
    ScalaProducerPartitioner,
    StickyPartitionCache,
    client_partition,
    fnv1a_32,
    fnv1a_abs,
    librdkafka_consistent,
    librdkafka_fnv1a,
    load_stats,
    sarama_hash,
    validate_record,
)

MURMUR = vectors_of_kind("murmur2")
ABS = vectors_of_kind("utils.abs")
FOR_KEY = vectors_of_kind("partitioner.partition_for_key")
OFFSETS = vectors_of_kind("coordinator.offsets_topic_partition")


def seq(start: int = 0) -> Any:
    counter = itertools.count(start)
    return lambda: next(counter)


def metas(spec: list[dict[str, Any]]) -> list[PartitionMeta]:
    return [PartitionMeta(p["partition"], p["leader"]) for p in spec]


@pytest.mark.parametrize("case", MURMUR, ids=[c["id"] for c in MURMUR])
def test_murmur2_vector(case: dict[str, Any]) -> None:
    assert murmur2(bytes.fromhex(case["input"]["key_hex"])) == case["expected"]["murmur2"]


@pytest.mark.parametrize("case", ABS, ids=[c["id"] for c in ABS])
def test_utils_abs_vector(case: dict[str, Any]) -> None:
    assert utils_abs(case["input"]["n"]) == case["expected"]["abs"]


@pytest.mark.parametrize("case", FOR_KEY, ids=[c["id"] for c in FOR_KEY])
def test_partition_for_key_vector(case: dict[str, Any]) -> None:
    key = bytes.fromhex(case["input"]["key_hex"])
    exp = case["expected"]
    assert murmur2(key) == exp["murmur2"]
    assert to_positive(murmur2(key)) == exp["to_positive"]
    for n, p in exp["partition_by_num_partitions"].items():
        assert partition_for_key(key, int(n)) == p


@pytest.mark.parametrize("case", OFFSETS, ids=[c["id"] for c in OFFSETS])
def test_offsets_topic_partition_vector(case: dict[str, Any]) -> None:
    """The coordinator's choice uses our java_string_hashcode + utils_abs (S-22)."""
    inp, exp = case["input"], case["expected"]
    if "java_string_hashcode" in exp:
        assert java_string_hashcode(inp["group_id"]) == exp["java_string_hashcode"]
    parts = exp.get("partition")
    if isinstance(parts, dict):
        for n, p in parts.items():
            assert utils_abs(java_string_hashcode(inp["group_id"])) % int(n) == p
    elif isinstance(parts, int):
        n = inp["offsets_topic_num_partitions"]
        n = n[0] if isinstance(n, list) else n
        assert utils_abs(java_string_hashcode(inp["group_id"])) % n == parts


def test_e7_group_test_lands_on_partition_48() -> None:
    assert utils_abs(java_string_hashcode("test")) % 50 == 48


def test_to_positive_is_not_abs() -> None:
    assert to_positive(-2147483648) == 0
    assert to_positive(-1) == 0x7FFFFFFF
    assert utils_abs(-2147483648) == 0


@given(st.binary(max_size=64), st.integers(1, 1000))
def test_partition_for_key_in_range(key: bytes, n: int) -> None:
    p = partition_for_key(key, n)
    assert 0 <= p < n
    assert p == partition_for_key(key, n)
    assert client_partition("librdkafka-murmur2", key, n) == p


@given(st.text(max_size=40))
def test_java_string_hashcode_matches_definition(s: str) -> None:
    units = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (h * 31 + int.from_bytes(units[i:i + 2], "big")) % 2**32
    assert java_string_hashcode(s) == (h - 2**32 if h >= 2**31 else h)


def test_default_partitioner_vector() -> None:
    (case,) = vectors_of_kind("partitioner.default")
    inp = case["input"]
    part = DefaultPartitioner()
    got = {part.partition(inp["topic"], inp["key_utf8"].encode(), metas(inp["partitions"])) for _ in range(inp["calls"])}
    assert got == {case["expected"]["partition"]}


def test_default_partitioner_round_robin_over_available() -> None:
    ps = [PartitionMeta(0, 0), PartitionMeta(1, None), PartitionMeta(2, 1)]
    part = DefaultPartitioner(counter_start=lambda _t: 0)
    assert [part.partition("t", None, ps) for _ in range(4)] == [0, 2, 0, 2]
    none_available = [PartitionMeta(0, None), PartitionMeta(1, None)]
    assert [part.partition("u", None, none_available) for _ in range(3)] == [0, 1, 0]
    assert part.partition("t", b"k", ps, explicit=1) == 1


def test_roundrobin_partitioner_unavailable_vector() -> None:
    case = next(c for c in vectors_of_kind("partitioner.roundrobin") if "partitions_in_metadata_order" in c["input"])
    inp, exp = case["input"], case["expected"]
    rr = RoundRobinPartitioner()
    chosen = [rr.partition(inp["topic"], None, metas(inp["partitions_in_metadata_order"])) for _ in range(inp["calls"])]
    assert chosen[:6] == exp["reference_sequence_first_6"]
    assert {str(p): chosen.count(p) for p in set(chosen)} == exp["counts"]
    assert not set(exp["never_chosen"]) & set(chosen)


@pytest.mark.parametrize("key", [b"key", None])
def test_roundrobin_partitioner_per_topic_counter_vector(key: bytes | None) -> None:
    cases = [c for c in vectors_of_kind("partitioner.roundrobin") if "topicA_partitions" in c["input"]]
    case = next(c for c in cases if (c["input"]["key_utf8"] is None) == (key is None))
    inp = case["input"]
    rr = RoundRobinPartitioner()
    counts = dict.fromkeys(range(inp["topicA_partitions"]), 0)
    for i in range(30):
        if i % 5 == 0:
            assert rr.partition("topicB", key, inp["topicB_partitions"]) == 0
        counts[rr.partition("topicA", key, inp["topicA_partitions"])] += 1
    assert {str(k): v for k, v in counts.items()} == case["expected"]["topicA_counts"]


def test_builtin_sticky_batch_size_must_be_positive_vector() -> None:
    (case,) = [c for c in vectors_of_kind("partitioner.builtin_sticky") if c["id"].endswith("MoreThatZero")]
    for size in case["input"]["sticky_batch_size"]:
        if case["expected"][str(size)] == "IllegalArgumentException":
            with pytest.raises(ValueError, match="batch size"):
                BuiltInPartitioner("t", size)
        else:
            BuiltInPartitioner("t", size)


def test_builtin_sticky_partitioning_vector() -> None:
    """testStickyPartitioning: stay for stickyBatchSize bytes, then switch; sequential random."""
    (case,) = [c for c in vectors_of_kind("partitioner.builtin_sticky") if c["id"].endswith("testStickyPartitioning")]
    inp = case["input"]
    n_a, n_b = len(inp["topicA_partitions"]), len(inp["topicB_partitions"])
    a = BuiltInPartitioner("A", inp["sticky_batch_size"]["A"], seq())
    b = BuiltInPartitioner("B", inp["sticky_batch_size"]["B"], seq())
    seen = []
    for _ in range(inp["sticky_batch_size"]["A"]):
        seen.append(a.peek_partition(n_a))
        a.update(1, n_a, enable_switch=True)
    assert seen == [0] * inp["sticky_batch_size"]["A"]  # "first partition = available[0 % 3] = 0"
    assert a.peek_partition(n_a) == 1  # "then 1"
    for _ in range(10):
        assert b.peek_partition(n_b) == 0
        b.update(1, n_b, True)


def test_builtin_unavailable_partitions_vector() -> None:
    a = BuiltInPartitioner("A", 1)
    ps_a = [PartitionMeta(0, 0), PartitionMeta(1, None), PartitionMeta(2, 2)]
    chosen = set()
    for _ in range(101):
        chosen.add(a.peek_partition(ps_a))
        a.update(1, ps_a, True)
    assert 1 not in chosen and len(chosen) == 2
    b = BuiltInPartitioner("B", 1)
    c = BuiltInPartitioner("C", 1)
    for _ in range(20):
        assert b.peek_partition([PartitionMeta(0, None), PartitionMeta(1, 0)]) == 1
        b.update(1, [PartitionMeta(0, None), PartitionMeta(1, 0)], True)
        assert c.peek_partition([PartitionMeta(0, None)]) == 0
        c.update(1, [PartitionMeta(0, None)], True)


def test_builtin_adaptive_partitions_vector() -> None:
    case = next(c for c in vectors_of_kind("partitioner.builtin_adaptive") if "cumulative_frequency_table" in c["expected"])
    inp, exp = case["input"], case["expected"]
    part = BuiltInPartitioner("t", inp["sticky_batch_size"], seq())
    part.update_partition_load_stats(inp["queue_sizes"], inp["partition_ids"])
    assert part.cumulative_frequency_table == exp["cumulative_frequency_table"]
    freq = [0] * len(inp["partition_ids"])
    n = len(inp["partition_ids"])
    for _ in range(2 * exp["load_stats_range_end"]):
        freq[part.peek_partition(n)] += 1
        part.update(1, n, True)
    assert freq == exp["frequencies"]


def test_builtin_adaptive_record_accumulator_vector() -> None:
    case = next(c for c in vectors_of_kind("partitioner.builtin_adaptive") if "expected_frequencies_per_cycle" in c["expected"])
    inp, exp = case["input"], case["expected"]
    part = BuiltInPartitioner("t", 1, seq())
    part.update_partition_load_stats(inp["queue_sizes"], [0, 1, 2])
    cycle = sum(exp["expected_frequencies_per_cycle"])
    freq = [0, 0, 0]
    for _ in range(exp["cycles"] * cycle):
        freq[part.peek_partition(3)] += 1
        part.update(1, 3, True)
    assert freq == [f * exp["cycles"] for f in exp["expected_frequencies_per_cycle"]]
    # node 0 (partitions 0 and 1) slower than partitioner.availability.timeout.ms: only partition 2 remains
    sizes, ids, length = load_stats(inp["queue_sizes"], [0, 1, 2], [200, 200, 0], inp["partitioner_availability_timeout_ms"])
    part.update_partition_load_stats(sizes, ids, length)
    part.update(1, 3, True)  # the next sticky choice already sees the new stats
    for _ in range(10):
        assert part.peek_partition(3) == 2
        part.update(1, 3, True)


def test_uniform_builtin_partitioner_vector() -> None:
    """testUniformBuiltInPartitioner: switch only once the batch is complete (or at 2 * batch.size).

    A tiny accumulator: one open batch per partition with batch.size capacity; a record that does not fit
    completes the open batch (enable switch with 0 bytes, as RecordAccumulator.partitionChanged does)."""
    (case,) = [c for c in vectors_of_kind("partitioner.builtin_sticky") if "partitions_chosen" in c["expected"]]
    calls = 0

    def rnd() -> int:
        nonlocal calls
        calls += 1
        return calls - 1

    batch = case["input"]["batch_size"]
    part = BuiltInPartitioner("t", batch, rnd)
    open_bytes: dict[int, int] = {}
    chosen, calls_after = [], []
    for kind in case["input"]["appends"]:
        size = batch if kind.startswith("large") else 10
        while True:
            p = part.peek_partition(3)
            if p in open_bytes and open_bytes[p] + size > batch:
                del open_bytes[p]  # the open batch is complete
                if part.update(0, 3, True):
                    continue
            open_bytes[p] = open_bytes.get(p, 0) + size
            part.update(size, 3, False)
            break
        chosen.append(p)
        calls_after.append(calls)
    assert chosen == case["expected"]["partitions_chosen"]
    assert calls_after == case["expected"]["random_calls_after_each"]


def test_sticky_partition_cache_switches_to_a_different_partition() -> None:
    cache = StickyPartitionCache(seq())
    first = cache.partition("t", 3)
    second = cache.next_partition("t", 3, first)
    assert second != first
    assert cache.partition("t", 3) == second
    assert cache.next_partition("t", [PartitionMeta(0, None), PartitionMeta(1, 3)], second) == 1


def test_scala_producer_keeps_random_partition_until_refresh() -> None:
    sp = ScalaProducerPartitioner(refresh_interval_ms=600_000, random_int=seq(7))
    assert {sp.partition("t", None, 5, now) for now in (0, 1000, 599_999)} == {2}
    assert sp.partition("t", None, 5, 600_000) == 3
    assert sp.partition("t", b"abc", 10, 0) == partition_for_key(b"abc", 10)


def test_my_partition_seed_example() -> None:
    mp = MyPartition(seq())
    assert mp.partition("hello", 3) == abs(java_string_hashcode("hello")) % 3
    # a negative hashCode: Java's % keeps the sign, abs() fixes it
    assert java_string_hashcode("polygenelubricants") == -2147483648
    assert mp.partition("polygenelubricants", 7) == 2**31 % 7
    assert mp.partition("key-1", 7) == abs(java_string_hashcode("key-1")) % 7
    assert mp.partition(None, 7) == 0


def test_record_validation_messages() -> None:
    with pytest.raises(InvalidRecordError, match="Topic cannot be null"):
        validate_record(None, None, None, 3)
    with pytest.raises(InvalidRecordError, match="Invalid timestamp"):
        validate_record("t", None, -1, 3)
    with pytest.raises(InvalidRecordError, match=r"Invalid partition given with record: 3 is not in the range \[0\.\.\.2\]\."):
        validate_record("t", 3, None, 3)
    validate_record("t", 2, 0, 3)


def test_other_clients_hashing() -> None:
    assert fnv1a_32(b"") == 0x811C9DC5
    assert fnv1a_32(b"a") == 0xE40C292C  # published FNV-1a test vector
    assert librdkafka_consistent(b"123456789", 2**31) == 0xCBF43926 % 2**31  # CRC-32 check value
    assert sarama_hash(b"a", 10) == abs(0xE40C292C - 2**32) % 10
    assert client_partition("librdkafka", b"", 4) is None
    with pytest.raises(ValueError, match="unknown client"):
        client_partition("nope", b"k", 3)


@pytest.mark.parametrize(("key", "expected"), [
    # librdkafka's unit test values for rd_fnv1a (computed with Go's hash/fnv, Sarama's hash)
    (b"kafka", 0xD33C4E1), (b"giberish123456789", 0x77A58295), (b"1234", 0x23BDD03), (b"234", 0x2DEA3CD2),
    (b"34", 0x740FA83E), (b"4", 0x310CA263), (b"PreAmbleWillBeRemoved,ThePrePartThatIs", 0x65CBD69C),
    (b"", 0x7EE3623B),
])
def test_librdkafka_fnv1a_matches_sarama(key: bytes, expected: int) -> None:
    assert fnv1a_abs(key) == expected
    for n in (1, 3, 7, 100):
        assert librdkafka_fnv1a(key, n) == sarama_hash(key, n) == expected % n


def test_every_partitioner_and_hash_vector_is_exercised() -> None:
    """Ledger: each stored case of these kinds is read by one of the tests above."""
    handled_singletons = {
        "partitioner/DefaultPartitionerTest/testKeyPartitionIsStable",
        "partitioner/RoundRobinPartitionerTest/testRoundRobinWithUnavailablePartitions",
        "partitioner/RoundRobinPartitionerTest/testRoundRobinWithKeyBytes",
        "partitioner/RoundRobinPartitionerTest/testRoundRobinWithNullKeyBytes",
        "partitioner/BuiltInPartitionerTest/testStickyPartitioning",
        "partitioner/BuiltInPartitionerTest/unavailablePartitionsTest",
        "partitioner/BuiltInPartitionerTest/adaptivePartitionsTest",
        "partitioner/BuiltInPartitionerTest/testStickyBatchSizeMoreThatZero",
        "partitioner/RecordAccumulatorTest/testUniformBuiltInPartitioner",
        "partitioner/RecordAccumulatorTest/testAdaptiveBuiltInPartitioner",
    }
    cases = vectors_of_kind("partitioner.")
    parametrized = {c["id"] for c in FOR_KEY}
    assert {c["id"] for c in cases} == parametrized | handled_singletons
    assert len(MURMUR) == 6 and len(ABS) == 5 and len(cases) == 120


def test_builtin_partitioner_ignore_keys() -> None:
    """partitioner.ignore.keys=true: keyed records are spread like unkeyed ones (S-8)."""
    part = BuiltInPartitioner("t", 1, seq(1))
    assert part.partition(b"hello", 12) == partition_for_key(b"hello", 12)
    assert part.partition(b"hello", 12, ignore_keys=True) == 1
    part.update(1, 12, True)
    assert part.partition(b"hello", 12, ignore_keys=True) == 2
