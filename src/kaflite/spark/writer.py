"""The sink: Arrow batches of (value, key, topic, partition, headers) produced to Kafka (S-40).

Placement: an explicit `partition` wins; otherwise a keyed row goes where the Java client would put it
(`toPositive(murmur2(key)) % numPartitions`). Rows are encoded into record batches and produced by
kaflite's idempotent client (kaflite.spark.encode / produce) when the settings allow, else through
librdkafka (its `murmur2_random` partitioner places keyed rows the same way). Delivery is at least
once: a task waits for every acknowledgement and fails if one is missing, so Spark retries it. For
idempotent consumers downstream, the `batchIdHeader` option stamps each record of a streaming
micro-batch with the batch id (a header), so a replayed batch can be recognised.

Exactly once (`exactlyOnce=true`, `transactionalIdPrefix=P`, streaming only; docs/spark.md): the task for
partition i of micro-batch b uses the transactional id `P-i`. It initialises its producer (fencing and
aborting whatever an earlier incarnation of the same task left open), then reads, read_committed, its
progress: the offset its own group `P-i` committed for partition 0 of the progress topic (the `topic`
option, or `progressTopic`: a topic that exists, since Kafka answers UNKNOWN_TOPIC_OR_PARTITION to an
offset commit of any other). When it is > b, this task of this batch was already written and committed, so
it writes nothing; otherwise it writes its rows and commits the offset b + 1 (its metadata names the batch)
with them in ONE transaction (send_offsets_to_transaction). A micro-batch Spark replays after the driver
was killed therefore adds each row once as read_committed consumers see it; a killed task's open
transaction is aborted by its next incarnation (or by the transaction timeout). The transactions go over
kaflite's own client with the encoder's record batches (kaflite.spark.transaction) when the settings and
the broker allow, as the at-least-once fast path; else through librdkafka.

Before this layout the progress was the offset the group `P` committed for (`P.sink-progress`, i), a topic
that never existed (kaflite did not check): while a task has no progress of its own yet, that legacy
location is read too, so a query restarted on a checkpoint written before still skips what it committed.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from kaflite.spark.options import OptionError, WriterOptions

log = logging.getLogger("kaflite.spark")

# Spark sets this local property on every task of a micro-batch (MicroBatchExecution.BATCH_ID_KEY)
_BATCH_ID_PROPERTY = "streaming.sql.batchId"


def validate_write_schema(schema: StructType, topic_option: str | None) -> None:
    """Spark's KafkaWriter.validateQuery: the columns the sink understands, with their allowed types."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise OptionError("Required attribute 'value' not found")
    if not isinstance(fields["value"], StringType | BinaryType):
        raise OptionError(
            f"value attribute type must be a string or binary, got {fields['value'].simpleString()}"
        )
    if "key" in fields and not isinstance(fields["key"], StringType | BinaryType):
        raise OptionError(
            f"key attribute type must be a string or binary, got {fields['key'].simpleString()}"
        )
    if "topic" in fields:
        if not isinstance(fields["topic"], StringType):
            raise OptionError(f"topic attribute type must be a string, got {fields['topic'].simpleString()}")
    elif topic_option is None:
        raise OptionError(
            "topic option required when no 'topic' attribute is present. Use the topic option for setting a topic."
        )
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise OptionError(
            f"partition attribute type must be an int, got {fields['partition'].simpleString()}"
        )
    if "headers" in fields:
        h = fields["headers"]
        ok = (
            isinstance(h, ArrayType)
            and isinstance(h.elementType, StructType)
            and [f.name for f in h.elementType.fields] == ["key", "value"]
            and isinstance(h.elementType.fields[0].dataType, StringType)
            and isinstance(h.elementType.fields[1].dataType, BinaryType)
        )
        if not ok:
            raise OptionError(
                f"headers attribute type must be an array<struct<key:string,value:binary>>, got {h.simpleString()}"
            )


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    records: int
    batch_id: int | None = None


def producer_config(options: WriterOptions) -> dict[str, Any]:
    conf: dict[str, Any] = {
        # Java's default partitioner for keyed records: toPositive(murmur2(key)) % numPartitions
        "partitioner": "murmur2_random",
        "linger.ms": 5,
        "acks": "all",
        # fewer, larger produce requests: a task writes its whole partition at once (bench/spark_bench.py:
        # sink 0.40-0.47x -> 0.62-0.68x of the discarding writer at 200k rows)
        "batch.num.messages": 100000,
        "queue.buffering.max.messages": 1000000,
    }
    conf.update(options.client_config)
    return conf


def _as_bytes(column: pa.Array) -> list[bytes | None]:
    """A string or binary column as Python bytes (strings re-typed to binary without copying)."""
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.large_binary() if pa.types.is_large_string(column.type) else pa.binary())
    return column.to_pylist()


def _batch_id() -> int | None:
    try:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        raw = ctx.getLocalProperty(_BATCH_ID_PROPERTY) if ctx is not None else None
        return int(raw) if raw is not None else None
    except Exception:  # noqa: BLE001 - no task context outside Spark (tests, local use)
        return None


def fast_sink_enabled() -> bool:
    """False when the executors' environment has KAFLITE_SPARK_FAST_PATH=0 (librdkafka does everything)."""
    return os.environ.get("KAFLITE_SPARK_FAST_PATH", "1") != "0"


def produce_arrow(producer: Any, options: WriterOptions, batches: Iterator[pa.RecordBatch],
                  batch_id: int | None) -> int:
    """Every row through kaflite's encoder and idempotent producer (kaflite.spark.encode / produce);
    return how many were acknowledged."""
    import numpy as np

    from kaflite.spark.encode import encode, place, topic_indices

    extra = ((options.batch_id_header, str(batch_id).encode())
             if options.batch_id_header and batch_id is not None else None)
    sent = 0
    for batch in batches:
        n = batch.num_rows
        if n == 0:
            continue
        col = {name.lower(): batch.column(i) for i, name in enumerate(batch.schema.names)}
        if options.topic is None and "topic" not in col:
            raise OptionError("topic option required when no 'topic' attribute is present.")
        try:
            names, index = topic_indices(col.get("topic"), options.topic)
        except ValueError as e:
            raise OptionError(str(e)) from None
        if options.topic is not None:
            index = np.zeros(n, dtype=np.int64)
        counts = np.array([producer.partition_count(t) for t in names], dtype=np.int64)
        keys = col.get("key")
        has_null_key = keys is None or keys.null_count > 0
        sticky = np.array([producer.sticky_partition(t) if has_null_key else 0 for t in names], dtype=np.int64)
        try:
            parts = place(keys, col.get("partition"), counts[index], sticky[index])
        except ValueError as e:
            raise OptionError(str(e)) from None
        # one timestamp for the rows of a batch, as the Java producer stamps records when they are sent
        now_ms = int(time.time() * 1000)
        producer.send(encode(names, index, parts, keys, col["value"], col.get("headers"), now_ms, extra,
                             producer.max_batch_bytes))
        sent += n
    acked = producer.flush()
    if acked != sent:
        raise RuntimeError(f"Kafka sink: {sent - acked} of {sent} records unacknowledged")
    return sent


@functools.lru_cache(maxsize=64)
def _refused_setting(items: frozenset[tuple[str, str]]) -> str | None:
    from confluent_kafka import KafkaException, Producer

    try:
        # no bootstrap server: librdkafka checks the names and values and connects nowhere; log_level 0
        # keeps its "No bootstrap.servers configured" notice off the user's terminal
        Producer({**dict(items), "log_level": 0})
    except KafkaException as e:
        return str(e.args[0].str() if e.args else e)
    return None


def check_settings(conf: dict[str, Any]) -> None:
    """The fast sink reads few `kafka.*` settings (kaflite.spark.produce); a misspelt or bad one is still
    refused by name, as on the librdkafka path: librdkafka checks them all (once per set of settings)."""
    items = frozenset((k, str(v)) for k, v in conf.items() if k != "bootstrap.servers" and not callable(v))
    why = _refused_setting(items)
    if why is not None:
        raise OptionError(f"Kafka sink: {why}")


def produce_batches(options: WriterOptions, batches: Iterator[pa.RecordBatch], batch_id: int | None) -> int:
    """Produce every row; return how many were acknowledged. Raises if any delivery failed.

    Through kaflite's encoder and client when the settings allow (kaflite.spark.produce), else (and
    with KAFLITE_SPARK_FAST_PATH=0) through librdkafka, a `produce()` call per row."""
    if fast_sink_enabled():
        from kaflite.spark import produce as fast

        conf = producer_config(options)
        if fast.supported(conf):
            check_settings(conf)
            arrow_producer = fast.ArrowProducer(conf)
            try:
                arrow_producer.start()
            except fast.Unsupported as why:
                log.info("kaflite sink: producing through librdkafka (%s)", why)
                arrow_producer.close()
            else:
                log.debug("kaflite sink: a task writes through kaflite's client")
                with arrow_producer:
                    return produce_arrow(arrow_producer, options, batches, batch_id)
    from confluent_kafka import Producer

    log.debug("kaflite sink: a task writes through librdkafka")
    failures: list[str] = []

    def on_error(err: Any, msg: Any) -> None:
        failures.append(f"{msg.topic()}: {err}")

    # delivery reports only for failures: a Python callback per record would halve the throughput
    producer = Producer(
        producer_config(options) | {"delivery.report.only.error": True, "on_delivery": on_error}
    )
    produce, poll = producer.produce, producer.poll
    sent = 0
    stamp = (
        [(options.batch_id_header, str(batch_id).encode())]
        if options.batch_id_header and batch_id is not None
        else []
    )
    for batch in batches:
        names = [n.lower() for n in batch.schema.names]
        col = {n: batch.column(i) for i, n in enumerate(names)}
        n = batch.num_rows
        values = _as_bytes(col["value"])
        keys = _as_bytes(col["key"]) if "key" in col else [None] * n
        if options.topic is not None:
            topics: list[Any] = [options.topic] * n
        elif "topic" in col:
            topics = col["topic"].to_pylist()
            if None in topics:
                raise OptionError(
                    "null topic present in the data. Use the topic option for setting a default topic."
                )
        else:
            raise OptionError("topic option required when no 'topic' attribute is present.")
        parts = col["partition"].to_pylist() if "partition" in col else None
        headers = col["headers"].to_pylist() if "headers" in col else None
        if parts is None and headers is None and not stamp:
            for topic, value, key in zip(topics, values, keys, strict=True):
                try:
                    produce(topic, value, key)
                except BufferError:
                    _produce_when_room(producer, topic, value, key, {})
        else:
            for i in range(n):
                kwargs: dict[str, Any] = {}
                if parts is not None and parts[i] is not None:
                    kwargs["partition"] = parts[i]
                h = [(e["key"], e["value"]) for e in headers[i]] if headers is not None and headers[i] else []
                if h or stamp:
                    kwargs["headers"] = h + stamp
                try:
                    produce(topics[i], values[i], keys[i], **kwargs)
                except BufferError:
                    _produce_when_room(producer, topics[i], values[i], keys[i], kwargs)
        sent += n
        poll(0)
    remaining = producer.flush(120)
    if failures or remaining:
        raise RuntimeError(
            f"Kafka sink: {len(failures)} of {sent} records failed"
            + (f", {remaining} unacknowledged after 120 s" if remaining else "")
            + (f"; first error: {failures[0]}" if failures else "")
        )
    return sent


def _produce_when_room(producer: Any, topic: Any, value: Any, key: Any, kwargs: dict[str, Any]) -> None:
    """The local queue is full: serve delivery reports until the record fits (bounded by the queue)."""
    deadline = time.monotonic() + 120
    while True:
        producer.poll(0.05)
        try:
            producer.produce(topic, value, key, **kwargs)
            return
        except BufferError:
            if time.monotonic() > deadline:
                raise RuntimeError("Kafka sink: local producer queue stayed full for 120 s") from None


def progress_location(options: WriterOptions, task_partition: int) -> tuple[str, str, int]:
    """(group, topic, partition) whose committed offset is the next micro-batch of task `task_partition`:
    its own group (named as its transactional id) and partition 0 of the progress topic, which exists
    (Kafka refuses an offset commit for a partition that does not)."""
    assert options.transactional_id_prefix is not None and options.progress_topic is not None
    return f"{options.transactional_id_prefix}-{task_partition}", options.progress_topic, 0


def legacy_progress_location(prefix: str, task_partition: int) -> tuple[str, str, int]:
    """Where the sink kept a task's progress before `progress_location` (a topic that never existed, so
    only kaflite accepted the commit): read, never written."""
    return prefix, f"{prefix}.sink-progress", task_partition


def progress_metadata(batch_id: int) -> str:
    return f"kaflite spark sink: micro-batch {batch_id} committed"


def _committed_offset(consumer: Any, topic: str, partition: int) -> int:
    """The group's committed offset of (topic, partition), -1 when none (read_committed: a pending
    transactional commit is waited for)."""
    from confluent_kafka import TopicPartition

    tp = consumer.committed([TopicPartition(topic, partition)], timeout=60)[0]
    if tp.error is not None:
        raise RuntimeError(f"Kafka sink: reading the progress of {topic}-{partition} failed: {tp.error}")
    return max(int(tp.offset), -1)  # OFFSET_INVALID (-1001): nothing committed


def _progress_consumer(options: WriterOptions, group: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": options.bootstrap_servers, "group.id": group,
                     "isolation.level": "read_committed", "enable.auto.commit": False})


def produce_exactly_once(options: WriterOptions, batches: Iterator[pa.RecordBatch], batch_id: int,
                         task_partition: int) -> int:
    """One transaction per task and micro-batch (see the module doc); returns the rows written (0 when
    this batch's task had already committed). Through kaflite's encoder and transactional client when
    the settings and the broker allow (kaflite.spark.transaction), else through librdkafka."""
    prefix = options.transactional_id_prefix
    assert prefix is not None
    transactional_id = f"{prefix}-{task_partition}"
    if fast_sink_enabled():
        from kaflite.spark import produce as fast
        from kaflite.spark import transaction

        # the sink's own transactional id replaces any `kafka.transactional.id`, on both paths
        conf = {k: v for k, v in producer_config(options).items() if k != "transactional.id"}
        if fast.supported(conf):
            check_settings(conf)
            producer = transaction.TransactionalArrowProducer(conf, transactional_id)
            try:
                producer.start()  # fences and aborts an earlier incarnation's open transaction
            except fast.Unsupported as why:
                log.info("kaflite sink: exactly once through librdkafka (%s)", why)
                producer.close()
            else:
                # which path a task took, for whoever turns kaflite.spark's debug log on in the executors
                # (tests/spark/test_exactly_once_sink.py checks its driver's tasks took this one)
                log.debug("kaflite sink: task %d of batch %d: exactly once through kaflite's client",
                          task_partition, batch_id)
                with producer:
                    return _exactly_once_fast(producer, options, batches, batch_id, task_partition)
    log.debug("kaflite sink: task %d of batch %d: exactly once through librdkafka", task_partition, batch_id)
    return _exactly_once_librdkafka(options, batches, batch_id, task_partition, transactional_id)


def _exactly_once_fast(producer: Any, options: WriterOptions, batches: Iterator[pa.RecordBatch],
                       batch_id: int, task_partition: int) -> int:
    from kaflite.spark.transaction import ProducerFenced

    prefix = options.transactional_id_prefix
    assert prefix is not None
    group, topic, partition = progress_location(options, task_partition)
    done = producer.committed_offset(group, topic, partition)
    if done < 0:  # nothing of its own yet: a checkpoint of the layout before may have progress
        done = producer.committed_offset(*legacy_progress_location(prefix, task_partition))
    if done > batch_id:
        log.info("kaflite sink: batch %d of task %d was already committed; skipped", batch_id, task_partition)
        return 0
    try:
        sent = produce_arrow(producer, options, batches, batch_id)
        # the bytes the librdkafka path commits: confluent-kafka sends the metadata with its C string's
        # NUL terminator, and its readers (committed()) read up to a NUL, running past the end without one
        producer.send_offsets(group, topic, partition, batch_id + 1, progress_metadata(batch_id) + "\x00")
        producer.commit()
    except ProducerFenced:
        raise  # a newer incarnation owns the id now (and aborted this one's transaction)
    except BaseException:
        try:
            producer.abort()
        except Exception as e:  # noqa: BLE001 - the first error is the task's; the next init aborts anyway
            log.warning("kaflite sink: aborting the transaction of task %d failed: %s", task_partition, e)
        raise
    return sent


def _exactly_once_librdkafka(options: WriterOptions, batches: Iterator[pa.RecordBatch], batch_id: int,
                             task_partition: int, transactional_id: str) -> int:
    from confluent_kafka import Producer, TopicPartition

    prefix = options.transactional_id_prefix
    assert prefix is not None
    base = producer_config(options)
    producer = Producer(base | {"transactional.id": transactional_id})
    producer.init_transactions(60)  # fences and aborts an earlier incarnation's open transaction
    group, topic, partition = progress_location(options, task_partition)
    consumer = _progress_consumer(options, group)
    try:
        done = _committed_offset(consumer, topic, partition)
        if done < 0:  # nothing of its own yet: a checkpoint of the layout before may have progress
            old_group, old_topic, old_partition = legacy_progress_location(prefix, task_partition)
            legacy = _progress_consumer(options, old_group)
            try:
                done = _committed_offset(legacy, old_topic, old_partition)
            finally:
                legacy.close()
        if done > batch_id:
            log.info("kaflite sink: batch %d of task %d was already committed; skipped", batch_id, task_partition)
            return 0
        failures: list[str] = []

        def on_error(err: Any, msg: Any) -> None:
            if err is not None:
                failures.append(f"{msg.topic()}: {err}")

        producer.begin_transaction()
        sent = _produce_rows(producer, options, batches, batch_id, on_error)
        producer.flush(120)
        if failures:
            producer.abort_transaction(60)
            raise RuntimeError(f"Kafka sink: {len(failures)} of {sent} records failed; first error: {failures[0]}")
        producer.send_offsets_to_transaction(
            [TopicPartition(topic, partition, batch_id + 1, metadata=progress_metadata(batch_id))],
            consumer.consumer_group_metadata(), 60)
        producer.commit_transaction(120)
        return sent
    finally:
        consumer.close()


def _produce_rows(producer: Any, options: WriterOptions, batches: Iterator[pa.RecordBatch], batch_id: int,
                  on_error: Any) -> int:
    sent = 0
    stamp = [(options.batch_id_header, str(batch_id).encode())] if options.batch_id_header else []
    for batch in batches:
        names = [n.lower() for n in batch.schema.names]
        col = {n: batch.column(i) for i, n in enumerate(names)}
        n = batch.num_rows
        values = _as_bytes(col["value"])
        keys = _as_bytes(col["key"]) if "key" in col else [None] * n
        if options.topic is not None:
            topics: list[Any] = [options.topic] * n
        elif "topic" in col:
            topics = col["topic"].to_pylist()
            if None in topics:
                raise OptionError("null topic present in the data. Use the topic option for setting a default topic.")
        else:
            raise OptionError("topic option required when no 'topic' attribute is present.")
        parts = col["partition"].to_pylist() if "partition" in col else None
        headers = col["headers"].to_pylist() if "headers" in col else None
        for i in range(n):
            kwargs: dict[str, Any] = {"on_delivery": on_error}
            if parts is not None and parts[i] is not None:
                kwargs["partition"] = parts[i]
            h = [(e["key"], e["value"]) for e in headers[i]] if headers is not None and headers[i] else []
            if h or stamp:
                kwargs["headers"] = h + stamp
            try:
                producer.produce(topics[i], values[i], keys[i], **kwargs)
            except BufferError:
                _produce_when_room(producer, topics[i], values[i], keys[i], kwargs)
        sent += n
        producer.poll(0)
    return sent


def _task_partition() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise OptionError("exactlyOnce needs a Spark task context")
    return int(ctx.partitionId())


class KafkaBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: WriterOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        return KafkaCommitMessage(records=produce_batches(self.options, iterator, None))


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: WriterOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        batch_id = _batch_id()
        if self.options.exactly_once:
            if batch_id is None:
                raise OptionError("exactlyOnce needs the micro-batch id (a streaming query)")
            return KafkaCommitMessage(records=produce_exactly_once(self.options, iterator, batch_id,
                                                                   _task_partition()), batch_id=batch_id)
        return KafkaCommitMessage(
            records=produce_batches(self.options, iterator, batch_id), batch_id=batch_id
        )

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total = sum(m.records for m in messages if isinstance(m, KafkaCommitMessage))
        log.info("kaflite sink: batch %d committed, %d records", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        # records already acknowledged stay in the topic (at-least-once); the batch is retried
        log.warning("kaflite sink: batch %d aborted; acknowledged records remain (at least once)", batchId)
