"""The source schema (Spark's Kafka connector schema) and Arrow record batches built column by column
(pure: no I/O, no Spark session needed)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

# Kafka's TimestampType ids, as Spark's `timestampType` column shows them
NO_TIMESTAMP_TYPE = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1

HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))


def arrow_schema(include_headers: bool) -> pa.Schema:
    """Equal to pyspark's `to_arrow_schema(spark_schema(...), timezone="UTC")`, which the Python data
    source runner checks every batch against."""
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", HEADERS_TYPE))
    return pa.schema(fields)


def spark_schema_ddl(include_headers: bool) -> str:
    ddl = (
        "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP, "
        "timestampType INT"
    )
    if include_headers:
        ddl += ", headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
    return ddl


class Record(Protocol):
    """What confluent_kafka.Message offers (and what tests can fake)."""

    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def offset(self) -> int: ...
    def timestamp(self) -> tuple[int, int]: ...
    def headers(self) -> list[tuple[str, bytes | None]] | None: ...


# librdkafka's timestamp types (TIMESTAMP_NOT_AVAILABLE=0, _CREATE_TIME=1, _LOG_APPEND_TIME=2) -> Kafka's ids
_TS_TYPE_IDS = np.array([NO_TIMESTAMP_TYPE, CREATE_TIME, LOG_APPEND_TIME], dtype=np.int32)


def records_to_batch(
    topic: str, partition: int, records: Sequence[Any], include_headers: bool
) -> pa.RecordBatch:
    """One RecordBatch from consecutive records (see `Record`) of one partition, one column at a time."""
    n = len(records)
    stamps = [r.timestamp() for r in records]
    kinds = np.fromiter((kind for kind, _ in stamps), dtype=np.int64, count=n)
    millis = np.fromiter((ts for _, ts in stamps), dtype=np.int64, count=n)
    columns: list[Any] = [
        pa.array([r.key() for r in records], pa.binary()),
        pa.array([r.value() for r in records], pa.binary()),
        pa.array([topic] * n, pa.string()),
        pa.array(np.full(n, partition, dtype=np.int32)),
        pa.array(np.fromiter((r.offset() for r in records), dtype=np.int64, count=n)),
        # Kafka timestamps are milliseconds; Spark's TimestampType is microseconds
        pa.array(millis * 1000, pa.timestamp("us", tz="UTC")),
        pa.array(_TS_TYPE_IDS[np.clip(kinds, 0, 2)]),
    ]
    if include_headers:
        headers = []
        for r in records:
            h = r.headers()
            # Spark shows a record without headers as null, not as an empty array
            headers.append([{"key": k, "value": v} for k, v in h] if h else None)
        columns.append(pa.array(headers, HEADERS_TYPE))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))
