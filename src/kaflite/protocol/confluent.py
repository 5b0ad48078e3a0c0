"""Confluent Schema Registry's wire format for record keys and values (what confluent-kafka's
serializers write), shared by the console's message browser and `kaflite.spark.registry`: pure, with
google.protobuf for Protobuf.

Rules (tests/protocol/test_confluent.py, and the users' tests: tests/console/test_units.py,
tests/spark/test_registry_codec.py):
- a framed body is the magic byte 0, a 4-byte big-endian schema id, then the payload (`split_frame`:
  None for anything shorter than 5 bytes or without the magic byte);
- a Protobuf payload starts with its message indexes: a zigzag varint count, then that many zigzag
  varints, the path of the message among the file's nested types; a count of 0 means [0] (the first
  message); more than 64 indexes, a path naming no message, or indexes past the end raise ValueError;
- a Protobuf schema is read from the registry's base64 FileDescriptorProto (`format=serialized`) into a
  pool of its own, with well-known imports (google/protobuf/*.proto) copied from protobuf's default pool;
  references and other imports raise ValueError;
- a decoded message becomes Python values field by field (`proto_to_python`): a field with presence is
  None when unset, enums by name, maps as dicts, uint64 / fixed64 above 2**63 as Java's long holds them.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

from kaflite.protocol.varint import read_zigzag_varint

__all__ = ["MAGIC", "proto_file", "proto_message", "proto_to_python", "read_message_indexes", "repeated",
           "split_frame"]

MAGIC = 0


def split_frame(body: bytes | None) -> tuple[int, bytes] | None:
    """(schema id, payload) of a framed body (module rules), None when it is not framed."""
    if body is None or len(body) < 5 or body[0] != MAGIC:
        return None
    return int.from_bytes(body[1:5], "big"), body[5:]


def read_message_indexes(payload: bytes) -> tuple[list[int], int]:
    """(message indexes, offset of the message bytes) of a Protobuf payload (module rules)."""
    try:
        count, pos = read_zigzag_varint(payload, 0)
        if count < 0 or count > 64:
            raise ValueError(f"message index count {count} is not valid")
        indexes = []
        for _ in range(count):
            index, pos = read_zigzag_varint(payload, pos)
            indexes.append(index)
    except ValueError as e:
        if "past the end" in str(e):
            raise ValueError("message indexes run past the end of the value") from None
        if "too long" in str(e):
            raise ValueError("message index varint longer than 10 bytes") from None
        raise
    return indexes or [0], pos


def proto_file(schema_id: int, serialized: str, references: bool = False) -> Any:
    """The schema's file descriptor (the registry's base64 FileDescriptorProto, asked with
    format=serialized) in a pool of its own, with well-known imports such as google/protobuf/timestamp.proto
    copied from protobuf's default pool; schema references are refused."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    if references:
        raise ValueError(f"schema id {schema_id}: Protobuf schemas with references are not supported")
    try:
        fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized, validate=True))
    except Exception:  # binascii.Error, protobuf's DecodeError
        raise ValueError(f"schema id {schema_id}: the registry did not answer a serialized FileDescriptorProto "
                         "for format=serialized") from None
    pool = descriptor_pool.DescriptorPool()
    default = descriptor_pool.Default()
    if fdp.dependency:
        # the well-known types are in the default pool once their modules are imported
        from google.protobuf import (  # noqa: F401
            any_pb2,
            duration_pb2,
            empty_pb2,
            field_mask_pb2,
            struct_pb2,
            timestamp_pb2,
            wrappers_pb2,
        )
    for dep in fdp.dependency:
        try:
            dep_file = default.FindFileByName(dep)
        except KeyError:
            raise ValueError(f"schema id {schema_id}: import {dep} is not a well-known type") from None
        dep_proto = descriptor_pb2.FileDescriptorProto()
        dep_file.CopyToProto(dep_proto)
        pool.Add(dep_proto)
    pool.Add(fdp)
    return pool.FindFileByName(fdp.name)


def proto_message(file_desc: Any, indexes: list[int] | None = None, name: str | None = None) -> Any:
    """The message descriptor at `indexes` (Confluent's path) or named `name` (full or simple)."""
    if name is not None:
        for desc in _all_messages(file_desc.message_types_by_name.values()):
            if name in (desc.full_name, desc.name):
                return desc
        raise ValueError(f"no message {name!r} in the schema")
    msgs = list(file_desc.message_types_by_name.values())
    desc = None
    for i in indexes or [0]:
        if not 0 <= i < len(msgs):
            raise ValueError(f"message index path {indexes} names no message of the schema")
        desc = msgs[i]
        msgs = list(desc.nested_types)
    return desc


def _all_messages(msgs: Any) -> Iterator[Any]:
    for m in msgs:
        yield m
        yield from _all_messages(m.nested_types)


def repeated(fd: Any) -> bool:
    from google.protobuf.descriptor import FieldDescriptor as FD

    return bool(fd.is_repeated) and not (  # protobuf 7's descriptors have no `label`
        fd.type == FD.TYPE_MESSAGE and fd.message_type.GetOptions().map_entry)


def proto_to_python(msg: Any) -> dict[str, Any]:
    """A decoded message as the Python values of proto_to_spark's struct: a field with presence (a
    message, a proto2 / proto3 `optional` field, a oneof member) is null when unset; other scalars hold
    their value (proto3's default when unset)."""
    from google.protobuf.descriptor import FieldDescriptor as FD

    def value(fd: Any, v: Any) -> Any:
        if fd.type == FD.TYPE_ENUM:
            ev = fd.enum_type.values_by_number.get(v)
            return ev.name if ev is not None else str(v)
        if fd.type in (FD.TYPE_MESSAGE, FD.TYPE_GROUP):
            return proto_to_python(v)
        if fd.type in (FD.TYPE_UINT64, FD.TYPE_FIXED64) and v >= 1 << 63:
            return v - (1 << 64)  # as Spark's from_protobuf (a Java long) holds it
        return v

    out: dict[str, Any] = {}
    for fd in msg.DESCRIPTOR.fields:
        v = getattr(msg, fd.name)
        if fd.type == FD.TYPE_MESSAGE and fd.message_type.GetOptions().map_entry:
            vfd = fd.message_type.fields_by_name["value"]
            out[fd.name] = {k: value(vfd, x) for k, x in v.items()}
        elif repeated(fd):
            out[fd.name] = [value(fd, x) for x in v]
        elif fd.has_presence and not msg.HasField(fd.name):
            out[fd.name] = None
        else:
            out[fd.name] = value(fd, v)
    return out
