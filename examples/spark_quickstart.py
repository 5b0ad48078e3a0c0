"""Read and write kaflite (or any Kafka) topics from PySpark with Spark's Kafka connector options.

    .venv/bin/kaflite serve --dev &                     # a broker on 127.0.0.1:9092
    .venv/bin/python examples/spark_quickstart.py       # KAFLITE_BOOTSTRAP=host:port for another broker

Spark stays on loopback (driver bound to and advertised as 127.0.0.1), logs only errors, and shows no
progress bars, so what is printed is the example's own output, but for the JVM's own
"WARNING: Using incubator modules: jdk.incubator.vector" line (Spark 4's launcher adds that module; no
setting turns the line off: docs/spark.md).
"""

import os
import sys
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession

from kaflite.spark import register

# the variable every kaflite command reads (BOOTSTRAP, what this example used to read, still works)
BOOTSTRAP = os.environ.get("KAFLITE_BOOTSTRAP") or os.environ.get("BOOTSTRAP") or "127.0.0.1:9092"
WORK = Path(tempfile.mkdtemp(prefix="kaflite-quickstart-"))

# Spark's log lines at ERROR only, from the JVM's first line on (setLogLevel would come after the
# start-up warnings)
(WORK / "log4j2.properties").write_text(
    "rootLogger.level = warn\n"  # Spark's level for interactive sessions: no "Setting default log level" banner
    "rootLogger.appenderRef.stderr.ref = stderr\n"
    "appender.stderr.type = Console\n"
    "appender.stderr.name = stderr\n"
    "appender.stderr.target = SYSTEM_ERR\n"
    "appender.stderr.filter.threshold.type = ThresholdFilter\n"  # only errors reach the terminal
    "appender.stderr.filter.threshold.level = error\n"
    "appender.stderr.layout.type = PatternLayout\n"
    "appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n\n"
)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
spark = (
    SparkSession.builder.master("local[2]")
    .config("spark.driver.host", "127.0.0.1")
    .config("spark.driver.bindAddress", "127.0.0.1")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={WORK / 'log4j2.properties'}")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
register(spark)  # format("kaflite")

# write: columns value (required), key, topic, partition, headers -- as Spark's Kafka sink
(
    spark.createDataFrame([("k1", "hello"), ("k2", "world")], "key STRING, value STRING")
    .write.format("kaflite")
    .option("kafka.bootstrap.servers", BOOTSTRAP)
    .option("topic", "quickstart")
    .mode("append")  # Python data sources accept append/overwrite; the Kafka sink refuses overwrite
    .save()
)

# batch read: key, value, topic, partition, offset, timestamp, timestampType (+ headers)
(
    spark.read.format("kaflite")
    .option("kafka.bootstrap.servers", BOOTSTRAP)
    .option("subscribe", "quickstart")
    .option("startingOffsets", "earliest")
    .load()
    .selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)", "partition", "offset")
    .show()
)

# streaming read with a checkpoint: offsets are kept in the checkpoint, exactly once into files
query = (
    spark.readStream.format("kaflite")
    .option("kafka.bootstrap.servers", BOOTSTRAP)
    .option("subscribe", "quickstart")
    .option("startingOffsets", "earliest")
    .option("maxOffsetsPerTrigger", "1000")
    .load()
    .writeStream.format("parquet")
    .option("path", str(WORK / "out"))
    .option("checkpointLocation", str(WORK / "checkpoint"))
    .trigger(availableNow=True)
    .start()
)
query.awaitTermination()
print(spark.read.parquet(str(WORK / "out")).count(), "records in Parquet at", WORK / "out")
print(f"(remove the example's temporary directory with: rm -rf {WORK})")
spark.stop()
