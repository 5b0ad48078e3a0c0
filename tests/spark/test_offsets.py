"""Offset math: proration (maxOffsetsPerTrigger), delay (minOffsetsPerTrigger), range splitting
(minPartitions) and range resolution between two checkpointed offsets, as Spark's Kafka connector."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kaflite.spark.offsets import (
    OffsetRange,
    from_checkpoint,
    rate_limit,
    resolve_ranges,
    should_delay,
    split_ranges,
    to_checkpoint,
)


def test_checkpoint_form_has_sorted_string_keys_and_round_trips() -> None:
    offsets = {("b", 10): 1, ("b", 2): 5, ("a", 0): 3}
    cp = to_checkpoint(offsets)
    assert json.dumps(cp) == '{"a": {"0": 3}, "b": {"2": 5, "10": 1}}'
    assert from_checkpoint(json.loads(json.dumps(cp))) == offsets


def test_rate_limit_prorates_by_lag() -> None:
    start = {("t", 0): 0, ("t", 1): 0}
    latest = {("t", 0): 300, ("t", 1): 100}
    assert rate_limit(100, start, latest, {}) == {("t", 0): 75, ("t", 1): 25}


def test_rate_limit_never_starves_a_small_partition_and_never_passes_latest() -> None:
    start = {("t", 0): 0, ("t", 1): 0}
    latest = {("t", 0): 1000, ("t", 1): 1}
    # share of partition 1 is 10 * 1/1001 < 1 -> ceil to 1; partition 0 gets floor(9.99) = 9
    assert rate_limit(10, start, latest, {}) == {("t", 0): 9, ("t", 1): 1}
    assert rate_limit(10_000, start, latest, {}) == latest


def test_rate_limit_new_partition_starts_at_its_earliest() -> None:
    start = {("t", 0): 0}
    latest = {("t", 0): 10, ("t", 1): 30}
    out = rate_limit(8, start, latest, {("t", 1): 20})
    assert out == {("t", 0): 4, ("t", 1): 24}


def test_rate_limit_with_nothing_new_returns_latest() -> None:
    assert rate_limit(5, {("t", 0): 7}, {("t", 0): 7}, {}) == {("t", 0): 7}


@given(
    st.integers(min_value=1, max_value=10_000),
    st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000)), min_size=1, max_size=8),
)
def test_rate_limit_properties(limit: int, spans: list[tuple[int, int]]) -> None:
    start = {("t", i): a for i, (a, _) in enumerate(spans)}
    latest = {("t", i): a + b for i, (a, b) in enumerate(spans)}
    out = rate_limit(limit, start, latest, {})
    for tp in latest:
        assert start[tp] <= out[tp] <= latest[tp]
        if latest[tp] > start[tp]:
            assert out[tp] > start[tp]  # every partition with data moves
    # the total may exceed the limit only by the partitions rounded up from below one
    assert sum(out[tp] - start[tp] for tp in out) <= limit + len(spans)


def test_should_delay_until_enough_records_or_max_delay() -> None:
    start, latest = {("t", 0): 0}, {("t", 0): 5}
    assert should_delay(10, start, latest, now_ms=1_000, last_trigger_ms=0, max_delay_ms=60_000) == (True, 0)
    assert should_delay(5, start, latest, now_ms=1_000, last_trigger_ms=0, max_delay_ms=60_000) == (
        False,
        1_000,
    )
    assert should_delay(10, start, latest, now_ms=60_000, last_trigger_ms=0, max_delay_ms=60_000) == (
        False,
        60_000,
    )


def test_split_ranges_without_min_partitions_drops_only_empty_ranges() -> None:
    ranges = [OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 5, 5)]
    assert split_ranges(ranges, None) == [OffsetRange("t", 0, 0, 10)]
    assert split_ranges(ranges, 1) == [OffsetRange("t", 0, 0, 10)]


def test_split_ranges_splits_large_ranges_in_proportion() -> None:
    # Spark's KafkaOffsetRangeCalculatorSuite case: sizes 10000 and 1 with minPartitions 3:
    # the small range stays whole, the large one is split in two
    ranges = [OffsetRange("t", 0, 0, 10_000), OffsetRange("t", 1, 0, 1)]
    assert split_ranges(ranges, 3) == [
        OffsetRange("t", 0, 0, 5_000),
        OffsetRange("t", 0, 5_000, 10_000),
        OffsetRange("t", 1, 0, 1),
    ]


def test_split_ranges_uneven_sizes_last_part_takes_remainder() -> None:
    out = split_ranges([OffsetRange("t", 0, 1, 11)], 3)
    assert out == [OffsetRange("t", 0, 1, 4), OffsetRange("t", 0, 4, 7), OffsetRange("t", 0, 7, 11)]


@given(
    st.lists(st.integers(0, 500), min_size=1, max_size=6), st.integers(1, 20), st.none() | st.integers(1, 100)
)
def test_split_ranges_cover_exactly_the_input(
    sizes: list[int], min_parts: int, max_records: int | None
) -> None:
    ranges = [OffsetRange("t", i, 100, 100 + s) for i, s in enumerate(sizes)]
    out = split_ranges(ranges, min_parts, max_records)
    for i, s in enumerate(sizes):
        mine = sorted((r.from_offset, r.until_offset) for r in out if r.partition == i)
        covered = [o for a, b in mine for o in range(a, b)]
        assert covered == list(range(100, 100 + s))
        if max_records:
            assert all(b - a <= max_records for a, b in mine)


def test_resolve_ranges_reads_new_partitions_from_earliest() -> None:
    lost: list[str] = []
    out = resolve_ranges({("t", 0): 5}, {("t", 0): 9, ("t", 1): 4}, {("t", 1): 0}, lost.append)
    assert out == [OffsetRange("t", 0, 5, 9), OffsetRange("t", 1, 0, 4)]
    assert lost == []


@pytest.mark.parametrize(
    "start, end, earliest_new, expected",
    [
        (
            {("t", 0): 0},
            {("t", 0): 3, ("t", 1): 9},
            {("t", 1): 2},
            "Added partition t-1 starts from 2 instead of 0",
        ),
        ({("t", 0): 0, ("t", 1): 4}, {("t", 0): 3}, {}, "t-1 are gone"),
        ({("t", 0): 8}, {("t", 0): 3}, {}, "t-0's offset was changed from 8 to 3"),
    ],
)
def test_resolve_ranges_reports_data_loss(start, end, earliest_new, expected) -> None:  # type: ignore[no-untyped-def]
    lost: list[str] = []
    resolve_ranges(start, end, earliest_new, lost.append)
    assert len(lost) == 1 and expected in lost[0]
