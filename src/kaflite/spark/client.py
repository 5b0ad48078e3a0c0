"""The I/O shell of the connector: everything that talks to a Kafka broker, through confluent-kafka
(librdkafka), so the connector works against kaflite and against any Kafka cluster.

- OffsetReader (driver): topic discovery for the subscription, earliest / latest / by-timestamp offsets.
- read_range (executor): the records of one OffsetRange as Arrow batches.
- Clients are created lazily and never pickled: Spark pickles readers and input partitions.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from kaflite.spark.arrow import records_to_batch
from kaflite.spark.offsets import OffsetRange, PartitionOffsets
from kaflite.spark.offsets import TopicPartition as TP
from kaflite.spark.options import ASSIGN, EARLIEST, LATEST, OffsetSpec, OptionError, ReaderOptions

log = logging.getLogger("kaflite.spark")

INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE = (
    "Some data may have been lost because they are not available in Kafka any more; either the data was "
    "aged out by Kafka or the topic may have been deleted before all the data in the topic was processed. "
    "If you don't want your streaming query to fail on such cases, set the source option "
    '"failOnDataLoss" to "false".'
)
INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE = (
    "Some data may have been lost because they are not available in Kafka any more; either the data was "
    "aged out by Kafka or the topic may have been deleted before all the data in the topic was processed. "
    'If you want your streaming query to fail on such cases, set the source option "failOnDataLoss" to "true".'
)

_BATCH_RECORDS = 10_000
_message_error = Message.error  # unbound, for map(): a C-level pass over a consume() result  # records per consume() call and per Arrow batch (Spark's default arrow batch size)


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (retention, deleted topic) and failOnDataLoss is true."""


def data_loss_reporter(fail_on_data_loss: bool) -> Callable[[str], None]:
    def report(message: str) -> None:
        if fail_on_data_loss:
            raise DataLossError(f"{message}. {INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE}")
        log.warning("%s. %s", message, INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE)

    return report


def consumer_config(conf: dict[str, str], role: str) -> dict[str, Any]:
    """librdkafka consumer settings: the user's `kafka.*` options plus what the connector owns."""
    out: dict[str, Any] = {
        # Spark's Java consumer reads uncommitted by default; librdkafka's default is read_committed
        "isolation.level": "read_uncommitted",
        "group.id": f"spark-kafka-source-{uuid.uuid4()}-{role}",
        "session.timeout.ms": 45_000,
        # A task drains a bounded range as fast as it can: librdkafka's default pauses a partition's
        # fetching for 1 s whenever its local queue passes queued.min.messages (100k), which capped the
        # source at ~270k rows/s on 1M-row ranges (bench/spark_bench.py); 10 ms keeps the queue fed.
        "fetch.queue.backoff.ms": 10,
    }
    out.update(conf)
    # offsets live in Spark's checkpoint, never in the group: these are not the user's to change
    out.update({"enable.auto.commit": False, "enable.auto.offset.store": False, "auto.offset.reset": "error"})
    return out


class OffsetReader:
    """Driver-side offset lookups for one source (Spark's KafkaOffsetReader)."""

    def __init__(self, options: ReaderOptions, timeout_s: float = 30.0) -> None:
        self.options = options
        self.timeout_s = timeout_s
        self._consumer: Consumer | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_consumer"] = None
        return state

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(consumer_config(self.options.client_config, "driver"))
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def partitions(self) -> list[TP]:
        """The partitions the subscription names right now (new topics/partitions included)."""
        if self.options.strategy == ASSIGN:
            return sorted(set(self.options.assigned))
        md = self.consumer.list_topics(timeout=self.timeout_s)
        out: list[TP] = []
        for name, topic in md.topics.items():
            if topic.error is not None or name.startswith("__") or not self.options.matches(name):
                continue
            out.extend((name, p) for p in topic.partitions)
        return sorted(out)

    def _watermarks(self, tp: TP) -> tuple[int, int]:
        low, high = self.consumer.get_watermark_offsets(
            TopicPartition(tp[0], tp[1]), timeout=self.timeout_s, cached=False
        )
        return int(low), int(high)

    def earliest(self, tps: Iterable[TP]) -> PartitionOffsets:
        return {tp: self._watermarks(tp)[0] for tp in tps}

    def latest(self, tps: Iterable[TP]) -> PartitionOffsets:
        return {tp: self._watermarks(tp)[1] for tp in tps}

    def by_timestamp(self, stamps: dict[TP, int], starting: bool, no_match: str) -> PartitionOffsets:
        """The first offset whose timestamp is >= the given one. No such record: for an ending offset the
        latest offset; for a starting one an error, or the latest offset with strategy 'latest'."""
        if not stamps:
            return {}
        found = self.consumer.offsets_for_times(
            [TopicPartition(t, p, ts) for (t, p), ts in stamps.items()], timeout=self.timeout_s
        )
        out: PartitionOffsets = {}
        for tpo in found:
            tp = (tpo.topic, tpo.partition)
            if tpo.error is not None:
                raise KafkaException(tpo.error)
            if tpo.offset >= 0:
                out[tp] = tpo.offset
            elif not starting or no_match == "latest":
                out[tp] = self._watermarks(tp)[1]
            else:
                raise OptionError(
                    f"No offset matched from request of topic-partition {tp[0]}-{tp[1]} and timestamp "
                    f"{stamps[tp]}. Set the option 'startingOffsetsByTimestampStrategy' to 'latest' to start "
                    "from the latest offset in that case."
                )
        return out

    def resolve(self, spec: OffsetSpec, starting: bool) -> PartitionOffsets:
        """An OffsetSpec made concrete for every partition of the subscription."""
        tps = self.partitions()
        if spec.kind == "earliest":
            return self.earliest(tps)
        if spec.kind == "latest":
            return self.latest(tps)
        if spec.kind == "timestamp":
            assert spec.timestamp is not None
            return self.by_timestamp({tp: spec.timestamp for tp in tps}, starting, spec.no_match)
        name = ("starting" if starting else "ending") + (
            "Offsets" if spec.kind == "offsets" else "OffsetsByTimestamp"
        )
        if set(spec.offsets) != set(tps):
            raise OptionError(
                f"If {name} contains specific offsets, you must specify all TopicPartitions. Use -1 for latest, "
                f"-2 for earliest. Specified: {sorted(spec.offsets)} Assigned: {sorted(tps)}"
            )
        if spec.kind == "timestamps":
            return self.by_timestamp(dict(spec.offsets), starting, spec.no_match)
        out: PartitionOffsets = {}
        for tp, off in spec.offsets.items():
            if off == EARLIEST:
                out[tp] = self.earliest([tp])[tp]
            elif off == LATEST:
                out[tp] = self.latest([tp])[tp]
            else:
                out[tp] = off
        return out


def read_range(
    conf: dict[str, str],
    r: OffsetRange,
    include_headers: bool,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
    fast: bool = True,
) -> Iterator[pa.RecordBatch]:
    """The records of [r.from_offset, r.until_offset) as Arrow batches (executor side).

    Records missing inside the range because of compaction or transaction markers are simply absent;
    records missing because retention deleted them are data loss (raised, or skipped with a warning).
    With `fast` (and settings it supports, kaflite.spark.fetch) the records come over kaflite's own Fetch
    client, decoded about 1 MiB of records at a time; else, and from where the fast path stops, through librdkafka.
    """
    report = data_loss_reporter(fail_on_data_loss)
    config = consumer_config(conf, "executor")
    timeout_s = poll_timeout_ms / 1000
    begin, until = r.from_offset, r.until_offset
    if begin >= until:
        return
    tp = TopicPartition(r.topic, r.partition)
    # librdkafka's consumer is made when first needed: the fast path reads a whole range without it (its
    # creation and first metadata request cost a task 1-60 ms, kaflite.spark.fetch.find_leader)
    made: list[Consumer] = []

    def rdkafka() -> Consumer:
        if not made:
            made.append(Consumer(config | {"enable.partition.eof": True}))
        return made[0]

    try:

        def at_end(offset: int) -> None:
            # the end of the log before `until`: the offsets left were compaction or transaction
            # marker gaps, unless the log was truncated below `until` since the range was planned
            high = rdkafka().get_watermark_offsets(tp, timeout=timeout_s, cached=False)[1]
            if high < until:
                report(f"Offsets [{high}, {until}) of {r.topic}-{r.partition} are no longer in the log")

        def out_of_range(offset: int) -> int:
            low, high = rdkafka().get_watermark_offsets(tp, timeout=timeout_s, cached=False)
            if offset > high:
                # past the log's end: it was truncated below the range (deleted and created again)
                report(f"Offsets [{high}, {until}) of {r.topic}-{r.partition} are no longer in the log")
                return until
            # retention deleted the offset (before the range was read, or while it was)
            report(
                f"Cannot fetch offset {offset} of {r.topic}-{r.partition} (earliest available offset is {low})"
            )
            return max(offset, low)

        # imported here, in the task: kio's schemas (and the hypothesis kio imports) take seconds to load,
        # which Spark's planning workers, importing this module, must not pay
        from kaflite.spark import batches, fetch

        # KAFLITE_SPARK_FAST_PATH=0 in the executors' environment: librdkafka reads everything (comparisons)
        if fast and os.environ.get("KAFLITE_SPARK_FAST_PATH", "1") != "0" and fetch.fast_path_supported(config):
            log.debug("kaflite source: %s-%d from %d through kaflite's fetch client (%s decoder)",
                      r.topic, r.partition, begin, batches.DECODER)

            def leader() -> tuple[str, int]:
                found = fetch.find_leader(config, r.topic, r.partition, timeout_s)
                if found is not None:
                    return found
                md = rdkafka().list_topics(r.topic, timeout=timeout_s)
                topic = md.topics.get(r.topic)
                part = topic.partitions.get(r.partition) if topic is not None and topic.error is None else None
                broker = md.brokers.get(part.leader) if part is not None else None
                if broker is None:
                    raise ConnectionError(f"{r.topic}-{r.partition} has no leader in the metadata")
                return str(broker.host), int(broker.port)

            # no watermark query first: the Fetch answers say where the log starts and ends (OFFSET_OUT_OF_RANGE
            # below its start, `at_end` at its end), and a fresh librdkafka consumer's first ListOffsets
            # took 0.7 s instead of 3 ms one time in ten (its bootstrap broker handle is replaced by the
            # broker's own while the leader lookup is under way, and the lookup waits for a retry): a task's
            # wall time, with no CPU to show for it (bench/spark_bench.py --rows 10000000)
            rest = yield from fetch.fetch_range(
                leader, config, r.topic, r.partition, begin, until, include_headers, poll_timeout_ms,
                at_end, out_of_range,
            )
            if rest is None:
                return
            begin = rest
        consumer = rdkafka()
        low, high = consumer.get_watermark_offsets(tp, timeout=timeout_s, cached=False)
        if low > begin:
            report(
                f"Cannot fetch offset {begin} of {r.topic}-{r.partition} (earliest available offset is {low})"
            )
            begin = low
        if high < until:
            report(f"Offsets [{high}, {until}) of {r.topic}-{r.partition} are no longer in the log")
            until = high
        if begin >= until:
            return
        log.debug("kaflite source: %s-%d from %d through librdkafka", r.topic, r.partition, begin)
        yield from _consume(consumer, r, begin, until, include_headers, poll_timeout_ms, at_end, out_of_range)
    finally:
        for consumer in made:
            consumer.close()


def _consume(
    consumer: Consumer,
    r: OffsetRange,
    begin: int,
    until: int,
    include_headers: bool,
    poll_timeout_ms: int,
    at_end: Callable[[int], None],
    out_of_range: Callable[[int], int],
) -> Iterator[pa.RecordBatch]:
    """[begin, until) through librdkafka: a `Message` per record."""
    consumer.assign([TopicPartition(r.topic, r.partition, begin)])
    next_offset = begin
    deadline = time.monotonic() + poll_timeout_ms / 1000
    while next_offset < until:
        msgs = consumer.consume(num_messages=min(_BATCH_RECORDS, until - next_offset), timeout=0.5)
        records: list[Message] = []
        reached_end = False
        if msgs and not any(map(_message_error, msgs)):
            # the common case, without a Python step per record: only records, in offset order
            last = int(msgs[-1].offset() or 0)
            if last < until:
                records, next_offset = msgs, last + 1
            else:
                records, next_offset = [m for m in msgs if int(m.offset() or 0) < until], until
            msgs = []
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    reached_end = True
                    continue
                if err.code() == KafkaError._AUTO_OFFSET_RESET:
                    next_offset = out_of_range(next_offset)
                    consumer.assign([TopicPartition(r.topic, r.partition, next_offset)])
                    break
                raise KafkaException(err)
            offset = int(m.offset() or 0)
            if offset >= until:
                next_offset = until
                break
            records.append(m)
            next_offset = offset + 1
        if records:
            deadline = time.monotonic() + poll_timeout_ms / 1000
            yield records_to_batch(r.topic, r.partition, records, include_headers)
        if reached_end and next_offset < until:
            at_end(next_offset)
            return
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"Cannot fetch records in [{next_offset}, {until}) of {r.topic}-{r.partition} within "
                f"kafkaConsumer.pollTimeoutMs={poll_timeout_ms}"
            )
