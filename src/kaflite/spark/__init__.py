"""kaflite.spark: a PySpark (Python Data Source API) source and sink for Kafka topics.

    from kaflite.spark import register
    register(spark)                      # format("kaflite"); register(spark, as_kafka=True): format("kafka") too
    df = (spark.readStream.format("kaflite")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092").option("subscribe", "events").load())

Options and schema are those of Spark's Kafka connector (see docs/spark.md).
"""

from __future__ import annotations

from typing import Any

from kaflite.spark.registry import from_registry, to_registry
from kaflite.spark.source import KafliteDataSource

__all__ = ["KafliteDataSource", "from_registry", "register", "to_registry"]


def register(spark: Any, as_kafka: bool = False, *, kafka_alias: bool | None = None) -> bool:
    """Register format `kaflite` with a SparkSession; with `as_kafka`, `format("kafka")` means it too.

    The `kafka` name is mapped to `kaflite` in PySpark's readers and writers (kaflite.spark.alias: Spark
    4.3 lets no Python data source answer to `kafka` itself), for every session of `spark`'s
    SparkContext. `kafka_alias` is the earlier name of `as_kafka`. Returns whether the alias is active.
    """
    spark.dataSource.register(KafliteDataSource)
    if not (as_kafka or kafka_alias):
        return False
    from kaflite.spark.alias import install

    install(spark)
    return True
