"""A batch job topic -> topic through the kaflite source and sink on Spark's `local-cluster[2,1,1024]`
master: a standalone master and two workers inside this driver's JVM, each worker starting its executor
as a JVM process of its own, with its own Python workers (as on a real cluster). Run as its own process by
test_local_cluster.py (one SparkContext per process; the tests' shared session is local[2]).

usage: python cluster_driver.py SPARK_HOME BOOTSTRAP INPUT OUTPUT

SPARK_HOME: a directory whose entries link to pyspark's (test_local_cluster.py makes it): a standalone
worker writes its executors' stdout/stderr under SPARK_HOME/work, which must not be the installed pyspark.
"""

from __future__ import annotations

import os
import sys
import time

# conftest.py's TEST_JVM_OPTIONS (not importable here: this script runs outside pytest)
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def main() -> None:
    t0 = time.monotonic()
    spark_home, bootstrap, source, sink = sys.argv[1:5]
    os.environ["SPARK_HOME"] = spark_home
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from kaflite.spark import register

    spark = (
        SparkSession.builder.master("local-cluster[2,1,1024]")
        .appName("kaflite-local-cluster")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
        .config("spark.executor.extraJavaOptions", JVM_OPTIONS)
        # the executors' Python workers import kaflite from the code under test (this checkout's src),
        # not from whatever the venv's editable install points at
        .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    sc = spark.sparkContext
    # getOrCreate returns before the executors have registered; with both registered (and one core
    # each), the job's first two tasks are offered one to each executor
    deadline = time.monotonic() + 120
    while len(sc.statusTracker().getExecutorInfos()) < 3 and time.monotonic() < deadline:  # + the driver
        time.sleep(0.2)
    print(f"executors registered at {time.monotonic() - t0:.1f} s", flush=True)
    rows = (
        spark.read.format("kaflite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .load()
        .selectExpr("key", "value")
    )
    (rows.write.format("kaflite").option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
     .mode("append").save())
    print(f"job done at {time.monotonic() - t0:.1f} s", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
