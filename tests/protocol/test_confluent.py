"""kaflite.protocol.confluent: Confluent's framing and Protobuf message indexes and descriptors (the parts
the console and kaflite.spark.registry share; their own tests decode real serializers' output)."""

from __future__ import annotations

import base64

import pytest
from google.protobuf import descriptor_pb2, message_factory

from kaflite.protocol.confluent import (
    proto_file,
    proto_message,
    proto_to_python,
    read_message_indexes,
    split_frame,
)


def test_framing_and_message_indexes() -> None:
    assert split_frame(b"\x00\x00\x00\x01\x02xy") == (258, b"xy")
    assert split_frame(b"\x01\x00\x00\x00\x01x") is None and split_frame(b"\x00\x00") is None
    assert read_message_indexes(b"\x00rest") == ([0], 1)
    assert read_message_indexes(b"\x04\x02\x06rest") == ([1, 3], 3)
    with pytest.raises(ValueError, match="past the end"):
        read_message_indexes(b"\x04\x02")
    with pytest.raises(ValueError, match="count 65 is not valid"):
        read_message_indexes(b"\x82\x01")  # zigzag 130 -> 65


def test_descriptor_from_the_registrys_serialized_form_decodes_values() -> None:
    fdp = descriptor_pb2.FileDescriptorProto(name="o.proto", package="shop", syntax="proto3",
                                             dependency=["google/protobuf/timestamp.proto"])
    order = fdp.message_type.add(name="Order")
    fd = descriptor_pb2.FieldDescriptorProto
    order.field.add(name="id", number=1, type=fd.TYPE_UINT64, label=fd.LABEL_OPTIONAL)
    order.field.add(name="tags", number=2, type=fd.TYPE_STRING, label=fd.LABEL_REPEATED)
    order.field.add(name="at", number=3, type=fd.TYPE_MESSAGE, label=fd.LABEL_OPTIONAL,
                    type_name=".google.protobuf.Timestamp")
    file_desc = proto_file(7, base64.b64encode(fdp.SerializeToString()).decode())
    desc = proto_message(file_desc, [0])
    assert desc.full_name == "shop.Order" and proto_message(file_desc, name="Order") is desc
    cls = message_factory.GetMessageClass(desc)
    got = proto_to_python(cls.FromString(cls(id=2**64 - 1, tags=["a", "b"]).SerializeToString()))
    assert got == {"id": -1, "tags": ["a", "b"], "at": None}  # uint64 as Java's long; unset message: None
    with pytest.raises(ValueError, match="names no message"):
        proto_message(file_desc, [3])
    with pytest.raises(ValueError, match="references"):
        proto_file(7, "", references=True)
    with pytest.raises(ValueError, match="serialized FileDescriptorProto"):
        proto_file(7, "syntax = 'proto3';")
