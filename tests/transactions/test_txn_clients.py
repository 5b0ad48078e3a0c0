"""Transactions with real clients (confluent-kafka / librdkafka) against a real broker: commit visible,
abort invisible to read_committed and visible to read_uncommitted, interleaved with non-transactional
records in one partition; fencing by a second producer with the same transactional id;
consume-transform-produce with send_offsets_to_transaction; a transaction left open past its timeout."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import confluent_kafka as ck
import pytest

from helpers import read_to_end


def _producer(broker: Any, tid: str, **kw: Any) -> ck.Producer:
    conf = {"bootstrap.servers": broker.bootstrap, "transactional.id": tid, "linger.ms": 5}
    conf.update(kw)
    p = ck.Producer(conf)
    p.init_transactions(30)
    return p


def _read(broker: Any, topic: str, isolation: str, expect_at_least: int = 0) -> list[bytes]:
    """Partition 0 to its end (read_committed: its last stable offset), and at least `expect_at_least`
    records: a commit or abort is answered before its marker is written (helpers.read_to_end; an idle
    second per read decided the end before)."""
    return read_to_end(broker.bootstrap, topic, 1, isolation, at_least=expect_at_least)


def _lso(broker: Any, topic: str) -> tuple[int, int]:
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "w", "isolation.level": "read_committed"})
    committed = c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10)[1]
    c.close()
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "w", "isolation.level": "read_uncommitted"})
    uncommitted = c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10)[1]
    c.close()
    return committed, uncommitted


def test_commit_visible_abort_invisible_interleaved(broker: Any, topic_factory: Callable[[int], str]) -> None:
    topic = topic_factory(1)
    plain = ck.Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    txp = _producer(broker, f"tx-{uuid.uuid4().hex[:6]}")
    plain.produce(topic, b"plain-1", partition=0)
    plain.flush(10)
    txp.begin_transaction()
    txp.produce(topic, b"committed-1", partition=0)
    txp.produce(topic, b"committed-2", partition=0)
    txp.flush(10)
    plain.produce(topic, b"plain-2", partition=0)  # between the transaction's records and its marker
    plain.flush(10)
    assert b"plain-2" not in _read(broker, topic, "read_committed", 1)  # held by the open txn
    txp.commit_transaction(30)
    txp.begin_transaction()
    txp.produce(topic, b"aborted-1", partition=0)
    txp.flush(10)
    txp.abort_transaction(30)
    plain.produce(topic, b"plain-3", partition=0)
    plain.flush(10)
    committed = _read(broker, topic, "read_committed", 5)
    assert committed == [b"plain-1", b"committed-1", b"committed-2", b"plain-2", b"plain-3"]
    uncommitted = _read(broker, topic, "read_uncommitted", 6)
    assert uncommitted == [b"plain-1", b"committed-1", b"committed-2", b"plain-2", b"aborted-1", b"plain-3"]
    lso, hw = _lso(broker, topic)
    assert lso == hw  # nothing open: the last stable offset caught up (markers count as offsets)


def test_second_producer_fences_the_first(broker: Any, topic_factory: Callable[[int], str]) -> None:
    topic = topic_factory(1)
    tid = f"fence-{uuid.uuid4().hex[:6]}"
    first = _producer(broker, tid)
    first.begin_transaction()
    first.produce(topic, b"from-first", partition=0)
    first.flush(10)
    second = _producer(broker, tid)  # aborts the first one's open transaction, bumps the epoch
    second.begin_transaction()
    second.produce(topic, b"from-second", partition=0)
    second.commit_transaction(30)
    with pytest.raises(ck.KafkaException) as e:
        first.produce(topic, b"zombie", partition=0)
        first.commit_transaction(10)
    assert e.value.args[0].fatal() or e.value.args[0].code() in (
        ck.KafkaError._FENCED, ck.KafkaError.PRODUCER_FENCED, ck.KafkaError.INVALID_PRODUCER_EPOCH)
    assert _read(broker, topic, "read_committed", 1) == [b"from-second"]


def test_consume_transform_produce_commits_offsets_with_the_transaction(
        broker: Any, topic_factory: Callable[[int], str]) -> None:
    src, dst = topic_factory(1), topic_factory(1)
    plain = ck.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        plain.produce(src, b"in-%d" % i, partition=0)
    plain.flush(10)
    group = f"ctp-{uuid.uuid4().hex[:6]}"
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                            "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.subscribe([src])
    txp = _producer(broker, f"ctp-{uuid.uuid4().hex[:6]}")

    def transform(n: int, commit: bool) -> None:
        got: list[Any] = []
        deadline = time.monotonic() + 20
        while len(got) < n and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                got.append(m)
        assert len(got) == n
        txp.begin_transaction()
        for m in got:
            txp.produce(dst, m.value().replace(b"in", b"out"), partition=0)
        positions = consumer.position(consumer.assignment())
        txp.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
        if commit:
            txp.commit_transaction(30)
        else:
            txp.abort_transaction(30)

    transform(5, True)
    committed = consumer.committed([ck.TopicPartition(src, 0)], timeout=10)
    assert committed[0].offset == 5
    transform(5, False)  # aborted: the output is invisible, the group's offset stays at 5
    committed = consumer.committed([ck.TopicPartition(src, 0)], timeout=10)
    assert committed[0].offset == 5
    consumer.close()
    assert _read(broker, dst, "read_committed", 5) == [b"out-%d" % i for i in range(5)]


def test_transaction_left_open_past_its_timeout_is_aborted(broker: Any, topic_factory: Callable[[int], str]) -> None:
    topic = topic_factory(1)
    txp = _producer(broker, f"slow-{uuid.uuid4().hex[:6]}", **{"transaction.timeout.ms": 1000})
    txp.begin_transaction()
    txp.produce(topic, b"never", partition=0)
    txp.flush(10)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        lso, hw = _lso(broker, topic)
        if lso == hw:
            break
        time.sleep(0.3)
    assert lso == hw == 2  # the record and the coordinator's ABORT marker
    assert _read(broker, topic, "read_committed", 0) == []
    assert _read(broker, topic, "read_uncommitted", 1) == [b"never"]


def test_timeout_above_the_maximum_is_refused(broker: Any) -> None:
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"big-{uuid.uuid4().hex[:6]}",
                     "transaction.timeout.ms": 900_001})
    with pytest.raises(ck.KafkaException) as e:
        p.init_transactions(20)
    assert e.value.args[0].code() == ck.KafkaError.INVALID_TRANSACTION_TIMEOUT
