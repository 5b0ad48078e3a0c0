"""The authorizer is asked where Kafka's KafkaApis asks its Authorizer (produce WRITE topic, fetch READ
topic, metadata DESCRIBE topic, create topics CREATE on the cluster, delete topics DELETE, classic groups
READ group, configs DESCRIBE_CONFIGS / ALTER_CONFIGS), and a refusal answers Kafka's *_AUTHORIZATION_FAILED
code."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from kaflite.server.authorizer import AclOperation, ResourceType, Session
from kaflite.server.embedded import EmbeddedBroker


class Recording:
    """Allows everything except WRITE on the topics in `deny_write`, and records every question."""

    def __init__(self, deny_write: set[str]) -> None:
        self.asked: set[tuple[str, str, str]] = set()
        self.deny_write = deny_write
        self.principals: set[str] = set()

    def authorize(self, session: Session, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        self.asked.add((operation.name, resource_type.name, name))
        self.principals.add(session.principal)
        return not (operation is AclOperation.WRITE and name in self.deny_write)


def test_the_handlers_ask_the_authorizer_and_a_refusal_is_kafkas_error(tmp_path: Path) -> None:
    topic, other, denied, group = (f"{n}-{uuid.uuid4().hex[:6]}" for n in ("authz", "made", "denied", "g"))
    recording = Recording({denied})
    with EmbeddedBroker(data_dir=tmp_path) as b:
        b.call(lambda: setattr(b.server.broker, "authorizer", recording))
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1), NewTopic(denied, 1, 1), NewTopic(other, 1, 1)])[topic].result(30)
        producer = ck.Producer({"bootstrap.servers": b.bootstrap})
        errors: dict[str, ck.KafkaError | None] = {}

        def report(err: ck.KafkaError | None, msg: ck.Message) -> None:
            errors[msg.topic()] = err

        producer.produce(topic, b"v", on_delivery=report)
        producer.produce(denied, b"v", on_delivery=report)
        producer.flush(30)
        assert errors[topic] is None
        assert errors[denied] is not None and errors[denied].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
        consumer = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe([topic])
            deadline = time.monotonic() + 60
            msg = None
            while msg is None and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error():
                    msg = None
            assert msg is not None and msg.value() == b"v"
        finally:
            consumer.close()
        admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, other)])[
            ConfigResource(ConfigResource.Type.TOPIC, other)].result(30)
        admin.delete_topics([other])[other].result(30)
    expected = {
        ("CREATE", "CLUSTER", "kafka-cluster"), ("WRITE", "TOPIC", topic), ("WRITE", "TOPIC", denied),
        ("DESCRIBE", "TOPIC", topic), ("READ", "TOPIC", topic), ("READ", "GROUP", group),
        ("DESCRIBE_CONFIGS", "TOPIC", other), ("DELETE", "TOPIC", other),
    }
    assert expected <= recording.asked, expected - recording.asked
    assert recording.principals == {"User:ANONYMOUS"}
