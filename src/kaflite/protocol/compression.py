"""Kafka's record-batch compression codecs: the bytes after a batch's 61-byte header, as clients write them.

Rules (what Apache Kafka's clients put on the wire, and what we must read and write):
1. gzip (1): an RFC 1952 gzip stream.
2. snappy (2): the Java client writes snappy-java's "xerial" framing: an 8-byte magic
   (0x82 'SNAPPY' 0x00), two big-endian int32 (version, compatible version), then chunks of
   [int32 length][raw snappy block]. librdkafka writes one raw snappy block. Readers accept both, so we
   decode both and write the xerial framing (what every client reads).
3. lz4 (3): an LZ4 frame with independent blocks (Kafka's KafkaLZ4BlockInputStream decompresses each
   block on its own, so linked blocks would break Java consumers), 64 KiB blocks, no content checksum.
4. zstd (4): a standard zstd frame.
The broker stores batches verbatim; decoding is needed only where records are read inside the broker
(the log cleaner, `__consumer_offsets` replay, recompression for a topic's `compression.type`).
The codecs come from `cramjam` (snappy, zstd) and `lz4` (its frame API lets us choose independent
blocks); gzip from the standard library.
"""

from __future__ import annotations

import struct
import zlib

from kaflite.protocol.errors import ErrorCode, KafkaError

__all__ = ["CODECS", "compress", "decompress", "decompress_view"]

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODECS = {"none": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_CHUNK = 32 * 1024  # snappy-java's default block size
_MAX_DECOMPRESSED = 1 << 31  # a bound on what one batch may inflate to (Kafka's batches are int32-sized)


def compress(codec: int, data: bytes | memoryview) -> bytes:
    """The compressed form of a batch's records section for `codec` (0-4); `data` is read in place (the
    sink's encoder hands a view of its buffer, not a copy)."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        c = zlib.compressobj(wbits=31)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        import cramjam

        out = bytearray(_XERIAL_HEADER)
        for start in range(0, len(data), _XERIAL_CHUNK):
            block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_CHUNK]))
            out += struct.pack(">i", len(block))
            out += block
        return bytes(out)
    if codec == LZ4:
        import lz4.frame

        return bytes(
            lz4.frame.compress(
                data,
                block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                block_linked=False,
                content_checksum=False,
                store_size=False,
            )
        )
    if codec == ZSTD:
        import cramjam

        return bytes(cramjam.zstd.compress(data))
    raise KafkaError(ErrorCode.unsupported_compression_type, f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """The records section of a batch compressed with `codec`; CORRUPT_MESSAGE when it does not decode."""
    out = decompress_view(codec, data)
    return out if isinstance(out, bytes) else bytes(out)


def decompress_view(codec: int, data: bytes | memoryview) -> bytes | memoryview:
    """`decompress` for a reader that only reads the records once (kaflite.spark's fetch decoder): the
    input is read in place where the codec library takes a buffer, and the output may be the library's
    own buffer (cramjam's zstd), read through a read-only memoryview, not copied into a bytes object."""
    if codec == NONE:
        return bytes(data)
    try:
        if codec == GZIP:
            d = zlib.decompressobj(wbits=31)
            out = d.decompress(data, _MAX_DECOMPRESSED)
            if d.unconsumed_tail:
                raise ValueError("gzip data inflates beyond 2 GiB")
            if not d.eof:
                raise ValueError("gzip stream is truncated")
            return out
        if codec == SNAPPY:
            return _snappy_decompress(bytes(data))
        if codec == LZ4:
            import lz4.frame

            return bytes(lz4.frame.decompress(data))
        if codec == ZSTD:
            import cramjam

            return memoryview(cramjam.zstd.decompress(data)).toreadonly()
    except KafkaError:
        raise
    except Exception as err:  # every codec library raises its own error type
        name = {GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}[codec]
        raise KafkaError(ErrorCode.corrupt_message, f"{name} data does not decode: {err}") from None
    raise KafkaError(ErrorCode.unsupported_compression_type, f"unknown compression codec {codec}")


def _snappy_decompress(raw: bytes) -> bytes:
    import cramjam

    if not raw.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(raw))
    pos, end = len(_XERIAL_HEADER), len(raw)
    out = bytearray()
    while pos < end:
        if pos + 4 > end:
            raise ValueError("truncated xerial chunk length")
        (length,) = struct.unpack_from(">i", raw, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise ValueError("xerial chunk runs past the end of the data")
        out += cramjam.snappy.decompress_raw(raw[pos : pos + length])
        pos += length
    return bytes(out)
