"""Arrow batches built column-wise match the schema pyspark checks every batch against."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pytest
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kaflite.spark.arrow import arrow_schema, records_to_batch


@dataclass
class FakeRecord:
    """The confluent_kafka.Message accessors records_to_batch uses."""

    k: bytes | None
    v: bytes | None
    off: int
    ts: tuple[int, int]
    hdrs: list[tuple[str, bytes | None]] | None = None

    def key(self) -> bytes | None:
        return self.k

    def value(self) -> bytes | None:
        return self.v

    def offset(self) -> int:
        return self.off

    def timestamp(self) -> tuple[int, int]:
        return self.ts

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self.hdrs


@pytest.mark.parametrize("include_headers", [False, True])
def test_arrow_schema_is_what_pyspark_derives_from_the_spark_schema(include_headers: bool) -> None:
    # Spark's KafkaRecordToRowConverter.kafkaSchema
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    spark_type = StructType(fields)
    assert to_arrow_schema(spark_type, timezone="UTC").equals(arrow_schema(include_headers))


def test_records_to_batch_columns() -> None:
    recs = [
        FakeRecord(b"k", b"v", 7, (1, 1_700_000_000_123), [("h", b"1"), ("n", None)]),
        FakeRecord(None, None, 9, (2, 5), None),
        FakeRecord(b"", b"x", 10, (0, -1), []),
    ]
    batch = records_to_batch("topic-a", 3, recs, include_headers=True)
    assert batch.schema.equals(arrow_schema(True))
    rows = batch.to_pylist()
    assert [r["key"] for r in rows] == [b"k", None, b""]
    assert [r["value"] for r in rows] == [b"v", None, b"x"]
    assert {r["topic"] for r in rows} == {"topic-a"} and {r["partition"] for r in rows} == {3}
    assert [r["offset"] for r in rows] == [7, 9, 10]
    assert rows[0]["timestamp"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.UTC)
    # CreateTime 0, LogAppendTime 1, none -1 (Kafka's TimestampType ids)
    assert [r["timestampType"] for r in rows] == [0, 1, -1]
    assert rows[0]["headers"] == [{"key": "h", "value": b"1"}, {"key": "n", "value": None}]
    # a record without headers shows null, as in Spark
    assert rows[1]["headers"] is None and rows[2]["headers"] is None


def test_records_to_batch_without_headers_has_no_headers_column() -> None:
    batch = records_to_batch(
        "t", 0, [FakeRecord(b"k", b"v", 0, (1, 0), [("h", b"1")])], include_headers=False
    )
    assert "headers" not in batch.schema.names and batch.num_rows == 1
