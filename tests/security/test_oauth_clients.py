"""OAUTHBEARER with real clients: librdkafka's unsecured token (`sasl.oauthbearer.config=principal=...`) on
a listener with Kafka's unsecured validator, and signed JWTs (confluent-kafka's `oauth_cb`, kafka-python's
and aiokafka's `sasl_oauth_token_provider`) on a listener validating them against a JWKS file. Refused:
an expired token, a wrong audience or issuer, a bad signature, an unknown key id, each with the client's
ordinary authentication error, nothing written and nothing of the token logged."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from oauthkit import Issuer, write_jwks
from seckit import Secured

from kaflite.server.embedded import EmbeddedBroker

pytestmark = pytest.mark.timeout(120)

SIGNED = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
OAUTH_JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"


@pytest.fixture(scope="module")
def idp() -> Issuer:
    return Issuer.new("k1")


@pytest.fixture(scope="module")
def oauth(idp: Issuer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    d = tmp_path_factory.mktemp("oauth")
    jwks = write_jwks(d / "jwks.json", idp)
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,OAUTH://127.0.0.1:0,JWT://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OAUTH:SASL_PLAINTEXT,JWT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.oauth.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
        "listener.name.jwt.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
        "listener.name.jwt.oauthbearer.sasl.server.callback.handler.class": SIGNED,
        "listener.name.jwt.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
        "listener.name.jwt.sasl.oauthbearer.expected.audience": "kafka",
        "listener.name.jwt.sasl.oauthbearer.expected.issuer": "https://idp.test",
        "connection.failed.authentication.delay.ms": "50",
    }
    with EmbeddedBroker(data_dir=d / "data", overrides=overrides) as b:
        yield Secured(b, {li.name: li.port for li in b.server.bound})


def principals(oauth: Secured, listener: str) -> set[str]:
    def read() -> set[str]:
        return {c.session.principal for c in oauth.broker.server._connections  # noqa: SLF001
                if c.session.listener_name == listener}

    deadline = time.monotonic() + 10
    while not (found := oauth.broker.call(read)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def end_offset(oauth: Secured, topic: str) -> int | None:
    consumer = Consumer({"bootstrap.servers": oauth.addr("PLAINTEXT"), "group.id": "probe"})
    try:
        if consumer.list_topics(topic, timeout=10).topics[topic].error is not None:
            return None
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        consumer.close()


def signed_conf(token: str) -> dict[str, Any]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            # librdkafka takes the token as given; its expiry for the client is an hour away
            "oauth_cb": lambda _config: (token, time.time() + 3600)}


def produce_consume(bootstrap: str, conf: dict[str, Any], n: int = 3) -> list[bytes]:
    topic = f"o-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": bootstrap, **conf})
    for i in range(n):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                         **conf})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        for _ in range(200):
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
                if len(got) == n:
                    break
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return sorted(got)


EXPECTED = [b"v0", b"v1", b"v2"]


def test_confluent_unsecured_token(oauth: Secured) -> None:
    conf = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": "principal=alice scope=produce extension_traceId=42"}
    assert produce_consume(oauth.addr("OAUTH"), conf) == EXPECTED
    producer = Producer({"bootstrap.servers": oauth.addr("OAUTH"), **conf})
    producer.produce("oauth-probe", b"x")
    assert producer.flush(20) == 0
    assert principals(oauth, "OAUTH") == {"User:alice"}


def test_confluent_signed_jwt(oauth: Secured, idp: Issuer) -> None:
    assert produce_consume(oauth.addr("JWT"), signed_conf(idp.sign("svc-orders"))) == EXPECTED
    producer = Producer({"bootstrap.servers": oauth.addr("JWT"), **signed_conf(idp.sign("svc-orders"))})
    producer.produce("oauth-probe", b"x")
    assert producer.flush(20) == 0
    assert principals(oauth, "JWT") == {"User:svc-orders"}


@functools.cache
def _rogues() -> tuple[Issuer, Issuer]:
    return Issuer.new("k1"), Issuer.new("k9")


def refused_tokens(idp: Issuer) -> dict[str, str]:
    same_kid, unknown_kid = _rogues()  # the first has the trusted key's id and another key: a bad signature
    return {
        "expired": idp.sign(now=time.time() - 3600 - 60),
        "wrong-audience": idp.sign(aud="other"),
        "wrong-issuer": idp.sign(iss="https://evil.test"),
        "bad-signature": same_kid.sign(),
        "unknown-kid": unknown_kid.sign(),
    }


CASES = ["expired", "wrong-audience", "wrong-issuer", "bad-signature", "unknown-kid"]


@pytest.mark.parametrize("case", CASES)
def test_confluent_refused(oauth: Secured, idp: Issuer, case: str, caplog: pytest.LogCaptureFixture) -> None:
    token = refused_tokens(idp)[case]
    topic = f"refused-{case}"
    errors: list[str] = []
    with caplog.at_level(logging.DEBUG, logger="kaflite"):
        producer = Producer({"bootstrap.servers": oauth.addr("JWT"), "message.timeout.ms": 1500,
                             "error_cb": lambda e: errors.append(str(e)), **signed_conf(token)})
        producer.produce(topic, b"must not be written")
        deadline = time.monotonic() + 10
        while not errors and time.monotonic() < deadline:
            producer.poll(0.1)
        producer.purge()
    assert "SASL authentication error" in " ".join(errors) and "invalid_token" in " ".join(errors)
    assert end_offset(oauth, topic) in (None, 0)
    assert token not in caplog.text and token.split(".")[1] not in caplog.text


def test_kafka_python_signed_and_refused(oauth: Secured, idp: Issuer, caplog: pytest.LogCaptureFixture) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import KafkaError
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        def __init__(self, token: str) -> None:
            self._token = token

        def token(self) -> str:
            return self._token

        def extensions(self) -> dict[str, str]:
            return {"traceId": "7"}

    def conf(token: str) -> dict[str, Any]:
        return {"bootstrap_servers": oauth.addr("JWT"), "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": Provider(token)}

    topic = f"kp-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(**conf(idp.sign("kp-user")))
    for i in range(3):
        producer.send(topic, f"v{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest", consumer_timeout_ms=15000,
                             **conf(idp.sign("kp-user")))
    got = [m.value for _, m in zip(range(3), consumer, strict=False)]
    consumer.close()
    assert sorted(got) == EXPECTED

    expired = refused_tokens(idp)["expired"]
    with caplog.at_level("WARNING", logger="kafka"), pytest.raises(KafkaError):
        producer = KafkaProducer(max_block_ms=2000, bootstrap_timeout_ms=1500, **conf(expired))
        producer.send("kp-expired", b"must not be written").get(timeout=5)
    assert "SaslAuthenticationFailedError" in caplog.text
    assert end_offset(oauth, "kp-expired") in (None, 0)


def test_aiokafka_signed_and_refused(oauth: Secured, idp: Issuer) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider
    from aiokafka.errors import KafkaConnectionError, KafkaError

    class Provider(AbstractTokenProvider):
        def __init__(self, token: str) -> None:
            self._token = token

        async def token(self) -> str:
            return self._token

    def conf(token: str) -> dict[str, Any]:
        return {"bootstrap_servers": oauth.addr("JWT"), "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": Provider(token)}

    async def run() -> list[bytes]:
        topic = f"ak-{uuid.uuid4().hex[:8]}"
        producer = AIOKafkaProducer(**conf(idp.sign("ak-user")))
        await producer.start()
        try:
            for i in range(3):
                await producer.send_and_wait(topic, f"v{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest",
                                    **conf(idp.sign("ak-user")))
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
        bad = AIOKafkaProducer(**conf(refused_tokens(idp)["wrong-audience"]))
        with pytest.raises((KafkaError, KafkaConnectionError)):
            await bad.start()
        await bad.stop()
        return sorted(got)

    assert asyncio.run(run()) == EXPECTED


def test_signed_listener_without_a_readable_jwks_refuses_start_up(tmp_path: Path) -> None:
    from kaflite.server.config import ConfigError

    overrides = {"listeners": "JWT://127.0.0.1:0", "listener.security.protocol.map": "JWT:SASL_PLAINTEXT",
                 "sasl.enabled.mechanisms": "OAUTHBEARER",
                 "sasl.server.callback.handler.class": SIGNED,
                 "sasl.oauthbearer.jwks.endpoint.url": (tmp_path / "missing.json").as_uri()}
    with pytest.raises(ConfigError, match="sasl.oauthbearer.jwks.endpoint.url"):
        with EmbeddedBroker(data_dir=tmp_path / "data", overrides=overrides):
            pass
    del overrides["sasl.oauthbearer.jwks.endpoint.url"]
    with pytest.raises(ConfigError, match="sasl.oauthbearer.jwks.endpoint.url"):
        with EmbeddedBroker(data_dir=tmp_path / "data", overrides=overrides):
            pass

