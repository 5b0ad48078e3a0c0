"""Read and write kaflite (or any Kafka) topics from PySpark with Spark's Kafka connector options.

kaflite serve &                       # a broker on 127.0.0.1:9092
python examples/spark_quickstart.py
"""

import os
import sys

from pyspark.sql import SparkSession

from kaflite.spark import register

BOOTSTRAP = os.environ.get("BOOTSTRAP", "127.0.0.1:9092")

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
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
    .option("path", "/tmp/kaflite-quickstart/out")
    .option("checkpointLocation", "/tmp/kaflite-quickstart/checkpoint")
    .trigger(availableNow=True)
    .start()
)
query.awaitTermination()
print(spark.read.parquet("/tmp/kaflite-quickstart/out").count(), "records in Parquet")
