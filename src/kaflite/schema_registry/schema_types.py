"""Schema types the registry accepts (AVRO, JSON, PROTOBUF): validation and the canonical text that decides
whether two registrations are the same schema.

Rules:
- AVRO: the text is JSON that fastavro parses, with the named types of its references known; the
  canonical text is the compact JSON of the schema as written (key order kept, so two schemas that differ
  only in whitespace are one schema, while defaults and docs still tell schemas apart, as Confluent's
  `AvroSchema.canonicalString` does); with normalize, keys are also sorted.
- JSON: the text is a JSON object or boolean that jsonschema's metaschema for its draft accepts (local
  $refs resolving); canonical text as for AVRO.
- PROTOBUF: .proto text that proto-schema-parser parses, or a base64 FileDescriptorProto (what
  confluent-kafka's Python serializer registers); kept as sent, less surrounding whitespace.
- Compatibility: avro_compat, json_compat and protobuf_compat, one per type.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kaflite.schema_registry import avro_compat, json_compat, protobuf_compat

TYPES = ("AVRO", "JSON", "PROTOBUF")


class InvalidSchema(ValueError):
    """The schema text is not a valid schema of its type (Confluent: 42201)."""


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class SchemaText:
    """What identifies a schema: its type, canonical text and references (ids are given per identity)."""

    schema_type: str
    schema: str
    references: tuple[Reference, ...] = ()


def parse_references(raw: Any) -> tuple[Reference, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidSchema("references must be a list")
    refs = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) \
                or not isinstance(item.get("subject"), str) or not isinstance(item.get("version"), int):
            raise InvalidSchema(f"invalid reference {item!r}: name, subject and version are required")
        refs.append(Reference(item["name"], item["subject"], item["version"]))
    return tuple(refs)


def _compact(value: Any, sort_keys: bool) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=sort_keys, ensure_ascii=False)


# resolves a reference to the referenced schema (raises InvalidSchema when it does not exist)
Resolver = Callable[[Reference], SchemaText]


def avro_named_types(text: SchemaText, resolve: Resolver, _depth: int = 0) -> dict[str, Any]:
    """The named Avro types that `text`'s references define (transitively), for parsing it."""
    if _depth > 32:
        raise InvalidSchema("schema references nest deeper than 32 levels")
    named: dict[str, Any] = {}
    for ref in text.references:
        target = resolve(ref)
        named.update(avro_named_types(target, resolve, _depth + 1))
        try:
            avro_compat.parse(json.loads(target.schema), named)
        except Exception as err:
            raise InvalidSchema(f"referenced schema {ref.subject} version {ref.version} is invalid: {err}") from err
    return named


def canonical(schema_type: str, schema: str, references: Sequence[Reference], resolve: Resolver,
              normalize: bool = False) -> SchemaText:
    """Validate a schema as registered and give its canonical identity; raises InvalidSchema."""
    schema_type = (schema_type or "AVRO").upper()
    if schema_type not in TYPES:
        raise InvalidSchema(f"unknown schema type {schema_type}; known: {', '.join(TYPES)}")
    if not isinstance(schema, str) or not schema.strip():
        raise InvalidSchema("the schema is empty")
    refs = tuple(references)
    if schema_type == "PROTOBUF":
        for ref in refs:
            resolve(ref)
        text = SchemaText(schema_type, schema.strip(), refs)
        parse_protobuf(text)
        return text
    try:
        loaded = json.loads(schema)
    except ValueError as err:
        raise InvalidSchema(f"Invalid schema: not JSON: {err}") from err
    text = SchemaText(schema_type, _compact(loaded, normalize), refs)
    if schema_type == "JSON":
        for ref in refs:
            resolve(ref)
        parse_json(text)
        return text
    named = avro_named_types(text, resolve)
    _require_avro_attributes(loaded)
    try:
        avro_compat.parse(loaded, named)
    except Exception as err:  # fastavro raises SchemaParseException, ValueError, TypeError, KeyError...
        raise InvalidSchema(f"Invalid schema: {err}") from err
    return text


# what the Avro specification requires of each complex type (fastavro accepts a record without fields)
_REQUIRED = {"record": ("fields", list), "error": ("fields", list), "enum": ("symbols", list),
             "fixed": ("size", int), "array": ("items", object), "map": ("values", object)}


def _require_avro_attributes(node: Any) -> None:
    if isinstance(node, list):
        for branch in node:
            _require_avro_attributes(branch)
    elif isinstance(node, dict):
        kind = node.get("type")
        if isinstance(kind, str) and kind in _REQUIRED:
            attr, attr_type = _REQUIRED[kind]
            if not isinstance(node.get(attr), attr_type):
                raise InvalidSchema(f"Invalid schema: {kind} {node.get('name', '')} needs \"{attr}\"".replace("  ", " "))
            for field in node.get("fields") or ():
                if isinstance(field, dict):
                    _require_avro_attributes(field.get("type"))
            for attr in ("items", "values"):
                _require_avro_attributes(node.get(attr))
        else:
            _require_avro_attributes(kind)


def parse_avro(text: SchemaText, resolve: Resolver) -> avro_compat.AvroSchema:
    return avro_compat.parse(json.loads(text.schema), avro_named_types(text, resolve))


def parse_json(text: SchemaText) -> json_compat.JsonSchema:
    try:
        return json_compat.parse(json.loads(text.schema))
    except ValueError as err:
        raise InvalidSchema(f"Invalid schema: {err}") from err


def parse_protobuf(text: SchemaText) -> protobuf_compat.ProtoSchema:
    try:
        return protobuf_compat.parse(text.schema)
    except ValueError as err:
        raise InvalidSchema(f"Invalid schema: {err}") from err
