"""kaflite.spark.batches: the compiled decoder (kaflite.spark._decode) gives the pure decoder's columns on
generated fetch answers (every codec, null keys and values, headers with null values and non-UTF-8 keys,
control batches, LogAppendTime, aborted transactions, range bounds) and refuses the same corrupt records.
The compiled module missing skips these tests with the reason, and fails them under KAFLITE_REQUIRE_ALL=1
(CI proves it was built). Pure: no broker, no Spark."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import require
from kaflite.protocol.control_record import build_marker_batch
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.record_batch import (
    BATCH_HEADER_SIZE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    build_record_batch,
    crc32c,
    encode_batch,
)
from kaflite.spark import batches as decoder


@pytest.fixture(autouse=True)
def _compiled() -> None:
    require(decoder.compiled_missing)


class RawKey(bytes):
    """A header key written as these bytes, UTF-8 or not (the encoder calls `.encode("utf-8")`)."""

    def encode(self, *_: Any) -> bytes:  # type: ignore[override]
        return bytes(self)


def decode_both(data: bytes, start: int, until: int, headers: bool, aborted: Any = None) -> tuple[Any, Any]:
    """(pure result or its exception, compiled result or its exception)."""
    out = []
    for pure in (True, False):
        try:
            out.append(decoder.decode_batches(data, "t", 3, start, until, headers, aborted, pure=pure))
        except KafkaError as exc:
            out.append(exc)
    return out[0], out[1]


def assert_same(pure: Any, compiled: Any) -> None:
    if isinstance(pure, KafkaError):
        assert isinstance(compiled, KafkaError), f"pure raised {pure}, compiled returned"
        assert pure.code == compiled.code == ErrorCode.corrupt_message
        return
    assert not isinstance(compiled, Exception), f"compiled raised {compiled}, pure returned"
    (a, after_a), (b, after_b) = pure, compiled
    assert after_a == after_b
    if a is None:
        assert b is None
        return
    b.validate(full=True)
    assert b.schema == a.schema
    for name in a.schema.names:
        assert b.column(name).equals(a.column(name)), name


blobs = st.one_of(st.none(), st.binary(max_size=30))
header_keys = st.one_of(st.text(max_size=6), st.binary(max_size=6).map(RawKey))
record = st.tuples(blobs, blobs, st.lists(st.tuples(header_keys, blobs), max_size=3), st.integers(0, 2),
                   st.integers(-5, 10_000))  # + offset gap, timestamp delta


@st.composite
def fetches(draw: Any) -> tuple[bytes, int, int, list[tuple[int, int]]]:
    out, aborted, offset = [], [], draw(st.integers(0, 1_000))
    first = offset
    for _ in range(draw(st.integers(1, 5))):
        recs = draw(st.lists(record, min_size=1, max_size=12))
        encoded, delta = [], 0
        for key, value, hdrs, gap, ts_delta in recs:
            encoded.append((delta, ts_delta, key, value, hdrs))
            delta += 1 + gap
        attributes = draw(st.integers(0, 4)) | (TIMESTAMP_TYPE_MASK if draw(st.booleans()) else 0)
        pid = draw(st.sampled_from([-1, 7, 8]))
        if pid >= 0:
            attributes |= TRANSACTIONAL_MASK
            if draw(st.booleans()):
                aborted.append((pid, offset))
        out.append(encode_batch(encoded, base_offset=offset, first_timestamp=draw(st.integers(0, 2**41)),
                                attributes=attributes, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                                base_sequence=0 if pid >= 0 else -1))
        offset += delta + draw(st.integers(0, 2))
        if draw(st.booleans()):
            out.append(build_marker_batch(draw(st.sampled_from([7, 8])), 0, draw(st.booleans()), 0, 1000,
                                          base_offset=offset))
            offset += 1
    start = draw(st.integers(first - 2, offset + 1))
    until = draw(st.integers(start, offset + 2))
    return b"".join(out), start, until, aborted


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fetches(), st.booleans(), st.booleans(), st.integers(0, 60))
def test_compiled_columns_equal_the_pure_ones(case: Any, include_headers: bool, committed: bool, cut: int) -> None:
    data, start, until, aborted = case
    data = data[: len(data) - cut]  # a truncated tail too, now and then
    assert_same(*decode_both(data, start, until, include_headers, aborted if committed else None))


def _batch(records_section: bytes, count: int, base: int = 0) -> bytes:
    """An uncompressed batch around a hand-made records section, with a correct CRC."""
    tail = struct.pack(">hiqqqhii", 0, max(count - 1, 0), 1_000, 1_000, -1, -1, -1, count) + records_section
    return struct.pack(">qiibI", base, len(tail) + 9, -1, 2, crc32c(tail)) + tail


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(record, min_size=1, max_size=6), st.data(), st.booleans(), st.integers(0, 7))
def test_a_corrupted_records_section_is_refused_by_both(recs: Any, data: Any, include_headers: bool,
                                                         start: int) -> None:
    good = encode_batch([(i, ts, k, v, h) for i, (k, v, h, _, ts) in enumerate(recs)], base_offset=0,
                        first_timestamp=1_000)
    section = bytearray(good[BATCH_HEADER_SIZE:])
    at = data.draw(st.integers(0, len(section) - 1))
    section[at] = data.draw(st.integers(0, 255))
    count = len(recs) + data.draw(st.sampled_from([0, 0, 0, -1, 1]))
    pure, compiled = decode_both(_batch(bytes(section), count), start, 100, include_headers)
    if isinstance(pure, KafkaError):
        assert isinstance(compiled, KafkaError) and compiled.code == ErrorCode.corrupt_message
    elif isinstance(compiled, KafkaError):
        # stricter by its rules: a record whose deltas run past its own end, outside [start, until)
        assert start > 0, f"compiled refused ({compiled}) what the pure decoder read"
    else:
        assert_same(pure, compiled)


def _record(body: bytes) -> bytes:
    out = bytearray()
    from kaflite.protocol.record_batch import write_varint

    write_varint(out, len(body))
    return bytes(out) + body


@pytest.mark.parametrize("section, count, message", [
    # a record's length runs past its section
    (_record(b"\x00\x00\x00\x02k\x02v\x00")[:-2], 1, "records"),
    # records left over after `count`, or fewer than it
    (_record(b"\x00\x00\x00\x01\x01\x00") * 2, 1, "fill"),
    (_record(b"\x00\x00\x00\x01\x01\x00"), 2, "fill"),
    # a negative record length (zigzag -6; the pure decoder chains it as 5 bytes: the section's end)
    (b"\x0b" + b"\x00" * 5, 1, "negative record length"),
    # a key length below -1
    (_record(b"\x00\x00\x00\x05\x01\x00"), 1, "negative record field length"),
    # a value running past its record
    (_record(b"\x00\x00\x00\x01\x10\x00"), 1, "record"),
    # a varint of 11 bytes
    (_record(b"\x00" + b"\xff" * 10 + b"\x01" + b"\x00\x01\x01\x00"), 1, "varint is too long"),
    # fields ending before the record does, no headers
    (_record(b"\x00\x00\x00\x01\x01\x00\x00"), 1, "do not match the record length"),
    # offsets that do not increase (deltas 0, 0)
    (_record(b"\x00\x00\x00\x01\x01\x00") * 2, 2, "record offsets do not increase"),
    # a header of null key
    (_record(b"\x00\x00\x00\x01\x01\x02\x01\x01"), 1, "null header key"),
    # headers ending before the record does
    (_record(b"\x00\x00\x00\x01\x01\x02\x02h\x01\x00"), 1, "record headers do not match the record length"),
    # a header key running far past the record (the pure decoder let an IndexError out before)
    (_record(b"\x00\x00\x00\x01\x01\x02\xd0\x0f"), 1, "record headers do not match the record length"),
    # a header value running past the record
    (_record(b"\x00\x00\x00\x01\x01\x02\x02h\x10"), 1, "record headers do not match the record length"),
])
def test_corrupt_records_raise_corrupt_message_in_both(section: bytes, count: int, message: str) -> None:
    pure, compiled = decode_both(_batch(section, count), 0, 10, True)
    assert isinstance(pure, KafkaError) and message in str(pure), pure
    assert isinstance(compiled, KafkaError) and message in str(compiled), compiled
    assert pure.code == compiled.code == ErrorCode.corrupt_message


def test_a_fetch_past_arrow_binary_offsets_is_unsupported_in_both(monkeypatch: pytest.MonkeyPatch) -> None:
    data = build_record_batch([(b"k", b"v" * 100, [])], timestamp_ms=1, base_offset=3)
    monkeypatch.setattr(decoder, "_MAX_BINARY", 64)
    for pure in (True, False):
        with pytest.raises(decoder.UnsupportedBatch):
            decoder.decode_batches(data, "t", 0, 3, 10, False, pure=pure)


def test_the_compiled_decoder_is_the_default_and_the_env_var_picks_the_pure_one() -> None:
    code = "import kaflite.spark.batches as b; print(b.DECODER)"
    env = {k: v for k, v in os.environ.items() if k != decoder.PURE_DECODER_ENV}
    chosen = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    forced = subprocess.run([sys.executable, "-c", code], env={**env, decoder.PURE_DECODER_ENV: "1"},
                            capture_output=True, text=True, check=True)
    assert (chosen.stdout.strip(), forced.stdout.strip()) == ("compiled", "pure")


def test_compiled_columns_share_the_c_buffers() -> None:
    data = build_record_batch([(b"k%d" % i, b"v" * 100, []) for i in range(50)], timestamp_ms=5)
    batch, _ = decoder.decode_batches(data, "t", 0, 0, 50, False, pure=False)
    assert batch is not None
    # the value column's data buffer is exactly the packed values: no copy, no slack after the resize
    assert batch.column("value").buffers()[2].size == 50 * 100
    assert batch.column("timestamp").to_pylist()[0] == pa.scalar(5_000, pa.timestamp("us", tz="UTC")).as_py()
