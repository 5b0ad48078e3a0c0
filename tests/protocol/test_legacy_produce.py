"""Produce v0-v2 (protocol/legacy_produce.py): message formats v0/v1 read and up-converted to one magic-2
batch, the hand decoder of the request, and kafka-python's 0.9/0.10 producers against a broker, read back
by confluent-kafka with Kafka's timestamps (none for magic 0 on CreateTime, the producer's for magic 1,
the broker's on LogAppendTime)."""

from __future__ import annotations

import struct
import time
import zlib
from typing import Any

import lz4.frame
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer

from kaflite.protocol import compression
from kaflite.protocol.errors import ErrorCode, KafkaError, ProtocolError
from kaflite.protocol.legacy_produce import read_message_set, to_record_batch
from kaflite.protocol.produce_request import decode_request as decode_produce
from kaflite.protocol.record_batch import decode_records, iter_batches
from kaflite.server.embedded import EmbeddedBroker


def _bytes(b: bytes | None) -> bytes:
    return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b


def message(key: bytes | None, value: bytes | None, magic: int = 1, ts: int = 1000, codec: int = 0,
            offset: int = 0, crc_delta: int = 0) -> bytes:
    body = struct.pack(">bb", magic, codec) + (struct.pack(">q", ts) if magic == 1 else b"")
    body += _bytes(key) + _bytes(value)
    msg = struct.pack(">I", (zlib.crc32(body) + crc_delta) & 0xFFFFFFFF) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def wrapper(inner: bytes, codec: int, magic: int = 1, ts: int = 1000) -> bytes:
    data = lz4.frame.compress(inner) if codec == compression.LZ4 else compression.compress(codec, inner)
    return message(None, data, magic=magic, ts=ts, codec=codec)


def test_plain_sets_of_both_magics_become_one_batch_with_kafkas_timestamps() -> None:
    v0 = message(b"a", b"1", magic=0) + message(None, b"2", magic=0, offset=1)
    records, codec = read_message_set(v0)
    assert records == [(-1, b"a", b"1"), (-1, None, b"2")] and codec == 0
    v1 = message(b"a", b"1", ts=5) + message(b"b", None, ts=7, offset=1)  # a tombstone
    batch = next(iter_batches(to_record_batch(v1)))
    assert batch.magic == 2 and batch.records_count == 2 and batch.producer_id == -1
    got = [(r.timestamp, r.key, r.value) for r in decode_records(batch)]
    assert got == [(5, b"a", b"1"), (7, b"b", None)]


@pytest.mark.parametrize("codec", [compression.GZIP, compression.SNAPPY, compression.LZ4])
@pytest.mark.parametrize("magic", [0, 1])
def test_compressed_wrappers_keep_their_codec_and_every_inner_record(codec: int, magic: int) -> None:
    inner = b"".join(message(b"k%d" % i, b"v%d" % i, magic=magic, ts=100 + i, offset=i) for i in range(5))
    data = wrapper(inner, codec, magic=magic) + message(b"plain", b"p", magic=magic, offset=5)
    batch = next(iter_batches(to_record_batch(data)))
    assert batch.compression == codec
    got = [(r.timestamp, r.key, r.value) for r in decode_records(batch)]
    ts = [-1] * 6 if magic == 0 else [100, 101, 102, 103, 104, 1000]
    assert got == list(zip(ts, [b"k%d" % i for i in range(5)] + [b"plain"],
                           [b"v%d" % i for i in range(5)] + [b"p"], strict=True))


def test_magic_0_lz4_with_the_old_header_checksum_is_read() -> None:
    inner = message(b"k", b"v", magic=0)
    frame = bytearray(lz4.frame.compress(inner, store_size=False))
    frame[6] ^= 0x5A  # the header checksum byte (no content size): what pre-0.10 clients got wrong
    with pytest.raises(KafkaError):  # a checking reader refuses it ...
        compression.decompress(compression.LZ4, bytes(frame))
    data = message(None, bytes(frame), magic=0, codec=compression.LZ4)
    assert read_message_set(data)[0] == [(-1, b"k", b"v")]  # ... magic 0 is read unchecked
    bad = message(None, bytes(frame), magic=1, codec=compression.LZ4)
    with pytest.raises(KafkaError) as e:  # magic 1 was always written right: checked
        read_message_set(bad)
    assert e.value.code is ErrorCode.corrupt_message


@pytest.mark.parametrize(("data", "code", "why"), [
    (message(b"k", b"v", crc_delta=1), ErrorCode.corrupt_message, "CRC mismatch"),
    (message(b"k", b"v", magic=2), ErrorCode.corrupt_message, "magic 2"),
    (message(b"k", b"v")[:-1], ErrorCode.corrupt_message, "runs past the set"),
    (message(b"k", b"v") + b"\x00\x00", ErrorCode.corrupt_message, "2 bytes left"),
    (wrapper(wrapper(message(b"k", b"v"), compression.GZIP), compression.GZIP), ErrorCode.corrupt_message,
     "inside a compressed message"),
    (message(None, b"x", codec=4), ErrorCode.unsupported_compression_type, "zstd"),
    (message(None, b"not gzip", codec=1), ErrorCode.corrupt_message, "gzip data does not decode"),
    (b"", ErrorCode.invalid_record, "without a message"),
])
def test_bad_message_sets_are_refused_with_kafkas_code(data: bytes, code: ErrorCode, why: str) -> None:
    with pytest.raises(KafkaError) as e:
        to_record_batch(data)
    assert e.value.code is code and why in (e.value.message or ""), e.value.message


@pytest.mark.parametrize("version", [0, 1, 2])
def test_request_decoder_reads_the_v0_layout_and_refuses_short_frames(version: int) -> None:
    def decode_request(frame: bytes, offset: int) -> Any:
        return decode_produce(frame, offset, version)

    ms = message(b"k", b"v")
    body = struct.pack(">hii", -1, 1500, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">ii", 1, 3)
    body += struct.pack(">i", len(ms)) + ms
    req = decode_request(b"HEAD" + body, 4)
    assert req.acks == -1 and req.timeout.total_seconds() == 1.5 and req.transactional_id is None
    assert [(t.name, [(p.index, p.records) for p in t.partition_data]) for t in req.topic_data] == \
        [("t", [(3, ms)])]
    for cut in (1, 5, len(body) - 1):
        with pytest.raises(ProtocolError):
            decode_request(body[:cut], 0)
    with pytest.raises(ProtocolError):
        decode_request(struct.pack(">hii", 1, 0, 2**31 - 1), 0)  # a topic count beyond the frame
    head = struct.pack(">hii", 1, 0, 1)
    for bad in (struct.pack(">h", -1),  # a null topic name
                struct.pack(">h", 2) + b"\xff\xfe",  # a name that is not UTF-8
                struct.pack(">h", 1) + b"t" + struct.pack(">iii", 1, 0, -2)):  # a message-set length of -2
        with pytest.raises(ProtocolError):
            decode_request(head + bad, 0)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> EmbeddedBroker:
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("legacy")) as b:
        yield b  # type: ignore[misc]


def _read(bootstrap: str, topic: str, n: int) -> list[tuple[int, bytes | None, bytes | None, tuple[int, int]]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "legacy", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[tuple[int, bytes | None, bytes | None, tuple[int, int]]] = []
    deadline = time.monotonic() + 15
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append((m.offset(), m.key(), m.value(), m.timestamp()))
    c.close()
    return got


@pytest.mark.parametrize(("api_version", "codec", "ts_type"), [
    ((0, 9), None, "CreateTime"),  # Produce v1, magic 0
    ((0, 9), "gzip", "LogAppendTime"),
    ((0, 10), None, "CreateTime"),  # Produce v2, magic 1
    ((0, 10), "lz4", "CreateTime"),
    ((0, 10), "gzip", "LogAppendTime"),
])
def test_kafka_python_old_protocols_produce_and_modern_clients_read(
        broker: EmbeddedBroker, api_version: tuple[int, int], codec: str | None, ts_type: str) -> None:
    topic = f"legacy-{api_version[1]}-{codec}-{ts_type}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"message.timestamp.type": ts_type})])[topic].result(10)
    before = int(time.time() * 1000)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=api_version, compression_type=codec,
                      linger_ms=20)
    sent = [p.send(topic, key=b"k%d" % i, value=None if i == 3 else b"v%d" % i, partition=0,
                   timestamp_ms=1_000_000 + i if api_version >= (0, 10) else None) for i in range(6)]
    p.flush(10)
    assert [f.get(10).offset for f in sent] == list(range(6))
    p.close(5)
    got = _read(broker.bootstrap, topic, 6)
    assert [(o, k, v) for o, k, v, _ts in got] == [(i, b"k%d" % i, None if i == 3 else b"v%d" % i)
                                                    for i in range(6)]
    for _o, _k, _v, (kind, ts) in got:
        if ts_type == "LogAppendTime":
            assert kind == 2 and before <= ts <= int(time.time() * 1000)
        elif api_version == (0, 9):
            assert ts == -1  # magic 0 has no timestamp (Kafka's NO_TIMESTAMP)
        else:
            assert kind == 1 and 1_000_000 <= ts < 1_000_006
