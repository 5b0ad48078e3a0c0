"""Malformed input: each bad connection gets closed (or an error code) with one log line, while a second
client connected at the same time keeps producing and consuming undisturbed."""

from __future__ import annotations

import logging
import struct
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kwire import WireClient

from helpers import poll_values
from kaflite.protocol.record_batch import build_record_batch


def _header(api_key: int, version: int, corr: int = 1) -> bytes:
    return struct.pack(">hhih", api_key, version, corr, 3) + b"bad"


BAD_INPUTS = {
    "garbage": b"\xde\xad\xbe\xef" * 16,
    "two_gib_length": struct.pack(">I", 0x7FFF_FFFF) + b"\x00" * 64,
    "negative_length": struct.pack(">i", -5) + b"\x00" * 64,
    "unknown_api_key": (lambda body: struct.pack(">i", len(body)) + body)(_header(9999, 0) + b"\x00" * 4),
    "unknown_version": (lambda body: struct.pack(">i", len(body)) + body)(_header(3, 99) + b"\x00" * 4),
    # a Metadata v12 frame cut in the middle of its topic array (the size prefix matches the cut body)
    "truncated_body": (lambda body: struct.pack(">i", len(body)) + body)(
        struct.pack(">hhih", 3, 12, 1, 1) + b"x" + b"\x00" + b"\x03\x00"
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_frame_closes_only_that_connection(broker, caplog, name: str) -> None:
    caplog.set_level(logging.DEBUG, logger="kaflite")
    with WireClient(broker.bootstrap) as good, WireClient(broker.bootstrap) as bad:
        bad.send_raw(BAD_INPUTS[name])
        assert bad.is_closed(wait=5), f"{name}: connection left open"
        r = good.request(
            MetadataRequest(
                topics=(MetadataRequestTopic(topic_id=None, name="bad-input-probe"),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        assert r.brokers[0].node_id == 0
    # one DEBUG line per refused connection (a flood of bad inputs must not flood the log), no traceback
    lines = [r for r in caplog.records if r.name == "kaflite.server" and "closing connection" in r.getMessage()]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert lines[0].levelno == logging.DEBUG
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info], caplog.text


def test_truncated_frame_then_hangup_does_not_disturb(broker) -> None:
    with WireClient(broker.bootstrap) as bad:
        bad.send_raw(struct.pack(">i", 1000) + b"\x00\x03\x00\x0c" + b"\x00" * 10)
    with WireClient(broker.bootstrap) as good:
        r = good.request(MetadataRequest(topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        assert r.controller_id == 0


def test_corrupt_batch_gets_corrupt_message(broker, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="kaflite")
    from kio.schema.errors import ErrorCode
    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("bad-batch", 1, 1)])["bad-batch"].result(timeout=10)
    batch = bytearray(build_record_batch([(b"k", b"v", [])]))
    batch[-1] ^= 0xFF  # flip a payload byte: the CRC no longer matches
    with WireClient(broker.bootstrap) as c:
        r = c.request(
            ProduceRequest(
                transactional_id=None,
                acks=1,
                timeout=__import__("datetime").timedelta(seconds=5),
                topic_data=(
                    TopicProduceData(
                        name="bad-batch", partition_data=(PartitionProduceData(index=0, records=bytes(batch)),)
                    ),
                ),
            )
        )
    part = r.responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.corrupt_message
    lines = [r.getMessage() for r in caplog.records if r.name == "kaflite.server"]
    assert len(lines) == 1 and "CORRUPT_MESSAGE" in lines[0], lines


def test_second_client_keeps_producing_and_consuming_during_attacks(broker) -> None:
    topic = "bad-input-steady"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=10)
    stop = threading.Event()

    def attack() -> None:
        deadline = time.monotonic() + 20
        while not stop.is_set() and time.monotonic() < deadline:
            for payload in BAD_INPUTS.values():
                try:
                    with WireClient(broker.bootstrap, timeout=2) as bad:
                        bad.send_raw(payload)
                        bad.is_closed(wait=2)
                except OSError:
                    pass

    attacker = threading.Thread(target=attack, daemon=True)
    attacker.start()
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1})
        n = 2000
        for i in range(n):
            producer.produce(topic, value=b"v%d" % i)
            if i % 100 == 0:
                producer.poll(0)
        assert producer.flush(20) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = poll_values(consumer, n, 20)
        consumer.close()
        assert got == [b"v%d" % i for i in range(n)]
    finally:
        stop.set()
        attacker.join(25)


def test_a_client_that_never_reads_is_paused_not_buffered(broker) -> None:
    """Pipelined Fetches whose large answers are never read: the broker stops reading that socket
    (bounded queue) instead of buffering without limit, and keeps serving others."""
    import io
    import socket

    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
    from kio.schema.request_header.v2.header import RequestHeader
    from kio.serial import entity_writer

    topic = "bp-topic"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=10)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for _ in range(64):
        producer.produce(topic, b"x" * 16_000)
    assert producer.flush(10) == 0

    buf = io.BytesIO()
    entity_writer(RequestHeader)(buf, RequestHeader(request_api_key=1, request_api_version=12, correlation_id=1, client_id="bp"))
    entity_writer(FetchRequest)(
        buf,
        FetchRequest(
            max_wait=__import__("datetime").timedelta(0),
            min_bytes=1,
            max_bytes=1 << 20,
            topics=(FetchTopic(topic=topic, partitions=(FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20),)),),
            forgotten_topics_data=(),
        ),
    )
    frame = struct.pack(">i", len(buf.getvalue())) + buf.getvalue()
    sock = socket.create_connection(("127.0.0.1", broker.port))
    sock.settimeout(2.0)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    blocked = False
    try:
        for _ in range(200_000):
            try:
                sock.sendall(frame * 50)
            except TimeoutError:
                blocked = True
                break
        assert blocked, "the broker kept reading requests it could not answer"
        # bounded: the 32 MiB limit plus at most one socket read that arrived before the pause
        queued = broker.call(lambda: [c.queued_bytes + c.decoder.buffered for c in broker.server._connections])
        assert all(q <= 33 * 1024 * 1024 for q in queued), queued
        with WireClient(broker.bootstrap) as good:  # others are still served
            r = good.request(MetadataRequest(topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False))
            assert r.controller_id == 0
    finally:
        sock.close()
