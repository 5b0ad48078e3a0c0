"""The test kit: `EmbeddedBroker(security=...)` and the `kaflite_secured_broker` fixture of the pytest plugin
give a secured broker and ready configurations for confluent-kafka, kafka-python and aiokafka
(server/security/testkit.py)."""

from __future__ import annotations

import asyncio
import stat
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from kaflite.server.embedded import EmbeddedBroker

pytestmark = pytest.mark.timeout(120)
SECURITIES = ["ssl", "sasl_plaintext", "sasl_ssl"]


def confluent_round_trip(conf: dict[str, Any]) -> list[bytes]:
    topic = f"kit-{uuid.uuid4().hex[:8]}"
    producer = Producer(conf)
    for i in range(3):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        for _ in range(150):
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
                if len(got) == 3:
                    break
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return sorted(got)


EXPECTED = [b"v0", b"v1", b"v2"]


@pytest.mark.parametrize("kaflite_secured_broker", SECURITIES, indirect=True)
def test_confluent_config_works_and_the_listener_is_secured(kaflite_secured_broker: EmbeddedBroker) -> None:
    broker = kaflite_secured_broker
    conf = broker.confluent_config()
    assert conf["security.protocol"] == broker.security_protocol == broker.server.bound[0].security_protocol
    assert confluent_round_trip(conf) == EXPECTED
    # a PLAINTEXT client cannot talk to it
    with pytest.raises(KafkaException):
        AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 1500}).list_topics(timeout=2)


@pytest.mark.parametrize("kaflite_secured_broker", SECURITIES, indirect=True)
def test_kafka_python_config_works(kaflite_secured_broker: EmbeddedBroker) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    conf = kaflite_secured_broker.kafka_python_config(user="bob")
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(**conf)
    for i in range(3):
        producer.send(topic, f"v{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest", consumer_timeout_ms=15000,
                             **conf)
    got = [m.value for _, m in zip(range(3), consumer, strict=False)]
    consumer.close()
    assert sorted(got) == EXPECTED


@pytest.mark.parametrize("kaflite_secured_broker", SECURITIES, indirect=True)
def test_aiokafka_config_works(kaflite_secured_broker: EmbeddedBroker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> list[bytes]:
        conf = kaflite_secured_broker.aiokafka_config()
        topic = f"ak-{uuid.uuid4().hex[:8]}"
        producer = AIOKafkaProducer(**conf)
        await producer.start()
        try:
            for i in range(3):
                await producer.send_and_wait(topic, f"v{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest", **conf)
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                async for msg in consumer:
                    assert msg.value is not None
                    got.append(msg.value)
                    if len(got) == 3:
                        break
        finally:
            await consumer.stop()
        return sorted(got)

    assert asyncio.run(run()) == EXPECTED


def test_scram_users_and_a_wrong_password(tmp_path: Path) -> None:
    with EmbeddedBroker(data_dir=tmp_path, security="sasl_plaintext", users={"carol": "c-secret"},
                        sasl_mechanism="SCRAM-SHA-256",
                        overrides={"connection.failed.authentication.delay.ms": "10"}) as broker:
        conf = broker.confluent_config()
        assert (conf["sasl.mechanism"], conf["sasl.username"]) == ("SCRAM-SHA-256", "carol")
        assert confluent_round_trip(conf) == EXPECTED
        # every user has both SCRAM credentials
        assert confluent_round_trip({**conf, "sasl.mechanism": "SCRAM-SHA-512"}) == EXPECTED
        errors: list[str] = []
        admin = AdminClient({**conf, "sasl.password": "wrong", "error_cb": lambda e: errors.append(str(e))})
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=2)
        admin.poll(0.5)
        assert "SASL authentication error" in " ".join(errors)


def test_client_certificate_required(tmp_path: Path) -> None:
    with EmbeddedBroker(data_dir=tmp_path / "d", security="ssl", client_auth=True) as broker:
        conf = broker.confluent_config()
        assert confluent_round_trip(conf) == EXPECTED
        principals = broker.call(lambda: {c.session.principal for c in broker.server._connections})  # noqa: SLF001
        assert "User:CN=alice" in principals
        kit = broker.kit
        assert kit is not None and kit.dir is not None
        assert stat.S_IMODE(kit.client_key.stat().st_mode) == 0o600
        certs = kit.dir
        without = {k: v for k, v in conf.items() if not k.startswith(("ssl.certificate", "ssl.key"))}
        with pytest.raises(KafkaException):
            AdminClient(without).list_topics(timeout=3)
    assert not certs.exists()  # removed by stop()


def test_plaintext_default_configs_and_bad_arguments(tmp_path: Path) -> None:
    with EmbeddedBroker(data_dir=tmp_path) as broker:
        assert broker.confluent_config() == {"bootstrap.servers": broker.bootstrap}
        assert broker.kafka_python_config() == {"bootstrap_servers": broker.bootstrap}
        assert broker.ca_file is None and broker.security_protocol == "PLAINTEXT"
    with pytest.raises(ValueError, match="security must be one of"):
        EmbeddedBroker(security="tls")
    with pytest.raises(ValueError, match="sasl_mechanism"):
        EmbeddedBroker(security="sasl_ssl", sasl_mechanism="GSSAPI")
    with pytest.raises(KeyError, match="mallory"):
        EmbeddedBroker(security="sasl_ssl").kit.confluent("x:1", user="mallory")  # type: ignore[union-attr]
