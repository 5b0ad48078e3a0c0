"""Avro schema compatibility as Confluent Schema Registry decides it: Avro's schema resolution rules
(can a reader schema read what a writer schema wrote?) applied per compatibility level.

Rules (each is checked by tests/schema_registry/test_avro_compat.py):
- BACKWARD: the new schema reads data written with the latest registered one; BACKWARD_TRANSITIVE: with
  every registered one. FORWARD(_TRANSITIVE): the latest (every) registered schema reads data written with
  the new one. FULL(_TRANSITIVE): both. NONE: no check.
- A reader reads a writer when (Avro specification, "Schema Resolution"): both are the same primitive, or
  the writer's type promotes to the reader's (int to long, float, double; long to float, double; float to
  double; string to bytes and bytes to string); records, enums and fixed have the same unqualified name,
  or the reader's aliases contain the writer's full name; each reader field is found in the writer (by
  name or one of the reader field's aliases) and read from it, or has a default; writer fields absent
  from the reader are skipped; every writer enum symbol is a reader symbol unless the reader enum has a
  default; fixed sizes are equal; array items and map values resolve; a writer union resolves when each
  of its branches does; a reader union reads a non-union writer when one of its branches does.
- Logical types are ignored (they annotate the underlying type, which is what resolution uses).
- Recursive named types terminate: a (reader, writer) pair already being checked counts as compatible.

Pure: no I/O; schemas come in as fastavro-parsed objects (see `parse`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import fastavro

from kaflite.schema_registry.compat_levels import check_at_level

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
NAMED = frozenset({"record", "error", "enum", "fixed"})
# writer type -> reader types it promotes to (Avro specification, Schema Resolution)
PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}


class AvroSchema:
    """A parsed Avro schema with its table of named types, so named references resolve."""

    def __init__(self, parsed: Any, named: dict[str, Any]) -> None:
        self.root = parsed
        self.named = named

    def resolve(self, node: Any) -> Any:
        """A schema node with name references and {"type": ...} wrappers replaced by what they denote."""
        if isinstance(node, str):
            return node if node in PRIMITIVES else self.resolve(self.named[node])
        if isinstance(node, dict):
            kind = node.get("type")
            if kind in PRIMITIVES:
                return kind  # a logicalType annotation does not change resolution
            if kind not in NAMED and kind not in ("array", "map"):
                return self.resolve(kind)
        return node


def parse(schema: Any, named_schemas: dict[str, Any] | None = None) -> AvroSchema:
    """Parse an Avro schema (JSON already loaded); `named_schemas` holds types defined by references and
    receives this schema's own named types. Raises fastavro's SchemaParseException (or ValueError,
    TypeError, KeyError) when the schema is invalid."""
    named: dict[str, Any] = {} if named_schemas is None else named_schemas
    parsed = fastavro.parse_schema(schema, named_schemas=named)
    return AvroSchema(parsed, dict(named))


def _type_of(node: Any) -> str:
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return "union"
    return str(node.get("type"))


def _full_name(node: dict[str, Any]) -> str:
    return str(node["name"])


def _short_name(full: str) -> str:
    return full.rsplit(".", 1)[-1]


def _aliases(node: dict[str, Any]) -> set[str]:
    """A named type's aliases as full names (an unqualified alias takes the type's namespace)."""
    full = _full_name(node)
    namespace = full.rsplit(".", 1)[0] if "." in full else ""
    out = set()
    for alias in node.get("aliases") or ():
        out.add(alias if "." in alias or not namespace else f"{namespace}.{alias}")
    return out


def _names_match(reader: dict[str, Any], writer: dict[str, Any]) -> bool:
    return _short_name(_full_name(reader)) == _short_name(_full_name(writer)) \
        or _full_name(writer) in _aliases(reader)


class _Checker:
    def __init__(self, reader: AvroSchema, writer: AvroSchema) -> None:
        self.reader = reader
        self.writer = writer
        self.in_progress: set[tuple[int, int]] = set()

    def check(self, r_node: Any, w_node: Any, path: str) -> list[str]:
        r = self.reader.resolve(r_node)
        w = self.writer.resolve(w_node)
        rt, wt = _type_of(r), _type_of(w)
        if wt == "union":
            problems: list[str] = []
            for i, branch in enumerate(w):
                problems += self.check(r, branch, f"{path}/{i}")
            return problems
        if rt == "union":
            for branch in r:
                if not self.check(branch, w, path):
                    return []
            return [f"{path}: reader union {self._describe(r, self.reader)} has no branch that reads writer type {wt}"]
        if rt in PRIMITIVES or wt in PRIMITIVES:
            if rt == wt or rt in PROMOTIONS.get(wt, frozenset()):
                return []
            return [f"{path}: reader type {rt} does not read writer type {wt}"]
        if rt != wt and not ({rt, wt} <= {"record", "error"}):
            return [f"{path}: reader type {rt} does not read writer type {wt}"]
        if rt == "array":
            return self.check(r["items"], w["items"], f"{path}/items")
        if rt == "map":
            return self.check(r["values"], w["values"], f"{path}/values")
        if not _names_match(r, w):
            return [f"{path}: reader name {_full_name(r)} does not match writer name {_full_name(w)}"]
        if rt == "fixed":
            if r["size"] != w["size"]:
                return [f"{path}: fixed size {r['size']} does not match writer size {w['size']}"]
            return []
        if rt == "enum":
            missing = [s for s in w["symbols"] if s not in r["symbols"]]
            if missing and r.get("default") is None:
                return [f"{path}: reader enum {_full_name(r)} lacks writer symbols {missing} and has no default"]
            return []
        return self._record(r, w, path)

    def _record(self, r: dict[str, Any], w: dict[str, Any], path: str) -> list[str]:
        pair = (id(r), id(w))
        if pair in self.in_progress:
            return []
        self.in_progress.add(pair)
        try:
            writer_fields = {f["name"]: f for f in w["fields"]}
            problems: list[str] = []
            for field in r["fields"]:
                wf = writer_fields.get(field["name"])
                if wf is None:
                    wf = next((writer_fields[a] for a in field.get("aliases") or () if a in writer_fields), None)
                if wf is None:
                    if "default" not in field:
                        problems.append(f"{path}/fields/{field['name']}: reader field has no default and is "
                                        f"missing from the writer")
                    continue
                problems += self.check(field["type"], wf["type"], f"{path}/fields/{field['name']}")
            return problems
        finally:
            self.in_progress.discard(pair)

    @staticmethod
    def _describe(node: Any, schema: AvroSchema) -> str:
        return "[" + ", ".join(_type_of(schema.resolve(b)) for b in node) + "]"


def can_read(reader: AvroSchema, writer: AvroSchema) -> list[str]:
    """Why `reader` cannot read data written with `writer` (empty when it can)."""
    return _Checker(reader, writer).check(reader.root, writer.root, "")


def check(level: str, new: AvroSchema, previous: Sequence[AvroSchema]) -> list[str]:
    """Confluent's verdict for registering `new` after `previous` (oldest first) at `level`: the list of
    incompatibilities, empty when compatible. Non-transitive levels look at the latest only."""
    return check_at_level(level, new, previous, can_read)
