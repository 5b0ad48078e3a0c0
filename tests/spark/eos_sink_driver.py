"""A streaming query topic -> topic through the kaflite sink with exactlyOnce=true, run as its own driver
process by test_exactly_once_sink.py (killed with SIGKILL there).

usage: python eos_sink_driver.py BOOTSTRAP INPUT OUTPUT CHECKPOINT_DIR MAX_OFFSETS_PER_TRIGGER PREFIX
"""

from __future__ import annotations

import os
import sys
import time


def main() -> None:
    bootstrap, source, sink, checkpoint, per_trigger, prefix = sys.argv[1:7]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from kaflite.spark import register

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kaflite-eos-sink-driver")
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
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", per_trigger)
        .load()
        .selectExpr("value")
    )
    query = (
        stream.writeStream.format("kaflite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("exactlyOnce", "true")
        .option("transactionalIdPrefix", prefix)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    print("STARTED", flush=True)
    deadline = time.monotonic() + 300
    while query.isActive and time.monotonic() < deadline:
        time.sleep(0.5)
    query.stop()


if __name__ == "__main__":
    main()
