"""Batch and streaming readers (S-38, S-39, S-41).

Rules of the streaming reader (Spark's KafkaMicroBatchStream):
- an offset is `{"topic": {"partition": next_offset}}`; Spark checkpoints the end offset of each batch
  before running it, so a restarted query replays exactly the same ranges (exactly once, with an
  idempotent or transactional sink such as files);
- latestOffset(start, limit): ReadAllAvailable reads everything; otherwise minOffsetsPerTrigger may
  delay a batch (until maxTriggerDelay passes) and maxOffsetsPerTrigger prorates across partitions;
- Trigger.AvailableNow pins the target once, so the query ends even while producers keep writing;
- partitions that appear mid-stream are read from their earliest offset; missing data is reported
  (failOnDataLoss);
- everything `read()` needs travels in the pickled KafkaInputPartition; connections open lazily.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from kaflite.spark.client import OffsetReader, data_loss_reporter, read_range
from kaflite.spark.offsets import (
    OffsetRange,
    PartitionOffsets,
    from_checkpoint,
    rate_limit,
    resolve_ranges,
    should_delay,
    split_ranges,
    to_checkpoint,
)
from kaflite.spark.options import OptionError, ReaderOptions


class KafkaInputPartition(InputPartition):
    """One Spark task: an offset range and the client settings to read it (pickled to executors)."""

    def __init__(
        self,
        offset_range: OffsetRange,
        client_config: dict[str, str],
        include_headers: bool,
        fail_on_data_loss: bool,
        poll_timeout_ms: int,
    ) -> None:
        super().__init__(offset_range)
        self.offset_range = offset_range
        self.client_config = client_config
        self.include_headers = include_headers
        self.fail_on_data_loss = fail_on_data_loss
        self.poll_timeout_ms = poll_timeout_ms


def _input_partitions(options: ReaderOptions, ranges: list[OffsetRange]) -> list[KafkaInputPartition]:
    return [
        KafkaInputPartition(
            r,
            options.client_config,
            options.include_headers,
            options.fail_on_data_loss,
            options.poll_timeout_ms,
        )
        for r in split_ranges(ranges, options.min_partitions, options.max_records_per_partition)
    ]


def _read(partition: InputPartition | None) -> Iterator[pa.RecordBatch]:
    if partition is None or (type(partition) is InputPartition and partition.value is None):
        # Spark plans a single empty partition when partitions() returned none: nothing to read
        return iter(())
    if not isinstance(partition, KafkaInputPartition):
        raise TypeError(f"kaflite source cannot read partition {partition!r}")
    return read_range(
        partition.client_config,
        partition.offset_range,
        partition.include_headers,
        partition.fail_on_data_loss,
        partition.poll_timeout_ms,
    )


class KafkaBatchReader(DataSourceReader):
    """A bounded read: [startingOffsets, endingOffsets) resolved once, at planning time."""

    def __init__(self, options: ReaderOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        offsets = OffsetReader(self.options)
        try:
            start = offsets.resolve(self.options.starting, starting=True)
            end = offsets.resolve(self.options.ending, starting=False)
        finally:
            offsets.close()
        ranges = []
        for tp in sorted(set(start) & set(end)):
            if end[tp] < start[tp]:
                # as Spark (resolvedStartOffsetGreaterThanEndOffset): an error, not data loss
                raise OptionError(
                    f"The resolved start offset {start[tp]} is greater than the resolved end offset {end[tp]} "
                    f"for topic partition {tp[0]}-{tp[1]}. Please check the starting and ending offset options."
                )
            ranges.append(OffsetRange(tp[0], tp[1], start[tp], end[tp]))
        return _input_partitions(self.options, ranges)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: ReaderOptions) -> None:
        self.options = options
        self.offsets = OffsetReader(options)
        self.latest_offsets: PartitionOffsets | None = None
        self.available_now_target: PartitionOffsets | None = None
        self.available_now = False
        self.last_trigger_ms = int(time.time() * 1000)

    def initialOffset(self) -> dict:
        return to_checkpoint(self.offsets.resolve(self.options.starting, starting=True))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now = True

    def _latest(self) -> PartitionOffsets:
        if self.available_now:
            if self.available_now_target is None:
                self.available_now_target = self.offsets.latest(self.offsets.partitions())
            return dict(self.available_now_target)
        return self.offsets.latest(self.offsets.partitions())

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_checkpoint(start)
        latest = self._latest()
        self.latest_offsets = latest
        if not latest:
            return start
        if isinstance(limit, ReadAllAvailable):
            return to_checkpoint(latest)
        min_rows = self.options.min_offsets_per_trigger
        if isinstance(limit, ReadMinRows):
            min_rows = limit.min_rows
        # with Trigger.AvailableNow a minimum could hold the last records back forever: the query must end
        if min_rows is not None and not self.available_now:
            delay, self.last_trigger_ms = should_delay(
                min_rows,
                begin,
                latest,
                int(time.time() * 1000),
                self.last_trigger_ms,
                self.options.max_trigger_delay_ms,
            )
            if delay:
                return start
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else self.options.max_offsets_per_trigger
        if max_rows is not None:
            new = [tp for tp in latest if tp not in begin]
            latest = rate_limit(max_rows, begin, latest, self.offsets.earliest(new) if new else {})
        return to_checkpoint(latest)

    def reportLatestOffset(self) -> dict | None:
        return to_checkpoint(self.latest_offsets) if self.latest_offsets else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, until = from_checkpoint(start), from_checkpoint(end)
        new = [tp for tp in until if tp not in begin]
        ranges = resolve_ranges(
            begin,
            until,
            self.offsets.earliest(new) if new else {},
            data_loss_reporter(self.options.fail_on_data_loss),
        )
        return _input_partitions(self.options, ranges)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)

    def commit(self, end: dict) -> None:
        # offsets live in Spark's checkpoint; nothing is committed to Kafka (as Spark's connector)
        pass

    def stop(self) -> None:
        self.offsets.close()
