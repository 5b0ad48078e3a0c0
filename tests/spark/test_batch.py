"""Batch reads and writes through Spark on a real broker (shared SparkSession, tiny data)."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import vectors_of_kind

pytestmark = pytest.mark.spark


def _read(spark: Any, kafka: Any, **options: str) -> Any:
    reader = spark.read.format("kaflite").option("kafka.bootstrap.servers", kafka.bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_batch_read_offset_ranges(spark: Any, kafka: Any) -> None:
    topic = kafka.topic("ranges", 3)
    kafka.produce(
        topic,
        [{"value": f"{p}-{i}".encode(), "key": b"k", "partition": p} for p in range(3) for i in range(6)],
    )

    rows = _read(spark, kafka, subscribe=topic).collect()
    assert sorted((r.partition, r.offset, r.value) for r in rows) == [
        (p, i, f"{p}-{i}".encode()) for p in range(3) for i in range(6)
    ]
    assert {r.topic for r in rows} == {topic} and {r.key for r in rows} == {b"k"}

    # explicit offsets, -2 = earliest, -1 = latest
    rows = _read(
        spark,
        kafka,
        subscribe=topic,
        startingOffsets=f'{{"{topic}": {{"0": 2, "1": -2, "2": 5}}}}',
        endingOffsets=f'{{"{topic}": {{"0": 4, "1": 1, "2": -1}}}}',
    ).collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(0, 2), (0, 3), (1, 0), (2, 5)]

    # assign reads only the named partitions; minPartitions splits the ranges into more tasks
    df = _read(spark, kafka, assign=f'{{"{topic}": [1]}}', minPartitions="3")
    assert df.rdd.getNumPartitions() == 3
    assert sorted(r.offset for r in df.collect()) == list(range(6))


def test_batch_read_by_timestamp(spark: Any, kafka: Any) -> None:
    topic = kafka.topic("stamps", 2)
    base = 1_700_000_000_000
    kafka.produce(
        topic,
        [
            {"value": f"{p}-{i}".encode(), "partition": p, "timestamp": base + 1000 * i}
            for p in range(2)
            for i in range(5)
        ],
    )
    rows = _read(spark, kafka, subscribe=topic, startingTimestamp=str(base + 3000)).collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(0, 3), (0, 4), (1, 3), (1, 4)]
    assert {r.timestamp.timestamp() for r in rows} == {(base + 3000) / 1000, (base + 4000) / 1000}
    assert {r.timestampType for r in rows} == {0}  # CreateTime

    rows = _read(
        spark,
        kafka,
        subscribe=topic,
        startingOffsetsByTimestamp=f'{{"{topic}": {{"0": {base + 1000}, "1": {base + 2000}}}}}',
        endingTimestamp=str(base + 2500),
    ).collect()
    # ending: the first offset at/after the timestamp (3), exclusive
    assert sorted((r.partition, r.offset) for r in rows) == [(0, 1), (0, 2), (1, 2)]

    with pytest.raises(Exception, match="resolved start offset 4 is greater than the resolved end offset 3"):
        _read(
            spark,
            kafka,
            subscribe=topic,
            startingTimestamp=str(base + 4000),
            endingTimestamp=str(base + 2500),
        ).collect()

    with pytest.raises(Exception, match="No offset matched"):
        _read(spark, kafka, subscribe=topic, startingTimestamp=str(base + 99_000)).collect()
    rows = _read(
        spark,
        kafka,
        subscribe=topic,
        startingTimestamp=str(base + 99_000),
        startingOffsetsByTimestampStrategy="latest",
    ).collect()
    assert rows == []


def test_bad_options_fail_with_the_option_named(spark: Any, kafka: Any) -> None:
    with pytest.raises(Exception, match="One of the following options must be specified"):
        _read(spark, kafka).collect()
    with pytest.raises(Exception, match="auto.offset.reset' is not supported"):
        _read(spark, kafka, subscribe="x", **{"kafka.auto.offset.reset": "earliest"}).collect()


def _partition_vectors() -> list[tuple[bytes, int]]:
    """Keys and the partition Kafka's Java client picks for them among 4 (Apache Kafka's own output)."""
    out = []
    for case in vectors_of_kind("partitioner.partition_for_key"):
        key = bytes.fromhex(case["input"]["key_hex"])
        if key and "4" in case["expected"]["partition_by_num_partitions"]:
            out.append((key, case["expected"]["partition_by_num_partitions"]["4"]))
    return out[:40]


def test_sink_round_trip_and_java_partitioning(spark: Any, kafka: Any) -> None:
    topic = kafka.topic("sink", 4)
    keyed = _partition_vectors()
    assert len(keyed) >= 10
    rows = [
        {"key": k, "value": b"v%d" % i, "headers": [{"key": "n", "value": b"%d" % i}] if i % 2 else None}
        for i, (k, _) in enumerate(keyed)
    ]
    schema = "key BINARY, value BINARY, headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
    spark.createDataFrame(rows, schema).write.format("kaflite").option(
        "kafka.bootstrap.servers", kafka.bootstrap
    ).option("topic", topic).mode("append").save()

    back = _read(spark, kafka, subscribe=topic, includeHeaders="true").collect()
    assert sorted((r.key, r.value, _h(r.headers)) for r in back) == sorted(
        (r["key"], r["value"], _h(r["headers"])) for r in rows
    )
    expected = dict(keyed)
    assert {r.key: r.partition for r in back} == expected

    # topic and partition columns, string key/value; the explicit partition wins over the key
    other = kafka.topic("sink-cols", 2)
    spark.createDataFrame(
        [(other, "a", "x", 1), (other, "b", "y", 0)], "topic STRING, key STRING, value STRING, partition INT"
    ).write.format("kaflite").option("kafka.bootstrap.servers", kafka.bootstrap).mode("append").save()
    got = sorted((r.key, r.value, r.partition) for r in _read(spark, kafka, subscribe=other).collect())
    assert got == [(b"a", b"x", 1), (b"b", b"y", 0)]


def _h(headers: Any) -> Any:
    if headers is None:
        return None
    return tuple((h["key"], h["value"]) for h in headers)


def test_sink_schema_errors(spark: Any, kafka: Any) -> None:
    def write(df: Any, mode: str = "append", **options: str) -> None:
        w = df.write.format("kaflite").option("kafka.bootstrap.servers", kafka.bootstrap).mode(mode)
        for k, v in options.items():
            w = w.option(k, v)
        w.save()

    with pytest.raises(Exception, match="value attribute type must be a string or binary"):
        write(spark.createDataFrame([(1,)], "value INT"), topic="t")
    with pytest.raises(Exception, match="topic option required"):
        write(spark.createDataFrame([("v",)], "value STRING"))
    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        write(spark.createDataFrame([("v",)], "key STRING"), topic="t")
    with pytest.raises(Exception, match="Save mode Overwrite not allowed for Kafka"):
        write(spark.createDataFrame([("v",)], "value STRING"), mode="overwrite", topic="t")
