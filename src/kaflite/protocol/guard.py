"""A length check of a request body before kio decodes it.

Why: kio's native reader pre-allocates from the declared element count of a compact array, and for some
counts near 2^32 the allocation fails and aborts the whole process (measured: a 5-byte DescribeConfigs
body `f2 ad e3 e1 24` kills the interpreter). One malformed request must never take the broker down, so
every declared length (arrays, strings, bytes, tagged fields) is checked against the bytes that are
actually left before kio sees the frame.

Rules: a declared array count may not exceed the bytes left (every element takes at least one byte), a
string/bytes length may not exceed them, a tagged field's content is checked inside its own size; a null
(-1) array, string or bytes in a field the schema does not declare nullable is refused, as Kafka's parser
refuses it ("non-nullable field was serialized as null"), so no handler ever meets a None it does not
expect; a violation raises `ProtocolError` (the connection is closed, as Kafka closes it for a request it
cannot parse).
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from kaflite.protocol.errors import ProtocolError

__all__ = ["check_request_lengths"]

_FIXED = {
    "int8": 1, "bool": 1, "uint8": 1, "int16": 2, "uint16": 2, "error_code": 2, "int32": 4, "uint32": 4,
    "timedelta_i32": 4, "int64": 8, "uint64": 8, "timedelta_i64": 8, "datetime_i64": 8, "float64": 8,
    "uuid": 16,
}
_i16 = struct.Struct(">h").unpack_from
_i32 = struct.Struct(">i").unpack_from

# One step of a plan: (kind, arg, nullable_entity)
#   kind "fixed": arg = size; "string"/"bytes": length-prefixed; "array": arg = element plan or size;
#   "entity": arg = entity plan
Plan = tuple[bool, list[tuple[str, Any, bool]], dict[int, tuple[str, Any, bool]]]
_PLANS: dict[Any, Plan] = {}


def _uvarint(buf: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise ProtocolError("varint runs past the end of the frame")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 35:
            raise ProtocolError("varint longer than 5 bytes")


def _plan(cls: Any) -> Plan:
    plan = _PLANS.get(cls)
    if plan is not None:
        return plan
    flexible = bool(cls.__flexible__)
    steps: list[tuple[str, Any, bool]] = []
    tagged: dict[int, tuple[str, Any, bool]] = {}
    for f in dataclasses.fields(cls):
        kind = classify_field(f)
        nullable = is_optional(f)
        if isinstance(kind, EntityTupleField):
            step: tuple[str, Any, bool] = ("array", kind.type_, nullable)
        elif isinstance(kind, EntityField):
            step = ("entity", kind.type_, nullable)
        else:
            ktype = get_schema_field_type(f)
            if isinstance(kind, PrimitiveTupleField):
                if ktype in ("string", "bytes", "records"):  # elements of a primitive array are never null
                    elem: Any = ("string" if ktype == "string" else "bytes", None, False)
                else:
                    elem = _FIXED.get(ktype, 1)
                step = ("array", elem, nullable)
            elif ktype in ("string", "bytes", "records"):
                step = ("string" if ktype == "string" else "bytes", None, nullable)
            else:
                step = ("fixed", _FIXED.get(ktype, 1), False)
        tag = get_field_tag(f)
        if tag is not None:
            tagged[int(tag)] = step
        else:
            steps.append(step)
    plan = (flexible, steps, tagged)
    _PLANS[cls] = plan
    return plan


def _length(buf: bytes | memoryview, pos: int, end: int, flexible: bool, wide: bool) -> tuple[int, int]:
    """A declared length (-1 = null) and the position after it."""
    if flexible:
        n, pos = _uvarint(buf, pos, end)
        return n - 1, pos
    size = 4 if wide else 2
    if pos + size > end:
        raise ProtocolError("length runs past the end of the frame")
    return (_i32(buf, pos)[0] if wide else _i16(buf, pos)[0]), pos + size


def _step(buf: bytes | memoryview, pos: int, end: int, flexible: bool, step: tuple[str, Any, bool]) -> int:
    kind, arg, nullable = step
    if kind == "fixed":
        pos += arg
        if pos > end:
            raise ProtocolError("field runs past the end of the frame")
        return pos
    if kind in ("string", "bytes"):
        n, pos = _length(buf, pos, end, flexible, wide=kind == "bytes")
        if n > end - pos:
            raise ProtocolError(f"declared length {n} exceeds the {end - pos} bytes left")
        if n < 0 and not nullable:
            raise ProtocolError(f"null {kind} in a non-nullable field")
        return pos + max(n, 0)
    if kind == "entity":
        if nullable and flexible:
            if pos >= end:
                raise ProtocolError("field runs past the end of the frame")
            marker = buf[pos]
            pos += 1
            if marker == 0xFF:  # -1: null struct
                return pos
        return _entity(buf, pos, end, arg)
    # array
    n, pos = _length(buf, pos, end, flexible, wide=True)
    if n > end - pos:
        raise ProtocolError(f"declared array count {n} exceeds the {end - pos} bytes left")
    if n < 0 and not nullable:
        raise ProtocolError("null array in a non-nullable field")
    if n <= 0:
        return pos
    if isinstance(arg, int):
        pos += n * arg
        if pos > end:
            raise ProtocolError("array runs past the end of the frame")
        return pos
    if isinstance(arg, tuple):
        for _ in range(n):
            pos = _step(buf, pos, end, flexible, arg)
        return pos
    for _ in range(n):
        pos = _entity(buf, pos, end, arg)
    return pos


def _entity(buf: bytes | memoryview, pos: int, end: int, cls: Any) -> int:
    flexible, steps, tagged = _plan(cls)
    for step in steps:
        pos = _step(buf, pos, end, flexible, step)
    if flexible:
        count, pos = _uvarint(buf, pos, end)
        if count > end - pos:
            raise ProtocolError(f"declared {count} tagged fields exceed the {end - pos} bytes left")
        for _ in range(count):
            tag, pos = _uvarint(buf, pos, end)
            size, pos = _uvarint(buf, pos, end)
            if size > end - pos:
                raise ProtocolError(f"tagged field of {size} bytes exceeds the {end - pos} bytes left")
            known = tagged.get(tag)
            if known is not None:
                _step(buf, pos, pos + size, flexible, known)
            pos += size
    return pos


def check_request_lengths(schema: Any, frame: bytes | memoryview, offset: int) -> int:
    """Raise ProtocolError when a declared length in the body of `schema` exceeds the frame; returns
    where the body ends (trailing bytes after it are allowed)."""
    return _entity(frame, offset, len(frame), schema)
