"""The ACL matrix with real clients (confluent-kafka and kafka-python) on one broker over SASL_PLAINTEXT
(PLAIN users): the allowed principal succeeds, the others get Kafka's error; a principal without DESCRIBE
never learns a topic exists; DENY beats ALLOW; PREFIXED and `*`; host rules; the ACL APIs themselves."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from kaflite.server.embedded import EmbeddedBroker

pytestmark = pytest.mark.timeout(120)

USERS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}
ANY_HOST = "*"
_ADMINS: dict[tuple[str, str], Any] = {}  # one AdminClient per (bootstrap, user)


def _jaas(users: dict[str, str]) -> str:
    opts = " ".join(f'user_{u}="{p}"' for u, p in users.items())
    return f'org.apache.kafka.common.security.plain.PlainLoginModule required {opts};'


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    overrides = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": _jaas(USERS),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
    }
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("acl"), overrides=overrides) as b:
        yield b
        _ADMINS.clear()  # close the admin clients before the broker goes


def conf(broker: EmbeddedBroker, user: str) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user]}


def name(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def admin(broker: EmbeddedBroker, user: str = "admin") -> AdminClient:
    """One client per user, kept: a librdkafka handle dropped before its futures complete cancels them."""
    key = (broker.bootstrap, user)
    if key not in _ADMINS:
        _ADMINS[key] = AdminClient(conf(broker, user))
    return _ADMINS[key]


def allow(broker: EmbeddedBroker, *bindings: AclBinding) -> None:
    for f in admin(broker).create_acls(list(bindings)).values():
        f.result(timeout=30)


def acl(rt: ResourceType, res: str, user: str, op: AclOperation, perm: AclPermissionType = AclPermissionType.ALLOW,
        pattern: ResourcePatternType = ResourcePatternType.LITERAL, host: str = ANY_HOST) -> AclBinding:
    principal = user if user.startswith("User:") else f"User:{user}"
    return AclBinding(rt, res, pattern, principal, host, op, perm)


def make_topic(broker: EmbeddedBroker, topic: str) -> None:
    admin(broker).create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)


def produce(broker: EmbeddedBroker, user: str, topic: str) -> KafkaError | None:
    """One record; the delivery error (None: written)."""
    p = Producer({**conf(broker, user), "message.timeout.ms": 10000, "enable.idempotence": False})
    out: list[KafkaError | None] = []
    p.produce(topic, b"v", on_delivery=lambda err, _m: out.append(err))
    p.flush(20)
    assert out, "no delivery report"
    return out[0]


def test_produce_needs_write_on_the_topic(broker: EmbeddedBroker) -> None:
    topic = name("orders-")
    make_topic(broker, topic)
    allow(broker, acl(ResourceType.TOPIC, topic, "alice", AclOperation.WRITE))
    assert produce(broker, "alice", topic) is None
    err = produce(broker, "bob", topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_consume_needs_read_on_the_topic_and_the_group(broker: EmbeddedBroker) -> None:
    topic, group = name("events-"), name("billing-")
    make_topic(broker, topic)
    assert produce(broker, "admin", topic) is None
    allow(broker, acl(ResourceType.TOPIC, topic, "alice", AclOperation.READ),
          acl(ResourceType.GROUP, group, "alice", AclOperation.READ),
          acl(ResourceType.TOPIC, topic, "bob", AclOperation.READ))
    c = Consumer({**conf(broker, "alice"), "group.id": group, "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        deadline, msg = time.monotonic() + 30, None
        while msg is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            msg = m if m is not None and not m.error() else None
        assert msg is not None and msg.value() == b"v"
        c.commit(asynchronous=False)
    finally:
        c.close()
    # bob may read the topic but not use the group: the consumer reports GROUP_AUTHORIZATION_FAILED
    c = Consumer({**conf(broker, "bob"), "group.id": group, "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        deadline, codes = time.monotonic() + 30, []
        while KafkaError.GROUP_AUTHORIZATION_FAILED not in codes and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None:
                assert m.error() is not None, "bob read a record"
                codes.append(m.error().code())
        assert KafkaError.GROUP_AUTHORIZATION_FAILED in codes, codes
    finally:
        c.close()


def test_a_principal_without_describe_never_learns_a_topic_exists(broker: EmbeddedBroker) -> None:
    secret, visible, missing = name("secret-"), name("visible-"), name("missing-")
    make_topic(broker, secret)
    make_topic(broker, visible)
    allow(broker, acl(ResourceType.TOPIC, visible, "bob", AclOperation.DESCRIBE))
    md = admin(broker, "bob").list_topics(timeout=20)
    assert visible in md.topics and secret not in md.topics
    # named: an existing topic and one that does not exist answer the same
    for t in (secret, missing):
        one = admin(broker, "bob").list_topics(topic=t, timeout=20)
        assert one.topics[t].error is not None and one.topics[t].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # producing to it (librdkafka asks Metadata first) fails the same way for both
    for t in (secret, missing):
        err = produce(broker, "bob", t)
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, (t, err)
    assert missing not in admin(broker).list_topics(timeout=20).topics  # nothing auto-created


def test_auto_creation_needs_create(broker: EmbeddedBroker) -> None:
    refused, made = name("auto-no-"), name("auto-yes-")
    allow(broker, acl(ResourceType.TOPIC, refused, "carol", AclOperation.WRITE),
          acl(ResourceType.TOPIC, made, "carol", AclOperation.WRITE),
          acl(ResourceType.TOPIC, made, "carol", AclOperation.CREATE))
    err = produce(broker, "carol", refused)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce(broker, "carol", made) is None
    topics = admin(broker).list_topics(timeout=20).topics
    assert made in topics and refused not in topics


def test_deny_beats_allow(broker: EmbeddedBroker) -> None:
    topic = name("shared-")
    make_topic(broker, topic)
    allow(broker, acl(ResourceType.TOPIC, topic, "User:*", AclOperation.WRITE),
          acl(ResourceType.TOPIC, topic, "bob", AclOperation.WRITE, AclPermissionType.DENY))
    assert produce(broker, "alice", topic) is None
    err = produce(broker, "bob", topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_prefixed_and_wildcard_patterns(broker: EmbeddedBroker) -> None:
    prefix = name("team-") + "."
    inside, outside, anything = prefix + "a", name("other-"), name("any-")
    for t in (inside, outside, anything):
        make_topic(broker, t)
    allow(broker, acl(ResourceType.TOPIC, prefix, "alice", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED))
    assert produce(broker, "alice", inside) is None
    err = produce(broker, "alice", outside)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # `*`: carol may describe every topic
    allow(broker, acl(ResourceType.TOPIC, "*", "carol", AclOperation.DESCRIBE))
    seen = admin(broker, "carol").list_topics(timeout=20).topics
    assert {inside, outside, anything} <= set(seen)


def test_host_rules(broker: EmbeddedBroker) -> None:
    topic = name("hosts-")
    make_topic(broker, topic)
    allow(broker, acl(ResourceType.TOPIC, topic, "alice", AclOperation.WRITE, host="10.9.9.9"))
    err = produce(broker, "alice", topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    allow(broker, acl(ResourceType.TOPIC, topic, "alice", AclOperation.WRITE, host="127.0.0.1"))
    assert produce(broker, "alice", topic) is None


def test_the_acl_apis_need_cluster_alter_and_answer_filters(broker: EmbeddedBroker) -> None:
    topic = name("apis-")
    binding = acl(ResourceType.TOPIC, topic, "bob", AclOperation.READ)
    with pytest.raises(KafkaException) as e:
        admin(broker, "bob").create_acls([binding])[binding].result(timeout=30)
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    allow(broker, binding)
    allow(broker, acl(ResourceType.TOPIC, "*", "carol", AclOperation.DESCRIBE))
    match = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.MATCH, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    found = {(b.name, b.principal, b.operation) for b in admin(broker).describe_acls(match).result(timeout=30)}
    assert {(topic, "User:bob", AclOperation.READ), ("*", "User:carol", AclOperation.DESCRIBE)} <= found
    flt = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None, AclOperation.ANY,
                           AclPermissionType.ANY)
    found = admin(broker).describe_acls(flt).result(timeout=30)
    assert [(b.name, b.principal, b.operation) for b in found] == [(topic, "User:bob", AclOperation.READ)]
    deleted = admin(broker).delete_acls([flt])[flt].result(timeout=30)
    assert [(b.name, b.principal) for b in deleted] == [(topic, "User:bob")]
    assert admin(broker).describe_acls(flt).result(timeout=30) == []


def test_kafka_python_sees_the_same_errors(broker: EmbeddedBroker) -> None:
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError

    topic = name("kpy-")
    make_topic(broker, topic)
    allow(broker, acl(ResourceType.TOPIC, topic, "alice", AclOperation.WRITE))

    def kp(user: str) -> dict[str, Any]:
        return {"bootstrap_servers": broker.bootstrap, "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "PLAIN", "sasl_plain_username": user, "sasl_plain_password": USERS[user]}

    p = KafkaProducer(**kp("alice"), max_block_ms=20000)
    try:
        p.send(topic, b"v").get(timeout=20)
    finally:
        p.close()
    p = KafkaProducer(**kp("bob"), max_block_ms=10000)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            p.send(topic, b"v").get(timeout=20)
    finally:
        p.close()
    a = KafkaAdminClient(**kp("bob"))
    try:
        assert topic not in a.list_topics()
    finally:
        a.close()


def test_authorized_operations_are_the_principals(broker: EmbeddedBroker) -> None:
    from confluent_kafka import TopicCollection

    topic, group = name("ops-"), name("ops-g-")
    make_topic(broker, topic)
    allow(broker, acl(ResourceType.TOPIC, topic, "alice", AclOperation.WRITE),
          acl(ResourceType.GROUP, group, "alice", AclOperation.READ))
    desc = admin(broker, "alice").describe_topics(TopicCollection([topic]), include_authorized_operations=True)
    ops = set(desc[topic].result(timeout=30).authorized_operations)
    assert ops == {AclOperation.WRITE, AclOperation.DESCRIBE}
    every = admin(broker).describe_topics(TopicCollection([topic]), include_authorized_operations=True)
    assert AclOperation.ALTER_CONFIGS in set(every[topic].result(timeout=30).authorized_operations)  # super user
    cluster = admin(broker).describe_cluster(include_authorized_operations=True).result(timeout=30)
    assert AclOperation.CLUSTER_ACTION in set(cluster.authorized_operations)
    groups = admin(broker, "alice").describe_consumer_groups([group], include_authorized_operations=True)
    assert set(groups[group].result(timeout=30).authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
