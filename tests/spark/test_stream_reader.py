"""KafkaStreamReader's offset decisions (latestOffset / partitions) with a scripted offset lookup in
place of the broker: read limits, Trigger.AvailableNow pinning, minOffsetsPerTrigger delay."""

from __future__ import annotations

from typing import Any

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from kaflite.spark.offsets import OffsetRange
from kaflite.spark.options import parse_reader_options
from kaflite.spark.reader import KafkaInputPartition, KafkaStreamReader


class ScriptedOffsets:
    """Stands in for OffsetReader: the log ends are whatever the test sets."""

    def __init__(
        self, latest: dict[tuple[str, int], int], earliest: dict[tuple[str, int], int] | None = None
    ) -> None:
        self.latest_offsets = latest
        self.earliest_offsets = earliest or {}

    def partitions(self) -> list[tuple[str, int]]:
        return sorted(self.latest_offsets)

    def latest(self, tps: Any) -> dict[tuple[str, int], int]:
        return {tp: self.latest_offsets[tp] for tp in tps}

    def earliest(self, tps: Any) -> dict[tuple[str, int], int]:
        return {tp: self.earliest_offsets.get(tp, 0) for tp in tps}

    def close(self) -> None:
        pass


def _reader(latest: dict[tuple[str, int], int], **options: str) -> KafkaStreamReader:
    opts = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t"} | options
    reader = KafkaStreamReader(parse_reader_options(opts, streaming=True))
    reader.offsets = ScriptedOffsets(latest)  # type: ignore[assignment]
    return reader


def test_default_read_limit_follows_the_options() -> None:
    assert isinstance(_reader({}).getDefaultReadLimit(), ReadAllAvailable)
    assert _reader({}, maxOffsetsPerTrigger="7").getDefaultReadLimit() == ReadMaxRows(7)
    assert _reader({}, minOffsetsPerTrigger="3").getDefaultReadLimit() == ReadMinRows(3)


def test_latest_offset_all_available_and_rate_limited() -> None:
    reader = _reader({("t", 0): 40, ("t", 1): 10}, maxOffsetsPerTrigger="10")
    start = {"t": {"0": 0, "1": 0}}
    assert reader.latestOffset(start, ReadAllAvailable()) == {"t": {"0": 40, "1": 10}}
    assert reader.latestOffset(start, ReadMaxRows(10)) == {"t": {"0": 8, "1": 2}}
    assert reader.reportLatestOffset() == {"t": {"0": 40, "1": 10}}


def test_available_now_pins_the_target_at_the_first_call() -> None:
    reader = _reader({("t", 0): 5})
    reader.prepareForTriggerAvailableNow()
    assert reader.latestOffset({"t": {"0": 0}}, ReadAllAvailable()) == {"t": {"0": 5}}
    reader.offsets.latest_offsets[("t", 0)] = 50  # type: ignore[attr-defined]
    assert reader.latestOffset({"t": {"0": 5}}, ReadAllAvailable()) == {"t": {"0": 5}}


def test_min_offsets_delays_then_max_trigger_delay_releases() -> None:
    reader = _reader({("t", 0): 3}, minOffsetsPerTrigger="5", maxTriggerDelay="1h")
    start = {"t": {"0": 0}}
    assert reader.latestOffset(start, ReadMinRows(5)) == start
    reader.last_trigger_ms -= 3_600_000  # an hour since the last batch
    assert reader.latestOffset(start, ReadMinRows(5)) == {"t": {"0": 3}}
    # AvailableNow never waits for the minimum
    reader = _reader({("t", 0): 3}, minOffsetsPerTrigger="5")
    reader.prepareForTriggerAvailableNow()
    assert reader.latestOffset(start, ReadMinRows(5)) == {"t": {"0": 3}}


def test_no_partitions_yet_keeps_the_start() -> None:
    assert _reader({}).latestOffset({}, ReadAllAvailable()) == {}


def test_partitions_carry_everything_read_needs() -> None:
    reader = _reader({("t", 0): 9, ("t", 1): 4}, minPartitions="3", includeHeaders="true")
    parts = reader.partitions({"t": {"0": 3}}, {"t": {"0": 9, "1": 4}})
    assert all(isinstance(p, KafkaInputPartition) for p in parts)
    ranges = sorted((p.offset_range for p in parts), key=lambda r: (r.partition, r.from_offset))  # type: ignore[attr-defined]
    assert ranges == [OffsetRange("t", 0, 3, 6), OffsetRange("t", 0, 6, 9), OffsetRange("t", 1, 0, 4)]
    p = parts[0]
    assert p.client_config["bootstrap.servers"] == "127.0.0.1:1" and p.include_headers  # type: ignore[attr-defined]
    import pickle

    assert pickle.loads(pickle.dumps(p)).offset_range == p.offset_range  # type: ignore[attr-defined]
