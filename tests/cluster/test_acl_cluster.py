"""ACLs on a cluster of three `python -m kaflite.server` processes on a real ZooKeeper: an ACL created
through the ACL API is stored as Kafka's ZooKeeper mode stores it (/kafka-acl-extended/prefixed/...,
a change notification) and every broker enforces it, and its deletion, within 1 s. Clients use a
SASL_PLAINTEXT listener (PLAIN users); the brokers talk PLAINTEXT to each other as User:ANONYMOUS, a super
user as Kafka users make their brokers."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
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

from cluster.conftest import BrokerProcesses
from helpers import free_port, wait_until
from kaflite.cluster.zk import KafkaZkClient
from server.kwire import WireClient

USERS = {"admin": "admin-pw", "alice": "alice-pw"}
IDS = (1, 2, 3)


def _jaas() -> str:
    opts = " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    return f"org.apache.kafka.common.security.plain.PlainLoginModule required {opts};"


def _conf(bootstrap: str, user: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": USERS[user]}


def _produce(p: Producer, topic: str) -> KafkaError | None:
    out: list[KafkaError | None] = []
    try:
        p.produce(topic, b"v", on_delivery=lambda err, _m: out.append(err))
    except KafkaException:
        # librdkafka keeps a refused produce's error on the topic until its next Metadata: ask for it now
        # (alice may DESCRIBE the topic), then produce again
        p.list_topics(topic=topic, timeout=5)
        p.produce(topic, b"v", on_delivery=lambda err, _m: out.append(err))
    p.flush(10)
    assert out, "no delivery report"
    return out[0]


def _until(p: Producer, topic: str, allowed: bool, timeout: float) -> float:
    """Seconds until a produce to `topic` is (allowed) / is refused (not allowed), polling."""
    start = time.monotonic()
    while True:
        err = _produce(p, topic)
        ok = err is None
        if not ok:
            assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
        if ok == allowed:
            return time.monotonic() - start
        assert time.monotonic() - start < timeout, f"{topic}: still {'refused' if allowed else 'allowed'}"
        time.sleep(0.02)


def _topic_acls_held(bootstrap: str, principal: str) -> int:
    """How many topic ACLs of `principal` the broker at `bootstrap` holds (DescribeAcls v3 to it alone)."""
    from kio.index import load_payload_module
    from kio.static.constants import EntityType
    from kio.static.primitive import i8

    m = load_payload_module(29, 3, EntityType.request)
    with WireClient(bootstrap) as c:
        r = c.request(m.DescribeAclsRequest(  # TOPIC, any name, ANY pattern, any host, ANY operation and permission
            resource_type_filter=i8(2), resource_name_filter=None, pattern_type_filter=i8(1),
            principal_filter=principal, host_filter=None, operation=i8(1), permission_type=i8(1)))
    assert int(r.error_code.value) == 0, r.error_message
    return sum(len(res.acls) for res in r.resources)


def test_an_acl_added_through_one_broker_is_enforced_by_all_within_a_second(
        brokers: BrokerProcesses, zk: KafkaZkClient) -> None:
    sasl_ports = {b: free_port() for b in IDS}
    for b in IDS:
        brokers.ports.setdefault(b, free_port())
        brokers.start(
            b,
            f"listeners=PLAINTEXT://127.0.0.1:{brokers.ports[b]},SASL_PLAINTEXT://127.0.0.1:{sasl_ports[b]}",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "inter.broker.listener.name=PLAINTEXT",
            "sasl.enabled.mechanisms=PLAIN",
            f"listener.name.sasl_plaintext.plain.sasl.jaas.config={_jaas()}",
            "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
            "super.users=User:admin;User:ANONYMOUS",
        )
    wait_until("three brokers registered", lambda: zk.get_broker_ids() == list(IDS))
    bootstrap = ",".join(f"127.0.0.1:{sasl_ports[b]}" for b in IDS)
    admin = AdminClient(_conf(bootstrap, "admin"))
    prefix = f"acl-{uuid.uuid4().hex[:6]}-"
    # one single-replica topic led by each broker: a produce to it is decided by that broker alone
    topics = {b: f"{prefix}{b}" for b in IDS}
    futures = admin.create_topics([NewTopic(t, num_partitions=1, replica_assignment=[[b]])
                                   for b, t in topics.items()])
    for f in futures.values():
        f.result(timeout=30)
    # alice may DESCRIBE them (else librdkafka keeps the Metadata refusal and never asks the broker again)
    describe = [AclBinding(ResourceType.TOPIC, t, ResourcePatternType.LITERAL, "User:alice", "*",
                           AclOperation.DESCRIBE, AclPermissionType.ALLOW) for t in topics.values()]
    for f in admin.create_acls(describe).values():
        f.result(timeout=30)
    # setup, not under test: every broker has them before librdkafka asks for Metadata (each broker's own
    # cache, asked on its PLAINTEXT listener, where ANONYMOUS is a super user)
    wait_until("every broker holds alice's DESCRIBE ACLs",
               lambda: all(_topic_acls_held(brokers.bootstrap(b), "User:alice") == len(topics) for b in IDS), 30)
    producers = {b: Producer({**_conf(f"127.0.0.1:{sasl_ports[b]}", "alice"), "message.timeout.ms": 5000,
                              "enable.idempotence": False}) for b in IDS}
    for b, t in topics.items():  # refused everywhere, and each producer connected and warm
        _until(producers[b], t, allowed=False, timeout=30)

    binding = AclBinding(ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED, "User:alice", "*",
                         AclOperation.WRITE, AclPermissionType.ALLOW)
    admin.create_acls([binding])[binding].result(timeout=30)
    took = {b: _until(producers[b], t, allowed=True, timeout=5) for b, t in topics.items()}
    assert max(took.values()) < 1.0, took

    # stored as Kafka's ZooKeeper mode stores it
    data, _ = zk._zk.get(f"/kafka-acl-extended/prefixed/Topic/{prefix}")  # noqa: SLF001
    assert json.loads(data) == {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow",
                                                         "operation": "Write", "host": "*"}]}
    changes = zk._zk.get_children("/kafka-acl-extended-changes")  # noqa: SLF001
    assert changes and all(c.startswith("acl_changes_") for c in changes)

    flt = AclBindingFilter(ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)
    assert len(admin.delete_acls([flt])[flt].result(timeout=30)) == 1
    took = {b: _until(producers[b], t, allowed=False, timeout=5) for b, t in topics.items()}
    assert max(took.values()) < 1.0, took
    assert zk._zk.exists(f"/kafka-acl-extended/prefixed/Topic/{prefix}") is None  # noqa: SLF001
    for p in producers.values():
        p.flush(1)
