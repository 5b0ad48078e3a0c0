"""confluent-kafka (librdkafka) against the secured listeners: SSL with and without a client certificate,
SASL_PLAINTEXT with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, SASL_SSL; refusals with the client's own error
and nothing written."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from seckit import PLAIN_USERS, SCRAM_USERS, Certs, Secured

pytestmark = pytest.mark.timeout(120)


def hold_connection(producer: Producer) -> None:
    """A produced record: librdkafka may drop its bootstrap connection after Metadata, a produce keeps a
    connection to the broker open."""
    producer.produce("principal-probe", b"x")
    assert producer.flush(20) == 0


def principals(secured: Secured, listener: str) -> set[str]:
    """The principals of the live connections of `listener` (waiting up to 10 s for one: librdkafka may
    be between its bootstrap connection and its broker connection)."""
    import time

    def read() -> set[str]:
        return {c.session.principal for c in secured.broker.server._connections  # noqa: SLF001
                if c.session.listener_name == listener}

    deadline = time.monotonic() + 10
    while not (found := secured.broker.call(read)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def ssl_conf(certs: Certs, with_cert: bool = False, rogue: bool = False) -> dict[str, Any]:
    conf: dict[str, Any] = {"security.protocol": "SSL", "ssl.ca.location": str(certs.ca_file)}
    if with_cert:
        conf["ssl.certificate.location"] = str(certs.rogue_cert if rogue else certs.client_cert)
        conf["ssl.key.location"] = str(certs.rogue_key if rogue else certs.client_key)
    return conf


def sasl_conf(mechanism: str, user: str, password: str, protocol: str = "SASL_PLAINTEXT",
              certs: Certs | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"security.protocol": protocol, "sasl.mechanism": mechanism,
                            "sasl.username": user, "sasl.password": password}
    if certs is not None:
        conf["ssl.ca.location"] = str(certs.ca_file)
    return conf


def produce_consume(bootstrap: str, conf: dict[str, Any], n: int = 5) -> list[bytes]:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, **conf})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(timeout=30)  # an admin call
    producer = Producer({"bootstrap.servers": bootstrap, **conf})
    for i in range(n):
        producer.produce(topic, f"v{i}".encode(), key=f"k{i}".encode())
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
        consumer.commit(asynchronous=False)  # a group coordinator call over the secured listener
    finally:
        consumer.close()
    return sorted(got)


EXPECTED = sorted(f"v{i}".encode() for i in range(5))


def test_ssl_without_client_certificate_is_anonymous(secured: Secured, certs: Certs) -> None:
    assert produce_consume(secured.addr("SSL"), ssl_conf(certs)) == EXPECTED
    producer = Producer({"bootstrap.servers": secured.addr("SSL"), **ssl_conf(certs)})
    hold_connection(producer)
    assert principals(secured, "SSL") == {"User:ANONYMOUS"}


def test_ssl_client_certificate_gives_the_mapped_subject_as_principal(secured: Secured, certs: Certs) -> None:
    conf = ssl_conf(certs, with_cert=True)
    assert produce_consume(secured.addr("MTLS"), conf) == EXPECTED
    producer = Producer({"bootstrap.servers": secured.addr("MTLS"), **conf})
    hold_connection(producer)
    # the full DN "CN=client,OU=apps,O=kaflite" mapped by the listener's ssl.principal.mapping.rules
    # (without rules the principal is the full DN: test_certs_cli.py)
    assert principals(secured, "MTLS") == {"User:client"}


@pytest.mark.parametrize("mechanism,user,password", [
    ("PLAIN", "alice", PLAIN_USERS["alice"]),
    ("PLAIN", "bob", PLAIN_USERS["bob"]),  # quotes and a backslash, escaped in the JAAS value
    ("SCRAM-SHA-256", "carol", SCRAM_USERS["carol"]),
    ("SCRAM-SHA-512", "dave", SCRAM_USERS["dave"]),
])
def test_sasl_plaintext(secured: Secured, mechanism: str, user: str, password: str) -> None:
    conf = sasl_conf(mechanism, user, password)
    assert produce_consume(secured.addr("SASL_PLAINTEXT"), conf) == EXPECTED
    producer = Producer({"bootstrap.servers": secured.addr("SASL_PLAINTEXT"), **conf})
    hold_connection(producer)
    assert f"User:{user}" in principals(secured, "SASL_PLAINTEXT")


@pytest.mark.parametrize("mechanism,user,password", [
    ("PLAIN", "alice", PLAIN_USERS["alice"]),
    ("SCRAM-SHA-512", "carol", SCRAM_USERS["carol"]),
])
def test_sasl_ssl(secured: Secured, certs: Certs, mechanism: str, user: str, password: str) -> None:
    conf = sasl_conf(mechanism, user, password, "SASL_SSL", certs)
    assert produce_consume(secured.addr("SASL_SSL"), conf) == EXPECTED


def _refused(bootstrap: str, conf: dict[str, Any], topic: str) -> str:
    """Produce one record with a client that must be refused; the error librdkafka reports."""
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 1500,
                         "error_cb": lambda e: errors.append(str(e)), **conf})
    producer.produce(topic, b"must not be written")
    producer.flush(3)
    deadline = time.monotonic() + 10  # a loaded machine: wait for librdkafka's error callback
    while not errors and time.monotonic() < deadline:
        producer.poll(0.1)
    with pytest.raises(KafkaException):
        AdminClient({"bootstrap.servers": bootstrap, **conf}).list_topics(timeout=2)
    return " ".join(errors)


def _topic_end(secured: Secured, topic: str) -> int | None:
    """Records in partition 0 of `topic` (None: no such topic) read over PLAINTEXT."""
    consumer = Consumer({"bootstrap.servers": secured.addr("PLAINTEXT"), "group.id": "probe"})
    try:
        md = consumer.list_topics(topic, timeout=10)
        if md.topics[topic].error is not None:
            return None
        from confluent_kafka import TopicPartition

        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        consumer.close()


@pytest.mark.parametrize("case", ["wrong-password", "unknown-user", "scram-wrong-password", "scram-unknown-user"])
def test_sasl_refusals(secured: Secured, case: str) -> None:
    topic = f"refused-{case}"
    mechanism = "PLAIN" if case.startswith(("wrong", "unknown")) else "SCRAM-SHA-256"
    user = "nobody" if "unknown" in case else ("alice" if mechanism == "PLAIN" else "carol")
    errors = _refused(secured.addr("SASL_PLAINTEXT"), sasl_conf(mechanism, user, "wrong"), topic)
    assert "Authentication failed" in errors or "SASL authentication error" in errors, errors
    assert _topic_end(secured, topic) in (None, 0)


@pytest.mark.parametrize("case", ["no-certificate", "untrusted-certificate"])
def test_mtls_refusals(secured: Secured, certs: Certs, case: str) -> None:
    topic = f"refused-{case}"
    conf = ssl_conf(certs, with_cert=case != "no-certificate", rogue=True)
    errors = _refused(secured.addr("MTLS"), conf, topic)
    # with TLS 1.3 the client finishes its handshake before the broker checks its certificate: librdkafka
    # sees the broker close the connection ("SSL connection closed by peer" in its log) and reports every
    # broker down
    assert "SSL" in errors or "_ALL_BROKERS_DOWN" in errors, errors
    assert _topic_end(secured, topic) in (None, 0)


def test_client_refuses_a_broker_it_does_not_trust(secured: Secured, certs: Certs) -> None:
    conf = {"security.protocol": "SSL", "ssl.ca.location": str(certs.rogue_ca_file)}
    errors = _refused(secured.addr("SSL"), conf, "refused-untrusted-broker")
    assert "certificate verify failed" in errors, errors
