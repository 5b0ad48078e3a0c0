"""KIP-467 with real clients: a batch refused for some of its records names them (Produce v8+
`record_errors`), so librdkafka fails those records with the partition's error and the others of the batch
with _INVALID_DIFFERENT_RECORD, for every codec; the wire answer carries the indexes and messages."""

from __future__ import annotations

import datetime
import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kwire import WireClient

from kaflite.protocol.compression import CODECS
from kaflite.protocol.record_batch import build_record_batch


def _create(broker, topic: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(timeout=10)


def _produce_batch(broker, topic: str, records: list[tuple[bytes | None, bytes]], codec: str) -> list:
    """Produce `records` in one batch (long linger, one flush) and return each one's delivery error."""
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1000, "compression.type": codec,
                  "enable.idempotence": False, "message.send.max.retries": 0})
    errors: list = [None] * len(records)
    done: list[int] = []

    def report(i: int):
        def cb(err, _msg) -> None:
            errors[i] = err
            done.append(i)
        return cb

    for i, (key, value) in enumerate(records):
        p.produce(topic, value=value, key=key, partition=0, on_delivery=report(i))
    deadline = time.monotonic() + 20
    while len(done) < len(records) and time.monotonic() < deadline:
        p.flush(1)
    assert len(done) == len(records)
    return errors


@pytest.mark.parametrize("codec", ["none", "gzip", "zstd"])
def test_keyless_record_in_compacted_topic_fails_alone(broker, codec: str) -> None:
    topic = f"compacted-{codec}"
    _create(broker, topic, {"cleanup.policy": "compact"})
    errors = _produce_batch(broker, topic, [(b"a", b"1"), (None, b"2"), (b"c", b"3"), (None, b"4")], codec)
    codes = [e.code() if e is not None else None for e in errors]
    assert codes == [KafkaError._INVALID_DIFFERENT_RECORD, KafkaError.INVALID_RECORD,
                     KafkaError._INVALID_DIFFERENT_RECORD, KafkaError.INVALID_RECORD]
    # nothing of the refused batch was written; a batch with keys only is accepted
    assert _produce_batch(broker, topic, [(b"a", b"1"), (b"b", b"2")], codec) == [None, None]


def test_record_errors_on_the_wire(broker) -> None:
    _create(broker, "compacted-wire", {"cleanup.policy": "compact"})
    _create(broker, "old-ts-wire", {"message.timestamp.before.max.ms": "3600000"})
    keyless = build_record_batch([(b"k", b"v", ()), (None, b"v", ())], compression=CODECS["lz4"])
    now = int(time.time() * 1000)
    old = build_record_batch([(None, b"a", ()), (None, b"b", ()), (None, b"c", ())],
                             timestamps=[now, now - 7_200_000, now])

    def produce(topic: str, records: bytes) -> ProduceRequest:
        return ProduceRequest(transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=5), topic_data=(
            TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=0, records=records),)),))

    with WireClient(broker.bootstrap) as c:
        r1 = c.request(produce("compacted-wire", keyless)).responses[0].partition_responses[0]
        r2 = c.request(produce("old-ts-wire", old)).responses[0].partition_responses[0]
    assert r1.error_code == ErrorCode.invalid_record
    assert [(e.batch_index, "without key" in (e.batch_index_error_message or "")) for e in r1.record_errors] == [(1, True)]
    assert r1.error_message and "1 record errors" in r1.error_message
    assert r2.error_code == ErrorCode.invalid_timestamp
    assert [e.batch_index for e in r2.record_errors] == [1]
    assert r2.error_message == "One or more records have been rejected due to invalid timestamp"


def _stored_values(broker, topic: str) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"read-{topic}", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        _low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        values: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(values) < high and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                values.append(m.value())
        return values
    finally:
        c.close()


@pytest.mark.parametrize("codec", [None, "gzip"])
def test_kafka_python_batch_with_a_keyless_record_is_refused_whole(broker, codec: str | None) -> None:
    """kafka-python's own batch layout (its record builder, compressed or not): kafka-python reads the
    record errors as the Java client does: the keyless record fails with INVALID_RECORD, the others of the
    batch with a plain KafkaError saying their batch held an invalid record, and none of it is stored."""
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError
    from kafka.errors import KafkaError as KPError

    topic = f"compacted-kp-{codec}"
    _create(broker, topic, {"cleanup.policy": "compact"})
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=500, retries=0, compression_type=codec,
                      acks=1)
    try:
        futures = [p.send(topic, key=k, value=v, partition=0) for k, v in [(b"a", b"1"), (None, b"2"), (b"c", b"3")]]
        p.flush(20)
        failures = []
        for f in futures:
            with pytest.raises(KPError) as e:
                f.get(timeout=10)
            failures.append(e.value)
        assert isinstance(failures[1], InvalidRecordError)
        for other in (failures[0], failures[2]):
            assert not isinstance(other, InvalidRecordError) and "part of a batch" in str(other)
        ok = [p.send(topic, key=k, value=v, partition=0) for k, v in [(b"a", b"4"), (b"b", b"5")]]
        p.flush(20)
        assert [f.get(timeout=10).offset for f in ok] == [0, 1]
    finally:
        p.close(5)
    assert _stored_values(broker, topic) == [b"4", b"5"]


def test_aiokafka_batch_with_a_keyless_record_is_refused_whole(broker) -> None:
    """aiokafka's own batch layout: the batch with a keyless record is refused and none of it stored."""
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError as AIOError

    topic = "compacted-aiokafka"
    _create(broker, topic, {"cleanup.policy": "compact"})

    async def run() -> list[int]:
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=500, acks=1)
        await p.start()
        try:
            batch = p.create_batch()
            for k, v in [(b"a", b"1"), (None, b"2"), (b"c", b"3")]:
                assert batch.append(key=k, value=v, timestamp=None) is not None
            batch.close()
            refused = await p.send_batch(batch, topic, partition=0)
            with pytest.raises(AIOError):  # aiokafka maps INVALID_RECORD (87), which it lacks, to UnknownError
                await asyncio.wait_for(refused, 10)
            sent = [await p.send(topic, key=k, value=v, partition=0) for k, v in [(b"a", b"4"), (b"b", b"5")]]
            return [(await asyncio.wait_for(f, 10)).offset for f in sent]
        finally:
            await p.stop()

    assert asyncio.run(run()) == [0, 1]
    assert _stored_values(broker, topic) == [b"4", b"5"]
