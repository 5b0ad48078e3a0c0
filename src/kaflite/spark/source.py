"""The data source Spark sees: format `kaflite` (and, opt in, `kafka`: kaflite.spark.register), batch +
streaming, read + write."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from kaflite.spark.arrow import spark_schema_ddl
from kaflite.spark.group_commit import GroupCommittingStreamReader
from kaflite.spark.options import OptionError, lower, parse_reader_options, parse_writer_options
from kaflite.spark.reader import KafkaBatchReader, KafkaStreamReader
from kaflite.spark.writer import KafkaBatchWriter, KafkaStreamWriter, validate_write_schema


class KafliteDataSource(DataSource):
    """`spark.read.format("kaflite").option("kafka.bootstrap.servers", ...).option("subscribe", ...)`:
    Spark's Kafka connector options and schema, over a standard Kafka client."""

    @classmethod
    def name(cls) -> str:
        return "kaflite"

    def schema(self) -> str:
        include = lower(self.options).get("includeheaders", "false").strip().lower() == "true"
        return spark_schema_ddl(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(parse_reader_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = parse_reader_options(self.options, streaming=True)
        if options.commit_group is not None:
            return GroupCommittingStreamReader(options)
        return KafkaStreamReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise OptionError(
                "Save mode Overwrite not allowed for Kafka. Allowed save modes are Append and ErrorIfExists (default)."
            )
        options = parse_writer_options(self.options)
        if options.exactly_once:
            raise OptionError("option 'exactlyOnce' applies to streaming queries (writeStream) only")
        validate_write_schema(schema, options.topic)
        return KafkaBatchWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = parse_writer_options(self.options)
        validate_write_schema(schema, options.topic)
        return KafkaStreamWriter(options)

