"""kaflite.spark.registry's type mappings and its per-task decoder / encoder, without Spark's JVM or a
registry (schemas are given by an injected fetch)."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from pyspark.sql import types as T

from kaflite.spark.registry import (
    BadRecord,
    Decoder,
    Encoder,
    RegisteredSchema,
    RegistryError,
    avro_to_spark,
    frame,
    json_schema_to_spark,
    spark_to_avro,
    spark_to_json_schema,
    unframe,
)
from registry_helpers import ORDER_V1, ORDER_V2


def _avro_type(schema: Any) -> Any:
    return avro_to_spark(fastavro.parse_schema(schema))


def test_avro_types_map_as_spark_from_avro_maps_them() -> None:
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "b", "type": "boolean"}, {"name": "i", "type": "int"}, {"name": "l", "type": "long"},
        {"name": "f", "type": "float"}, {"name": "d", "type": "double"}, {"name": "s", "type": "string"},
        {"name": "y", "type": "bytes"}, {"name": "opt", "type": ["null", "string"], "default": None},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
        {"name": "x", "type": {"type": "fixed", "name": "F", "size": 2}},
        {"name": "a", "type": {"type": "array", "items": ["null", "long"]}},
        {"name": "m", "type": {"type": "map", "values": "double"}},
        {"name": "n", "type": {"type": "record", "name": "N", "fields": [{"name": "v", "type": "int"}]}},
        {"name": "n2", "type": ["null", "N"]},
        {"name": "il", "type": ["int", "long"]},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "lts", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
    ]}
    nested = T.StructType([T.StructField("v", T.IntegerType(), False)])
    assert _avro_type(schema) == T.StructType([
        T.StructField("b", T.BooleanType(), False), T.StructField("i", T.IntegerType(), False),
        T.StructField("l", T.LongType(), False), T.StructField("f", T.FloatType(), False),
        T.StructField("d", T.DoubleType(), False), T.StructField("s", T.StringType(), False),
        T.StructField("y", T.BinaryType(), False), T.StructField("opt", T.StringType(), True),
        T.StructField("e", T.StringType(), False), T.StructField("x", T.BinaryType(), False),
        T.StructField("a", T.ArrayType(T.LongType(), True), False),
        T.StructField("m", T.MapType(T.StringType(), T.DoubleType(), False), False),
        T.StructField("n", nested, False), T.StructField("n2", nested, True),
        T.StructField("il", T.LongType(), False), T.StructField("day", T.DateType(), False),
        T.StructField("ts", T.TimestampType(), False), T.StructField("lts", T.TimestampNTZType(), False),
        T.StructField("dec", T.DecimalType(9, 2), False), T.StructField("tm", T.IntegerType(), False),
        T.StructField("u", T.StringType(), False),
    ])


def test_avro_types_without_a_spark_type_are_refused() -> None:
    with pytest.raises(ValueError, match="several non-null types"):
        _avro_type({"type": "record", "name": "R", "fields": [{"name": "u", "type": ["string", "long"]}]})
    with pytest.raises(ValueError, match="recursive Avro type"):
        _avro_type({"type": "record", "name": "Node", "fields": [
            {"name": "next", "type": ["null", "Node"]}]})


def test_spark_struct_to_avro_and_back() -> None:
    spark_type = T.StructType([
        T.StructField("id", T.LongType(), False), T.StructField("name", T.StringType(), True),
        T.StructField("tags", T.ArrayType(T.StringType(), True), True),
        T.StructField("attrs", T.MapType(T.StringType(), T.IntegerType(), False), False),
        T.StructField("inner", T.StructType([T.StructField("x", T.DoubleType(), False)]), True),
        T.StructField("day", T.DateType(), True), T.StructField("at", T.TimestampType(), True),
        T.StructField("amount", T.DecimalType(10, 3), True), T.StructField("raw", T.BinaryType(), True),
    ])
    avro = spark_to_avro(spark_type)
    assert avro["name"] == "topLevelRecord"
    name_field = next(f for f in avro["fields"] if f["name"] == "name")
    assert name_field == {"name": "name", "type": ["null", "string"], "default": None}
    assert avro_to_spark(fastavro.parse_schema(avro)) == spark_type
    with pytest.raises(ValueError, match="string keys"):
        spark_to_avro(T.StructType([T.StructField("m", T.MapType(T.LongType(), T.LongType()))]))


def test_json_schema_to_spark() -> None:
    schema = {"type": "object", "definitions": {"Pt": {"type": "object", "properties": {
        "x": {"type": "number"}, "y": {"type": "number"}}}},
        "properties": {"id": {"type": "integer"}, "name": {"type": ["string", "null"]},
                       "ok": {"type": "boolean"}, "at": {"$ref": "#/definitions/Pt"},
                       "path": {"type": "array", "items": {"$ref": "#/definitions/Pt"}},
                       "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
                       "any": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}
    pt = T.StructType([T.StructField("x", T.DoubleType()), T.StructField("y", T.DoubleType())])
    assert json_schema_to_spark(schema) == T.StructType([
        T.StructField("id", T.LongType()), T.StructField("name", T.StringType()),
        T.StructField("ok", T.BooleanType()), T.StructField("at", pt),
        T.StructField("path", T.ArrayType(pt)), T.StructField("counts", T.MapType(T.StringType(), T.LongType())),
        T.StructField("any", T.StringType()),
    ])
    with pytest.raises(ValueError, match="root is an object"):
        json_schema_to_spark({"type": "string"})
    derived = spark_to_json_schema(T.StructType([T.StructField("id", T.LongType(), False),
                                                 T.StructField("n", T.StringType(), True)]))
    assert derived["properties"] == {"id": {"type": "integer"}, "n": {"type": ["string", "null"]}}
    assert derived["required"] == ["id"]


def test_framing() -> None:
    assert frame(258, b"xy") == b"\x00\x00\x00\x01\x02xy"
    assert unframe(b"\x00\x00\x00\x01\x02xy") == (258, b"xy")
    with pytest.raises(BadRecord, match="shorter than"):
        unframe(b"\x00\x00")
    with pytest.raises(BadRecord, match="no magic byte: value starts with 0x7b22696422"):
        unframe(b'{"id": 1}')


class Schemas:
    """An injected /schemas/ids/{id}: the schemas by id, counting the fetches."""

    def __init__(self, by_id: dict[int, RegisteredSchema]) -> None:
        self.by_id = by_id
        self.calls: list[int] = []

    def __call__(self, schema_id: int) -> RegisteredSchema:
        self.calls.append(schema_id)
        if schema_id not in self.by_id:
            raise RegistryError("not found", 404, 40403)
        return self.by_id[schema_id]


def _avro(schema: dict[str, Any], rec: dict[str, Any], schema_id: int) -> bytes:
    bio = io.BytesIO()
    fastavro.schemaless_writer(bio, fastavro.parse_schema(schema), rec)
    return frame(schema_id, bio.getvalue())


def _decoder(mode: str = "FAILFAST", reader: dict[str, Any] = ORDER_V2, reader_id: int = 2) -> tuple[Decoder, Schemas]:
    schemas = Schemas({1: RegisteredSchema(1, "AVRO", json.dumps(ORDER_V1)),
                       2: RegisteredSchema(2, "AVRO", json.dumps(ORDER_V2)),
                       3: RegisteredSchema(3, "JSON", "{}")})
    spark_type = avro_to_spark(fastavro.parse_schema(reader))
    d = Decoder(url="http://unused", reader_type="AVRO", reader_schema=json.dumps(reader), reader_id=reader_id,
                spark_type_json=spark_type.json(), mode=mode, fetch=schemas)
    return d, schemas


def test_decoder_resolves_old_writers_and_fetches_each_id_once() -> None:
    d, schemas = _decoder()
    old = [_avro(ORDER_V1, {"id": i, "item": "a"}, 1) for i in range(3)]
    new = _avro(ORDER_V2, {"id": 9, "item": "b", "qty": 4}, 2)
    first = d.decode(pa.array([old[0], None, new], pa.binary()))
    second = d.decode(pa.array([old[1], old[2], new], pa.binary()))
    assert first.to_pylist() == [{"id": 0, "item": "a", "qty": 1}, None, {"id": 9, "item": "b", "qty": 4}]
    assert second.to_pylist()[:2] == [{"id": 1, "item": "a", "qty": 1}, {"id": 2, "item": "a", "qty": 1}]
    assert schemas.calls == [1, 2]  # two batches, each id fetched once


def test_decoder_modes_name_the_rows_problem() -> None:
    good = _avro(ORDER_V1, {"id": 1, "item": "a"}, 1)
    cases = [
        (b"\x01\x00\x00\x00\x01abc", "row 1 of the batch: no magic byte"),
        (frame(77, good[5:]), "row 1 of the batch: unknown schema id 77"),
        (frame(3, b"{}"), "schema id 3 is a JSON schema, the column is read as AVRO"),
        (good[:6], "schema id 1: payload does not decode"),
        (good + b"\x00", "1 bytes left after the Avro record"),
    ]
    for bad, message in cases:
        d, _ = _decoder()
        with pytest.raises(BadRecord, match=message):
            d.decode(pa.array([good, bad], pa.binary()))
        d, _ = _decoder("PERMISSIVE")
        assert d.decode(pa.array([good, bad], pa.binary())).to_pylist() == [
            {"id": 1, "item": "a", "qty": 1}, None]


def test_decoder_logical_types() -> None:
    schema = {"type": "record", "name": "L", "fields": [
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "m", "type": {"type": "map", "values": "long"}}]}
    at = dt.datetime(2026, 11, 28, 12, 30, tzinfo=dt.UTC)
    rec = {"day": dt.date(2026, 11, 28), "ts": at, "dec": decimal.Decimal("12.34"), "tm": dt.time(1, 2, 3),
           "u": "6f1c4b8a-3c1e-4a52-9d7e-2b7f3f0e9a11", "m": {"a": 1}}
    spark_type = avro_to_spark(fastavro.parse_schema(schema))
    d = Decoder(url="http://unused", reader_type="AVRO", reader_schema=json.dumps(schema), reader_id=5,
                spark_type_json=spark_type.json(), fetch=Schemas({5: RegisteredSchema(5, "AVRO", json.dumps(schema))}))
    [got] = d.decode(pa.array([_avro(schema, rec, 5)], pa.binary())).to_pylist()
    assert got == {**rec, "tm": 3723000, "m": [("a", 1)]}


def test_json_decoder_checks_types_by_field() -> None:
    schema = {"type": "object", "properties": {"id": {"type": "integer"}, "tags": {"type": "array", "items": {
        "type": "string"}}, "p": {"type": "object", "properties": {"x": {"type": "number"}}}}}
    spark_type = json_schema_to_spark(schema)
    fetch = Schemas({4: RegisteredSchema(4, "JSON", json.dumps(schema))})

    def decoder(mode: str) -> Decoder:
        return Decoder(url="http://unused", reader_type="JSON", reader_schema=json.dumps(schema), reader_id=4,
                       spark_type_json=spark_type.json(), mode=mode, fetch=fetch)

    ok = frame(4, b'{"id": 1, "tags": ["a"], "p": {"x": 2}, "extra": true}')
    assert decoder("FAILFAST").decode(pa.array([ok], pa.binary())).to_pylist() == [
        {"id": 1, "tags": ["a"], "p": {"x": 2.0}}]
    bad = frame(4, b'{"id": 1, "p": {"x": "two"}}')
    with pytest.raises(BadRecord, match=r'field p.x: expected a number, got "two"'):
        decoder("FAILFAST").decode(pa.array([ok, bad], pa.binary()))
    assert decoder("PERMISSIVE").decode(pa.array([bad, frame(4, b"{nope")], pa.binary())).to_pylist() == [None, None]


def test_encoder_frames_avro_with_the_given_id() -> None:
    spark_type = T.StructType([T.StructField("id", T.LongType(), False), T.StructField("item", T.StringType(), False),
                               T.StructField("m", T.MapType(T.StringType(), T.LongType()), True)])
    schema = spark_to_avro(spark_type)
    enc = Encoder(registry_url="http://unused", subject="s", schema=json.dumps(schema), schema_id=42,
                  spark_type_json=spark_type.json())
    arrow_type = pa.struct([("id", pa.int64()), ("item", pa.string()), ("m", pa.map_(pa.string(), pa.int64()))])
    out = enc.encode(pa.array([{"id": 1, "item": "a", "m": {"k": 2}}, None], arrow_type)).to_pylist()
    assert out[1] is None
    schema_id, payload = unframe(out[0])
    assert schema_id == 42
    assert fastavro.schemaless_reader(io.BytesIO(payload), fastavro.parse_schema(schema), None) == {
        "id": 1, "item": "a", "m": {"k": 2}}
    bad = Encoder(registry_url="http://unused", subject="s", schema=json.dumps(ORDER_V1), schema_id=7,
                  spark_type_json=spark_type.json())
    with pytest.raises(BadRecord, match="row 0 of the batch does not fit schema id 7"):
        bad.encode(pa.array([{"id": "x", "item": "a", "m": None}], pa.struct(
            [("id", pa.string()), ("item", pa.string()), ("m", pa.map_(pa.string(), pa.int64()))])))


def _shipment_descriptor() -> Any:
    from google.protobuf import descriptor_pb2

    fdp = descriptor_pb2.FileDescriptorProto(name="shop/shipment.proto", package="shop", syntax="proto3")
    f = descriptor_pb2.FieldDescriptorProto
    msg = fdp.message_type.add(name="Shipment")
    msg.field.add(name="id", number=1, type=f.TYPE_INT64, label=f.LABEL_OPTIONAL)
    msg.field.add(name="carrier", number=2, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    msg.field.add(name="items", number=3, type=f.TYPE_STRING, label=f.LABEL_REPEATED)
    msg.field.add(name="state", number=4, type=f.TYPE_ENUM, type_name=".shop.Shipment.State", label=f.LABEL_OPTIONAL)
    msg.field.add(name="to", number=5, type=f.TYPE_MESSAGE, type_name=".shop.Shipment.Addr", label=f.LABEL_OPTIONAL)
    msg.field.add(name="tags", number=6, type=f.TYPE_MESSAGE, type_name=".shop.Shipment.TagsEntry",
                  label=f.LABEL_REPEATED)
    msg.field.add(name="big", number=7, type=f.TYPE_UINT64, label=f.LABEL_OPTIONAL)
    msg.enum_type.add(name="State").value.add(name="NEW", number=0)
    msg.enum_type[0].value.add(name="SENT", number=1)
    addr = msg.nested_type.add(name="Addr")
    addr.field.add(name="city", number=1, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    entry = msg.nested_type.add(name="TagsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=f.TYPE_INT32, label=f.LABEL_OPTIONAL)
    fdp.message_type.add(name="Other").field.add(name="x", number=1, type=f.TYPE_INT32, label=f.LABEL_OPTIONAL)
    return fdp


def test_protobuf_message_indexes() -> None:
    from kaflite.spark.registry import read_message_indexes

    assert read_message_indexes(b"\x00rest") == ([0], 1)  # count 0: the first message
    assert read_message_indexes(b"\x04\x02\x06rest") == ([1, 3], 3)  # zigzag: 4 -> 2, 2 -> 1, 6 -> 3
    with pytest.raises(BadRecord, match="run past the end"):
        read_message_indexes(b"\x04\x02")


def test_protobuf_decoder() -> None:
    import base64

    from google.protobuf import descriptor_pool, message_factory

    from kaflite.spark.registry import proto_message, proto_pool_file, proto_to_spark

    fdp = _shipment_descriptor()
    text = base64.b64encode(fdp.SerializeToString()).decode()
    schema = RegisteredSchema(8, "PROTOBUF", text)
    desc = proto_message(proto_pool_file(schema))
    assert desc.full_name == "shop.Shipment"
    spark_type = proto_to_spark(desc)
    assert spark_type == T.StructType([
        T.StructField("id", T.LongType()), T.StructField("carrier", T.StringType()),
        T.StructField("items", T.ArrayType(T.StringType())), T.StructField("state", T.StringType()),
        T.StructField("to", T.StructType([T.StructField("city", T.StringType())])),
        T.StructField("tags", T.MapType(T.StringType(), T.IntegerType())), T.StructField("big", T.LongType())])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Shipment"))
    other = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Other"))
    full = cls(id=1, carrier="post", items=["a"], state=1, tags={"k": 2}, big=(1 << 64) - 1)
    full.to.city = "Oslo"
    d = Decoder(url="http://unused", reader_type="PROTOBUF", reader_schema=text, reader_id=8,
                spark_type_json=spark_type.json(), fetch=Schemas({8: schema}))
    values = [frame(8, b"\x00" + full.SerializeToString()), frame(8, b"\x00" + cls(id=2).SerializeToString())]
    assert d.decode(pa.array(values, pa.binary())).to_pylist() == [
        {"id": 1, "carrier": "post", "items": ["a"], "state": "SENT", "to": {"city": "Oslo"}, "tags": [("k", 2)],
         "big": -1},
        {"id": 2, "carrier": "", "items": [], "state": "NEW", "to": None, "tags": [], "big": 0}]
    wrong = frame(8, b"\x02\x02" + other(x=1).SerializeToString())  # message index [1]: shop.Other
    with pytest.raises(BadRecord, match="holds message shop.Other, the column is read as shop.Shipment"):
        d.decode(pa.array([wrong], pa.binary()))
