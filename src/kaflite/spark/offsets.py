"""Offset bookkeeping for the source: the checkpointed offset form, offset ranges, rate limiting and
range splitting (pure; mirrors Spark's KafkaSourceOffset, KafkaMicroBatchStream.rateLimit /
delayBatch and KafkaOffsetRangeCalculator).

An offset map is {(topic, partition): next_offset_to_read}. In Spark's checkpoint it is written as
`{"topic": {"partition": next_offset}}`; here the JSON form has sorted string keys so that equal
maps serialise to equal strings (the Python streaming engine compares offsets as JSON).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

TopicPartition = tuple[str, int]
PartitionOffsets = dict[TopicPartition, int]


def to_checkpoint(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """{(t, p): o} -> {"t": {"p": o}} with sorted keys (partitions sorted numerically)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_checkpoint(obj: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    return {(topic, int(p)): int(o) for topic, parts in obj.items() for p, o in parts.items()}


@dataclass(frozen=True)
class OffsetRange:
    """Records [from_offset, until_offset) of one partition: what one Spark task reads."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        # an estimate: compaction and transaction markers leave gaps
        return self.until_offset - self.from_offset


def rate_limit(
    limit: int,
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    earliest_of_new: Mapping[TopicPartition, int],
) -> PartitionOffsets:
    """maxOffsetsPerTrigger: share `limit` offsets across partitions in proportion to their lag.

    A partition whose share is below one still gets one (small partitions are never starved), larger
    shares are floored, and no partition moves past its latest offset. Partitions new since `start`
    begin at their earliest offset (`earliest_of_new`).
    """
    sizes: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        begin = start.get(tp, earliest_of_new.get(tp))
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    out: PartitionOffsets = {}
    for tp, end in latest.items():
        if tp not in sizes:
            out[tp] = end
            continue
        begin = start.get(tp, earliest_of_new.get(tp, 0))
        share = limit * (sizes[tp] / total)
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(end, begin + step)
    return out


def count_available(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]) -> int:
    """Records between `start` and `latest` (new partitions counted from 0, as Spark's delayBatch)."""
    return sum(end - start.get(tp, 0) for tp, end in latest.items())


def should_delay(
    min_rows: int,
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    now_ms: int,
    last_trigger_ms: int,
    max_delay_ms: int,
) -> tuple[bool, int]:
    """minOffsetsPerTrigger + maxTriggerDelay: skip this trigger while fewer than `min_rows` records are
    available, unless `max_delay_ms` passed since the last batch ran. Returns (delay, last_trigger_ms)."""
    if now_ms - last_trigger_ms >= max_delay_ms:
        return False, now_ms
    if count_available(start, latest) < min_rows:
        return True, last_trigger_ms
    return False, now_ms


def _java_round(x: float) -> int:
    # Scala's math.round(Double): half rounds up (Python's round() would round half to even)
    return math.floor(x + 0.5)


def _part_count(size: int, total: int, min_parts: int) -> int:
    return max(_java_round(size / total * min_parts), 1)


def _split(r: OffsetRange, parts: int) -> list[OffsetRange]:
    out: list[OffsetRange] = []
    remaining = r.size
    begin = r.from_offset
    for i in range(parts):
        this = remaining // (parts - i)  # the last part takes the rounding remainder
        remaining -= this
        end = min(begin + this, r.until_offset)
        out.append(OffsetRange(r.topic, r.partition, begin, end))
        begin = end
    return [x for x in out if x.size > 0]


def split_ranges(
    ranges: Iterable[OffsetRange], min_partitions: int | None, max_records_per_partition: int | None = None
) -> list[OffsetRange]:
    """Spark's KafkaOffsetRangeCalculator.getRanges: drop empty ranges; with `minPartitions` above the
    number of ranges, split the large ones in proportion to their size (approximately minPartitions
    tasks in all). `maxRecordsPerPartition` first caps every range's size."""
    result = [r for r in ranges if r.size > 0]
    if max_records_per_partition:
        result = [
            piece
            for r in result
            for piece in _split(r, max(1, math.ceil(r.size / max_records_per_partition)))
        ]
    if min_partitions is None or len(result) >= min_partitions:
        return result
    total = sum(r.size for r in result)
    unsplit = [r for r in result if _part_count(r.size, total, min_partitions) == 1]
    unsplit_ids = {id(r) for r in unsplit}
    split_total = total - sum(r.size for r in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    out: list[OffsetRange] = []
    for r in result:
        parts = 1 if id(r) in unsplit_ids else _part_count(r.size, split_total, split_min)
        out.extend(_split(r, parts))
    return out


def resolve_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    earliest_of_new: Mapping[TopicPartition, int],
    report_data_loss: Callable[[str], None],
) -> list[OffsetRange]:
    """Spark's getOffsetRangesFromResolvedOffsets: the ranges between two checkpointed offsets.

    Partitions that appeared after `start` are read from their earliest offset (a start above 0 means
    records were lost before we saw the partition); partitions that vanished, or whose offset went
    backwards, are data loss. `report_data_loss` raises or logs according to failOnDataLoss.
    """
    for tp, offset in sorted(earliest_of_new.items()):
        if tp not in start and offset != 0:
            report_data_loss(
                f"Added partition {tp[0]}-{tp[1]} starts from {offset} instead of 0. "
                "Some data may have been missed"
            )
    gone = sorted(set(start) - set(end))
    if gone:
        names = ", ".join(f"{t}-{p}" for t, p in gone)
        report_data_loss(f"{names} are gone. Some data may have been missed")
    ranges: list[OffsetRange] = []
    for tp in sorted(end):
        if tp in start:
            begin = start[tp]
        elif tp in earliest_of_new:
            begin = earliest_of_new[tp]
        else:
            continue
        until = end[tp]
        if until < begin:
            report_data_loss(
                f"Partition {tp[0]}-{tp[1]}'s offset was changed from {begin} to {until}, "
                "some data may have been missed"
            )
        ranges.append(OffsetRange(tp[0], tp[1], begin, until))
    return ranges
