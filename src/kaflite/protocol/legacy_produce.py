"""Produce v0-v2's message sets of Kafka's message formats v0 and v1, each turned into one magic-2 record
batch (the request itself, v3's without a transactional id, is read by protocol/produce_request.py).

kaflite stores magic-2 batches only, as Kafka does since 3.0 (`log.message.format.version` is ignored from
then on): a Produce v0-v2 from a client that does not know record batches (librdkafka with
`broker.version.fallback` below 0.10.2, kafka-python with `api_version` (0, 9) or (0, 10)) is up-converted
on receipt, as Kafka's `LogValidator` does, then appended like any other batch.

Rules:
- a message set is [offset int64][size int32][message]...; a message is [crc int32 (CRC-32, IEEE)]
  [magic int8 (0 or 1)][attributes int8][timestamp int64, magic 1 only][key bytes][value bytes], where
  bytes are an int32 length (-1: null) and the data; the CRC covers everything after itself;
- a bad CRC, a magic other than 0 or 1, a size that runs past the set, a key or value length past its
  message, or bytes left after the last message are CORRUPT_MESSAGE (the partition refused, unwritten);
  an empty set is INVALID_RECORD (Kafka: "at least one record");
- attributes bits 0-2 are the codec (0 none, 1 gzip, 2 snappy, 3 lz4): a compressed message is a wrapper
  whose value is an inner message set, compressed; the inner messages are the records (wrappers do not
  nest: an inner compressed message is CORRUPT_MESSAGE); zstd (4) did not exist before magic 2:
  UNSUPPORTED_COMPRESSION_TYPE;
- a magic-0 message has no timestamp: its record gets -1 (Kafka's NO_TIMESTAMP, what a consumer then sees
  on a CreateTime topic; a LogAppendTime topic stamps the batch on append as for any batch); a magic-1
  record keeps its own timestamp;
- the converted batch holds every record of the set in order, offsets 0..n-1 (the log assigns the real
  ones), no producer id (message formats before 2 have no idempotence), compressed with the codec of
  the set's first compressed wrapper (Kafka keeps the producer's codec), uncompressed when there is none;
- a magic-0 lz4 wrapper carries a frame whose header checksum old clients computed wrongly (over the magic
  number too, KAFKA-3160; kafka-python still writes it so for `api_version` (0, 9)): its frame is read
  block by block without checking that byte, as Kafka reads magic-0 lz4; magic 1 frames are checked.
"""

from __future__ import annotations

import struct
import zlib

from kaflite.protocol import compression
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.record_batch import build_record_batch

__all__ = ["LegacyRecord", "read_message_set", "to_record_batch"]

_HEAD = struct.Struct(">qi")  # offset, message size
_MSG = struct.Struct(">IbB")  # crc, magic, attributes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
NO_TIMESTAMP = -1

LegacyRecord = tuple[int, bytes | None, bytes | None]  # (timestamp, key, value)


def _corrupt(why: str) -> KafkaError:
    return KafkaError(ErrorCode.corrupt_message, f"message set (format v0/v1): {why}")


def _bytes_field(buf: memoryview, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise _corrupt(f"{what} length runs past its message")
    (n,) = _I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    if pos + n > end:
        raise _corrupt(f"{what} of {n} bytes runs past its message")
    return bytes(buf[pos : pos + n]), pos + n


def read_message_set(data: bytes | memoryview, inner: bool = False) -> tuple[list[LegacyRecord], int]:
    """The records of a v0/v1 message set and the codec of its first compressed wrapper (0 when none)."""
    buf = memoryview(data)
    pos, end = 0, len(buf)
    records: list[LegacyRecord] = []
    codec_used = compression.NONE
    while pos < end:
        if pos + _HEAD.size > end:
            raise _corrupt(f"{end - pos} bytes left after the last message")
        _offset, size = _HEAD.unpack_from(buf, pos)
        start = pos + _HEAD.size
        stop = start + size
        if size < _MSG.size + 8 or stop > end:
            raise _corrupt(f"message of size {size} at byte {pos} runs past the set of {end} bytes")
        crc, magic, attributes = _MSG.unpack_from(buf, start)
        if magic not in (0, 1):
            raise _corrupt(f"magic {magic} (Produce v0-v2 carry magic 0 or 1)")
        if zlib.crc32(buf[start + 4 : stop]) != crc:
            raise _corrupt(f"CRC mismatch in the message at byte {pos}")
        p = start + _MSG.size
        timestamp = NO_TIMESTAMP
        if magic == 1:
            if p + 8 > stop:
                raise _corrupt("timestamp runs past its message")
            (timestamp,) = _I64.unpack_from(buf, p)
            p += 8
        key, p = _bytes_field(buf, p, stop, "key")
        value, p = _bytes_field(buf, p, stop, "value")
        if p != stop:
            raise _corrupt(f"{stop - p} bytes after the value of the message at byte {pos}")
        codec = attributes & 0x07
        if codec == compression.NONE:
            records.append((timestamp, key, value))
        elif inner:
            raise _corrupt("a compressed message inside a compressed message")
        elif codec == compression.ZSTD:
            raise KafkaError(ErrorCode.unsupported_compression_type, "zstd needs record batches (Produce v3+)")
        elif codec > compression.ZSTD:
            raise _corrupt(f"unknown compression codec {codec}")
        else:
            if value is None:
                raise _corrupt("a compressed message without a value")
            raw = _lz4_frame_unchecked(value) if codec == compression.LZ4 and magic == 0 else \
                compression.decompress(codec, value)
            nested, _ = read_message_set(raw, inner=True)
            if magic == 0:  # magic 0 inner messages carry no timestamp either
                nested = [(NO_TIMESTAMP, k, v) for _t, k, v in nested]
            records.extend(nested)
            if codec_used == compression.NONE:
                codec_used = codec
        pos = stop
    return records, codec_used


_LZ4_MAGIC = 0x184D2204
_LZ4_BLOCK_MAX = {4: 1 << 16, 5: 1 << 18, 6: 1 << 20, 7: 1 << 22}


def _lz4_frame_unchecked(data: bytes) -> bytes:
    """An LZ4 frame's content, its header checksum byte not checked (module rules: magic-0 lz4)."""
    import lz4.block

    try:
        if len(data) < 7 or struct.unpack_from("<I", data)[0] != _LZ4_MAGIC:
            raise ValueError("not an LZ4 frame")
        flg, bd = data[4], data[5]
        block_checksum, content_size = bool(flg & 0x10), bool(flg & 0x08)
        block_max = _LZ4_BLOCK_MAX.get((bd >> 4) & 0x07)
        if block_max is None:
            raise ValueError(f"block size code {(bd >> 4) & 0x07}")
        pos = 6 + (8 if content_size else 0) + 1  # descriptor, then the (unchecked) header checksum
        out = bytearray()
        while True:
            if pos + 4 > len(data):
                raise ValueError("truncated frame")
            (size,) = struct.unpack_from("<I", data, pos)
            pos += 4
            if size == 0:  # end mark
                break
            n = size & 0x7FFFFFFF
            if n > block_max or pos + n > len(data):
                raise ValueError(f"block of {n} bytes beyond the frame or its block size")
            block = data[pos : pos + n]
            out += block if size & 0x80000000 else lz4.block.decompress(block, uncompressed_size=block_max)
            pos += n + (4 if block_checksum else 0)
        return bytes(out)
    except (ValueError, lz4.block.LZ4BlockError) as err:
        raise _corrupt(f"lz4 data does not decode: {err}") from None


def to_record_batch(data: bytes | memoryview) -> bytes:
    """One magic-2 batch holding every record of a v0/v1 message set (module rules)."""
    records, codec = read_message_set(data)
    if not records:
        raise KafkaError(ErrorCode.invalid_record, "a message set without a message")
    return build_record_batch(
        [(key, value, ()) for _t, key, value in records],
        timestamps=[t for t, _k, _v in records],
        compression=codec,
    )
