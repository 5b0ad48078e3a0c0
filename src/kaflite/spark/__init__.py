"""kaflite.spark: a PySpark (Python Data Source API) source and sink for Kafka topics.

    from kaflite.spark import register
    register(spark)                      # format("kaflite")
    df = (spark.readStream.format("kaflite")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092").option("subscribe", "events").load())

Options and schema are those of Spark's Kafka connector (see docs/spark.md).
"""

from __future__ import annotations

from typing import Any

from kaflite.spark.source import KafkaAliasDataSource, KafliteDataSource

__all__ = ["KafliteDataSource", "KafkaAliasDataSource", "register"]


def register(spark: Any, kafka_alias: bool = False) -> bool:
    """Register format `kaflite` with a SparkSession; with `kafka_alias`, also try Spark's own name.

    Returns whether the `kafka` alias is active. Spark 4.3 reserves the name `kafka` for its JVM
    connector (DATA_SOURCE_ALREADY_EXISTS even when the jar is absent), so there the alias is refused
    and `format("kaflite")` is the way in; the options and schema are the same.
    """
    spark.dataSource.register(KafliteDataSource)
    if not kafka_alias:
        return False
    try:
        spark.dataSource.register(KafkaAliasDataSource)
    except Exception as e:  # noqa: BLE001 - pyspark's AnalysisException; the alias is best effort
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(e):
            raise
        return False
    return True
