"""The Spark JVMs of the tests write their temporary files under the session's `spark_tmp` directory
(removed at the end, conftest.py), not in /tmp: spark.local.dir (spark-*, blockmgr-*) and java.io.tmpdir
(artifacts-*, liblz4-java-*.so), in the shared session and in a driver process a test starts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark


def test_the_shared_session_writes_under_spark_tmp(spark: Any, spark_tmp: Path) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm.java.lang.System.getProperty("java.io.tmpdir") == str(spark_tmp)
    local = jvm.org.apache.spark.util.Utils.getLocalDir(spark.sparkContext._jsc.sc().getConf())
    assert Path(local).resolve().is_relative_to(spark_tmp.resolve()), local
    # a job that shuffles writes its blocks there (blockmgr-*)
    assert spark.range(100).repartition(2).count() == 100
    assert list(spark_tmp.glob("blockmgr-*")), sorted(p.name for p in spark_tmp.iterdir())


def test_the_drivers_the_tests_start_inherit_it(spark_tmp: Path) -> None:
    """The exactly-once and local-cluster tests' drivers get it from this process's environment (nothing
    in their scripts): pyspark reads PYSPARK_SUBMIT_ARGS, Spark SPARK_LOCAL_DIRS."""
    assert os.environ["SPARK_LOCAL_DIRS"] == str(spark_tmp)
    assert f"spark.driver.defaultJavaOptions=-Djava.io.tmpdir={spark_tmp} " in os.environ["PYSPARK_SUBMIT_ARGS"]
    assert f"spark.executor.defaultJavaOptions=-Djava.io.tmpdir={spark_tmp} " in os.environ["PYSPARK_SUBMIT_ARGS"]
    assert os.environ["PYSPARK_SUBMIT_ARGS"].endswith(" pyspark-shell")
