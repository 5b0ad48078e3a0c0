"""JSON Schema compatibility verdicts per level (kaflite.schema_registry.json_compat).

Expected verdicts follow Confluent's documentation: "Schema Evolution and Compatibility"
(https://docs.confluent.io/platform/current/schema-registry/fundamentals/schema-evolution.html: BACKWARD,
the new schema reads what the last one wrote; FORWARD, the last one reads what the new one writes; FULL
both; *_TRANSITIVE against every version; NONE no check) and the JSON Schema serdes page's
"JSON Schema compatibility rules" (https://docs.confluent.io/platform/current/schema-registry/fundamentals/
serdes-develop/serdes-json.html), with its open / closed content model cases: adding a property to an
open content model is incompatible, removing one from it compatible; adding an optional property to a
closed content model is compatible, removing one from it incompatible; adding a required property
incompatible; widening a type (integer to number), an enum, a maximum or maxLength compatible and
narrowing them incompatible. Each case is (old, new, BACKWARD verdict, FORWARD verdict); FULL is their
conjunction and NONE accepts everything.
"""

from __future__ import annotations

from typing import Any

import pytest

from kaflite.schema_registry.json_compat import check, parse
from registry_helpers import ALL_LEVELS, assert_verdict, case_params


def obj(props: dict[str, Any], required: list[str] | None = None, closed: bool = False, **extra: Any
        ) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props, **extra}
    if required:
        schema["required"] = required
    if closed:
        schema["additionalProperties"] = False
    return schema


S = {"type": "string"}
I = {"type": "integer"}  # noqa: E741
N = {"type": "number"}

CASES: list[tuple[str, Any, Any, bool, bool]] = [
    ("identical", obj({"a": S}), obj({"a": S}), True, True),
    ("property added to open model", obj({"a": S}), obj({"a": S, "b": I}), False, True),
    ("property removed from open model", obj({"a": S, "b": I}), obj({"a": S}), True, False),
    ("optional property added to closed model", obj({"a": S}, closed=True), obj({"a": S, "b": I}, closed=True),
     True, False),
    ("property removed from closed model", obj({"a": S, "b": I}, closed=True), obj({"a": S}, closed=True),
     False, True),
    ("required property added to closed model", obj({"a": S}, closed=True),
     obj({"a": S, "b": I}, ["b"], closed=True), False, False),
    ("required attribute added", obj({"a": S}), obj({"a": S}, ["a"]), False, True),
    ("required attribute removed", obj({"a": S}, ["a"]), obj({"a": S}), True, False),
    ("type widened integer to number", obj({"a": I}), obj({"a": N}), True, False),
    ("type narrowed number to integer", obj({"a": N}), obj({"a": I}), False, True),
    ("type changed string to integer", obj({"a": S}), obj({"a": I}), False, False),
    ("type union extended", obj({"a": S}), obj({"a": {"type": ["string", "null"]}}), True, False),
    ("enum extended", {"enum": ["A", "B"]}, {"enum": ["A", "B", "C"]}, True, False),
    ("enum narrowed", {"enum": ["A", "B"]}, {"enum": ["A"]}, False, True),
    ("maxLength increased", {"type": "string", "maxLength": 5}, {"type": "string", "maxLength": 9}, True, False),
    ("maxLength added", S, {"type": "string", "maxLength": 9}, False, True),
    ("minLength decreased", {"type": "string", "minLength": 3}, {"type": "string", "minLength": 1}, True, False),
    ("maximum decreased", {"type": "integer", "maximum": 10}, {"type": "integer", "maximum": 5}, False, True),
    ("minimum removed", {"type": "integer", "minimum": 0}, I, True, False),
    ("pattern added", S, {"type": "string", "pattern": "^a"}, False, True),
    ("pattern changed", {"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^b"}, False, False),
    ("additionalProperties closed", obj({"a": S}), obj({"a": S}, closed=True), False, True),
    ("additionalProperties schema widened", obj({}, additionalProperties=I), obj({}, additionalProperties=N),
     True, False),
    ("property added, checked against writer's additionalProperties schema",
     obj({"a": S}, additionalProperties=I), obj({"a": S, "b": N}, additionalProperties=I), True, False),
    ("array items widened", {"type": "array", "items": I}, {"type": "array", "items": N}, True, False),
    ("maxItems added", {"type": "array", "items": S}, {"type": "array", "items": S, "maxItems": 3}, False, True),
    ("nested property type changed", obj({"o": obj({"x": S})}), obj({"o": obj({"x": I})}), False, False),
    ("oneOf branch added", {"oneOf": [S, I]}, {"oneOf": [S, I, {"type": "boolean"}]}, True, False),
    ("oneOf branch removed", {"oneOf": [S, I]}, {"oneOf": [S]}, False, True),
    ("plain type becomes a oneOf containing it", S, {"oneOf": [S, I]}, True, False),
    ("anyOf becomes oneOf", {"anyOf": [S, I]}, {"oneOf": [S, I]}, False, True),
    ("true schema narrowed to a type", True, S, False, True),
    ("local $ref followed", {"$defs": {"x": S}, "$ref": "#/$defs/x"}, {"$defs": {"x": I}, "$ref": "#/$defs/x"},
     False, False),
    ("multipleOf refined", {"type": "integer", "multipleOf": 2}, {"type": "integer", "multipleOf": 4}, False, True),
]


@pytest.mark.parametrize(("old", "new", "backward", "forward"), case_params(CASES))
@pytest.mark.parametrize("level", ALL_LEVELS)
def test_verdict_per_level(level: str, old: Any, new: Any, backward: bool, forward: bool) -> None:
    assert_verdict(check, parse, level, old, new, backward, forward)


def test_at_least_twenty_cases() -> None:
    assert len(CASES) >= 20


@pytest.mark.parametrize(("level", "ok"), [("BACKWARD", True), ("BACKWARD_TRANSITIVE", False),
                                           ("FULL_TRANSITIVE", False), ("NONE", True)])
def test_transitive_levels_compare_with_every_version(level: str, ok: bool) -> None:
    # v2 narrowed v1's number to integer (registered under NONE, say); v3 keeps integer: it reads v2's data,
    # not v1's
    v1 = obj({"a": N})
    v2 = obj({"a": I})
    v3 = obj({"a": I}, description="v3")
    assert (check(level, parse(v3), [parse(v1), parse(v2)]) == []) is ok


def test_invalid_schemas_are_refused() -> None:
    for bad in ({"type": "strung"}, {"minLength": -1}, {"$ref": "#/$defs/missing"}, [1, 2], "x"):
        with pytest.raises(ValueError):
            parse(bad)


def test_messages_name_the_path_and_confluent_difference() -> None:
    problems = check("BACKWARD", parse(obj({"a": S, "b": I})), [parse(obj({"a": S}))])
    assert len(problems) == 1 and "#/properties/b" in problems[0]
    assert "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL" in problems[0] and problems[0].startswith("BACKWARD")
