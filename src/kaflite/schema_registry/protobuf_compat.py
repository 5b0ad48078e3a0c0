"""Protobuf schema compatibility as Confluent Schema Registry decides it, on schemas given as .proto
text (parsed with proto-schema-parser) or as a base64 FileDescriptorProto (what confluent-kafka's Python
ProtobufSerializer registers).

Rules (each is checked by tests/schema_registry/test_protobuf_compat.py):
- Levels as for Avro (compat_levels.LEVELS). A check compares an original (the writer: the registered
  schema for BACKWARD, the new one for FORWARD) with an update (the reader) and lists differences, as
  Confluent's protobuf diff does; the pair is compatible when every difference is a compatible one.
- Compatible differences: a message, enum, enum constant, field or oneof added; an enum, enum constant,
  field or oneof removed; a field renamed (fields are matched by number); a string field's label changed
  (string and bytes); a single existing field moved into a new oneof.
- Incompatible differences: the package changed; a message removed (messages are matched by their name
  within the package, nested ones as Outer.Inner); a field's kind changed (scalar or enum / message /
  map); a scalar's wire group changed (groups: int32 int64 uint32 uint64 bool and enums; sint32 sint64;
  string bytes; fixed32 sfixed32; fixed64 sfixed64; float; double); a message field's type name changed;
  a numeric field's label changed (optional / required / repeated, compared only when both fields state
  one, as proto3 fields without a label state none); a required field added or removed; a field removed
  from a oneof that stays; a field moved into an existing oneof; two or more existing fields moved into
  a new oneof.
- Text is turned into a FileDescriptorProto the way protoc lays it out (map fields become nested
  `<Name>Entry` messages, proto3 `optional` a synthetic oneof, type names resolved from the innermost
  scope outwards to `.package.Outer.Inner`; names defined in imports stay as written), so the registry
  can answer `format=serialized` for a schema registered as text.

Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from antlr4.error.ErrorListener import ErrorListener
from google.protobuf import descriptor_pb2
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

from kaflite.schema_registry.compat_levels import check_at_level

FDP = descriptor_pb2.FieldDescriptorProto
SCALARS: dict[str, int] = {
    "double": FDP.TYPE_DOUBLE, "float": FDP.TYPE_FLOAT, "int64": FDP.TYPE_INT64, "uint64": FDP.TYPE_UINT64,
    "int32": FDP.TYPE_INT32, "fixed64": FDP.TYPE_FIXED64, "fixed32": FDP.TYPE_FIXED32, "bool": FDP.TYPE_BOOL,
    "string": FDP.TYPE_STRING, "bytes": FDP.TYPE_BYTES, "uint32": FDP.TYPE_UINT32,
    "sfixed32": FDP.TYPE_SFIXED32, "sfixed64": FDP.TYPE_SFIXED64, "sint32": FDP.TYPE_SINT32,
    "sint64": FDP.TYPE_SINT64,
}
SCALAR_NAMES = {number: name for name, number in SCALARS.items()}
# wire-compatible scalar groups (Protocol Buffers language guide, "Updating A Message Type")
SCALAR_GROUPS = {"int32": "number", "int64": "number", "uint32": "number", "uint64": "number", "bool": "number",
                 "sint32": "signed", "sint64": "signed", "string": "string", "bytes": "string",
                 "fixed32": "fixed32", "sfixed32": "fixed32", "fixed64": "fixed64", "sfixed64": "fixed64",
                 "float": "float", "double": "double"}
COMPATIBLE = frozenset({
    "MESSAGE_ADDED", "ENUM_ADDED", "ENUM_REMOVED", "ENUM_CONST_ADDED", "ENUM_CONST_CHANGED",
    "ENUM_CONST_REMOVED", "FIELD_ADDED", "FIELD_REMOVED", "FIELD_NAME_CHANGED",
    "FIELD_STRING_OR_BYTES_LABEL_CHANGED", "ONEOF_ADDED", "ONEOF_REMOVED", "ONEOF_FIELD_ADDED",
})


@dataclass(frozen=True)
class FieldType:
    kind: str  # "scalar" (enums included), "message" or "map"
    name: str  # scalar name, enum or message local name; for a map: ""
    key: FieldType | None = None
    value: FieldType | None = None


@dataclass
class ProtoField:
    name: str
    number: int
    label: str | None  # "optional", "required", "repeated", or None (proto3 without a label)
    type: FieldType
    oneof: str | None


@dataclass
class ProtoMessage:
    fields: dict[int, ProtoField] = field(default_factory=dict)
    oneofs: dict[str, set[int]] = field(default_factory=dict)


@dataclass
class ProtoSchema:
    package: str
    messages: dict[str, ProtoMessage]
    enums: dict[str, dict[str, int]]
    descriptor: descriptor_pb2.FileDescriptorProto

    def serialized(self) -> str:
        """The schema as Confluent's `format=serialized`: a base64 FileDescriptorProto."""
        return base64.standard_b64encode(self.descriptor.SerializeToString()).decode("ascii")


# ---- parsing ----------------------------------------------------------------------------------------

def parse(text: str, name: str = "schema.proto") -> ProtoSchema:
    """A Protobuf schema from .proto text or a base64 FileDescriptorProto; ValueError when it is neither."""
    descriptor = _from_base64(text)
    if descriptor is None:
        try:
            tree = Parser(setup_lexer=_raise_on_error, setup_parser=_raise_on_error).parse(text)
        except ValueError as err:
            raise ValueError(f"not a .proto schema: {err}") from err
        descriptor = to_descriptor(tree, name)
    return from_descriptor(descriptor)


class _Raise(ErrorListener):  # type: ignore[misc]
    """ANTLR prints syntax errors and recovers by default; a registry must refuse the schema instead."""

    def syntaxError(self, recognizer: Any, offendingSymbol: Any, line: int, column: int, msg: str,  # noqa: N802
                    e: Any) -> None:
        raise ValueError(f"line {line}:{column} {msg}")


def _raise_on_error(recognizer: Any) -> None:
    recognizer.removeErrorListeners()
    recognizer.addErrorListener(_Raise())


def _from_base64(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    if not text or any(c.isspace() for c in text.strip()):
        return None  # .proto text has spaces; base64 has none
    try:
        raw = base64.b64decode(text.strip(), validate=True)
        descriptor = descriptor_pb2.FileDescriptorProto.FromString(raw)
    except (binascii.Error, ValueError, Exception):  # protobuf's DecodeError is an Exception subclass
        return None
    return descriptor if descriptor.message_type or descriptor.enum_type or descriptor.name else None


def to_descriptor(tree: ast.File, name: str = "schema.proto") -> descriptor_pb2.FileDescriptorProto:
    out = descriptor_pb2.FileDescriptorProto(name=name, syntax=tree.syntax or "proto2")
    defined: dict[str, str] = {}  # full name (no leading dot) -> "message" | "enum"
    for element in tree.file_elements:
        if isinstance(element, ast.Package):
            out.package = element.name
        elif isinstance(element, ast.Import):
            out.dependency.append(element.name)
    prefix = f"{out.package}." if out.package else ""
    for element in tree.file_elements:
        _collect(element, prefix, defined)
    proto3 = out.syntax == "proto3"
    for element in tree.file_elements:
        if isinstance(element, ast.Message):
            out.message_type.append(_message(element, [p for p in out.package.split(".") if p], defined, proto3))
        elif isinstance(element, ast.Enum):
            out.enum_type.append(_enum(element))
    return out


def _collect(element: Any, prefix: str, defined: dict[str, str]) -> None:
    if isinstance(element, ast.Message):
        defined[prefix + element.name] = "message"
        for child in element.elements:
            _collect(child, f"{prefix}{element.name}.", defined)
    elif isinstance(element, ast.Enum):
        defined[prefix + element.name] = "enum"


def _enum(element: ast.Enum) -> descriptor_pb2.EnumDescriptorProto:
    out = descriptor_pb2.EnumDescriptorProto(name=element.name)
    for value in element.elements:
        if isinstance(value, ast.EnumValue):
            out.value.add(name=value.name, number=value.number)
    return out


def _resolve(type_name: str, scope: list[str], defined: dict[str, str]) -> tuple[int, str]:
    """(field type, type_name) for a named type, searched from the innermost scope outwards."""
    if type_name.startswith("."):
        full = type_name[1:]
        found = defined.get(full)
    else:
        full, found = type_name, None
        for depth in range(len(scope), -1, -1):
            candidate = ".".join([*scope[:depth], type_name])
            if candidate in defined:
                full, found = candidate, defined[candidate]
                break
    kind = FDP.TYPE_ENUM if found == "enum" else FDP.TYPE_MESSAGE
    return kind, f".{full}" if found else type_name


def _set_type(out: descriptor_pb2.FieldDescriptorProto, type_name: str, scope: list[str],
              defined: dict[str, str]) -> None:
    if type_name in SCALARS:
        out.type = SCALARS[type_name]  # type: ignore[assignment]
    else:
        kind, resolved = _resolve(type_name, scope, defined)
        out.type = kind  # type: ignore[assignment]
        out.type_name = resolved


def _message(element: ast.Message, scope: list[str], defined: dict[str, str], proto3: bool
             ) -> descriptor_pb2.DescriptorProto:
    out = descriptor_pb2.DescriptorProto(name=element.name)
    inner = [*scope, element.name]
    numbers: set[int] = set()

    def add_field(f: ast.Field, oneof_index: int | None) -> None:
        if f.number in numbers or f.number < 1:
            raise ValueError(f"message {'.'.join(inner)}: field number {f.number} is invalid or used twice")
        numbers.add(f.number)
        fd = out.field.add(name=f.name, number=f.number)
        labels = {ast.FieldCardinality.REPEATED: FDP.LABEL_REPEATED, ast.FieldCardinality.REQUIRED: FDP.LABEL_REQUIRED}
        fd.label = labels.get(f.cardinality, FDP.LABEL_OPTIONAL)  # type: ignore[arg-type, assignment]
        _set_type(fd, f.type, inner, defined)
        if oneof_index is not None:
            fd.oneof_index = oneof_index
        elif proto3 and f.cardinality == ast.FieldCardinality.OPTIONAL:
            fd.proto3_optional = True
            synthetic.append(fd)

    synthetic: list[descriptor_pb2.FieldDescriptorProto] = []
    for child in element.elements:
        if isinstance(child, ast.Field):
            add_field(child, None)
        elif isinstance(child, ast.MapField):
            if child.number in numbers:
                raise ValueError(f"message {'.'.join(inner)}: field number {child.number} used twice")
            numbers.add(child.number)
            entry_name = "".join(p[:1].upper() + p[1:] for p in child.name.split("_")) + "Entry"
            entry = out.nested_type.add(name=entry_name)
            entry.options.map_entry = True
            for number, (field_name, field_type) in enumerate((("key", child.key_type), ("value", child.value_type)), 1):
                ef = entry.field.add(name=field_name, number=number, label=FDP.LABEL_OPTIONAL)
                _set_type(ef, field_type, [*inner, entry_name], defined)
            fd = out.field.add(name=child.name, number=child.number, label=FDP.LABEL_REPEATED,
                               type=FDP.TYPE_MESSAGE)
            fd.type_name = "." + ".".join([*inner, entry_name])
        elif isinstance(child, ast.OneOf):
            index = len(out.oneof_decl)
            out.oneof_decl.add(name=child.name)
            for member in child.elements:
                if isinstance(member, ast.Field):
                    add_field(member, index)
        elif isinstance(child, ast.Message):
            out.nested_type.append(_message(child, inner, defined, proto3))
        elif isinstance(child, ast.Enum):
            out.enum_type.append(_enum(child))
        elif isinstance(child, ast.Group):
            raise ValueError(f"message {'.'.join(inner)}: groups are not supported")
    for fd in synthetic:  # protoc places proto3 optional's synthetic oneofs after the real ones
        fd.oneof_index = len(out.oneof_decl)
        out.oneof_decl.add(name=f"_{fd.name}")
    return out


def from_descriptor(descriptor: descriptor_pb2.FileDescriptorProto) -> ProtoSchema:
    package = descriptor.package
    prefix = f".{package}." if package else "."
    messages: dict[str, ProtoMessage] = {}
    enums: dict[str, dict[str, int]] = {}
    raw: dict[str, descriptor_pb2.DescriptorProto] = {}
    proto3 = descriptor.syntax == "proto3"

    def index(msg: descriptor_pb2.DescriptorProto, path: str) -> None:
        raw[path] = msg
        for nested in msg.nested_type:
            index(nested, f"{path}.{nested.name}")
        for enum in msg.enum_type:
            enums[f"{path}.{enum.name}"] = {v.name: v.number for v in enum.value}

    for msg in descriptor.message_type:
        index(msg, msg.name)
    for enum in descriptor.enum_type:
        enums[enum.name] = {v.name: v.number for v in enum.value}

    def local(type_name: str) -> str:
        return type_name[len(prefix):] if type_name.startswith(prefix) else type_name.lstrip(".")

    def field_type(fd: descriptor_pb2.FieldDescriptorProto) -> FieldType:
        if fd.type in SCALAR_NAMES:
            return FieldType("scalar", SCALAR_NAMES[fd.type])
        name = local(fd.type_name)
        if fd.type == FDP.TYPE_ENUM or name in enums:
            return FieldType("scalar", "enum:" + name)
        entry = raw.get(name)
        if entry is not None and entry.options.map_entry:
            key, value = (field_type(f) for f in sorted(entry.field, key=lambda f: f.number))
            return FieldType("map", "", key, value)
        return FieldType("message", name)

    for path, msg in raw.items():
        if msg.options.map_entry:
            continue
        model = ProtoMessage()
        for fd in msg.field:
            label: str | None = {FDP.LABEL_REPEATED: "repeated", FDP.LABEL_REQUIRED: "required"}.get(fd.label)
            if label is None and (not proto3 or fd.proto3_optional):
                label = "optional"
            oneof = None
            if fd.HasField("oneof_index") and not fd.proto3_optional:
                oneof = msg.oneof_decl[fd.oneof_index].name
                model.oneofs.setdefault(oneof, set()).add(fd.number)
            model.fields[fd.number] = ProtoField(fd.name, fd.number, label, field_type(fd), oneof)
        messages[path] = model
    return ProtoSchema(package, messages, enums, descriptor)


# ---- compatibility ----------------------------------------------------------------------------------

def differences(original: ProtoSchema, update: ProtoSchema) -> list[tuple[str, str]]:
    """Confluent's differences from `original` (the writer) to `update` (the reader): (type, path)."""
    out: list[tuple[str, str]] = []
    if original.package != update.package:
        out.append(("PACKAGE_CHANGED", original.package))
    for name, msg in original.messages.items():
        other = update.messages.get(name)
        if other is None:
            out.append(("MESSAGE_REMOVED", name))
        else:
            out += _message_differences(name, msg, other)
    out += [("MESSAGE_ADDED", name) for name in update.messages if name not in original.messages]
    for name, consts in original.enums.items():
        other_consts = update.enums.get(name)
        if other_consts is None:
            out.append(("ENUM_REMOVED", name))
            continue
        out += [("ENUM_CONST_REMOVED", f"{name}.{c}") for c in consts if c not in other_consts]
        out += [("ENUM_CONST_ADDED", f"{name}.{c}") for c in other_consts if c not in consts]
        out += [("ENUM_CONST_CHANGED", f"{name}.{c}") for c, n in consts.items()
                if c in other_consts and other_consts[c] != n]
    out += [("ENUM_ADDED", name) for name in update.enums if name not in original.enums]
    return out


def _message_differences(path: str, original: ProtoMessage, update: ProtoMessage) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for number, f in original.fields.items():
        where = f"{path}.{f.name}"
        other = update.fields.get(number)
        if other is None:
            out.append(("REQUIRED_FIELD_REMOVED" if f.label == "required" else "FIELD_REMOVED", where))
            continue
        if other.name != f.name:
            out.append(("FIELD_NAME_CHANGED", where))
        out += _type_differences(where, f.label, other.label, f.type, other.type)
    for number, f in update.fields.items():
        if number not in original.fields:
            out.append(("REQUIRED_FIELD_ADDED" if f.label == "required" else "FIELD_ADDED", f"{path}.{f.name}"))
    for name, members in original.oneofs.items():
        if name not in update.oneofs:
            out.append(("ONEOF_REMOVED", f"{path}.{name}"))
            continue
        out += [("ONEOF_FIELD_REMOVED", f"{path}.{name}.{n}") for n in sorted(members - update.oneofs[name])]
        for n in sorted(update.oneofs[name] - members):
            moved = n in original.fields and original.fields[n].oneof is None
            out.append(("FIELD_MOVED_TO_EXISTING_ONEOF" if moved else "ONEOF_FIELD_ADDED", f"{path}.{name}.{n}"))
    for name, members in update.oneofs.items():
        if name in original.oneofs:
            continue
        moved_in = [n for n in members if n in original.fields and original.fields[n].oneof is None]
        out.append(("MULTIPLE_FIELDS_MOVED_TO_ONEOF" if len(moved_in) > 1 else "ONEOF_ADDED", f"{path}.{name}"))
    return out


def _type_differences(where: str, o_label: str | None, u_label: str | None, o: FieldType, u: FieldType
                      ) -> list[tuple[str, str]]:
    if o.kind != u.kind:
        return [("FIELD_KIND_CHANGED", where)]
    if o.kind == "map":
        assert o.key and u.key and o.value and u.value
        return _type_differences(where, None, None, o.key, u.key) \
            + _type_differences(where, None, None, o.value, u.value)
    if o.kind == "message":
        return [] if o.name == u.name else [("FIELD_NAMED_TYPE_CHANGED", where)]
    o_group, u_group = _group(o.name), _group(u.name)
    if o_group != u_group:
        return [("FIELD_SCALAR_KIND_CHANGED", where)]
    if o_label is not None and u_label is not None and o_label != u_label:
        return [("FIELD_STRING_OR_BYTES_LABEL_CHANGED" if o_group == "string" else "FIELD_NUMERIC_LABEL_CHANGED",
                 where)]
    return []


def _group(scalar: str) -> str:
    return "number" if scalar.startswith("enum:") else SCALAR_GROUPS[scalar]


def can_read(reader: ProtoSchema, writer: ProtoSchema) -> list[str]:
    """The incompatible differences from `writer` to `reader` (empty when the reader reads the writer)."""
    return [f"{kind} at {path}" for kind, path in differences(writer, reader) if kind not in COMPATIBLE]


def check(level: str, new: ProtoSchema, previous: Sequence[ProtoSchema]) -> list[str]:
    """Confluent's verdict for registering `new` after `previous` (oldest first) at `level`."""
    return check_at_level(level, new, previous, can_read)
