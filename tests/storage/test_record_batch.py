"""RecordBatchView / build_record_batch / decode_records: round trips and header-level validation."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.record_batch import (
    BATCH_HEADER_SIZE,
    RecordBatchView,
    build_record_batch,
    crc32c,
    decode_records,
    iter_batches,
    read_varint,
    write_varint,
)


def _recrc(buf: bytearray) -> bytearray:
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return buf


def test_header_fields_of_a_built_batch() -> None:
    raw = build_record_batch(
        [(b"k1", b"v1", [("h", b"x")]), (None, b"v2", []), (b"k3", None, [])],
        base_offset=7, timestamp_ms=1000, producer_id=42, producer_epoch=3, base_sequence=10,
    )
    v = RecordBatchView.parse(raw)
    assert (v.base_offset, v.magic, v.last_offset_delta, v.records_count) == (7, 2, 2, 3)
    assert (v.first_timestamp, v.max_timestamp) == (1000, 1000)
    assert (v.producer_id, v.producer_epoch, v.base_sequence, v.last_sequence) == (42, 3, 10, 12)
    assert v.size == len(raw) and v.batch_length == len(raw) - 12
    assert v.crc_ok() and v.compression_type == "none" and not v.is_transactional and not v.is_control
    v.validate(max_size=len(raw))
    recs = decode_records(v)
    assert [(r.offset, r.key, r.value, r.headers) for r in recs] == [
        (7, b"k1", b"v1", [("h", b"x")]), (8, None, b"v2", []), (9, b"k3", None, [])
    ]


def test_gzip_round_trip_and_per_record_timestamps() -> None:
    raw = build_record_batch([(b"a", b"x" * 1000, []), (b"b", b"y", [])], timestamps=[50, 40], compression=1)
    v = RecordBatchView.parse(raw)
    assert v.compression_type == "gzip" and len(raw) < 500
    assert v.max_timestamp == 50
    assert [(r.key, r.timestamp) for r in decode_records(v)] == [(b"a", 50), (b"b", 40)]


def test_iter_batches_walks_concatenated_batches() -> None:
    raws = [build_record_batch([(b"k", bytes([i]) * i, [])] * (i + 1), base_offset=i * 10) for i in range(5)]
    views = list(iter_batches(b"".join(raws)))
    assert [v.base_offset for v in views] == [0, 10, 20, 30, 40]
    assert [bytes(v.buffer) for v in views] == raws


@pytest.mark.parametrize(
    "mutate, code",
    [
        (lambda b: b.__setitem__(30, b[30] ^ 1), ErrorCode.corrupt_message),  # payload bit flip
        (lambda b: b.__setitem__(17, b[17] ^ 0xFF), ErrorCode.corrupt_message),  # CRC byte flip
        (lambda b: b.__setitem__(16, 1), ErrorCode.invalid_record),  # magic 1
        (lambda b: _recrc(struct.pack_into(">i", b, 57, 5) or b), ErrorCode.invalid_record),  # count
        (lambda b: _recrc(struct.pack_into(">i", b, 23, -1) or b), ErrorCode.invalid_record),  # delta
        (lambda b: _recrc(struct.pack_into(">q", b, 35, -5) or b), ErrorCode.invalid_timestamp),
        (lambda b: _recrc(struct.pack_into(">h", b, 21, 0x20) or b), ErrorCode.invalid_record),  # control
        (lambda b: _recrc(struct.pack_into(">h", b, 21, 6) or b), ErrorCode.corrupt_message),  # codec 6
    ],
)
def test_validate_refuses_with_kafka_codes(mutate, code) -> None:  # type: ignore[no-untyped-def]
    buf = bytearray(build_record_batch([(b"k", b"v", [])] * 2))
    mutate(buf)
    with pytest.raises(KafkaError) as e:
        RecordBatchView.parse(buf).validate(max_size=10_000)
    assert e.value.code == code


def test_truncated_and_huge_length_are_corrupt() -> None:
    raw = build_record_batch([(b"k", b"v" * 100, [])])
    for cut in (10, BATCH_HEADER_SIZE - 1, BATCH_HEADER_SIZE, len(raw) - 1):
        with pytest.raises(KafkaError) as e:
            list(iter_batches(raw[:cut]))
        assert e.value.code == ErrorCode.corrupt_message
    huge = bytearray(raw)
    struct.pack_into(">i", huge, 8, 0x7FFFFFF0)
    with pytest.raises(KafkaError) as e:
        RecordBatchView.parse(huge)
    assert e.value.code == ErrorCode.corrupt_message
    small = bytearray(raw)
    struct.pack_into(">i", small, 8, 10)
    with pytest.raises(KafkaError) as e:
        RecordBatchView.parse(small)
    assert e.value.code == ErrorCode.corrupt_message


def test_message_too_large() -> None:
    raw = build_record_batch([(b"k", b"v" * 100, [])])
    with pytest.raises(KafkaError) as e:
        RecordBatchView.parse(raw).validate(max_size=len(raw) - 1)
    assert e.value.code == ErrorCode.message_too_large


def test_crc32c_known_vector() -> None:
    # RFC 3720 test vector: 32 bytes of zeros -> 0x8A9136AA
    assert crc32c(bytes(32)) == 0x8A9136AA


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varint_round_trip(n: int) -> None:
    out = bytearray()
    write_varint(out, n)
    assert read_varint(bytes(out), 0) == (n, len(out))


_record = st.tuples(
    st.one_of(st.none(), st.binary(max_size=20)),
    st.one_of(st.none(), st.binary(max_size=50)),
    st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))), max_size=3),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_record, min_size=1, max_size=8), st.integers(0, 2**40), st.sampled_from([0, 1]))
def test_build_decode_round_trip(records, base, codec) -> None:  # type: ignore[no-untyped-def]
    raw = build_record_batch(records, base_offset=base, timestamp_ms=123, compression=codec)
    v = RecordBatchView.parse(raw)
    v.validate()
    got = decode_records(v)
    assert [(r.key, r.value, r.headers) for r in got] == [(k, val, list(h)) for k, val, h in records]
    assert [r.offset for r in got] == list(range(base, base + len(records)))
