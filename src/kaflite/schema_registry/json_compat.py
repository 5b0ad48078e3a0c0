"""JSON Schema compatibility as Confluent Schema Registry decides it: can a reader schema accept every
document a writer schema accepts, with Confluent's open / closed content model rules for objects.

Rules (each is checked by tests/schema_registry/test_json_compat.py):
- Levels as for Avro (compat_levels.LEVELS): BACKWARD(_TRANSITIVE) checks new-as-reader against the latest
  (every) registered schema as writer, FORWARD(_TRANSITIVE) the other way, FULL(_TRANSITIVE) both, NONE
  nothing.
- `true` and `{}` accept everything, `false` nothing: a reader `true` accepts any writer; a reader that is
  not `true` does not accept a writer `true`.
- type: the reader's types must include the writer's (integer is within number); enum / const: the
  reader's values must include the writer's; bounds: a reader maximum, exclusiveMaximum, maxLength,
  maxItems, maxProperties needs a writer bound at most as large, a minimum-like bound a writer bound at
  least as large; a reader pattern needs the same writer pattern; a reader multipleOf needs a writer
  multipleOf that it divides; a reader uniqueItems needs the writer's.
- objects (Confluent's content models): a property in both is checked recursively; a property the
  reader lacks is allowed when the reader is open (additionalProperties absent or true), refused when it
  is closed (false), and checked against the reader's additionalProperties schema otherwise; a property
  the reader adds is refused when the writer is open (the writer may have sent that name with any
  value), allowed when the writer is closed, and checked against the writer's additionalProperties
  schema otherwise; every property the reader requires the writer requires; a reader additionalProperties
  narrower than the writer's is refused.
- arrays: items (one schema) are checked recursively; anyOf / oneOf: every writer branch must be accepted
  by a reader branch (a non-combined side counts as one branch); anyOf turning into oneOf is refused;
  a reader allOf needs every branch to accept the writer.
- Local $ref (`#/...`) are resolved within each document; a pair of schemas already being checked counts
  as compatible, so recursive schemas terminate.

Pure: no I/O; schemas come in as loaded JSON (see `parse`, which validates with jsonschema).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jsonschema.exceptions
import jsonschema.validators

from kaflite.schema_registry.compat_levels import check_at_level

UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")


class JsonSchema:
    """A validated JSON schema document (a dict or a boolean)."""

    def __init__(self, document: Any) -> None:
        self.root = document

    def deref(self, node: Any) -> Any:
        """`node` with a local $ref replaced by what it points at (a remote one is left as is)."""
        seen = 0
        while isinstance(node, dict) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#"):
            target: Any = self.root
            for part in node["$ref"][1:].split("/"):
                if not part:
                    continue
                part = part.replace("~1", "/").replace("~0", "~")
                if isinstance(target, dict) and part in target:
                    target = target[part]
                elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                    target = target[int(part)]
                else:
                    raise ValueError(f"unresolvable $ref {node['$ref']}")
            node = target
            seen += 1
            if seen > 64:
                raise ValueError(f"$ref cycle at {node!r}")
        return node


def parse(document: Any) -> JsonSchema:
    """Validate a loaded JSON schema against its metaschema (draft from $schema, else the latest);
    raises ValueError when it is not a schema."""
    if not isinstance(document, (dict, bool)):
        raise ValueError("a JSON schema is an object or a boolean")
    if isinstance(document, dict):
        try:
            jsonschema.validators.validator_for(document).check_schema(document)
        except jsonschema.exceptions.SchemaError as err:
            raise ValueError(f"not a valid JSON schema: {err.message}") from err
    schema = JsonSchema(document)
    _walk_refs(schema, document, 0)
    return schema


def _walk_refs(schema: JsonSchema, node: Any, depth: int) -> None:
    if depth > 200:
        return
    if isinstance(node, dict):
        if "$ref" in node:
            schema.deref(node)  # raises on a dangling local $ref: the schema is invalid
        for value in node.values():
            _walk_refs(schema, value, depth + 1)
    elif isinstance(node, list):
        for value in node:
            _walk_refs(schema, value, depth + 1)


def _is_true(node: Any) -> bool:
    return node is True or node == {}


def _types(node: dict[str, Any]) -> set[str] | None:
    kind = node.get("type")
    if kind is None:
        return None
    return {kind} if isinstance(kind, str) else set(kind)


def _open(node: dict[str, Any]) -> bool:
    return _is_true(node.get("additionalProperties", True))


class _Checker:
    def __init__(self, reader: JsonSchema, writer: JsonSchema) -> None:
        self.reader = reader
        self.writer = writer
        self.in_progress: set[tuple[int, int]] = set()

    def check(self, r: Any, w: Any, path: str) -> list[str]:
        r, w = self.reader.deref(r), self.writer.deref(w)
        if _is_true(r) or w is False:
            return []
        if r is False:
            return [f"{path or '#'}: the reader accepts nothing"]
        if _is_true(w):
            return [f"{path or '#'}: the writer accepts anything and the reader does not"]
        pair = (id(r), id(w))
        if pair in self.in_progress:
            return []
        self.in_progress.add(pair)
        try:
            return self._check(r, w, path or "#")
        finally:
            self.in_progress.discard(pair)

    def _check(self, r: dict[str, Any], w: dict[str, Any], path: str) -> list[str]:
        combined = self._combined(r, w, path)
        if combined is not None:
            return combined
        problems: list[str] = []
        rt, wt = _types(r), _types(w)
        if rt is not None:
            widened = rt | ({"integer"} if "number" in rt else set())
            if wt is None or not wt <= widened:
                problems.append(f"{path}: type {sorted(wt) if wt else 'any'} is not within the reader's "
                                f"{sorted(rt)} (TYPE_CHANGED / TYPE_NARROWED)")
        for key in ("enum", "const"):
            if key in r:
                allowed = r["enum"] if key == "enum" else [r["const"]]
                given = w.get("enum") if "enum" in w else ([w["const"]] if "const" in w else None)
                if given is None or any(v not in allowed for v in given):
                    problems.append(f"{path}: {key} narrowed (ENUM_ARRAY_NARROWED)")
        for key in UPPER_BOUNDS:
            if key in r and not (isinstance(w.get(key), (int, float)) and w[key] <= r[key]):
                problems.append(f"{path}: {key} added or decreased ({key.upper()}_DECREASED)")
        for key in LOWER_BOUNDS:
            if key in r and not (isinstance(w.get(key), (int, float)) and w[key] >= r[key]):
                problems.append(f"{path}: {key} added or increased ({key.upper()}_INCREASED)")
        if "pattern" in r and w.get("pattern") != r["pattern"]:
            problems.append(f"{path}: pattern added or changed (PATTERN_ADDED / PATTERN_CHANGED)")
        if "multipleOf" in r:
            wm = w.get("multipleOf")
            if not isinstance(wm, (int, float)) or (wm / r["multipleOf"]) % 1 != 0:
                problems.append(f"{path}: multipleOf added or changed (MULTIPLE_OF_CHANGED)")
        if r.get("uniqueItems") is True and w.get("uniqueItems") is not True:
            problems.append(f"{path}: uniqueItems added (UNIQUE_ITEMS_ADDED)")
        problems += self._object(r, w, path)
        if isinstance(r.get("items"), (dict, bool)) or isinstance(w.get("items"), (dict, bool)):
            problems += self.check(r.get("items", True), w.get("items", True), f"{path}/items")
        return problems

    def _combined(self, r: dict[str, Any], w: dict[str, Any], path: str) -> list[str] | None:
        if isinstance(r.get("allOf"), list):
            problems = []
            for i, branch in enumerate(r["allOf"]):
                problems += self.check(branch, w, f"{path}/allOf/{i}")
            return problems
        r_key = next((k for k in ("oneOf", "anyOf") if isinstance(r.get(k), list)), None)
        w_key = next((k for k in ("oneOf", "anyOf") if isinstance(w.get(k), list)), None)
        if r_key is None and w_key is None:
            return None
        r_branches = r[r_key] if r_key else [r]
        w_branches = w[w_key] if w_key else [w]
        problems = []
        if r_key == "oneOf" and w_key == "anyOf" and len(w_branches) > 1:
            problems.append(f"{path}: anyOf became oneOf (COMBINED_TYPE_CHANGED)")
        for i, branch in enumerate(w_branches):
            if all(self.check(rb, branch, path) for rb in r_branches):
                problems.append(f"{path}/{w_key or ''}/{i}: no reader branch accepts this writer branch "
                                f"(COMBINED_TYPE_SUBSCHEMAS_CHANGED)".replace("//", "/"))
        return problems

    def _object(self, r: dict[str, Any], w: dict[str, Any], path: str) -> list[str]:
        r_props: dict[str, Any] = r.get("properties") or {}
        w_props: dict[str, Any] = w.get("properties") or {}
        problems: list[str] = []
        r_add, w_add = r.get("additionalProperties", True), w.get("additionalProperties", True)
        for name, w_prop in w_props.items():
            sub = f"{path}/properties/{name}"
            if name in r_props:
                problems += self.check(r_props[name], w_prop, sub)
            elif r_add is False:
                problems.append(f"{sub}: property removed from a closed content model "
                                f"(PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL)")
            elif not _is_true(r_add):
                problems += self.check(r_add, w_prop, sub)
        for name, r_prop in r_props.items():
            if name in w_props:
                continue
            sub = f"{path}/properties/{name}"
            if _open(w):
                if not _is_true(r_prop):
                    problems.append(f"{sub}: property added to an open content model "
                                    f"(PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL)")
            elif w_add is not False:
                problems += self.check(r_prop, w_add, sub)
        missing = [n for n in r.get("required") or () if n not in (w.get("required") or ())]
        if missing:
            problems.append(f"{path}: required {missing} added (REQUIRED_ATTRIBUTE_ADDED)")
        if r_add is False and w_add is not False:
            problems.append(f"{path}: additionalProperties narrowed (ADDITIONAL_PROPERTIES_NARROWED)")
        elif isinstance(r_add, dict) and not _is_true(r_add) and w_add is not False:
            problems += self.check(r_add, w_add, f"{path}/additionalProperties")
        return problems


def can_read(reader: JsonSchema, writer: JsonSchema) -> list[str]:
    """Why `reader` does not accept every document `writer` accepts (empty when it does)."""
    return _Checker(reader, writer).check(reader.root, writer.root, "")


def check(level: str, new: JsonSchema, previous: Sequence[JsonSchema]) -> list[str]:
    """Confluent's verdict for registering `new` after `previous` (oldest first) at `level`: the
    incompatibilities, empty when compatible."""
    return check_at_level(level, new, previous, can_read)
