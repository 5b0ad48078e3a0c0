"""Unsigned varints (Kafka's UNSIGNED_VARINT: 7 bits a byte, least significant first, the high bit set on
every byte but the last) and tagged-field sections, for the hand-written encoders and the coordinators'
record layouts.

Rules (tests/protocol/test_varint.py):
- `uvarint(n)` of 0 <= n < 2**35 is the shortest encoding; one-byte values come from a table (nearly every
  varint of an answer: array lengths, short strings, tagged-field counts);
- `read_uvarint(raw, pos)` reads at most 5 bytes (a 32-bit value, as Kafka's readUnsignedVarint) and
  returns (value, position after it); a sixth byte or the end of `raw` raises ValueError;
- `read_zigzag_varint(raw, pos)` reads a signed (zigzag) varint of at most 10 bytes (Kafka's VARINT /
  VARLONG, the message indexes of Confluent's Protobuf framing); a longer one or the end of `raw` raises
  ValueError;
- `skip_tags(raw, pos)` skips a tagged-field section (a count, then per field a tag, a size and that many
  bytes) and returns the position after it; a section past the end raises ValueError.
"""

from __future__ import annotations

__all__ = ["read_uvarint", "read_zigzag_varint", "skip_tags", "uvarint"]

_SMALL = tuple(bytes((n,)) for n in range(0x80))


def uvarint(n: int) -> bytes:
    if 0 <= n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read(raw: bytes | memoryview, pos: int, max_bytes: int) -> tuple[int, int]:
    shift = n = 0
    for _ in range(max_bytes):
        if pos >= len(raw):
            raise ValueError("varint runs past the end")
        b = raw[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n, pos
        shift += 7
    raise ValueError("varint too long")


def read_uvarint(raw: bytes | memoryview, pos: int) -> tuple[int, int]:
    return _read(raw, pos, 5)


def read_zigzag_varint(raw: bytes | memoryview, pos: int) -> tuple[int, int]:
    n, pos = _read(raw, pos, 10)
    return (n >> 1) ^ -(n & 1), pos


def skip_tags(raw: bytes | memoryview, pos: int) -> int:
    count, pos = read_uvarint(raw, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(raw, pos)
        size, pos = read_uvarint(raw, pos)
        pos += size
    if pos > len(raw):
        raise ValueError("tagged fields run past the end")
    return pos
