"""Transactions over every secured listener (issue 26's acceptance): a transactional producer of each client
commits and aborts through SSL, SASL_PLAINTEXT (SCRAM-SHA-256) and SASL_SSL (SCRAM-SHA-512), and a
read_committed consumer on the same listener reads the committed records only. The coordinators' and the
markers' paths are the plaintext ones; what is tested is that InitProducerId, AddPartitionsToTxn, EndTxn
and the read_committed fetch are served to authenticated sessions as to plaintext ones."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from kaflite.server.embedded import EmbeddedBroker

pytestmark = pytest.mark.timeout(180)

SECURED = {"ssl": "PLAIN", "sasl_plaintext": "SCRAM-SHA-256", "sasl_ssl": "SCRAM-SHA-512"}


@pytest.fixture(scope="module", params=sorted(SECURED))
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    security = str(request.param)
    data: Path = tmp_path_factory.mktemp(f"txn-{security}")
    with EmbeddedBroker(data_dir=data, security=security, sasl_mechanism=SECURED[security]) as b:
        yield b


def read_committed(conf: dict[str, Any], topic: str, want: int) -> list[bytes]:
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        for _ in range(300):  # bounded: at most ~60 s
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
            if len(got) >= want:
                for _ in range(5):  # nothing aborted arrives after the committed ones either
                    extra = consumer.poll(0.2)
                    if extra is not None and extra.error() is None:
                        got.append(extra.value())
                break
    finally:
        consumer.close()
    return sorted(got)


def test_confluent_kafka_commits_and_aborts(broker: EmbeddedBroker) -> None:
    conf = broker.confluent_config()
    topic = f"txn-ck-{uuid.uuid4().hex[:8]}"
    producer = Producer({**conf, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, f"ok{i}".encode())
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, b"aborted")
    producer.flush(30)
    producer.abort_transaction(30)
    assert read_committed(conf, topic, 3) == [b"ok0", b"ok1", b"ok2"]


def test_kafka_python_commits_and_aborts(broker: EmbeddedBroker) -> None:
    from kafka import KafkaProducer

    topic = f"txn-kp-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(**broker.kafka_python_config(), transactional_id=f"tx-{topic}")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(2):
            producer.send(topic, f"kp{i}".encode())
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"aborted").get(timeout=30)
        producer.abort_transaction()
    finally:
        producer.close(timeout=10)
    assert read_committed(broker.confluent_config(), topic, 2) == [b"kp0", b"kp1"]


def test_aiokafka_commits_and_aborts(broker: EmbeddedBroker) -> None:
    from aiokafka import AIOKafkaProducer

    topic = f"txn-ak-{uuid.uuid4().hex[:8]}"

    async def run() -> None:
        producer = AIOKafkaProducer(**broker.aiokafka_config(), transactional_id=f"tx-{topic}")
        await producer.start()
        try:
            async with asyncio.timeout(60):
                async with producer.transaction():
                    await producer.send_and_wait(topic, b"ak0")
                await producer.begin_transaction()
                await producer.send_and_wait(topic, b"aborted")
                await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(run())
    assert read_committed(broker.confluent_config(), topic, 1) == [b"ak0"]
