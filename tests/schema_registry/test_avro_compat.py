"""Avro compatibility verdicts per level (kaflite.schema_registry.avro_compat).

Expected verdicts follow Confluent's documentation, "Schema Evolution and Compatibility"
(https://docs.confluent.io/platform/current/schema-registry/fundamentals/schema-evolution.html):
BACKWARD: "consumers using the new schema can read data produced with the last schema" (allowed: delete
fields, add optional fields); FORWARD: "data produced with a new schema can be read by consumers using
the last schema" (allowed: add fields, delete optional fields); FULL: both (add or delete optional fields
only); the *_TRANSITIVE levels compare with all registered versions instead of the last one; NONE: no
check. Each case below is a schema change (old -> new) with its BACKWARD and FORWARD verdicts, which are
Avro's schema resolution rules (Avro specification, "Schema Resolution") with the new schema as the
reader (BACKWARD) or the writer (FORWARD); FULL is their conjunction and NONE always accepts.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kaflite.schema_registry import compat_levels
from kaflite.schema_registry.avro_compat import check, parse
from registry_helpers import expected_verdict


def rec(*fields: dict[str, Any], name: str = "R", namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "record", "name": name, "fields": list(fields), **extra}
    if namespace is not None:
        schema["namespace"] = namespace
    return schema


def f(name: str, type_: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


def enum(symbols: list[str], name: str = "E", **extra: Any) -> dict[str, Any]:
    return {"type": "enum", "name": name, "symbols": symbols, **extra}


BASE = rec(f("a", "int"))
NODE = rec(f("v", "int"), f("next", ["null", "Node"], default=None), name="Node")

# (case id, old schema, new schema, BACKWARD ok, FORWARD ok)
CASES: list[tuple[str, Any, Any, bool, bool]] = [
    # fields added / removed
    ("identical", BASE, BASE, True, True),
    ("add field with default", BASE, rec(f("a", "int"), f("b", "string", default="x")), True, True),
    ("add field without default", BASE, rec(f("a", "int"), f("b", "string")), False, True),
    ("add nullable field with null default", BASE, rec(f("a", "int"), f("b", ["null", "int"], default=None)), True, True),
    ("add nullable field without default", BASE, rec(f("a", "int"), f("b", ["null", "int"])), False, True),
    ("remove field with default", rec(f("a", "int"), f("b", "int", default=0)), BASE, True, True),
    ("remove field without default", rec(f("a", "int"), f("b", "int")), BASE, True, False),
    ("remove only field (without default)", BASE, rec(), True, False),
    ("add field to empty record with default", rec(), BASE | {"fields": [f("a", "int", default=1)]}, True, True),
    ("rename field without alias", BASE, rec(f("z", "int")), False, False),
    ("rename field with alias to old name", BASE, rec(f("z", "int", aliases=["a"])), True, False),
    ("rename field with default", rec(f("a", "int", default=1)), rec(f("z", "int", default=1)), True, True),
    ("reorder fields", rec(f("a", "int"), f("b", "long")), rec(f("b", "long"), f("a", "int")), True, True),
    ("add default to existing field", BASE, rec(f("a", "int", default=0)), True, True),
    ("remove default from existing field", rec(f("a", "int", default=0)), BASE, True, True),
    ("add doc", BASE, rec(f("a", "int", doc="the a")), True, True),
    # primitive promotions
    ("int to long", rec(f("a", "int")), rec(f("a", "long")), True, False),
    ("int to float", rec(f("a", "int")), rec(f("a", "float")), True, False),
    ("int to double", rec(f("a", "int")), rec(f("a", "double")), True, False),
    ("long to float", rec(f("a", "long")), rec(f("a", "float")), True, False),
    ("long to double", rec(f("a", "long")), rec(f("a", "double")), True, False),
    ("float to double", rec(f("a", "float")), rec(f("a", "double")), True, False),
    ("long to int", rec(f("a", "long")), rec(f("a", "int")), False, True),
    ("double to float", rec(f("a", "double")), rec(f("a", "float")), False, True),
    ("double to int", rec(f("a", "double")), rec(f("a", "int")), False, True),
    ("string to bytes", rec(f("a", "string")), rec(f("a", "bytes")), True, True),
    ("bytes to string", rec(f("a", "bytes")), rec(f("a", "string")), True, True),
    ("int to string", rec(f("a", "int")), rec(f("a", "string")), False, False),
    ("boolean to int", rec(f("a", "boolean")), rec(f("a", "int")), False, False),
    ("string to int", rec(f("a", "string")), rec(f("a", "int")), False, False),
    ("null to int", rec(f("a", "null")), rec(f("a", "int")), False, False),
    ("logical type added on long", rec(f("a", "long")), rec(f("a", {"type": "long", "logicalType": "timestamp-millis"})), True, True),
    ("top-level primitive identical", "string", "string", True, True),
    ("top-level int to long", "int", "long", True, False),
    ("top-level string to record", "string", BASE, False, False),
    # enums
    ("enum symbol added", rec(f("e", enum(["A", "B"]))), rec(f("e", enum(["A", "B", "C"]))), True, False),
    ("enum symbol removed", rec(f("e", enum(["A", "B", "C"]))), rec(f("e", enum(["A", "B"]))), False, True),
    ("enum symbol added, enum default", rec(f("e", enum(["A", "B"], default="A"))),
     rec(f("e", enum(["A", "B", "C"], default="A"))), True, True),
    ("enum symbol removed, enum default", rec(f("e", enum(["A", "B", "C"], default="A"))),
     rec(f("e", enum(["A", "B"], default="A"))), True, True),
    ("enum symbols reordered", rec(f("e", enum(["A", "B"]))), rec(f("e", enum(["B", "A"]))), True, True),
    ("enum renamed", rec(f("e", enum(["A"]))), rec(f("e", enum(["A"], name="F"))), False, False),
    ("enum renamed with alias", rec(f("e", enum(["A"]))), rec(f("e", enum(["A"], name="F", aliases=["E"]))), True, False),
    ("enum to string", rec(f("e", enum(["A"]))), rec(f("e", "string")), False, False),
    # fixed
    ("fixed same size", rec(f("x", {"type": "fixed", "name": "X", "size": 4})),
     rec(f("x", {"type": "fixed", "name": "X", "size": 4})), True, True),
    ("fixed size changed", rec(f("x", {"type": "fixed", "name": "X", "size": 4})),
     rec(f("x", {"type": "fixed", "name": "X", "size": 8})), False, False),
    ("fixed renamed", rec(f("x", {"type": "fixed", "name": "X", "size": 4})),
     rec(f("x", {"type": "fixed", "name": "Y", "size": 4})), False, False),
    # unions
    ("type to union containing it", rec(f("a", "int")), rec(f("a", ["null", "int"])), True, False),
    ("union to its single member", rec(f("a", ["null", "int"])), rec(f("a", "int")), False, True),
    ("union widened", rec(f("a", ["null", "int"])), rec(f("a", ["null", "int", "string"])), True, False),
    ("union narrowed", rec(f("a", ["null", "int", "string"])), rec(f("a", ["null", "int"])), False, True),
    ("union branches reordered", rec(f("a", ["null", "string"])), rec(f("a", ["string", "null"])), True, True),
    ("union member promoted", rec(f("a", ["null", "int"])), rec(f("a", ["null", "long"])), True, False),
    ("int to union of long", rec(f("a", "int")), rec(f("a", ["null", "long"])), True, False),
    ("union to unrelated type", rec(f("a", ["null", "int"])), rec(f("a", "string")), False, False),
    ("union of records gains a record", rec(f("u", [rec(f("x", "int"), name="A")])),
     rec(f("u", [rec(f("x", "int"), name="A"), rec(f("y", "int"), name="B")])), True, False),
    # nested records
    ("nested field added with default", rec(f("n", rec(f("x", "int"), name="N"))),
     rec(f("n", rec(f("x", "int"), f("y", "int", default=0), name="N"))), True, True),
    ("nested field added without default", rec(f("n", rec(f("x", "int"), name="N"))),
     rec(f("n", rec(f("x", "int"), f("y", "int"), name="N"))), False, True),
    ("nested field removed (no default)", rec(f("n", rec(f("x", "int"), f("y", "int"), name="N"))),
     rec(f("n", rec(f("x", "int"), name="N"))), True, False),
    ("nested field promoted", rec(f("n", rec(f("x", "int"), name="N"))),
     rec(f("n", rec(f("x", "long"), name="N"))), True, False),
    ("nested record renamed", rec(f("n", rec(f("x", "int"), name="N"))),
     rec(f("n", rec(f("x", "int"), name="M"))), False, False),
    ("nested record renamed with alias", rec(f("n", rec(f("x", "int"), name="N"))),
     rec(f("n", rec(f("x", "int"), name="M", aliases=["N"]))), True, False),
    ("recursive record unchanged", NODE, NODE, True, True),
    ("recursive record gains field with default", NODE,
     rec(f("v", "int"), f("next", ["null", "Node"], default=None), f("w", "int", default=0), name="Node"), True, True),
    ("recursive record gains field without default", NODE,
     rec(f("v", "int"), f("next", ["null", "Node"], default=None), f("w", "int"), name="Node"), False, True),
    ("named type reused by reference", rec(f("p", rec(f("x", "int"), name="P")), f("q", "P")),
     rec(f("p", rec(f("x", "long"), name="P")), f("q", "P")), True, False),
    # names, namespaces, aliases
    ("record renamed", rec(f("a", "int")), rec(f("a", "int"), name="S"), False, False),
    ("record renamed with alias", rec(f("a", "int")), rec(f("a", "int"), name="S", aliases=["R"]), True, False),
    ("namespace added", rec(f("a", "int")), rec(f("a", "int"), namespace="com.example"), True, True),
    ("namespace changed", rec(f("a", "int"), namespace="com.a"), rec(f("a", "int"), namespace="com.b"), True, True),
    ("renamed across namespaces with qualified alias", rec(f("a", "int"), namespace="com.a"),
     rec(f("a", "int"), name="S", namespace="com.b", aliases=["com.a.R"]), True, False),
    ("renamed with unqualified alias in another namespace", rec(f("a", "int"), namespace="com.a"),
     rec(f("a", "int"), name="S", namespace="com.b", aliases=["R"]), False, False),
    # arrays and maps
    ("array items promoted", rec(f("xs", {"type": "array", "items": "int"})),
     rec(f("xs", {"type": "array", "items": "long"})), True, False),
    ("array items changed", rec(f("xs", {"type": "array", "items": "int"})),
     rec(f("xs", {"type": "array", "items": "string"})), False, False),
    ("array of records gains field with default", rec(f("xs", {"type": "array", "items": rec(f("x", "int"), name="I")})),
     rec(f("xs", {"type": "array", "items": rec(f("x", "int"), f("y", "int", default=0), name="I")})), True, True),
    ("map values promoted", rec(f("m", {"type": "map", "values": "float"})),
     rec(f("m", {"type": "map", "values": "double"})), True, False),
    ("map values changed", rec(f("m", {"type": "map", "values": "int"})),
     rec(f("m", {"type": "map", "values": "boolean"})), False, False),
    ("array to map", rec(f("c", {"type": "array", "items": "int"})),
     rec(f("c", {"type": "map", "values": "int"})), False, False),
]

LEVELS = ("BACKWARD", "FORWARD", "FULL", "NONE")


def test_the_table_has_at_least_60_distinct_cases() -> None:
    assert len(CASES) >= 60
    assert len({case[0] for case in CASES}) == len(CASES)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("old", "new", "backward", "forward"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_verdict_per_level(level: str, old: Any, new: Any, backward: bool, forward: bool) -> None:
    old_s = parse(json.loads(json.dumps(old)))
    new_s = parse(json.loads(json.dumps(new)))
    problems = check(level, new_s, [old_s])
    assert (problems == []) is expected_verdict(level, backward, forward), problems
    # the transitive level agrees with the plain one when there is only one earlier version
    if level != "NONE":
        assert (check(level + "_TRANSITIVE", new_s, [old_s]) == []) is expected_verdict(level, backward, forward)


V1 = rec(f("a", "int"))
V2 = rec(f("a", "int"), f("b", "int", default=0))
V3 = rec(f("a", "int"), f("b", "int"))  # b loses its default: reads V2's data, not V1's


@pytest.mark.parametrize(("level", "ok"), [
    ("BACKWARD", True), ("BACKWARD_TRANSITIVE", False),
    ("FORWARD", True), ("FORWARD_TRANSITIVE", True),
    ("FULL", True), ("FULL_TRANSITIVE", False), ("NONE", True),
])
def test_transitive_levels_compare_with_every_version(level: str, ok: bool) -> None:
    history = [parse(V1), parse(V2)]
    assert (check(level, parse(V3), history) == []) is ok


def test_forward_transitive_catches_a_removal_the_latest_allows() -> None:
    # V1 has c without default; V2 gave it a default; V3 removes c: V2 reads V3's data, V1 cannot
    v1 = rec(f("a", "int"), f("c", "int"))
    v2 = rec(f("a", "int"), f("c", "int", default=0))
    v3 = rec(f("a", "int"))
    assert check("FORWARD", parse(v3), [parse(v1), parse(v2)]) == []
    assert check("FORWARD_TRANSITIVE", parse(v3), [parse(v1), parse(v2)]) != []


def test_first_version_is_always_compatible_and_unknown_level_refused() -> None:
    assert check("FULL_TRANSITIVE", parse(V1), []) == []
    with pytest.raises(ValueError):
        check("SIDEWAYS", parse(V1), [parse(V1)])
    assert set(compat_levels.LEVELS) == {"BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
                                         "FULL_TRANSITIVE", "NONE"}


def test_messages_name_the_field() -> None:
    problems = check("BACKWARD", parse(rec(f("a", "int"), f("b", "string"))), [parse(BASE)])
    assert len(problems) == 1 and "/fields/b" in problems[0] and problems[0].startswith("BACKWARD")
