"""kaflite.spark.from_registry / to_registry against kaflite's schema registry, with confluent-kafka's
serializers on the other side (shared SparkSession and broker; a registry of this module's own)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from registry_helpers import ORDER_V1, ORDER_V2, RunningRegistry

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def registry(kafka: Any) -> Iterator[RunningRegistry]:
    running = RunningRegistry(kafka.bootstrap, f"_schemas_{uuid.uuid4().hex[:8]}")
    yield running
    running.stop()
    # KafkaStore.stop() releases its producer: no connection failures logged once the shared broker is gone
    assert running.service.store.producer is None


def _subject() -> str:
    return f"orders-{uuid.uuid4().hex[:8]}-value"


def _avro_serializer(registry: RunningRegistry, schema: dict[str, Any], subject: str) -> Any:
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    ser = AvroSerializer(registry.client(), json.dumps(schema),
                         conf={"subject.name.strategy": lambda ctx, name: subject})
    ctx = SerializationContext("t", MessageField.VALUE)
    return lambda rec: ser(rec, ctx)


def _values_df(spark: Any, values: list[bytes | None]) -> Any:
    return spark.createDataFrame([(v,) for v in values], "value binary")


def test_from_registry_decodes_confluent_avro_with_evolved_schema(spark: Any, registry: RunningRegistry) -> None:
    from kaflite.spark import from_registry

    subject = _subject()
    v1 = _avro_serializer(registry, ORDER_V1, subject)
    old = [v1({"id": i, "item": f"item-{i}"}) for i in range(3)]
    v2 = _avro_serializer(registry, ORDER_V2, subject)
    new = [v2({"id": 10 + i, "item": f"new-{i}", "qty": 5 + i}) for i in range(2)]
    assert old[0][1:5] != new[0][1:5]  # two writer schema ids

    df = _values_df(spark, [*old, None, *new]).select(from_registry("value", registry.url, subject).alias("o"))
    # the reader schema is the subject's latest (v2): old records get qty's default
    assert [f.name for f in df.schema["o"].dataType.fields] == ["id", "item", "qty"]
    rows = [r.o.asDict() if r.o is not None else None for r in df.collect()]
    assert rows == [{"id": i, "item": f"item-{i}", "qty": 1} for i in range(3)] + [None] + [
        {"id": 10 + i, "item": f"new-{i}", "qty": 5 + i} for i in range(2)]

    # an older version as the reader schema: the newer records lose qty (Avro resolution)
    df1 = _values_df(spark, new).select(from_registry("value", registry.url, subject, version=1).alias("o"))
    assert [r.o.asDict() for r in df1.collect()] == [{"id": 10 + i, "item": f"new-{i}"} for i in range(2)]


def test_from_registry_modes(spark: Any, registry: RunningRegistry) -> None:
    from kaflite.spark import from_registry

    subject = _subject()
    good = _avro_serializer(registry, ORDER_V1, subject)({"id": 1, "item": "a"})
    unknown_id = b"\x00\x7f\xff\xff\xf0" + good[5:]
    values = [good, b"{not framed}", unknown_id, good[:7]]
    df = _values_df(spark, values)

    permissive = df.select(from_registry("value", registry.url, subject, mode="PERMISSIVE").alias("o"))
    assert [r.o.asDict() if r.o else None for r in permissive.collect()] == [{"id": 1, "item": "a"}, None, None, None]

    for bad, problem in [(values[1], "no magic byte"), (values[2], "unknown schema id 2147483632"),
                         (values[3], "payload does not decode")]:
        with pytest.raises(Exception, match=problem):
            _values_df(spark, [good, bad]).select(from_registry("value", registry.url, subject)).collect()
    with pytest.raises(ValueError, match="mode must be one of"):
        from_registry("value", registry.url, subject, mode="DROPMALFORMED")


def test_to_registry_read_by_confluent_avro_deserializer(spark: Any, registry: RunningRegistry) -> None:
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from pyspark.sql import functions as F

    from kaflite.spark import to_registry

    subject = _subject()
    rows = [(1, "a", 2.5, ["x", "y"], {"k": 3}, None), (2, None, -1.0, [], {}, "note")]
    df = spark.createDataFrame(rows, "id long, item string, price double, tags array<string>, "
                                     "attrs map<string, int>, note string")
    out = df.select(to_registry(F.struct(*df.columns), registry.url, subject).alias("v")).collect()
    deser = AvroDeserializer(registry.client())
    got = [deser(r.v, None) for r in out]
    assert got == [dict(zip(df.columns, r, strict=True)) for r in rows]
    # registered once, under the subject, as the schema derived from the struct type
    latest = registry.client().get_latest_version(subject)
    assert json.loads(latest.schema.schema_str)["name"] == "topLevelRecord"
    assert {r.v[1:5] for r in out} == {latest.schema_id.to_bytes(4, "big")}


def test_to_registry_given_schema_and_lookup(spark: Any, registry: RunningRegistry) -> None:
    from pyspark.sql import functions as F

    from kaflite.spark import from_registry, to_registry
    from kaflite.spark.registry import RegistryError

    subject = _subject()
    df = spark.createDataFrame([(7, "seven")], "id long, item string")
    struct = F.struct("id", "item")
    # not registered yet, auto-registration off: refused on the driver (given schema: looked up there)
    with pytest.raises(RegistryError, match="40401"):
        to_registry(struct, registry.url, subject, schema=json.dumps(ORDER_V1), auto_register=False)
    encoded = df.select(to_registry(struct, registry.url, subject, schema=json.dumps(ORDER_V1)).alias("v"))
    back = encoded.select(from_registry("v", registry.url, subject).alias("o")).collect()
    assert [r.o.asDict() for r in back] == [{"id": 7, "item": "seven"}]
    looked_up = df.select(to_registry(struct, registry.url, subject, schema=json.dumps(ORDER_V1),
                                      auto_register=False).alias("v")).collect()
    assert looked_up == encoded.collect()


def test_from_registry_json_schema_round_trip(spark: Any, registry: RunningRegistry) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from pyspark.sql import functions as F

    from kaflite.spark import from_registry, to_registry

    subject = _subject()
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
              "properties": {"id": {"type": "integer"}, "item": {"type": "string"},
                             "price": {"type": ["number", "null"]},
                             "tags": {"type": "array", "items": {"type": "string"}}},
              "required": ["id"]}
    ctx = SerializationContext("t", MessageField.VALUE)
    ser = JSONSerializer(json.dumps(schema), registry.client(),
                         conf={"subject.name.strategy": lambda c, n: subject})
    records = [{"id": 1, "item": "a", "price": 2.5, "tags": ["x"]}, {"id": 2, "item": "b", "price": None, "tags": []},
               {"id": 3}]
    values = [ser(r, ctx) for r in records]
    decoded = _values_df(spark, values).select(from_registry("value", registry.url, subject).alias("o"))
    assert [f.name for f in decoded.schema["o"].dataType.fields] == ["id", "item", "price", "tags"]
    full = [{"id": None, "item": None, "price": None, "tags": None, **r} for r in records]
    assert [r.o.asDict() for r in decoded.collect()] == full

    # and back, as JSON under the same subject's latest schema, read by confluent-kafka's deserializer
    re_encoded = decoded.select(to_registry(F.col("o"), registry.url, subject, use_latest_version=True).alias("v"))
    deser = JSONDeserializer(json.dumps(schema))
    got = [deser(r.v, ctx) for r in re_encoded.collect()]
    assert got == [{k: v for k, v in r.items() if v is not None} for r in records]  # nulls left out, as to_json

    # a JSON Schema derived from the struct type, registered under a new subject
    derived_subject = _subject()
    derived = decoded.select(to_registry(F.col("o"), registry.url, derived_subject, schema_type="JSON").alias("v"))
    rows = derived.collect()  # without df=, each task registers the schema on its first batch
    latest = registry.client().get_latest_version(derived_subject)
    assert latest.schema.schema_type == "JSON"
    deser = JSONDeserializer(latest.schema.schema_str)
    assert [deser(r.v, ctx) for r in rows] == [
        {k: v for k, v in r.items() if v is not None} for r in records]


def test_spark_job_reads_avro_topic_and_writes_it_back_through_registry(
        spark: Any, kafka: Any, registry: RunningRegistry) -> None:
    """Issue 33's acceptance: a topic written by confluent-kafka's AvroSerializer, read by kaflite's source,
    decoded, re-encoded through the registry and written by kaflite's sink; the rows are equal."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    from kaflite.spark import from_registry, to_registry

    source, sink = kafka.topic("avro-in", 2), kafka.topic("avro-out", 2)
    in_subject, out_subject = f"{source}-value", f"{sink}-value"
    ser = _avro_serializer(registry, ORDER_V2, in_subject)
    records = [{"id": i, "item": f"item-{i}", "qty": i % 4} for i in range(40)]
    kafka.produce(source, [{"key": str(r["id"]).encode(), "value": ser(r)} for r in records])

    df = (spark.read.format("kaflite").option("kafka.bootstrap.servers", kafka.bootstrap)
          .option("subscribe", source).load())
    decoded = df.select("key", from_registry("value", registry.url, in_subject).alias("order"))
    (decoded.select("key", to_registry("order", registry.url, out_subject, df=decoded).alias("value"))
     .write.format("kaflite").mode("append").option("kafka.bootstrap.servers", kafka.bootstrap)
     .option("topic", sink).save())

    deser = AvroDeserializer(registry.client())
    out = kafka.read_all(sink)
    got = sorted((m.key(), tuple(deser(m.value(), None).items())) for m in out)
    assert got == sorted((str(r["id"]).encode(), tuple(r.items())) for r in records)
    # the sink's records carry the id of the schema registered for the output subject
    out_id = registry.client().get_latest_version(out_subject).schema_id
    assert {m.value()[:5] for m in out} == {b"\x00" + out_id.to_bytes(4, "big")}


def _shipment_class(with_items: bool) -> Any:
    """A Protobuf message class built at run time (as protoc would generate for `package shop; message
    Shipment { int64 id = 1; string carrier = 2; [repeated string items = 3;] }`)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FileDescriptorProto(name="shop/shipment.proto", package="shop", syntax="proto3")
    message = fdp.message_type.add(name="Shipment")
    f = descriptor_pb2.FieldDescriptorProto
    message.field.add(name="id", number=1, type=f.TYPE_INT64, label=f.LABEL_OPTIONAL)
    message.field.add(name="carrier", number=2, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    if with_items:
        message.field.add(name="items", number=3, type=f.TYPE_STRING, label=f.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Shipment"))


def test_from_registry_decodes_confluent_protobuf(spark: Any, registry: RunningRegistry) -> None:
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from kaflite.spark import from_registry
    from kaflite.spark.registry import frame

    subject = _subject()
    ctx = SerializationContext("t", MessageField.VALUE)
    conf = {"use.deprecated.format": False, "subject.name.strategy": lambda c, n: subject}
    v1, v2 = _shipment_class(False), _shipment_class(True)
    # version 1 registered as .proto text (the tasks ask for it with format=serialized), its record framed
    # by hand; version 2 registered by confluent-kafka's serializer (a base64 FileDescriptorProto)
    text = 'syntax = "proto3";\npackage shop;\nmessage Shipment { int64 id = 1; string carrier = 2; }'
    v1_id = registry.client().register_schema(subject, Schema(text, "PROTOBUF"))
    old = frame(v1_id, b"\x00" + v1(id=1, carrier="post").SerializeToString())
    new = ProtobufSerializer(v2, registry.client(), conf)(v2(id=2, carrier="ship", items=["a", "b"]), ctx)
    assert old[1:5] != new[1:5]
    df = _values_df(spark, [old, new]).select(from_registry("value", registry.url, subject).alias("o"))
    assert [r.o.asDict() for r in df.collect()] == [{"id": 1, "carrier": "post", "items": []},
                                                     {"id": 2, "carrier": "ship", "items": ["a", "b"]}]


def test_from_registry_fetches_each_writer_schema_once_per_task(spark: Any) -> None:
    """A registry of two schemas counting its /schemas/ids requests: one task decoding five Arrow batches
    of rows alternating between two ids asks for each id once."""
    import io
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import fastavro

    from kaflite.spark import from_registry
    from kaflite.spark.registry import frame

    schemas = {1: ORDER_V1, 2: ORDER_V2}
    fetched: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            path = self.path.split("?")[0]
            if path == "/subjects/s/versions/latest":
                body: dict[str, Any] = {"subject": "s", "version": 2, "id": 2, "schema": json.dumps(ORDER_V2)}
            elif path.startswith("/schemas/ids/"):
                fetched.append(path)
                body = {"schema": json.dumps(schemas[int(path.rsplit("/", 1)[1])])}
            else:
                self.send_error(404)
                return
            raw = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    def avro(sid: int, rec: dict[str, Any]) -> bytes:
        bio = io.BytesIO()
        fastavro.schemaless_writer(bio, fastavro.parse_schema(schemas[sid]), rec)
        return frame(sid, bio.getvalue())

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    values = [avro(1, {"id": i, "item": "x"}) if i % 2 else avro(2, {"id": i, "item": "y", "qty": 7})
              for i in range(10)]
    previous = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "2")
    try:
        df = _values_df(spark, values).coalesce(1).select(from_registry("value", url, "s").alias("o"))
        rows = [r.o.asDict() for r in df.collect()]
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", previous)
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert rows == [{"id": i, "item": "x", "qty": 1} if i % 2 else {"id": i, "item": "y", "qty": 7}
                    for i in range(10)]
    assert sorted(fetched) == ["/schemas/ids/1", "/schemas/ids/2"]


def test_from_registry_avro_schema_with_references(spark: Any, registry: RunningRegistry) -> None:
    """A schema using a named type another subject defines (Confluent's schema references): the driver
    and each task fetch the referenced version to parse it."""
    import io

    import fastavro
    from confluent_kafka.schema_registry import Schema, SchemaReference

    from kaflite.spark import from_registry
    from kaflite.spark.registry import frame

    item_subject, subject = _subject(), _subject()
    item = {"type": "record", "name": "Item", "namespace": "shop",
            "fields": [{"name": "sku", "type": "string"}, {"name": "n", "type": "int"}]}
    order = {"type": "record", "name": "Basket", "namespace": "shop",
             "fields": [{"name": "id", "type": "long"}, {"name": "items", "type": {"type": "array", "items": "shop.Item"}}]}
    client = registry.client()
    client.register_schema(item_subject, Schema(json.dumps(item), "AVRO"))
    sid = client.register_schema(subject, Schema(json.dumps(order), "AVRO",
                                                 [SchemaReference("shop.Item", item_subject, 1)]))
    named: dict[str, Any] = {}
    fastavro.parse_schema(item, named_schemas=named)
    parsed = fastavro.parse_schema(order, named_schemas=named)
    rec = {"id": 5, "items": [{"sku": "a", "n": 2}]}
    bio = io.BytesIO()
    fastavro.schemaless_writer(bio, parsed, rec)
    df = _values_df(spark, [frame(sid, bio.getvalue())]).select(from_registry("value", registry.url, subject).alias("o"))
    [row] = df.collect()
    assert row.o.asDict(recursive=True) == rec
    # and written back with the subject's latest version (its references parsed by each task)
    from kaflite.spark import to_registry

    back = df.select(to_registry("o", registry.url, subject, use_latest_version=True).alias("v")).collect()
    assert [r.v for r in back] == [frame(sid, bio.getvalue())]


def test_streaming_query_decodes_and_writes_back_through_registry(
        spark: Any, kafka: Any, registry: RunningRegistry, tmp_path: Any) -> None:
    """The same pipeline as a Structured Streaming query (AvailableNow, two micro-batches), the sink's
    records equal to the source's."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    from kaflite.spark import from_registry, to_registry

    source, sink = kafka.topic("avro-stream-in", 1), kafka.topic("avro-stream-out", 1)
    ser = _avro_serializer(registry, ORDER_V1, f"{source}-value")
    records = [{"id": i, "item": f"item-{i}"} for i in range(6)]
    kafka.produce(source, [{"value": ser(r)} for r in records])

    stream = (spark.readStream.format("kaflite").option("kafka.bootstrap.servers", kafka.bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "3").load()
              .select(from_registry("value", registry.url, f"{source}-value").alias("order")))
    query = (stream.select(to_registry("order", registry.url, f"{sink}-value", df=stream).alias("value"))
             .writeStream.format("kaflite").option("kafka.bootstrap.servers", kafka.bootstrap)
             .option("topic", sink).option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(120), "AvailableNow query did not finish"
    assert len([p for p in query.recentProgress if p["numInputRows"] > 0]) == 2
    deser = AvroDeserializer(registry.client())
    assert sorted((deser(m.value(), None) for m in kafka.read_all(sink)), key=lambda r: r["id"]) == records
