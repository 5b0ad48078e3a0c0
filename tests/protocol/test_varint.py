"""kaflite.protocol.varint against kio's own reader and writer of Kafka's UNSIGNED_VARINT."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.serial.readers import read_unsigned_varint
from kio.serial.writers import write_unsigned_varint

from kaflite.protocol.varint import read_uvarint, read_zigzag_varint, skip_tags, uvarint


@given(st.integers(min_value=0, max_value=2**31 - 1))
def test_uvarint_is_kios_encoding_and_reads_back(n: int) -> None:
    out = io.BytesIO()
    write_unsigned_varint(out, n)
    assert uvarint(n) == out.getvalue()
    assert read_uvarint(b"\xff" + uvarint(n) + b"tail", 1) == (n, 1 + len(uvarint(n)))
    assert read_unsigned_varint(memoryview(uvarint(n)), 0)[0] == n


def test_read_uvarint_is_bounded_and_refuses_the_end() -> None:
    assert read_uvarint(b"\xff\xff\xff\xff\x0f", 0) == (2**32 - 1, 5)
    with pytest.raises(ValueError, match="too long"):
        read_uvarint(b"\x80\x80\x80\x80\x80\x01", 0)
    with pytest.raises(ValueError, match="past the end"):
        read_uvarint(b"\x80", 0)
    with pytest.raises(ValueError, match="past the end"):
        read_uvarint(b"", 0)


def test_skip_tags_skips_every_field_and_refuses_a_short_section() -> None:
    section = b"\x02" + b"\x00\x03abc" + b"\x05\x00"  # two fields: tag 0 of 3 bytes, tag 5 empty
    assert skip_tags(section + b"rest", 0) == len(section)
    assert skip_tags(b"\x00", 0) == 1
    with pytest.raises(ValueError):
        skip_tags(b"\x01\x00\x09ab", 0)  # a field of 9 bytes with 2 left


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))  # kio writes VARINT (32 bits)
def test_zigzag_varint_reads_what_kio_writes(n: int) -> None:
    from kio.serial.writers import write_signed_varint

    out = io.BytesIO()
    write_signed_varint(out, n)
    data = out.getvalue()
    assert read_zigzag_varint(data + b"x", 0) == (n, len(data))


def test_zigzag_varint_is_bounded() -> None:
    assert read_zigzag_varint(b"\x03", 0) == (-2, 1)
    assert read_zigzag_varint(b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01", 0) == (2**63 - 1, 10)  # VARLONG
    with pytest.raises(ValueError, match="too long"):
        read_zigzag_varint(b"\x80" * 10 + b"\x01", 0)
    with pytest.raises(ValueError, match="past the end"):
        read_zigzag_varint(b"\x80", 0)
