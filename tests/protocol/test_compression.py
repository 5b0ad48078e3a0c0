"""Batch compression codecs: round trips, both snappy framings, corrupt input, and interop with the codec
implementations of a real Kafka client (aiokafka's, which follow the Java client's framings)."""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaflite.protocol.compression import CODECS, compress, decompress
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.record_batch import build_record_batch, decode_records, iter_batches

COMPRESSED = ["gzip", "snappy", "lz4", "zstd"]
# text-like data compresses; 200 KiB spans several snappy chunks (32 KiB) and lz4 blocks (64 KiB)
SAMPLES = [b"", b"x", b"kaflite " * 25_000, os.urandom(70_000)]


@pytest.mark.parametrize("name", COMPRESSED)
@pytest.mark.parametrize("data", SAMPLES, ids=["empty", "one", "text-200k", "random-70k"])
def test_round_trip(name: str, data: bytes) -> None:
    packed = compress(CODECS[name], data)
    assert decompress(CODECS[name], packed) == data
    if len(data) > 1000 and data[:8] == b"kaflite ":
        assert len(packed) < len(data) // 10


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(COMPRESSED), st.binary(max_size=5000))
def test_round_trip_property(name: str, data: bytes) -> None:
    assert decompress(CODECS[name], compress(CODECS[name], data)) == data


def test_snappy_writes_xerial_framing_and_reads_raw_blocks_too() -> None:
    import cramjam

    data = b"abc" * 40_000
    packed = compress(CODECS["snappy"], data)
    assert packed[:8] == b"\x82SNAPPY\x00" and struct.unpack(">ii", packed[8:16]) == (1, 1)
    raw = bytes(cramjam.snappy.compress_raw(data))  # what librdkafka writes
    assert decompress(CODECS["snappy"], raw) == data


def test_lz4_frame_has_independent_blocks_and_no_content_checksum() -> None:
    packed = compress(CODECS["lz4"], b"y" * 10)
    assert packed[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    flg = packed[4]
    assert flg >> 6 == 1  # version 01
    assert flg & 0x20  # block independence (Kafka's Java reader needs it)
    assert not flg & 0x04 and not flg & 0x08  # no content checksum, no content size


aiokafka_codec = pytest.importorskip("aiokafka.codec")
ENCODERS = {
    "gzip": aiokafka_codec.gzip_encode,
    "snappy": aiokafka_codec.snappy_encode,  # xerial framing, as the Java client
    "lz4": aiokafka_codec.lz4_encode,
    "zstd": aiokafka_codec.zstd_encode,
}
DECODERS = {
    "gzip": aiokafka_codec.gzip_decode,
    "snappy": aiokafka_codec.snappy_decode,
    "lz4": aiokafka_codec.lz4_decode,
    "zstd": aiokafka_codec.zstd_decode,
}


@pytest.mark.parametrize("name", COMPRESSED)
def test_interop_with_a_kafka_client_codec(name: str) -> None:
    data = b"".join(b"record-%d;" % i for i in range(20_000))
    assert decompress(CODECS[name], ENCODERS[name](data)) == data
    assert DECODERS[name](compress(CODECS[name], data)) == data


@pytest.mark.parametrize("name", COMPRESSED)
def test_corrupt_compressed_data_is_corrupt_message(name: str) -> None:
    packed = bytearray(compress(CODECS[name], b"hello world " * 1000))
    del packed[len(packed) // 2 :]  # truncated
    with pytest.raises(KafkaError) as err:
        decompress(CODECS[name], bytes(packed))
    assert err.value.code == ErrorCode.corrupt_message


def test_snappy_xerial_chunk_running_past_the_end() -> None:
    bad = b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, 1_000_000) + b"\x00" * 10
    with pytest.raises(KafkaError) as err:
        decompress(CODECS["snappy"], bad)
    assert err.value.code == ErrorCode.corrupt_message


@pytest.mark.parametrize("name", COMPRESSED)
def test_batches_in_every_codec_decode_to_their_records(name: str) -> None:
    records = [(b"k%d" % i, b"v" * i, [("h", b"1")]) for i in range(50)]
    buf = build_record_batch(records, base_offset=7, compression=CODECS[name])
    (view,) = list(iter_batches(buf))
    assert view.compression == CODECS[name]
    view.validate()
    decoded = decode_records(view)
    assert [(r.offset, r.key, r.value, r.headers) for r in decoded] == [
        (7 + i, k, v, h) for i, (k, v, h) in enumerate(records)
    ]


def test_recompress_batches() -> None:
    from kaflite.protocol.record_batch import recompress_batches

    recs = [(b"k%d" % i, b"v%d" % i, []) for i in range(10)]
    lz4 = build_record_batch(recs, compression=CODECS["lz4"], producer_id=7, producer_epoch=2, base_sequence=40)
    plain = build_record_batch(recs, base_offset=10)
    both = lz4 + plain
    assert recompress_batches(both, CODECS["lz4"]) == lz4 + recompress_batches(plain, CODECS["lz4"])
    assert recompress_batches(lz4, CODECS["lz4"]) is lz4  # nothing to do: the same buffer
    out = list(iter_batches(recompress_batches(both, CODECS["zstd"])))
    assert [v.compression for v in out] == [CODECS["zstd"]] * 2
    assert (out[0].producer_id, out[0].producer_epoch, out[0].base_sequence) == (7, 2, 40)
    for v in out:
        v.validate()
    assert [r.value for v in out for r in decode_records(v)] == [v for _, v, _ in recs] * 2

    corrupt = bytearray(lz4)
    corrupt[-1] ^= 0xFF  # the CRC no longer matches: refused, not given a fresh CRC
    with pytest.raises(KafkaError) as err:
        recompress_batches(bytes(corrupt), CODECS["none"])
    assert err.value.code == ErrorCode.corrupt_message
    truncated = lz4[:-5]
    assert recompress_batches(truncated, CODECS["none"]) is truncated  # the log's validation answers


_RECORD = st.tuples(
    st.one_of(st.none(), st.binary(max_size=20)),
    st.one_of(st.none(), st.binary(max_size=200)),
    st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=10))), max_size=3),
)


@settings(max_examples=60, deadline=None)
@given(records=st.lists(_RECORD, min_size=1, max_size=30), source=st.sampled_from(["none", *COMPRESSED]),
       target=st.sampled_from(["none", *COMPRESSED]), attributes=st.sampled_from([0, 0x08, 0x10, 0x18]))
def test_recompression_keeps_every_record_byte_and_every_header_field(records: list, source: str, target: str,
                                                                       attributes: int) -> None:
    """The records section after recompression is the producer's own bytes; the header differs only in the
    codec bits, the length and the CRC (the timestamp type and transactional bits included)."""
    from kaflite.protocol.record_batch import BATCH_HEADER_SIZE, encode_batch, recompress_batches

    encoded = [(i, i * 3, k, v, h) for i, (k, v, h) in enumerate(records)]  # timestamp deltas are kept
    batch = encode_batch(encoded, base_offset=0, first_timestamp=1_700_000_000_000, producer_id=5,
                         producer_epoch=1, base_sequence=9, attributes=attributes | CODECS[source],
                         partition_leader_epoch=-1)
    (before,) = iter_batches(batch)
    (after,) = iter_batches(recompress_batches(batch, CODECS[target]))
    after.validate()
    assert after.compression == CODECS[target]
    assert after.attributes & ~0x07 == before.attributes & ~0x07
    keep = ("base_offset", "partition_leader_epoch", "magic", "last_offset_delta", "first_timestamp",
            "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "records_count")
    assert [getattr(after, f) for f in keep] == [getattr(before, f) for f in keep]
    assert (decompress(after.compression, after.buffer[BATCH_HEADER_SIZE:])
            == decompress(before.compression, before.buffer[BATCH_HEADER_SIZE:]))


def test_recompression_keeps_a_header_key_that_is_not_utf8() -> None:
    """Kafka's header keys are Strings, but a client can send any bytes: recompression must not replace
    them (decoding every record turned such a key into U+FFFD)."""
    from kaflite.protocol.record_batch import BATCH_HEADER_SIZE, recompress_batches

    plain = build_record_batch([(b"k", b"v", [("ok", b"1")])])
    raw_key = b"\xff\xfe"
    # the header key "ok" (length varint 4 = zigzag 2) patched to two bytes that are not UTF-8
    at = plain.index(b"\x04ok")
    body = bytearray(plain)
    body[at + 1:at + 3] = raw_key
    from kaflite.protocol.record_batch import crc32c

    struct.pack_into(">I", body, 17, crc32c(bytes(body[21:])))
    (after,) = iter_batches(recompress_batches(bytes(body), CODECS["gzip"]))
    section = decompress(after.compression, after.buffer[BATCH_HEADER_SIZE:])
    assert b"\x04" + raw_key in section
