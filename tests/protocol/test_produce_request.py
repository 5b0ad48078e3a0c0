"""kaflite.protocol.produce_request: Produce v3-v13 decoded by hand, checked against kio's own encoder and
decoder (every version, hypothesis), and refusing what does not decode with ProtocolError only."""

from __future__ import annotations

import datetime
import importlib
import io
import struct
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader, entity_writer

from kaflite.protocol.errors import ProtocolError
from kaflite.protocol.produce_request import TRANSACTIONAL_ID_VERSION, VERSIONS, decode_request

KIO_VERSIONS = [v for v in VERSIONS if v >= TRANSACTIONAL_ID_VERSION]  # kio has no schema for v0-v2: tests/protocol/test_legacy_produce.py


def _schema(version: int) -> Any:
    return importlib.import_module(f"kio.schema.produce.v{version}.request")


def _encode(version: int, transactional_id: str | None, acks: int, timeout_ms: int,
            topics: list[tuple[str, uuid.UUID, list[tuple[int, bytes | None]]]]) -> bytes:
    from kio.static.primitive import i16, i32

    m = _schema(version)
    data = []
    for name, topic_id, parts in topics:
        pdata = tuple(m.PartitionProduceData(index=i32(i), records=r) for i, r in parts)
        data.append(m.TopicProduceData(topic_id=topic_id, partition_data=pdata) if version >= 13
                    else m.TopicProduceData(name=name, partition_data=pdata))
    req = m.ProduceRequest(transactional_id=transactional_id, acks=i16(acks),
                           timeout=datetime.timedelta(milliseconds=timeout_ms), topic_data=tuple(data))
    buf = io.BytesIO()
    entity_writer(m.ProduceRequest)(buf, req)
    return buf.getvalue()


_TOPICS = st.lists(st.tuples(st.text(min_size=0, max_size=12), st.uuids(),
                             st.lists(st.tuples(st.integers(-1, 2**31 - 1),
                                                st.one_of(st.none(), st.binary(max_size=300))), max_size=4)),
                   max_size=4)


@settings(max_examples=150, deadline=None)
@given(version=st.sampled_from(KIO_VERSIONS), transactional_id=st.one_of(st.none(), st.text(max_size=20)),
       acks=st.sampled_from([-1, 0, 1, 2]), timeout_ms=st.integers(0, 2**31 - 1), topics=_TOPICS,
       prefix=st.binary(max_size=5), trailing=st.binary(max_size=5))
def test_every_version_decodes_as_kio_decodes_it(version: int, transactional_id: str | None, acks: int,
                                                 timeout_ms: int, topics: list, prefix: bytes,
                                                 trailing: bytes) -> None:
    body = _encode(version, transactional_id, acks, timeout_ms, topics)
    frame = prefix + body + trailing  # the body starts after the header; bytes after it are ignored
    ours = decode_request(frame, len(prefix), version)
    theirs, _size = entity_reader(_schema(version).ProduceRequest)(body, 0)
    assert ours.transactional_id == theirs.transactional_id
    assert ours.acks == theirs.acks and ours.timeout == theirs.timeout
    assert len(ours.topic_data) == len(theirs.topic_data)
    for mine, kio in zip(ours.topic_data, theirs.topic_data, strict=True):
        if version >= 13:
            assert mine.topic_id == kio.topic_id and mine.name == ""
        else:
            assert mine.name == kio.name and mine.topic_id is None
        assert [(p.index, None if p.records is None else bytes(p.records)) for p in mine.partition_data] == [
            (p.index, p.records) for p in kio.partition_data]
        assert all(isinstance(p.records, memoryview) for p in mine.partition_data if p.records is not None)


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(KIO_VERSIONS), topics=_TOPICS, cut=st.integers(0, 2000),
       flips=st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), max_size=4))
def test_a_truncated_or_mutated_body_is_a_protocol_error_or_a_request(version: int, topics: list, cut: int,
                                                                      flips: list[tuple[int, int]]) -> None:
    body = bytearray(_encode(version, "tx", -1, 1000, topics))
    for at, value in flips:
        if body:
            body[at % len(body)] = value
    body = body[:cut] if cut < len(body) else body
    try:
        decode_request(bytes(body), 0, version)
    except ProtocolError:
        pass


@pytest.mark.parametrize("version", [3, 9])
def test_a_null_topic_name_and_a_count_beyond_the_frame_are_refused(version: int) -> None:
    flexible = version >= 9
    head = (b"\x00" if flexible else struct.pack(">h", -1)) + struct.pack(">hi", -1, 1000)
    one = b"\x02" if flexible else struct.pack(">i", 1)
    null_name = b"\x00" if flexible else struct.pack(">h", -1)
    with pytest.raises(ProtocolError, match="null topic name"):
        decode_request(head + one + null_name, 0, version)
    huge = b"\xff\xff\xff\x7f" if flexible else struct.pack(">i", 2**31 - 1)
    with pytest.raises(ProtocolError, match="beyond the frame"):
        decode_request(head + huge, 0, version)


@pytest.mark.parametrize("version", [9, 13])
def test_records_lengths_at_each_varint_width_decode_as_kio_decodes_them(version: int) -> None:
    # the partition reader reads a length of one to three varint bytes inline and leaves longer ones (and
    # null) to the general reader: each side of each boundary, and a request mixing them
    sizes = [None, 0, 1, 126, 127, 128, 16382, 16383, 16384, 20000, 2**21 - 2, 2**21 - 1, 2**21]
    parts = [(i, None if n is None else bytes([i]) * n) for i, n in enumerate(sizes)]
    body = _encode(version, None, -1, 1000, [("t", uuid.uuid4(), parts)])
    ours = decode_request(body, 0, version)
    assert [(p.index, None if p.records is None else bytes(p.records)) for p in ours.topic_data[0].partition_data] \
        == parts


def test_a_partition_with_tagged_fields_is_read_by_the_general_reader() -> None:
    # v9: one topic "t" with two partitions; the first carries one tagged field (tag 5, 2 bytes) after its
    # records, which the inline reader must not take as the end of the partition
    head = b"\x00" + struct.pack(">hi", -1, 1000) + b"\x02" + b"\x02t" + b"\x03"
    first = struct.pack(">i", 0) + b"\x04abc" + b"\x01\x05\x02zz"
    second = struct.pack(">i", 1) + b"\x02d" + b"\x00"
    ours = decode_request(head + first + second + b"\x00\x00", 0, 9)
    assert [(p.index, bytes(p.records or b"")) for p in ours.topic_data[0].partition_data] == [(0, b"abc"), (1, b"d")]
    with pytest.raises(ProtocolError):  # the same tagged field cut short
        decode_request(head + struct.pack(">i", 0) + b"\x04abc" + b"\x01\x05\x09zz", 0, 9)


def test_a_large_frame_read_into_a_bytearray_gives_read_only_records_without_a_copy() -> None:
    """A Produce request larger than the receive buffer arrives as the bytearray the socket filled
    (protocol/framing.py): its records are views of that buffer (not copies) that cannot be written through."""
    records = b"r" * 100_000
    frame = bytearray(b"\x00" * 3 + _encode(9, None, -1, 1000, [("t", uuid.uuid4(), [(0, records)])]))
    part = decode_request(frame, 3, 9).topic_data[0].partition_data[0]
    assert part.records is not None and bytes(part.records) == records
    assert part.records.obj is frame, "the records were copied out of the frame"
    assert part.records.readonly
    with pytest.raises(TypeError):
        part.records[0] = 0
