"""Protobuf compatibility verdicts per level (kaflite.schema_registry.protobuf_compat).

Expected verdicts follow Confluent's documentation: "Schema Evolution and Compatibility"
(https://docs.confluent.io/platform/current/schema-registry/fundamentals/schema-evolution.html: levels as
for Avro) and the Protobuf serdes page's "Protobuf compatibility rules"
(https://docs.confluent.io/platform/current/schema-registry/fundamentals/serdes-develop/serdes-protobuf.html):
fields are matched by number, so adding or removing a field is compatible both ways; changing a field's
type is compatible only within Protobuf's wire-compatible groups (language guide, "Updating A Message
Type": int32 / uint32 / int64 / uint64 / bool; sint32 / sint64; string / bytes; fixed32 / sfixed32;
fixed64 / sfixed64); renaming a field is compatible; removing a message type is incompatible (so adding
one is BACKWARD-compatible and FORWARD-incompatible); changing the package, adding or removing a required
field, removing a field from a oneof or moving several existing fields into a new oneof are incompatible.
Each case is (old, new, BACKWARD verdict, FORWARD verdict); FULL is their conjunction, NONE accepts all.
"""

from __future__ import annotations

import pytest

from kaflite.schema_registry.protobuf_compat import check, parse
from registry_helpers import ALL_LEVELS, assert_verdict, case_params


def p3(body: str, package: str = "shop") -> str:
    return f'syntax = "proto3";\npackage {package};\n{body}\n'


def p2(body: str) -> str:
    return f'syntax = "proto2";\npackage shop;\n{body}\n'


BASE = p3("message Order { int64 id = 1; string name = 2; }")

CASES: list[tuple[str, str, str, bool, bool]] = [
    ("identical", BASE, BASE, True, True),
    ("whitespace and comments only", BASE, p3("// orders\nmessage Order {\n  int64 id = 1;\n  string name = 2;\n}"),
     True, True),
    ("field added", BASE, p3("message Order { int64 id = 1; string name = 2; double price = 3; }"), True, True),
    ("field removed", BASE, p3("message Order { int64 id = 1; }"), True, True),
    ("field renamed", BASE, p3("message Order { int64 id = 1; string title = 2; }"), True, True),
    ("int64 to int32 (same wire group)", BASE, p3("message Order { int32 id = 1; string name = 2; }"), True, True),
    ("int64 to bool (same wire group)", BASE, p3("message Order { bool id = 1; string name = 2; }"), True, True),
    ("int64 to sint64", BASE, p3("message Order { sint64 id = 1; string name = 2; }"), False, False),
    ("string to bytes", BASE, p3("message Order { int64 id = 1; bytes name = 2; }"), True, True),
    ("string to int64", BASE, p3("message Order { int64 id = 1; int64 name = 2; }"), False, False),
    ("fixed32 to sfixed32", p3("message M { fixed32 a = 1; }"), p3("message M { sfixed32 a = 1; }"), True, True),
    ("float to double", p3("message M { float a = 1; }"), p3("message M { double a = 1; }"), False, False),
    ("enum to int32", p3("enum E { A = 0; } message M { E e = 1; }"), p3("enum E { A = 0; } message M { int32 e = 1; }"),
     True, True),
    ("enum constant added", p3("enum E { A = 0; } message M { E e = 1; }"),
     p3("enum E { A = 0; B = 1; } message M { E e = 1; }"), True, True),
    ("enum constant removed", p3("enum E { A = 0; B = 1; } message M { E e = 1; }"),
     p3("enum E { A = 0; } message M { E e = 1; }"), True, True),
    ("scalar becomes a message", p3("message M { int32 a = 1; } message N { int32 x = 1; }"),
     p3("message M { N a = 1; } message N { int32 x = 1; }"), False, False),
    ("message field's type renamed", p3("message M { N a = 1; } message N { int32 x = 1; } message P { int32 x = 1; }"),
     p3("message M { P a = 1; } message N { int32 x = 1; } message P { int32 x = 1; }"), False, False),
    ("message type added", BASE, BASE + "message Refund { int64 order = 1; }", True, False),
    ("message type removed", BASE + "message Refund { int64 order = 1; }", BASE, False, True),
    ("nested message field changed", p3("message M { message In { string s = 1; } In i = 1; }"),
     p3("message M { message In { int32 s = 1; } In i = 1; }"), False, False),
    ("package changed", BASE, p3("message Order { int64 id = 1; string name = 2; }", package="store"), False, False),
    ("map value type changed", p3("message M { map<string, int64> m = 1; }"),
     p3("message M { map<string, string> m = 1; }"), False, False),
    ("map becomes a scalar", p3("message M { map<string, int64> m = 1; }"), p3("message M { int64 m = 1; }"),
     False, False),
    ("numeric field becomes repeated (proto2 labels)", p2("message M { optional int32 a = 1; }"),
     p2("message M { repeated int32 a = 1; }"), False, False),
    ("string field becomes repeated (proto2 labels)", p2("message M { optional string a = 1; }"),
     p2("message M { repeated string a = 1; }"), True, True),
    ("required field added", p2("message M { optional int32 a = 1; }"),
     p2("message M { optional int32 a = 1; required int32 b = 2; }"), False, False),
    ("optional field added (proto2)", p2("message M { optional int32 a = 1; }"),
     p2("message M { optional int32 a = 1; optional int32 b = 2; }"), True, True),
    ("field added to an existing oneof", p3("message M { oneof v { int32 a = 1; } }"),
     p3("message M { oneof v { int32 a = 1; string b = 2; } }"), True, False),
    ("one existing field moved into a new oneof", p3("message M { int32 a = 1; }"),
     p3("message M { oneof v { int32 a = 1; } }"), True, True),
    ("two existing fields moved into a new oneof", p3("message M { int32 a = 1; string b = 2; }"),
     p3("message M { oneof v { int32 a = 1; string b = 2; } }"), False, True),
    ("existing field moved into an existing oneof", p3("message M { int32 a = 1; oneof v { string b = 2; } }"),
     p3("message M { oneof v { string b = 2; int32 a = 1; } }"), False, False),
    ("map field added", BASE, p3("message Order { int64 id = 1; string name = 2; map<string, string> tags = 3; }"),
     True, True),
]


@pytest.mark.parametrize(("old", "new", "backward", "forward"), case_params(CASES))
@pytest.mark.parametrize("level", ALL_LEVELS)
def test_verdict_per_level(level: str, old: str, new: str, backward: bool, forward: bool) -> None:
    assert_verdict(check, parse, level, old, new, backward, forward)


def test_at_least_twenty_cases() -> None:
    assert len(CASES) >= 20


@pytest.mark.parametrize(("level", "ok"), [("BACKWARD", True), ("BACKWARD_TRANSITIVE", False),
                                           ("FORWARD_TRANSITIVE", True), ("NONE", True)])
def test_transitive_levels_compare_with_every_version(level: str, ok: bool) -> None:
    # v1 had Refund; v2 dropped it (registered under NONE, say); v3 equals v2 but for a field: BACKWARD
    # against v2 passes, against v1 Refund is missing
    v1 = BASE + "message Refund { int64 order = 1; }"
    v2 = BASE
    v3 = p3("message Order { int64 id = 1; string name = 2; bool paid = 3; }")
    assert (check(level, parse(v3), [parse(v1), parse(v2)]) == []) is ok


def test_serialized_descriptor_and_text_compare_equal() -> None:
    text = p3("enum E { A = 0; } message M { int64 id = 1; map<string, E> m = 2; oneof o { string s = 3; } "
              "optional string z = 4; message In { repeated E e = 1; } In i = 5; }")
    parsed = parse(text)
    from_binary = parse(parsed.serialized())
    assert from_binary.messages == parsed.messages and from_binary.enums == parsed.enums
    assert check("FULL", from_binary, [parsed]) == []


def test_invalid_schemas_are_refused() -> None:
    for bad in ("message {", 'syntax = "proto3"; message M { int32 a = 1; string b = 1; }', "not proto at all"):
        with pytest.raises(ValueError):
            parse(bad)


def test_messages_name_the_difference_and_path() -> None:
    problems = check("BACKWARD", parse(p3("message Order { int64 id = 1; int64 name = 2; }")), [parse(BASE)])
    assert problems == ["BACKWARD: FIELD_SCALAR_KIND_CHANGED at Order.name"]
