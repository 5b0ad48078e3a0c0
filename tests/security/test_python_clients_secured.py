"""kafka-python and aiokafka against the secured listeners: SSL with and without a client certificate,
SASL_PLAINTEXT with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, SASL_SSL: produce, consume in a group and an
admin call; a wrong password, an unknown user and an untrusted certificate refused with the client's
ordinary error and nothing written."""

from __future__ import annotations

import asyncio
import ssl
import uuid
from typing import Any

import pytest
from seckit import PLAIN_USERS, SCRAM_USERS, Certs, Secured

pytestmark = pytest.mark.timeout(120)

CASES = [
    ("SSL", None, None, None),
    ("MTLS", None, None, None),
    ("SASL_PLAINTEXT", "PLAIN", "alice", PLAIN_USERS["alice"]),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", "carol", SCRAM_USERS["carol"]),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512", "dave", SCRAM_USERS["dave"]),
    ("SASL_SSL", "SCRAM-SHA-256", "dave", SCRAM_USERS["dave"]),
]


def kp_conf(certs: Certs, listener: str, mechanism: str | None, user: str | None, password: str | None,
            rogue: bool = False) -> dict[str, Any]:
    protocol = {"MTLS": "SSL"}.get(listener, listener)
    conf: dict[str, Any] = {"security_protocol": protocol}
    if "SSL" in protocol:
        conf.update(ssl_cafile=str(certs.ca_file), ssl_check_hostname=True)
    if listener == "MTLS":
        conf.update(ssl_certfile=str(certs.rogue_cert if rogue else certs.client_cert),
                    ssl_keyfile=str(certs.rogue_key if rogue else certs.client_key))
    if mechanism:
        conf.update(sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
    return conf


def _end_offset(secured: Secured, topic: str) -> int | None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": secured.addr("PLAINTEXT"), "group.id": "probe"})
    try:
        if consumer.list_topics(topic, timeout=10).topics[topic].error is not None:
            return None
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        consumer.close()


@pytest.mark.parametrize("listener,mechanism,user,password", CASES)
def test_kafka_python(secured: Secured, certs: Certs, listener: str, mechanism: str | None, user: str | None,
                      password: str | None) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic

    conf = kp_conf(certs, listener, mechanism, user, password)
    bootstrap = secured.addr(listener)
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **conf)
    admin.create_topics([NewTopic(topic, 1, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, **conf)
    for i in range(3):
        producer.send(topic, f"v{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"g-{topic}", auto_offset_reset="earliest",
                             consumer_timeout_ms=15000, **conf)
    got = []
    for msg in consumer:
        got.append(msg.value)
        if len(got) == 3:
            break
    consumer.commit()
    consumer.close()
    assert sorted(got) == [b"v0", b"v1", b"v2"]


@pytest.mark.parametrize("case", ["unknown-user", "wrong-password", "scram-wrong-password"])
def test_kafka_python_refused(secured: Secured, certs: Certs, case: str, caplog: pytest.LogCaptureFixture) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    mechanism = "SCRAM-SHA-512" if case.startswith("scram") else "PLAIN"
    user = "nobody" if case == "unknown-user" else "alice" if mechanism == "PLAIN" else "carol"
    conf = kp_conf(certs, "SASL_PLAINTEXT", mechanism, user, "wrong")
    # kafka-python 3 retries its bootstrap until bootstrap_timeout_ms, logging the broker's answer
    with caplog.at_level("WARNING", logger="kafka"), pytest.raises(KafkaError):
        producer = KafkaProducer(bootstrap_servers=secured.addr("SASL_PLAINTEXT"), max_block_ms=2000,
                                 bootstrap_timeout_ms=1500, **conf)
        producer.send(f"kp-{case}", b"must not be written").get(timeout=5)
    assert "SaslAuthenticationFailedError" in caplog.text
    assert _end_offset(secured, f"kp-{case}") in (None, 0)


def test_kafka_python_untrusted_certificate_refused(secured: Secured, certs: Certs) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    conf = kp_conf(certs, "MTLS", None, None, None, rogue=True)
    with pytest.raises(KafkaError):
        producer = KafkaProducer(bootstrap_servers=secured.addr("MTLS"), max_block_ms=2000,
                                 bootstrap_timeout_ms=1500, **conf)
        producer.send("kp-rogue", b"must not be written").get(timeout=5)
    assert _end_offset(secured, "kp-rogue") in (None, 0)


def aio_conf(certs: Certs, listener: str, mechanism: str | None, user: str | None, password: str | None,
             rogue: bool = False) -> dict[str, Any]:
    from aiokafka.helpers import create_ssl_context

    protocol = {"MTLS": "SSL"}.get(listener, listener)
    conf: dict[str, Any] = {"security_protocol": protocol}
    if "SSL" in protocol:
        if listener == "MTLS":
            conf["ssl_context"] = create_ssl_context(
                cafile=str(certs.ca_file), certfile=str(certs.rogue_cert if rogue else certs.client_cert),
                keyfile=str(certs.rogue_key if rogue else certs.client_key))
        else:
            conf["ssl_context"] = create_ssl_context(cafile=str(certs.ca_file))
    if mechanism:
        conf.update(sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
    return conf


@pytest.mark.parametrize("listener,mechanism,user,password", CASES)
def test_aiokafka(secured: Secured, certs: Certs, listener: str, mechanism: str | None, user: str | None,
                  password: str | None) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    bootstrap = secured.addr(listener)
    topic = f"aio-{uuid.uuid4().hex[:8]}"

    async def run() -> list[bytes]:
        conf = aio_conf(certs, listener, mechanism, user, password)
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **conf)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, 1, 1)])
        finally:
            await admin.close()
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **conf)
        await producer.start()
        try:
            for i in range(3):
                await producer.send_and_wait(topic, f"v{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"g-{topic}",
                                    auto_offset_reset="earliest", **conf)
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(20):
                async for msg in consumer:
                    got.append(msg.value)
                    if len(got) == 3:
                        break
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    assert sorted(asyncio.run(run())) == [b"v0", b"v1", b"v2"]


@pytest.mark.parametrize("case", ["wrong-password", "unknown-user", "scram-wrong-password", "untrusted-certificate"])
def test_aiokafka_refused(secured: Secured, certs: Certs, case: str) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaConnectionError, KafkaError

    if case == "untrusted-certificate":
        listener, conf = "MTLS", aio_conf(certs, "MTLS", None, None, None, rogue=True)
    else:
        mechanism = "SCRAM-SHA-256" if case.startswith("scram") else "PLAIN"
        user = "nobody" if case == "unknown-user" else "alice" if mechanism == "PLAIN" else "carol"
        listener, conf = "SASL_PLAINTEXT", aio_conf(certs, "SASL_PLAINTEXT", mechanism, user, "wrong")

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=secured.addr(listener), request_timeout_ms=3000, **conf)
        try:
            await producer.start()
            await producer.send_and_wait(f"aio-{case}", b"must not be written")
        finally:
            await producer.stop()

    with pytest.raises((KafkaError, KafkaConnectionError, ssl.SSLError, ConnectionError)) as err:
        asyncio.run(run())
    if case != "untrusted-certificate":
        assert "Authentication failed" in str(err.value) or "SaslAuthenticationFailed" in repr(err.value) or \
            isinstance(err.value, KafkaConnectionError), repr(err.value)
    assert _end_offset(secured, f"aio-{case}") in (None, 0)
