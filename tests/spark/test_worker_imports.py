"""A Spark Python worker that imports kaflite does not import hypothesis (kaflite/hypothesis_gate.py): kio
would, whenever it is installed, for 0.6-0.9 s of CPU in every fresh worker, and a worker never generates
test data. The driver, this pytest process, is left as it is."""

from __future__ import annotations

import sys
from typing import Any

from helpers import missing_module, require


def test_a_spark_python_worker_imports_kaflite_without_hypothesis(spark: Any) -> None:
    require(missing_module("hypothesis"))  # installed with the test extras: where kio would pull it in

    # Defined here so that cloudpickle ships it by value: a module-level function is pickled by reference,
    # and the worker would then import this test module, and with it tests/helpers.py, which is on the
    # worker's path only where PYTHONPATH names tests/ (it does not in CI).
    def _probe(_: Any) -> tuple[str, bool, bool]:
        import sys

        import kaflite.spark.produce  # noqa: F401  # what a sink task imports (kio with it)

        main = getattr(sys.modules.get("__main__"), "__spec__", None)
        return (
            str(getattr(main, "name", "")),
            "kio" in sys.modules,
            sys.modules.get("hypothesis") is not None,
        )

    rows = spark.sparkContext.parallelize([0, 1], 2).map(_probe).collect()
    assert rows and all(main.startswith("pyspark.") and kio and not hyp for main, kio, hyp in rows), rows
    assert sys.modules.get("hypothesis") is not None  # the driver (pytest) keeps it: tests generate data
