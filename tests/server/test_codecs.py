"""Compression codecs with real clients. Compacted topics in every codec: the broker decodes what
librdkafka compressed, the log cleaner keeps the latest record per key, and the batches it re-encodes in
the producer's codec are read back by confluent-kafka and aiokafka. A topic's compression.type re-encodes
batches as Kafka does."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kaflite.protocol.compression import CODECS
from kaflite.protocol.record_batch import decode_records, iter_batches
from kaflite.server.embedded import EmbeddedBroker
from kaflite.storage.cleaner import compact_log

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

KEYS, ROUNDS = 12, 8


def _value(rnd: int, key: int) -> bytes:
    return b"round-%d-key-%d-" % (rnd, key) + b"payload " * 8


@pytest.fixture(scope="module")
def broker() -> Any:
    with EmbeddedBroker() as b:
        yield b


def _stored_batches(b: EmbeddedBroker, topic: str) -> list[Any]:
    def read() -> list[bytes]:
        log = b.server.broker.log_manager.get(topic, 0)
        out, offset = [], log.log_start_offset
        while offset < log.log_end_offset:
            info = log.read(offset, 1 << 20)
            chunk = b"".join(bytes(x) for x in info.records)
            views = list(iter_batches(chunk))
            out.append(chunk)
            offset = views[-1].last_offset + 1
        return out

    return [v for chunk in b.call(read) for v in iter_batches(chunk)]


def _consume_all_confluent(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes, bytes]]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    out: list[tuple[int, bytes, bytes]] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            out.append((m.offset(), m.key(), m.value()))
            if m.offset() >= end - 1:
                break
    finally:
        c.close()
    return out


async def _consume_all_aiokafka(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes, bytes]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await c.start()
    out: list[tuple[int, bytes, bytes]] = []
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        await c.seek_to_beginning(tp)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (not out or out[-1][0] < end - 1):
            for msgs in (await c.getmany(timeout_ms=500)).values():
                out.extend((m.offset, m.key, m.value) for m in msgs)
    finally:
        await c.stop()
    return out


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compacted_topic_in_every_codec(broker: EmbeddedBroker, codec: str) -> None:
    topic = f"compact-{codec}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    cfg = {"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01"}
    admin.create_topics([NewTopic(topic, 1, 1, config=cfg)])[topic].result(10)

    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 5})
    for rnd in range(ROUNDS):
        for k in range(KEYS):
            p.produce(topic, key=b"k%d" % k, value=_value(rnd, k))
        assert p.flush(10) == 0  # one batch per round, several segments in all
    total = ROUNDS * KEYS

    # the broker keeps the client's compressed batches and can decode every one of them
    before = _stored_batches(broker, topic)
    assert before and all(v.compression == CODECS[codec] for v in before)
    decoded = [(r.offset, r.key, r.value) for v in before for r in decode_records(v)]
    assert decoded == [(i, b"k%d" % (i % KEYS), _value(i // KEYS, i % KEYS)) for i in range(total)]

    def compact() -> Any:
        log = broker.server.broker.log_manager.get(topic, 0)
        log.roll()  # seal the active segment so every round is cleanable
        return compact_log(log, broker.server.broker.now_ms(), force=True)

    broker.call(compact)
    after = _stored_batches(broker, topic)
    assert all(v.compression == CODECS[codec] for v in after)
    kept = [(r.offset, r.key, r.value) for v in after for r in decode_records(v)]
    assert len(kept) < total
    latest = {b"k%d" % k: _value(ROUNDS - 1, k) for k in range(KEYS)}
    assert {k: v for _, k, v in kept} == latest

    # real clients read the re-encoded batches: offsets kept, only the latest value per key
    # in the cleaned part; the last batch of the log is never cleaned away
    for got in (_consume_all_confluent(broker.bootstrap, topic, total),
                asyncio.run(_consume_all_aiokafka(broker.bootstrap, topic, total))):
        assert got == kept, codec


@pytest.mark.parametrize(
    ("topic_codec", "producer_codec", "stored"),
    [("zstd", "none", "zstd"), ("gzip", "lz4", "gzip"), ("uncompressed", "snappy", "none"),
     ("producer", "lz4", "lz4"), ("lz4", "lz4", "lz4")],
)
def test_topic_compression_type_reencodes_batches(
    broker: EmbeddedBroker, topic_codec: str, producer_codec: str, stored: str
) -> None:
    topic = f"codec-{topic_codec}-{producer_codec}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"compression.type": topic_codec})])[topic].result(10)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "compression.type": producer_codec,
                     "enable.idempotence": True, "linger.ms": 5})
    sent = [(b"k%d" % i, b"value %d " % i * 20) for i in range(300)]
    for k, v in sent:
        p.produce(topic, key=k, value=v, headers=[("h", k)])
    assert p.flush(10) == 0

    batches = _stored_batches(broker, topic)
    assert batches and {v.compression for v in batches} == {CODECS[stored]}
    assert all(v.producer_id >= 0 and v.base_sequence >= 0 for v in batches)  # idempotence fields kept
    got = _consume_all_confluent(broker.bootstrap, topic, len(sent))
    assert [(k, v) for _, k, v in got] == sent
    assert [o for o, _, _ in got] == list(range(len(sent)))
