"""Streaming reads on a real broker: maxOffsetsPerTrigger with Trigger.AvailableNow, a partition added
mid-stream, failOnDataLoss; and a streaming write."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.spark


def _stream(spark: Any, kafka: Any, **options: str) -> Any:
    reader = spark.readStream.format("kaflite").option("kafka.bootstrap.servers", kafka.bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _wait(cond: Callable[[], bool], what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def test_max_offsets_per_trigger_with_available_now(spark: Any, kafka: Any, tmp_path: Any) -> None:
    topic = kafka.topic("rate", 3)
    lags = {0: 30, 1: 10, 2: 2}
    kafka.produce(topic, [{"value": b"x", "partition": p} for p, n in lags.items() for _ in range(n)])
    name = f"rate_{uuid.uuid4().hex[:8]}"
    query = (
        _stream(spark, kafka, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="10")
        .selectExpr("partition", "offset")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120), "AvailableNow query did not finish"
    rows = sorted((r.partition, r.offset) for r in spark.table(name).collect())
    assert rows == [(p, o) for p, n in lags.items() for o in range(n)]
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]
    # prorated by lag: 30/10/2 -> 7 + 2 + 1 (small partitions are not starved), never above the limit
    # plus the partitions rounded up from below one
    assert sum(sizes) == 42 and len(sizes) >= 4 and max(sizes) <= 10 + 3, sizes


def test_partition_added_mid_stream_is_read_from_its_start(spark: Any, kafka: Any, tmp_path: Any) -> None:
    from confluent_kafka.admin import NewPartitions

    topic = kafka.topic("grow", 1)
    kafka.produce(topic, [{"value": b"a%d" % i, "partition": 0} for i in range(4)])
    name = f"grow_{uuid.uuid4().hex[:8]}"
    query = (
        _stream(spark, kafka, subscribe=topic, startingOffsets="earliest")
        .selectExpr("partition", "offset", "value")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    try:
        _wait(lambda: spark.table(name).count() == 4, "the first 4 records")
        admin = kafka.admin()
        admin.create_partitions([NewPartitions(topic, 2)])[topic].result(30)
        kafka.produce(topic, [{"value": b"b%d" % i, "partition": 1} for i in range(3)])
        _wait(lambda: spark.table(name).count() >= 7, "the records of the new partition")
        rows = sorted((r.partition, r.offset, r.value) for r in spark.table(name).collect())
        assert rows == [(0, i, b"a%d" % i) for i in range(4)] + [(1, i, b"b%d" % i) for i in range(3)]
    finally:
        query.stop()


def _truncated_topic(kafka: Any) -> str:
    """A topic whose log start moved from 0 to 6, as retention does (DeleteRecords)."""
    from confluent_kafka import TopicPartition

    topic = kafka.topic("loss", 1)
    kafka.produce(topic, [{"value": b"%d" % i, "partition": 0} for i in range(10)])
    admin = kafka.admin()
    admin.delete_records([TopicPartition(topic, 0, 6)])[TopicPartition(topic, 0, 6)].result(30)
    return topic


def test_fail_on_data_loss_batch(spark: Any, kafka: Any) -> None:
    topic = _truncated_topic(kafka)

    def read(fail: str) -> list[int]:
        df = (
            spark.read.format("kaflite")
            .option("kafka.bootstrap.servers", kafka.bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", f'{{"{topic}": {{"0": 2}}}}')
            .option("endingOffsets", "latest")
            .option("failOnDataLoss", fail)
            .load()
        )
        return sorted(r.offset for r in df.collect())

    with pytest.raises(Exception, match="Cannot fetch offset 2"):
        read("true")
    assert read("false") == [6, 7, 8, 9]


def test_fail_on_data_loss_stream(spark: Any, kafka: Any, tmp_path: Any) -> None:
    """The query stops with the error, or (failOnDataLoss=false) skips to what is left."""
    topic = _truncated_topic(kafka)

    def stream(fail: str) -> tuple[Any, str]:
        name = f"loss_{uuid.uuid4().hex[:8]}"
        query = (
            _stream(
                spark,
                kafka,
                subscribe=topic,
                startingOffsets=f'{{"{topic}": {{"0": 2}}}}',
                failOnDataLoss=fail,
            )
            .selectExpr("offset")
            .writeStream.format("memory")
            .queryName(name)
            .option("checkpointLocation", str(tmp_path / f"cp-{fail}"))
            .trigger(availableNow=True)
            .start()
        )
        return query, name

    query, _ = stream("true")
    with pytest.raises(Exception, match="Cannot fetch offset 2"):
        query.awaitTermination(120)
    query, name = stream("false")
    assert query.awaitTermination(120)
    assert sorted(r.offset for r in spark.table(name).collect()) == [6, 7, 8, 9]


def test_streaming_write_with_batch_id_header(spark: Any, kafka: Any, tmp_path: Any) -> None:
    source = kafka.topic("swsrc", 2)
    sink = kafka.topic("swdst", 2)
    kafka.produce(source, [{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(12)])
    query = (
        _stream(spark, kafka, subscribe=source, startingOffsets="earliest", maxOffsetsPerTrigger="5")
        .selectExpr("key", "upper(cast(value as string)) AS value")
        .writeStream.format("kaflite")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("topic", sink)
        .option("batchIdHeader", "spark.batch")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    out = kafka.read_all(sink)
    assert sorted((m.key(), m.value()) for m in out) == sorted((b"k%d" % i, b"V%d" % i) for i in range(12))
    batch_ids = {dict(m.headers())["spark.batch"] for m in out}
    assert len(batch_ids) >= 2 and all(b.isdigit() for b in batch_ids)


@pytest.mark.slow
def test_min_offsets_per_trigger_waits_until_enough_or_max_delay(
    spark: Any, kafka: Any, tmp_path: Any
) -> None:
    topic = kafka.topic("minrows", 1)
    kafka.produce(topic, [{"value": b"a", "partition": 0} for _ in range(3)])
    name = f"minrows_{uuid.uuid4().hex[:8]}"
    query = (
        _stream(
            spark,
            kafka,
            subscribe=topic,
            startingOffsets="earliest",
            minOffsetsPerTrigger="5",
            # far beyond the time to the first trigger even on a loaded machine, so the check below
            # that a trigger with 3 < 5 records made no batch holds without depending on timing
            maxTriggerDelay="20s",
        )
        .selectExpr("offset")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        # 3 < 5 records available: wait until a trigger has been evaluated (Spark reports the first
        # trigger that finds no new data as a progress event), then no batch may have run
        _wait(lambda: len(query.recentProgress) > 0, "a trigger evaluated with 3 of the 5 records")
        assert [p["numInputRows"] for p in query.recentProgress] == [0] * len(query.recentProgress)
        assert spark.table(name).count() == 0
        kafka.produce(topic, [{"value": b"b", "partition": 0} for _ in range(3)])
        _wait(lambda: spark.table(name).count() == 6, "a batch once 5 records are available")
    finally:
        query.stop()
    # one more record never reaches the minimum: maxTriggerDelay lets it through. A query of its own, with a
    # short delay (the one above waited its 20 s here): the record is read by a batch the delay forced
    kafka.produce(topic, [{"value": b"c", "partition": 0}])
    forced = f"minrows_forced_{uuid.uuid4().hex[:8]}"
    query = (
        _stream(spark, kafka, subscribe=topic, startingOffsets="earliest", minOffsetsPerTrigger="50",
                maxTriggerDelay="1s")
        .selectExpr("offset")
        .writeStream.format("memory")
        .queryName(forced)
        .option("checkpointLocation", str(tmp_path / "cp-forced"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        _wait(lambda: spark.table(forced).count() == 7, "the batch forced by maxTriggerDelay", timeout=60)
        # 7 < 50 records: only the delay let a batch run, one batch of all 7 (its progress is reported
        # after the sink has the rows)
        _wait(lambda: any(p["numInputRows"] for p in query.recentProgress), "the forced batch's progress")
        assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [7]
    finally:
        query.stop()


def test_subscribe_pattern_picks_up_a_topic_created_mid_stream(spark: Any, kafka: Any, tmp_path: Any) -> None:
    prefix = f"pat{uuid.uuid4().hex[:6]}"
    first = kafka.topic(prefix, 1)
    kafka.produce(first, [{"value": b"a", "partition": 0}])
    name = f"pat_{uuid.uuid4().hex[:8]}"
    query = (
        _stream(spark, kafka, subscribePattern=f"{prefix}-.*", startingOffsets="earliest")
        .selectExpr("topic", "offset")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    try:
        _wait(lambda: spark.table(name).count() == 1, "the first topic's record")
        second = kafka.topic(prefix, 2)
        kafka.produce(second, [{"value": b"b", "partition": p} for p in (0, 1, 1)])
        _wait(lambda: spark.table(name).count() >= 4, "the new topic's records")
        rows = sorted((r.topic, r.offset) for r in spark.table(name).collect())
        assert rows == sorted([(first, 0), (second, 0), (second, 0), (second, 1)])
    finally:
        query.stop()
