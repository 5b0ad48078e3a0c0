"""Spark columns in Confluent's wire format, decoded and encoded against a schema registry (kaflite's or
Confluent's): `from_registry(col, url, subject=...)` (Avro, JSON Schema, Protobuf) and
`to_registry(struct_col, url, subject)` (Avro, JSON Schema).

Rules:
- A framed value is byte 0 (the magic byte), the schema id as 4 big-endian bytes, then the payload
  (Avro binary, JSON text for JSON Schema, Protobuf: message-index varints then the message); anything
  else is a bad row.
- The result's Spark type is fixed when the function is called, on the driver, from the reader schema
  (a subject's version, `latest` by default, or a schema id); every row is resolved to that schema
  (Avro: the writer schema of the row's id read with the reader schema, Avro's schema resolution;
  Protobuf: the row's message parsed with the reader's message class, fields matched by number).
- Writer schemas are fetched from `/schemas/ids/{id}` at most once per id per task: the cache lives in the
  Arrow UDF's iterator, which runs once per task.
- A null value decodes to a null struct and a null struct encodes to a null value, in every mode.
- mode FAILFAST (default, as Spark's from_avro) raises on a bad row, naming its problem; PERMISSIVE gives
  null for it.
- to_registry writes one schema id for the whole column: resolved once on the driver when the schema or
  the column's type is known there, else once per task on its first batch (registering the same schema
  again answers the same id).
"""

from __future__ import annotations

import base64
import io
import json
import struct
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from kaflite.protocol import confluent
from kaflite.protocol.confluent import proto_to_python, repeated

MAGIC = 0
MODES = ("FAILFAST", "PERMISSIVE")
_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryError(RuntimeError):
    """The registry answered an error (status and Confluent's error_code kept), or could not be reached."""

    def __init__(self, message: str, status: int = 0, error_code: int = 0) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code


class BadRecord(ValueError):
    """A row that cannot be decoded or encoded (FAILFAST raises it; PERMISSIVE makes the row null)."""


@dataclass(frozen=True)
class RegisteredSchema:
    id: int
    schema_type: str  # AVRO, JSON or PROTOBUF
    schema: str
    references: tuple[dict[str, Any], ...] = ()
    subject: str | None = None
    version: int | None = None


class RegistryClient:
    """The few routes of Confluent's REST API these functions need, over urllib (no extra dependency on
    the executors)."""

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Accept": _CONTENT_TYPE, "Content-Type": _CONTENT_TYPE})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                err = json.loads(raw)
                code, message = int(err.get("error_code", e.code)), str(err.get("message", raw))
            except (ValueError, AttributeError):
                code, message = e.code, raw.decode(errors="replace")
            raise RegistryError(f"{method} {self.url}{path}: {e.code} {message} (error_code {code})",
                                e.code, code) from None
        except OSError as e:
            raise RegistryError(f"{method} {self.url}{path}: registry unreachable: {e}") from None

    @staticmethod
    def _schema(raw: dict[str, Any], schema_id: int | None = None) -> RegisteredSchema:
        return RegisteredSchema(
            id=int(raw["id"]) if schema_id is None else schema_id,
            schema_type=raw.get("schemaType") or "AVRO",
            schema=raw["schema"],
            references=tuple(raw.get("references") or ()),
            subject=raw.get("subject"),
            version=raw.get("version"),
        )

    # format=serialized: a Protobuf schema comes as a base64 FileDescriptorProto (whatever text was
    # registered), which google.protobuf loads without a .proto parser; other types are unaffected
    def by_id(self, schema_id: int) -> RegisteredSchema:
        return self._schema(self._call("GET", f"/schemas/ids/{schema_id}?format=serialized"), schema_id)

    def version(self, subject: str, version: int | str = "latest") -> RegisteredSchema:
        return self._schema(self._call("GET", f"/subjects/{_q(subject)}/versions/{version}?format=serialized"))

    def register(self, subject: str, schema_type: str, schema: str) -> int:
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        return int(self._call("POST", f"/subjects/{_q(subject)}/versions", body)["id"])

    def lookup(self, subject: str, schema_type: str, schema: str) -> int:
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        return int(self._call("POST", f"/subjects/{_q(subject)}", body)["id"])


def _q(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


# ---------------------------------------------------------------------------------------------- Avro


def _avro_self_contained(client: RegistryClient, schema: RegisteredSchema) -> Any:
    """The schema's JSON with the named types its references define (fetched recursively) written out at
    their first use, as if it had been written in one piece: the Spark type, fastavro's resolution of a
    writer against a reader, all then need nothing but the schema itself. A reference's name is the full
    name of the type its subject defines (Confluent's convention for Avro)."""
    defs = {ref["name"]: _avro_self_contained(client, client.version(ref["subject"], ref["version"]))
            for ref in schema.references}
    raw = json.loads(schema.schema)
    if not defs:
        return raw
    defined: set[str] = set()
    primitives = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}

    def walk(s: Any, ns: str) -> Any:
        if isinstance(s, str):
            if s in primitives:
                return s
            for name in (s if "." in s or not ns else f"{ns}.{s}", s):
                if name in defs and name not in defined:
                    defined.add(name)
                    return walk(defs[name], name.rsplit(".", 1)[0] if "." in name else "")
            return s
        if isinstance(s, list):
            return [walk(x, ns) for x in s]
        if not isinstance(s, dict):
            return s
        t = s.get("type")
        if t in ("record", "error"):
            name = s["name"]
            inner = s.get("namespace", name.rsplit(".", 1)[0] if "." in name else ns)
            return {**s, "fields": [{**f, "type": walk(f["type"], inner)} for f in s["fields"]]}
        if t == "array":
            return {**s, "items": walk(s["items"], ns)}
        if t == "map":
            return {**s, "values": walk(s["values"], ns)}
        if isinstance(t, (dict, list)) or (isinstance(t, str) and t not in primitives | {"enum", "fixed"}):
            return {**s, "type": walk(t, ns)}
        return s

    return walk(raw, raw.get("namespace", "") if isinstance(raw, dict) else "")


def parse_avro(client: RegistryClient | None, schema: RegisteredSchema) -> Any:
    import fastavro

    raw = _avro_self_contained(client, schema) if client is not None and schema.references \
        else json.loads(schema.schema)
    return fastavro.parse_schema(raw)


# logical types whose fastavro values Arrow cannot take as Spark sees them: read as their base type
_RAW_LOGICAL = ("time-millis", "time-micros", "uuid")


def avro_reader_schema(parsed: Any) -> Any:
    """The parsed schema with the logical types in _RAW_LOGICAL removed (schema resolution ignores
    logical types, so this reads the same data)."""
    if isinstance(parsed, list):
        return [avro_reader_schema(s) for s in parsed]
    if not isinstance(parsed, dict):
        return parsed
    out = {k: v for k, v in parsed.items() if not (k == "logicalType" and v in _RAW_LOGICAL)}
    t = parsed.get("type")
    if t == "record" or t == "error":
        out["fields"] = [{**f, "type": avro_reader_schema(f["type"])} for f in parsed["fields"]]
    elif t == "array":
        out["items"] = avro_reader_schema(parsed["items"])
    elif t == "map":
        out["values"] = avro_reader_schema(parsed["values"])
    elif isinstance(t, (dict, list)):
        out["type"] = avro_reader_schema(t)
    return out


def avro_to_spark(parsed: Any) -> Any:
    """The Spark type of a parsed Avro schema, as Spark's from_avro maps it (SchemaConverters): record
    -> struct, enum -> string, fixed and bytes -> binary, map -> map<string, _>, a union with null ->
    its other branch, nullable; date, timestamp-*, local-timestamp-*, decimal -> their Spark types."""
    from pyspark.sql import types as T

    named: dict[str, Any] = {}

    def conv(s: Any, stack: tuple[str, ...]) -> tuple[Any, bool]:  # (type, nullable)
        if isinstance(s, str):
            if s in named:
                if s in stack:
                    raise ValueError(f"recursive Avro type {s} has no Spark type")
                return conv(named[s], stack)
            prim = {"null": T.NullType(), "boolean": T.BooleanType(), "int": T.IntegerType(),
                    "long": T.LongType(), "float": T.FloatType(), "double": T.DoubleType(),
                    "bytes": T.BinaryType(), "string": T.StringType()}
            if s not in prim:
                raise ValueError(f"unknown Avro type {s!r}")
            return prim[s], s == "null"
        if isinstance(s, list):
            branches = [b for b in s if b != "null"]
            nullable = len(branches) < len(s)
            if len(branches) == 1:
                return conv(branches[0], stack)[0], nullable
            if set(branches) == {"int", "long"}:
                return T.LongType(), nullable
            if set(branches) == {"float", "double"}:
                return T.DoubleType(), nullable
            raise ValueError(f"Avro union {json.dumps(s)} of several non-null types is not supported")
        t = s.get("type")
        logical = s.get("logicalType")
        if logical == "date" and t == "int":
            return T.DateType(), False
        if logical in ("timestamp-millis", "timestamp-micros") and t == "long":
            return T.TimestampType(), False
        if logical in ("local-timestamp-millis", "local-timestamp-micros") and t == "long":
            return T.TimestampNTZType(), False
        if logical == "decimal" and t in ("bytes", "fixed"):
            return T.DecimalType(int(s["precision"]), int(s.get("scale", 0))), False
        if t in ("record", "error"):
            name = s["name"]
            named[name] = s
            fields = []
            for f in s["fields"]:
                ft, fn = conv(f["type"], (*stack, name))
                fields.append(T.StructField(f["name"], ft, fn))
            return T.StructType(fields), False
        if t == "enum":
            named[s["name"]] = s
            return T.StringType(), False
        if t == "fixed":
            named[s["name"]] = s
            return T.BinaryType(), False
        if t == "array":
            it, inull = conv(s["items"], stack)
            return T.ArrayType(it, inull), False
        if t == "map":
            vt, vnull = conv(s["values"], stack)
            return T.MapType(T.StringType(), vt, vnull), False
        return conv(t, stack)

    spark_type, _ = conv(parsed, ())
    return spark_type


def spark_to_avro(spark_type: Any, name: str = "topLevelRecord", namespace: str = "") -> dict[str, Any]:
    """An Avro record schema for a Spark struct type, as Spark's to_avro writes one (record names from the
    field path), except that a nullable field is `["null", T]` with default null, so that a later version
    adding a nullable column stays BACKWARD compatible."""
    from pyspark.sql import types as T

    def conv(t: Any, nullable: bool, path: str) -> Any:
        base: Any
        if isinstance(t, T.BooleanType):
            base = "boolean"
        elif isinstance(t, (T.ByteType, T.ShortType, T.IntegerType)):
            base = "int"
        elif isinstance(t, T.LongType):
            base = "long"
        elif isinstance(t, T.FloatType):
            base = "float"
        elif isinstance(t, T.DoubleType):
            base = "double"
        elif isinstance(t, T.StringType):
            base = "string"
        elif isinstance(t, T.BinaryType):
            base = "bytes"
        elif isinstance(t, T.DateType):
            base = {"type": "int", "logicalType": "date"}
        elif isinstance(t, T.TimestampNTZType):
            base = {"type": "long", "logicalType": "local-timestamp-micros"}
        elif isinstance(t, T.TimestampType):
            base = {"type": "long", "logicalType": "timestamp-micros"}
        elif isinstance(t, T.DecimalType):
            base = {"type": "bytes", "logicalType": "decimal", "precision": t.precision, "scale": t.scale}
        elif isinstance(t, T.ArrayType):
            base = {"type": "array", "items": conv(t.elementType, t.containsNull, path)}
        elif isinstance(t, T.MapType):
            if not isinstance(t.keyType, T.StringType):
                raise ValueError(f"Avro maps have string keys; {path} has {t.keyType.simpleString()} keys")
            base = {"type": "map", "values": conv(t.valueType, t.valueContainsNull, path)}
        elif isinstance(t, T.StructType):
            rec_name = path.rsplit(".", 1)[-1] if path else name
            base = {"type": "record", "name": rec_name, "fields": [
                _avro_field(f.name, conv(f.dataType, f.nullable, f"{path or name}.{f.name}"), f.nullable)
                for f in t.fields]}
            if not path and namespace:
                base["namespace"] = namespace
        else:
            raise ValueError(f"no Avro type for Spark type {t.simpleString()} ({path or name})")
        return ["null", base] if nullable else base

    if not isinstance(spark_type, T.StructType):
        raise ValueError(f"to_registry encodes a struct column, not {spark_type.simpleString()}")
    result: dict[str, Any] = conv(spark_type, False, "")
    return result


def _avro_field(name: str, avro_type: Any, nullable: bool) -> dict[str, Any]:
    f: dict[str, Any] = {"name": name, "type": avro_type}
    if nullable:
        f["default"] = None
    return f


# --------------------------------------------------------------------------------------- JSON Schema


def json_schema_to_spark(schema: Any) -> Any:
    """The Spark type of a JSON Schema: an object with properties -> struct (every field nullable: a
    property may be absent), additionalProperties only -> map<string, _>, array -> array, integer ->
    bigint, number -> double, string, boolean; `type: [T, "null"]` -> T; anything else (no type,
    oneOf/anyOf, several types) -> string holding the value's JSON text. Local $refs are followed."""
    from pyspark.sql import types as T

    root = schema

    def resolve(s: Any, depth: int = 0) -> Any:
        while isinstance(s, dict) and "$ref" in s:
            ref = s["$ref"]
            if not ref.startswith("#") or depth > 32:
                raise ValueError(f"JSON Schema $ref {ref!r} is not a local reference")
            node = root
            for part in ref[1:].split("/")[1:] if ref != "#" else []:
                node = node[part.replace("~1", "/").replace("~0", "~")]
            s, depth = node, depth + 1
        return s

    def conv(s: Any, depth: int) -> Any:
        if depth > 32:
            raise ValueError("recursive JSON Schema has no Spark type")
        s = resolve(s)
        if not isinstance(s, dict):
            return T.StringType()
        t = s.get("type")
        if isinstance(t, list):
            rest = [x for x in t if x != "null"]
            t = rest[0] if len(rest) == 1 else None
        if t is None and "properties" in s:
            t = "object"
        if t == "object":
            props = s.get("properties")
            if props:
                return T.StructType([T.StructField(k, conv(v, depth + 1), True) for k, v in props.items()])
            extra = s.get("additionalProperties")
            if isinstance(extra, dict):
                return T.MapType(T.StringType(), conv(extra, depth + 1), True)
            return T.StringType()
        if t == "array":
            items = s.get("items")
            return T.ArrayType(conv(items, depth + 1) if isinstance(items, dict) else T.StringType(), True)
        return {"integer": T.LongType(), "number": T.DoubleType(), "boolean": T.BooleanType(),
                "string": T.StringType()}.get(str(t), T.StringType())

    result = conv(schema, 0)
    if not isinstance(result, T.StructType):
        raise ValueError("from_registry needs a JSON Schema whose root is an object with properties")
    return result


def _json_converter(spark_type: Any) -> Callable[[Any, str], Any]:
    """A function turning a parsed JSON value into the Python value Arrow builds `spark_type` from,
    raising BadRecord (naming the field path) when the value has another type."""
    from pyspark.sql import types as T

    def bad(path: str, want: str, v: Any) -> BadRecord:
        return BadRecord(f"field {path or '(root)'}: expected {want}, got {json.dumps(v)[:80]}")

    if isinstance(spark_type, T.StructType):
        convs = [(f.name, _json_converter(f.dataType)) for f in spark_type.fields]

        def struct_(v: Any, path: str) -> Any:
            if v is None:
                return None
            if not isinstance(v, dict):
                raise bad(path, "an object", v)
            return {n: c(v.get(n), f"{path}.{n}" if path else n) for n, c in convs}
        return struct_
    if isinstance(spark_type, T.ArrayType):
        ec = _json_converter(spark_type.elementType)

        def array_(v: Any, path: str) -> Any:
            if v is None:
                return None
            if not isinstance(v, list):
                raise bad(path, "an array", v)
            return [ec(x, f"{path}[{i}]") for i, x in enumerate(v)]
        return array_
    if isinstance(spark_type, T.MapType):
        vc = _json_converter(spark_type.valueType)

        def map_(v: Any, path: str) -> Any:
            if v is None:
                return None
            if not isinstance(v, dict):
                raise bad(path, "an object", v)
            return {k: vc(x, f"{path}.{k}") for k, x in v.items()}
        return map_
    if isinstance(spark_type, T.LongType):
        def long_(v: Any, path: str) -> Any:
            if v is None:
                return None
            if isinstance(v, bool) or not (isinstance(v, int) or (isinstance(v, float) and v.is_integer())):
                raise bad(path, "an integer", v)
            return int(v)
        return long_
    if isinstance(spark_type, T.DoubleType):
        def double_(v: Any, path: str) -> Any:
            if v is None:
                return None
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise bad(path, "a number", v)
            return float(v)
        return double_
    if isinstance(spark_type, T.BooleanType):
        def bool_(v: Any, path: str) -> Any:
            if v is not None and not isinstance(v, bool):
                raise bad(path, "a boolean", v)
            return v
        return bool_

    def string_(v: Any, path: str) -> Any:  # a string, or any other value as its JSON text
        if v is None or isinstance(v, str):
            return v
        return json.dumps(v, separators=(",", ":"))
    return string_


def spark_to_json_schema(spark_type: Any, title: str = "topLevelRecord") -> dict[str, Any]:
    """A JSON Schema (draft 7) for a Spark struct type: nullable fields accept null, non-nullable ones are
    required; dates and timestamps are strings (format date / date-time), binary base64 strings."""
    from pyspark.sql import types as T

    def conv(t: Any, nullable: bool) -> dict[str, Any]:
        s: dict[str, Any]
        if isinstance(t, T.BooleanType):
            s = {"type": "boolean"}
        elif isinstance(t, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
            s = {"type": "integer"}
        elif isinstance(t, (T.FloatType, T.DoubleType, T.DecimalType)):
            s = {"type": "number"}
        elif isinstance(t, T.StringType):
            s = {"type": "string"}
        elif isinstance(t, T.BinaryType):
            s = {"type": "string", "contentEncoding": "base64"}
        elif isinstance(t, T.DateType):
            s = {"type": "string", "format": "date"}
        elif isinstance(t, (T.TimestampType, T.TimestampNTZType)):
            s = {"type": "string", "format": "date-time"}
        elif isinstance(t, T.ArrayType):
            s = {"type": "array", "items": conv(t.elementType, t.containsNull)}
        elif isinstance(t, T.MapType):
            if not isinstance(t.keyType, T.StringType):
                raise ValueError(f"JSON objects have string keys, not {t.keyType.simpleString()}")
            s = {"type": "object", "additionalProperties": conv(t.valueType, t.valueContainsNull)}
        elif isinstance(t, T.StructType):
            s = {"type": "object", "properties": {f.name: conv(f.dataType, f.nullable) for f in t.fields}}
            required = [f.name for f in t.fields if not f.nullable]
            if required:
                s["required"] = required
        else:
            raise ValueError(f"no JSON Schema type for Spark type {t.simpleString()}")
        if nullable:
            s["type"] = [s["type"], "null"]
        return s

    if not isinstance(spark_type, T.StructType):
        raise ValueError(f"to_registry encodes a struct column, not {spark_type.simpleString()}")
    return {"$schema": "http://json-schema.org/draft-07/schema#", "title": title, **conv(spark_type, False)}


def _json_default(v: Any) -> Any:
    import datetime
    import decimal

    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(v).decode()
    if isinstance(v, datetime.datetime):
        return v.isoformat()
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return float(v)
    raise TypeError(f"{type(v).__name__} is not JSON serializable")


# ------------------------------------------------------------------------------------------ Protobuf


def read_message_indexes(payload: bytes) -> tuple[list[int], int]:
    """Confluent's message indexes (kaflite.protocol.confluent); BadRecord when they do not read."""
    try:
        return confluent.read_message_indexes(payload)
    except ValueError as e:
        raise BadRecord(str(e)) from None


def proto_pool_file(schema: RegisteredSchema) -> Any:
    """The schema's file descriptor, from the registry's FileDescriptorProto (kaflite.protocol.confluent)."""
    return confluent.proto_file(schema.id, schema.schema, bool(schema.references))


def proto_message(file_desc: Any, indexes: list[int] | None = None, name: str | None = None) -> Any:
    """The message descriptor at `indexes` or named `name`; a path naming no message is a BadRecord (a
    row's), an unknown name a ValueError (the caller's)."""
    if name is not None:
        return confluent.proto_message(file_desc, name=name)
    try:
        return confluent.proto_message(file_desc, indexes)
    except ValueError as e:
        raise BadRecord(str(e)) from None










def proto_to_spark(desc: Any) -> Any:
    """The Spark type of a message, as Spark's from_protobuf maps it: message -> struct, repeated ->
    array, map -> map, enum -> string, int32 / sint32 / sfixed32 -> int, int64 / sint64 / sfixed64 /
    uint64 / fixed64 -> bigint, bytes -> binary; uint32 / fixed32 -> bigint (Spark's int only with
    `upcast.unsigned.ints` off, where large values wrap). Every field nullable."""
    from google.protobuf.descriptor import FieldDescriptor as FD
    from pyspark.sql import types as T

    scalars = {FD.TYPE_INT32: T.IntegerType(), FD.TYPE_SINT32: T.IntegerType(), FD.TYPE_SFIXED32: T.IntegerType(),
               FD.TYPE_INT64: T.LongType(), FD.TYPE_SINT64: T.LongType(), FD.TYPE_SFIXED64: T.LongType(),
               FD.TYPE_UINT32: T.LongType(), FD.TYPE_FIXED32: T.LongType(), FD.TYPE_UINT64: T.LongType(),
               FD.TYPE_FIXED64: T.LongType(), FD.TYPE_BOOL: T.BooleanType(), FD.TYPE_FLOAT: T.FloatType(),
               FD.TYPE_DOUBLE: T.DoubleType(), FD.TYPE_STRING: T.StringType(), FD.TYPE_BYTES: T.BinaryType(),
               FD.TYPE_ENUM: T.StringType()}

    def field_type(fd: Any, stack: tuple[str, ...]) -> Any:
        if fd.type in (FD.TYPE_MESSAGE, FD.TYPE_GROUP):
            m = fd.message_type
            if m.GetOptions().map_entry:
                return T.MapType(field_type(m.fields_by_name["key"], stack),
                                 field_type(m.fields_by_name["value"], stack), True)
            t = message(m, stack)
        else:
            t = scalars[fd.type]
        return T.ArrayType(t, True) if repeated(fd) else t

    def message(m: Any, stack: tuple[str, ...]) -> Any:
        if m.full_name in stack:
            raise ValueError(f"recursive Protobuf message {m.full_name} has no Spark type")
        return T.StructType([T.StructField(fd.name, field_type(fd, (*stack, m.full_name)), True)
                             for fd in m.fields])

    return message(desc, ())







# ----------------------------------------------------------------------------------------- decoding


def frame(schema_id: int, payload: bytes) -> bytes:
    return struct.pack(">bI", MAGIC, schema_id) + payload


def unframe(value: bytes) -> tuple[int, bytes]:
    """(schema id, payload) of a Confluent-framed value; BadRecord when it is not one."""
    if len(value) < 5:
        raise BadRecord(f"value of {len(value)} bytes is shorter than Confluent's 5-byte header")
    if value[0] != MAGIC:
        raise BadRecord(f"no magic byte: value starts with 0x{value[:5].hex()}, not 0x00 and a schema id")
    return int.from_bytes(value[1:5], "big"), value[5:]


@dataclass
class Decoder:
    """Decodes framed values into the Python values of the reader's Spark type. One per task: `writers`
    caches each schema id's decoding function, so each id is fetched once."""

    url: str
    reader_type: str  # AVRO, JSON or PROTOBUF
    reader_schema: str  # the reader schema's text (Avro: JSON of the schema; JSON: the JSON Schema; .proto)
    reader_id: int
    spark_type_json: str  # the Spark type, as StructType.json()
    mode: str = "FAILFAST"
    reader_message: str | None = None  # PROTOBUF: the full name of the message the column holds
    reader_references: tuple[dict[str, Any], ...] = ()  # AVRO: the reader schema's references
    fetch: Callable[[int], RegisteredSchema] | None = None  # injected in tests; else HTTP
    writers: dict[int, Callable[[bytes], Any]] = field(default_factory=dict)
    fetches: int = 0

    def __post_init__(self) -> None:
        from pyspark.sql.types import StructType

        self._client = RegistryClient(self.url)
        self._spark_type = StructType.fromJson(json.loads(self.spark_type_json))
        if self.reader_type == "AVRO":
            self._reader_parsed = avro_reader_schema(
                parse_avro(self._client, RegisteredSchema(self.reader_id, "AVRO", self.reader_schema,
                                                          self.reader_references)))
        elif self.reader_type == "PROTOBUF":
            from google.protobuf import message_factory

            file_desc = proto_pool_file(RegisteredSchema(self.reader_id, "PROTOBUF", self.reader_schema))
            self._proto_class = message_factory.GetMessageClass(
                proto_message(file_desc, name=self.reader_message))
        else:
            self._json_convert = _json_converter(self._spark_type)

    def _fetch(self, schema_id: int) -> RegisteredSchema:
        self.fetches += 1
        if self.fetch is not None:
            return self.fetch(schema_id)
        return self._client.by_id(schema_id)

    def _writer(self, schema_id: int) -> Callable[[bytes], Any]:
        w = self.writers.get(schema_id)
        if w is not None:
            return w
        try:
            writer = self._fetch(schema_id)
        except RegistryError as e:
            if e.error_code == 40403 or e.status == 404:
                raise BadRecord(f"unknown schema id {schema_id} (the registry at {self.url} has none)") from None
            raise
        if writer.schema_type != self.reader_type:
            raise BadRecord(f"schema id {schema_id} is a {writer.schema_type} schema, "
                            f"the column is read as {self.reader_type}")
        if self.reader_type == "AVRO":
            import fastavro

            wparsed = avro_reader_schema(parse_avro(self._client, writer))
            rparsed = None if schema_id == self.reader_id else self._reader_parsed

            def read_avro(payload: bytes) -> Any:
                bio = io.BytesIO(payload)
                rec = fastavro.schemaless_reader(bio, wparsed, rparsed)
                if bio.tell() != len(payload):
                    raise BadRecord(f"{len(payload) - bio.tell()} bytes left after the Avro record "
                                    f"(schema id {schema_id})")
                return rec
            w = read_avro
        elif self.reader_type == "PROTOBUF":
            w = self._proto_reader(schema_id, writer)
        else:
            convert = self._json_convert

            def read_json(payload: bytes) -> Any:
                return convert(json.loads(payload), "")
            w = read_json
        self.writers[schema_id] = w
        return w

    def _proto_reader(self, schema_id: int, writer: RegisteredSchema) -> Callable[[bytes], Any]:
        """Rows are parsed with the reader's message class (Protobuf matches fields by number, so data
        of an older or newer compatible version reads), after checking that the row's message indexes
        name the same message in its writer schema."""
        wfile = proto_pool_file(writer)
        cls = self._proto_class
        want = cls.DESCRIPTOR.full_name
        names: dict[tuple[int, ...], str] = {}

        def read_proto(payload: bytes) -> Any:
            indexes, pos = read_message_indexes(payload)
            name = names.get(tuple(indexes))
            if name is None:
                name = names[tuple(indexes)] = proto_message(wfile, indexes).full_name
            if name != want:
                raise BadRecord(f"schema id {schema_id}: the value holds message {name}, the column is read as "
                                f"{want}")
            return proto_to_python(cls.FromString(payload[pos:]))
        return read_proto

    def decode_one(self, value: bytes) -> Any:
        schema_id, payload = unframe(value)
        read = self._writer(schema_id)
        try:
            return read(payload)
        except BadRecord:
            raise
        except Exception as e:  # fastavro / json errors on a corrupt payload
            raise BadRecord(f"schema id {schema_id}: payload does not decode: {type(e).__name__}: {e}") from None

    def decode(self, values: Any) -> Any:
        """A pyarrow binary array -> the struct array of the reader's Spark type."""
        from pyspark.sql.pandas.types import to_arrow_type

        out: list[Any] = []
        for i, v in enumerate(values.to_pylist()):
            if v is None:
                out.append(None)
                continue
            try:
                out.append(self.decode_one(v))
            except BadRecord as e:
                if self.mode == "PERMISSIVE":
                    out.append(None)
                else:
                    raise BadRecord(f"from_registry (mode FAILFAST): row {i} of the batch: {e}") from None
        return pa.array(out, type=to_arrow_type(self._spark_type, timezone="UTC"))


def _check_mode(mode: str) -> str:
    m = mode.upper()
    if m not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    return m


def reader_schema(registry_url: str, subject: str | None = None, version: int | str = "latest",
                  schema_id: int | None = None) -> RegisteredSchema:
    """The reader schema from_registry resolves rows to: by id, else the subject's version."""
    client = RegistryClient(registry_url)
    if schema_id is not None:
        return client.by_id(schema_id)
    if subject is None:
        raise ValueError("from_registry needs subject= (its latest or given version) or schema_id=")
    return client.version(subject, version)


def spark_type_of(registry_url: str, schema: RegisteredSchema, message_name: str | None = None) -> Any:
    if schema.schema_type == "AVRO":
        t = avro_to_spark(parse_avro(RegistryClient(registry_url), schema))
        from pyspark.sql.types import StructType

        if not isinstance(t, StructType):
            raise ValueError(f"schema id {schema.id} is not an Avro record; from_registry gives a struct")
        return t
    if schema.schema_type == "JSON":
        return json_schema_to_spark(json.loads(schema.schema))
    if schema.schema_type == "PROTOBUF":
        return proto_to_spark(proto_message(proto_pool_file(schema), name=message_name))
    raise ValueError(f"from_registry does not decode {schema.schema_type} schemas (schema id {schema.id})")


def from_registry(col: Any, registry_url: str, subject: str | None = None, *, version: int | str = "latest",
                  schema_id: int | None = None, mode: str = "FAILFAST", message_name: str | None = None) -> Any:
    """A struct column decoded from Confluent-framed Avro, JSON Schema or Protobuf values (binary `col`).

    The struct's type is the reader schema's, fetched now: `subject`'s `version` (default latest), or
    `schema_id`. Each row is decoded with its own writer schema (its id, fetched once per task) and
    resolved to the reader schema. Protobuf: the column holds one message, `message_name` (full or simple
    name), by default the schema's first. `mode`: FAILFAST raises on a row that is not framed, has an unknown id
    or does not decode; PERMISSIVE makes it null.
    """
    from pyspark.sql.functions import arrow_udf

    m = _check_mode(mode)
    schema = reader_schema(registry_url, subject, version, schema_id)
    spark_type = spark_type_of(registry_url, schema, message_name)
    params = dict(url=registry_url, reader_type=schema.schema_type, reader_schema=schema.schema,
                  reader_id=schema.id, spark_type_json=spark_type.json(), mode=m,
                  reader_references=schema.references)
    if schema.schema_type == "PROTOBUF":
        params["reader_message"] = proto_message(proto_pool_file(schema), name=message_name).full_name

    def decode(batches: Iterator[pa.Array]) -> Iterator[pa.Array]:
        decoder = Decoder(**params)  # type: ignore[arg-type]  # one per task: the schema cache's lifetime
        for values in batches:
            yield decoder.decode(values)

    # the type hints make it an iterator UDF (one Decoder per task); pyspark's stubs know only functionType=
    make_udf: Any = arrow_udf
    udf = make_udf(decode, spark_type)
    return udf(col)


# ----------------------------------------------------------------------------------------- encoding


def _to_python(spark_type: Any, drop_null_fields: bool = False) -> Callable[[Any], Any]:
    """Arrow's Python values of `spark_type` -> what fastavro / json write (maps: Arrow gives a list of
    (key, value) pairs, the writers take a dict). `drop_null_fields` leaves a struct's null fields out (JSON,
    as Spark's to_json does by default: a JSON Schema property that is absent need not accept null)."""
    from pyspark.sql import types as T

    if isinstance(spark_type, T.StructType):
        convs = [(f.name, _to_python(f.dataType, drop_null_fields)) for f in spark_type.fields]
        if drop_null_fields:
            def struct_(v: Any) -> Any:
                if v is None:
                    return None
                return {n: c(v[n]) for n, c in convs if v[n] is not None}
            return struct_
        if all(c is _identity for _, c in convs):
            return _identity
        return lambda v: None if v is None else {n: c(v[n]) for n, c in convs}
    if isinstance(spark_type, T.ArrayType):
        ec = _to_python(spark_type.elementType, drop_null_fields)
        return _identity if ec is _identity else (lambda v: None if v is None else [ec(x) for x in v])
    if isinstance(spark_type, T.MapType):
        vc = _to_python(spark_type.valueType, drop_null_fields)
        return lambda v: None if v is None else {k: vc(x) for k, x in v}
    return _identity


def _identity(v: Any) -> Any:
    return v


@dataclass
class Encoder:
    """Encodes rows (Arrow's Python values of a struct) into framed values. With no schema given, the
    schema is resolved on the first batch, from the batch's Arrow type (once per task)."""

    registry_url: str
    subject: str
    schema_type: str = "AVRO"
    schema: str | None = None
    schema_id: int | None = None
    spark_type_json: str | None = None
    auto_register: bool = True
    use_latest_version: bool = False
    record_name: str = "topLevelRecord"
    namespace: str = ""
    references: tuple[dict[str, Any], ...] = ()  # the schema's (use_latest_version), to parse it

    def _resolve(self, arrow_type: Any) -> None:
        from pyspark.sql.pandas.types import from_arrow_type
        from pyspark.sql.types import StructType

        spark_type: Any
        if self.spark_type_json is not None:
            spark_type = StructType.fromJson(json.loads(self.spark_type_json))
        else:
            spark_type = from_arrow_type(arrow_type, prefer_timestamp_ntz=False)
        if self.schema_id is None:
            reg = writer_schema(self.registry_url, self.subject, spark_type, self.schema, self.schema_type,
                                self.auto_register, self.use_latest_version, self.record_name, self.namespace)
            self.schema_type, self.schema, self.schema_id = reg.schema_type, reg.schema, reg.id
            self.references = reg.references
        if self.schema_type not in ("AVRO", "JSON"):
            raise ValueError(f"to_registry writes AVRO or JSON, not {self.schema_type}")
        assert self.schema is not None and self.schema_id is not None
        self._convert = _to_python(spark_type, drop_null_fields=self.schema_type == "JSON")
        self._header = struct.pack(">bI", MAGIC, self.schema_id)
        if self.schema_type == "AVRO":
            self._parsed = parse_avro(RegistryClient(self.registry_url),
                                      RegisteredSchema(self.schema_id, "AVRO", self.schema, self.references))

    def encode_one(self, row: dict[str, Any]) -> bytes:
        rec = self._convert(row)
        if self.schema_type == "AVRO":
            import fastavro

            bio = io.BytesIO()
            bio.write(self._header)
            fastavro.schemaless_writer(bio, self._parsed, rec)
            return bio.getvalue()
        return self._header + json.dumps(rec, separators=(",", ":"), default=_json_default).encode()

    def encode(self, rows: Any) -> Any:
        if not hasattr(self, "_header"):
            self._resolve(rows.type)
        out: list[bytes | None] = []
        for i, row in enumerate(rows.to_pylist()):
            if row is None:
                out.append(None)
                continue
            try:
                out.append(self.encode_one(row))
            except Exception as e:  # fastavro's validation of a value against the schema
                raise BadRecord(f"to_registry: row {i} of the batch does not fit schema id {self.schema_id}: "
                                f"{type(e).__name__}: {e}") from None
        return pa.array(out, type=pa.binary())


def writer_schema(registry_url: str, subject: str, spark_type: Any, schema: str | None = None,
                  schema_type: str = "AVRO", auto_register: bool = True, use_latest_version: bool = False,
                  record_name: str = "topLevelRecord", namespace: str = "") -> RegisteredSchema:
    """The schema to_registry writes with, and its id: the subject's latest version
    (`use_latest_version`), else `schema` or the one derived from `spark_type`, registered under
    `subject` (`auto_register`, as the serializers' `auto.register.schemas`) or looked up there."""
    client = RegistryClient(registry_url)
    st = schema_type.upper()
    if use_latest_version:
        return client.version(subject, "latest")
    if st not in ("AVRO", "JSON"):
        raise ValueError(f"to_registry writes AVRO or JSON, not {schema_type!r}")
    if schema is None:
        derived = spark_to_avro(spark_type, record_name, namespace) if st == "AVRO" \
            else spark_to_json_schema(spark_type, record_name)
        schema = json.dumps(derived, separators=(",", ":"))
    sid = client.register(subject, st, schema) if auto_register else client.lookup(subject, st, schema)
    return RegisteredSchema(sid, st, schema, subject=subject)


def to_registry(struct_col: Any, registry_url: str, subject: str, *, schema: str | None = None,
                schema_type: str = "AVRO", auto_register: bool = True, use_latest_version: bool = False,
                record_name: str = "topLevelRecord", namespace: str = "", df: Any = None) -> Any:
    """A binary column of Confluent-framed Avro (or JSON) values encoding `struct_col` (null stays null).

    The schema is `schema` (text) or derived from the column's Spark type, registered under `subject`
    (`auto_register=True`) or looked up there (`auto_register=False`: the task fails with 40401 / 40403
    when it is absent), or the subject's latest version (`use_latest_version=True`). With `schema`,
    `use_latest_version` or `df=` (the DataFrame `struct_col` belongs to, which gives its type) that
    happens once, now, on the driver, and a refusal (409) raises here; otherwise each task does it on its
    first batch (registering a schema twice answers the same id), since a Column does not know its type.
    """
    from pyspark.sql.functions import arrow_udf

    st = schema_type.upper()
    params: dict[str, Any] = dict(registry_url=registry_url, subject=subject, schema_type=st, schema=schema,
                                  auto_register=auto_register, use_latest_version=use_latest_version,
                                  record_name=record_name, namespace=namespace)
    if df is not None:
        spark_type = _column_type(struct_col, df)
        params["spark_type_json"] = spark_type.json()
    if df is not None or schema is not None or use_latest_version:
        from pyspark.sql.types import StructType

        reg = writer_schema(registry_url, subject, StructType.fromJson(json.loads(params["spark_type_json"]))
                            if df is not None else None, schema, st, auto_register, use_latest_version,
                            record_name, namespace)
        params.update(schema_type=reg.schema_type, schema=reg.schema, schema_id=reg.id, references=reg.references)
        if reg.schema_type not in ("AVRO", "JSON"):
            raise ValueError(f"to_registry writes AVRO or JSON, not {reg.schema_type}")

    def encode(batches: Iterator[pa.Array]) -> Iterator[pa.Array]:
        encoder = Encoder(**params)  # one per task: the schema is resolved once
        for rows in batches:
            yield encoder.encode(rows)

    make_udf: Any = arrow_udf
    udf = make_udf(encode, "binary")
    return udf(struct_col)


def _column_type(col: Any, df: Any) -> Any:
    from pyspark.sql.functions import col as col_fn

    c = col_fn(col) if isinstance(col, str) else col
    return df.select(c.alias("_c")).schema["_c"].dataType
