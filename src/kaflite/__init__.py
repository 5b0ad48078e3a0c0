"""kaflite: a Kafka-compatible streaming platform in Python.

The broker speaks the Kafka wire protocol; `kaflite.assign` holds Kafka's partitioners and
assignors as pure Python; `kaflite.spark` is a PySpark data source and sink.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kaflite.hypothesis_gate import in_spark_worker, keep_hypothesis_out
from kaflite.version import __version__

if in_spark_worker():  # a Spark Python worker imports kaflite to read or write: no test strategies there
    keep_hypothesis_out()

if TYPE_CHECKING:  # pragma: no cover
    from kaflite.server.embedded import EmbeddedBroker
    from kaflite.server.embedded_cluster import EmbeddedCluster

__all__ = ["EmbeddedBroker", "EmbeddedCluster", "__version__"]


def __getattr__(name: str) -> Any:
    # Imported lazily so that `import kaflite.assign` stays stdlib-only and fast.
    if name == "EmbeddedBroker":
        from kaflite.server.embedded import EmbeddedBroker

        return EmbeddedBroker
    if name == "EmbeddedCluster":
        from kaflite.server.embedded_cluster import EmbeddedCluster

        return EmbeddedCluster
    raise AttributeError(name)
