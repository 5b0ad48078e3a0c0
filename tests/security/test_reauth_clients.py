"""KIP-368 with real clients on a SASL_PLAINTEXT listener whose sessions last 2.5 s
(`connections.max.reauth.ms`): librdkafka and kafka-python 3 re-authenticate on the same connection and
keep producing; aiokafka, which has no KIP-368, is disconnected on its first request after its session's
end, reconnects, logs in again and keeps producing; an OAUTHBEARER token's expiry ends a session the same
way."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from seckit import Secured, jaas_plain

from kaflite.server.embedded import EmbeddedBroker

pytestmark = pytest.mark.timeout(120)

SESSION_MS = 2500  # librdkafka and kafka-python re-authenticate at ~90%: 250 ms of margin on a busy machine
OAUTH_JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"


@pytest.fixture(scope="module")
def reauth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas_plain({"alice": "alice-secret"}),
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
        # per listener and mechanism, as Kafka: PLAIN sessions last 2.5 s, OAUTHBEARER ones the token's life
        "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": str(SESSION_MS),
    }
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("reauth"), overrides=overrides) as b:
        yield Secured(b, {li.name: li.port for li in b.server.bound})


def end_offset(reauth: Secured, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": reauth.addr("PLAINTEXT"), "group.id": "probe"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        consumer.close()


def lines(caplog: pytest.LogCaptureFixture, text: str) -> int:
    return sum(text in r.getMessage() for r in caplog.records)


def test_confluent_reauthenticates_on_the_same_connection(reauth: Secured, caplog: pytest.LogCaptureFixture) -> None:
    topic = f"ra-{uuid.uuid4().hex[:8]}"
    conf = {"bootstrap.servers": reauth.addr("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret",
            "linger.ms": 0}
    producer = Producer(conf)
    with caplog.at_level(logging.DEBUG, logger="kaflite"):
        sent = 0
        deadline = time.monotonic() + 2.4 * SESSION_MS / 1000
        while time.monotonic() < deadline:
            producer.produce(topic, f"v{sent}".encode())
            sent += 1
            assert producer.flush(10) == 0
            time.sleep(0.1)
    assert end_offset(reauth, topic) == sent
    assert lines(caplog, "re-authenticated as User:alice") >= 2
    assert lines(caplog, "SASL session expired") == 0
    assert "alice-secret" not in caplog.text


def test_kafka_python_reauthenticates_on_the_same_connection(reauth: Secured, caplog: pytest.LogCaptureFixture) -> None:
    from kafka import KafkaProducer

    topic = f"rk-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(bootstrap_servers=reauth.addr("SASL_PLAINTEXT"), security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="alice-secret",
                             linger_ms=0)
    sent = 0
    with caplog.at_level(logging.DEBUG, logger="kaflite"):
        deadline = time.monotonic() + 2.4 * SESSION_MS / 1000
        while time.monotonic() < deadline:
            producer.send(topic, f"v{sent}".encode()).get(timeout=20)
            sent += 1
            time.sleep(0.1)
    producer.close()
    assert end_offset(reauth, topic) == sent
    assert lines(caplog, "re-authenticated as User:alice") >= 2
    assert lines(caplog, "SASL session expired") == 0


def test_aiokafka_without_reauthentication_is_disconnected_and_reconnects(
        reauth: Secured, caplog: pytest.LogCaptureFixture) -> None:
    """aiokafka has no KIP-368: its first request after the session's end closes the connection, unserved;
    it reconnects, logs in again and sends the request again."""
    from aiokafka import AIOKafkaProducer

    topic = f"rk-{uuid.uuid4().hex[:8]}"

    async def run() -> int:
        producer = AIOKafkaProducer(bootstrap_servers=reauth.addr("SASL_PLAINTEXT"),
                                    security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                                    sasl_plain_username="alice", sasl_plain_password="alice-secret")
        await producer.start()
        sent = 0
        try:
            deadline = time.monotonic() + 2 * SESSION_MS / 1000
            while time.monotonic() < deadline:
                await producer.send_and_wait(topic, f"v{sent}".encode())
                sent += 1
                await asyncio.sleep(0.2)
        finally:
            await producer.stop()
        return sent

    with caplog.at_level(logging.DEBUG, logger="kaflite"):
        sent = asyncio.run(run())
    assert end_offset(reauth, topic) == sent  # every record written once: an expired request is not served
    assert lines(caplog, "SASL session expired") >= 1
    assert lines(caplog, "authenticated as User:alice") >= 2
    assert lines(caplog, "re-authenticated") == 0


def test_an_oauth_tokens_expiry_ends_the_session(reauth: Secured, caplog: pytest.LogCaptureFixture) -> None:
    """librdkafka's unsecured token lives `lifeSeconds`; the session ends with it (no
    connections.max.reauth.ms for OAUTHBEARER here), and librdkafka re-authenticates with a fresh token."""
    topic = f"ro-{uuid.uuid4().hex[:8]}"
    conf = {"bootstrap.servers": reauth.addr("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": "principal=olivia lifeSeconds=5", "linger.ms": 0}
    producer = Producer(conf)
    with caplog.at_level(logging.DEBUG, logger="kaflite"):
        sent = 0
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            producer.produce(topic, f"v{sent}".encode())
            sent += 1
            assert producer.flush(10) == 0
            time.sleep(0.1)
    assert end_offset(reauth, topic) == sent
    assert lines(caplog, "re-authenticated as User:olivia") >= 1
    assert lines(caplog, "SASL session expired") == 0
