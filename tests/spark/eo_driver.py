"""A streaming query run as its own driver process by test_exactly_once.py (killed with SIGKILL there).

usage: python eo_driver.py BOOTSTRAP TOPIC OUTPUT_DIR CHECKPOINT_DIR MAX_OFFSETS_PER_TRIGGER
Reads TOPIC from the earliest offsets in small micro-batches and appends (topic, partition, offset,
value) to Parquet, until killed.
"""

from __future__ import annotations

import os
import sys
import time


def main() -> None:
    bootstrap, topic, output, checkpoint, per_trigger = sys.argv[1:6]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from kaflite.spark import register

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kaflite-eo-driver")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        # conftest.py's TEST_JVM_OPTIONS (not importable here: this script runs outside pytest)
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    stream = (
        spark.readStream.format("kaflite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", per_trigger)
        .load()
        .selectExpr("topic", "partition", "offset", "value")
    )
    query = (
        stream.writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    print("STARTED", flush=True)
    deadline = time.monotonic() + 300  # never outlive the test by much
    while query.isActive and time.monotonic() < deadline:
        time.sleep(0.5)
    query.stop()


if __name__ == "__main__":
    main()
