"""`register(spark, as_kafka=True)`: a pipeline written for Spark's `format("kafka")` runs on kaflite's
source and sink without the JVM connector's jar (batch read and write, a stream resolved)."""

from __future__ import annotations

from typing import Any

import pytest

from kaflite.spark import register
from kaflite.spark.alias import aliased

pytestmark = pytest.mark.spark


def test_format_kafka_reads_and_writes_through_kaflite(spark: Any, kafka: Any) -> None:
    assert register(spark, as_kafka=True) is True
    assert register(spark, as_kafka=True) is True  # idempotent
    topic = kafka.topic("alias", 2)
    out = kafka.topic("alias-out", 1)
    kafka.produce(topic, [{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(6)])

    batch = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", topic)
        .load()
    )
    assert sorted(r.value for r in batch.select("value").collect()) == [b"v%d" % i for i in range(6)]

    batch.selectExpr("key", "value").write.format("kafka").mode("append").option(
        "kafka.bootstrap.servers", kafka.bootstrap
    ).option("topic", out).save()
    assert sorted(m.value() for m in kafka.read_all(out)) == [b"v%d" % i for i in range(6)]

    # a stream resolves to the same source (analysis fails on "kafka" without the alias); running queries
    # through it is what tests/spark/test_streaming.py does under the name kaflite
    stream = (
        spark.readStream.format("KAFKA")  # Spark's names are case-insensitive
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", topic)
        .load()
    )
    assert stream.isStreaming and stream.columns == batch.columns
    assert batch.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


def test_other_names_and_other_contexts_pass_through(spark: Any) -> None:
    register(spark, as_kafka=True)

    class Reader:
        def __init__(self, session: Any) -> None:
            self._spark = session

    assert aliased(Reader(spark), "kafka") == "kaflite"
    assert aliased(Reader(spark), "parquet") == "parquet"
    assert aliased(Reader(object()), "kafka") == "kafka"  # a session of another SparkContext
    assert aliased(Reader(None), "kafka") == "kafka"
