"""Fetch sessions (KIP-227) on the wire and with kafka-python, which uses them by default: a session is
created, incremental fetches carry only partitions with news, stale epochs and unknown ids are refused."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from typing import Any

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.fetch.v12 import request as q
from kio.static.primitive import i8, i32, i64
from kwire import WireClient

from kaflite.protocol.errors import ErrorCode
from kaflite.server.embedded import EmbeddedBroker
from kaflite.server.handlers.fetch import FETCH_SESSIONS


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("fs", 3, 1)])["fs"].result(10)
        yield b


def _produce(b: EmbeddedBroker, partition: int, n: int) -> None:
    p = ck.Producer({"bootstrap.servers": b.bootstrap})
    for i in range(n):
        p.produce("fs", b"v%d" % i, partition=partition)
    assert p.flush(10) == 0


def _fetch(c: WireClient, session_id: int, epoch: int, offsets: dict[int, int],
           forgotten: tuple[int, ...] = ()) -> Any:
    topics = (q.FetchTopic(topic="fs", partitions=tuple(
        q.FetchPartition(partition=i32(p), fetch_offset=i64(o), partition_max_bytes=i32(1 << 20))
        for p, o in offsets.items())),) if offsets else ()
    return c.request(q.FetchRequest(
        max_wait=datetime.timedelta(milliseconds=0), min_bytes=i32(1), max_bytes=i32(1 << 24),
        isolation_level=i8(0), session_id=i32(session_id), session_epoch=i32(epoch), topics=topics,
        forgotten_topics_data=(q.ForgottenTopic(topic="fs", partitions=tuple(i32(p) for p in forgotten)),)
        if forgotten else ()))


def _partitions(resp: Any) -> dict[int, int]:
    """partition -> high watermark, for the partitions the answer carries."""
    return {int(p.partition_index): int(p.high_watermark) for t in resp.responses for p in t.partitions}


def test_session_on_the_wire(broker: EmbeddedBroker) -> None:
    _produce(broker, 0, 3)
    with WireClient(broker.bootstrap) as c:
        first = _fetch(c, 0, 0, {0: 0, 1: 0, 2: 0})
        sid = int(first.session_id)
        assert first.error_code == ErrorCode.none and sid > 0
        assert _partitions(first) == {0: 3, 1: 0, 2: 0}  # a new session answers everything
        quiet = _fetch(c, sid, 1, {0: 3})  # caught up everywhere: nothing new
        assert quiet.error_code == ErrorCode.none and _partitions(quiet) == {}
        _produce(broker, 2, 2)
        news = _fetch(c, sid, 2, {})  # no partition in the request: the session still reads all three
        assert _partitions(news) == {2: 2}
        assert _fetch(c, sid, 2, {}).error_code == ErrorCode.invalid_fetch_session_epoch
        assert _fetch(c, sid + 1000, 1, {}).error_code == ErrorCode.fetch_session_id_not_found
        _produce(broker, 1, 1)
        forgot = _fetch(c, sid, 3, {2: 2}, forgotten=(1,))  # partition 1 left the session
        assert _partitions(forgot) == {}
        final = _fetch(c, sid, -1, {0: 0, 1: 0, 2: 0})  # closes the session, full sessionless answer
        assert int(final.session_id) == 0 and set(_partitions(final)) == {0, 1, 2}
        assert _fetch(c, sid, 4, {}).error_code == ErrorCode.fetch_session_id_not_found


def test_kafka_python_consumes_through_incremental_fetches(broker: EmbeddedBroker) -> None:
    from kafka import KafkaConsumer, TopicPartition

    with WireClient(broker.bootstrap) as c:
        already = sum(_partitions(_fetch(c, 0, -1, {0: 0, 1: 0, 2: 0})).values())
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    got: list[tuple[int, int]] = []

    def consume_until(n: int) -> None:
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend((r.partition, r.offset) for r in records)

    try:
        consumer.assign([TopicPartition("fs", p) for p in range(3)])
        consume_until(already)
        for round_ in range(3):  # new records after the consumer caught up: only incremental fetches see them
            for p in range(3):
                _produce(broker, p, 20)
            consume_until(already + 60 * (round_ + 1))

        def epochs() -> list[int]:
            return [s.epoch for s in broker.server.broker.services.get(FETCH_SESSIONS)._sessions.values()]

        seen_epochs = broker.call(epochs)
    finally:
        consumer.close()
    want = already + 180
    assert len(got) == want and len(set(got)) == want  # every record once
    assert max(seen_epochs) > 3  # the consumer's session went through several incremental fetches
