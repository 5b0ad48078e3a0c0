"""`format("kafka")` answered by kaflite's source in PySpark: `register(spark, as_kafka=True)`.

Spark cannot hold a Python data source under the name `kafka`: `DataSource.lookupDataSource` (Spark 4.3,
sql/core/.../execution/datasources/DataSource.scala) raises KAFKA_DATA_SOURCE_NOT_ENABLED for that name
when the JVM connector's classes are absent, before it looks at registered Python data sources, and
`DataSourceRegistration.checkDataSourceExists` therefore refuses to register one (DATA_SOURCE_ALREADY_EXISTS).
So the alias is made on the PySpark side, before the name reaches the JVM.

Rules:
- the `format()` of PySpark's DataFrameReader, DataStreamReader, DataFrameWriter and DataStreamWriter
  is wrapped once per process; `load(format=...)`, `save(format=...)` and `start(format=...)` call
  format(), so they are covered too;
- the wrapper turns `kafka` (any case) into `kaflite` only for the sessions of a SparkContext that
  `install` was given (sessions of one SparkContext share its Python object, including the cloned session
  a foreachBatch function receives); any other name, and any other SparkContext, pass through unchanged;
- not covered: SQL (`USING kafka`), Spark Connect sessions, Scala/Java code.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

KAFLITE = "kaflite"

_contexts: weakref.WeakSet[Any] = weakref.WeakSet()


def _classes() -> list[type]:
    from pyspark.sql.readwriter import DataFrameReader, DataFrameWriter
    from pyspark.sql.streaming.readwriter import DataStreamReader, DataStreamWriter

    return [DataFrameReader, DataFrameWriter, DataStreamReader, DataStreamWriter]


def aliased(owner: Any, source: Any) -> Any:
    """The format name to hand to Spark: `kaflite` for `kafka` in an aliased session, else `source`."""
    if not isinstance(source, str) or source.strip().lower() != "kafka":
        return source
    session = getattr(owner, "_spark", None)
    context = getattr(session, "_sc", None)
    return KAFLITE if context is not None and context in _contexts else source


def _wrap(cls: type) -> None:
    original: Callable[..., Any] = cls.format  # type: ignore[attr-defined]
    if getattr(original, "_kaflite_alias", False):
        return

    @functools.wraps(original)
    def format(self: Any, source: str) -> Any:
        return original(self, aliased(self, source))

    format._kaflite_alias = True  # type: ignore[attr-defined]
    cls.format = format  # type: ignore[attr-defined]


def install(spark: Any) -> None:
    """Answer `format("kafka")` with kaflite's source in every session of `spark`'s SparkContext."""
    context = getattr(spark, "_sc", None)
    if context is None:
        raise TypeError(
            "register(spark, as_kafka=True) needs a classic SparkSession (Spark Connect sessions have no "
            "SparkContext in this process); use format(\"kaflite\") there"
        )
    for cls in _classes():
        _wrap(cls)
    _contexts.add(context)
