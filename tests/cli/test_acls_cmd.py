"""`kaflite acls` (kafka-acls.sh): the bindings --add makes (--producer, --consumer, operations, hosts),
the client properties of --command-config, and add / list / remove against a SASL broker with ACLs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kaflite.cli.acls_cmd import Binding, bindings_for
from kaflite.cli.common import CliFailure
from kaflite.cli.kafka_flags import command_config
from kaflite.server.acl.model import Op, PatternType, Permission
from kaflite.server.authorizer import ResourceType
from kaflite.server.embedded import EmbeddedBroker

T, G, TX, C = (int(r) for r in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID,
                                ResourceType.CLUSTER))
LIT, PRE = int(PatternType.LITERAL), int(PatternType.PREFIXED)


def _add(**kw: object) -> list[Binding]:
    base: dict[str, object] = dict(allow=[], deny=[], allow_hosts=[], deny_hosts=[], operations=[], topics=[],
                                   groups=[], txn_ids=[], cluster=False, pattern=LIT, producer=False,
                                   consumer=False, idempotent=False)
    base.update(kw)
    return bindings_for(**base)  # type: ignore[arg-type]


def test_producer_and_consumer_conveniences_are_kafkas() -> None:
    got = {(b.resource_type, b.name, b.operation) for b in _add(allow=["User:app"], producer=True, topics=["t"],
                                                                 txn_ids=["tx"], idempotent=True)}
    assert got == {(T, "t", Op.WRITE), (T, "t", Op.DESCRIBE), (T, "t", Op.CREATE), (TX, "tx", Op.WRITE),
                   (TX, "tx", Op.DESCRIBE), (C, "kafka-cluster", Op.IDEMPOTENT_WRITE)}
    got = {(b.resource_type, b.name, b.operation) for b in _add(allow=["User:c"], consumer=True, topics=["t"],
                                                                 groups=["g"])}
    assert got == {(T, "t", Op.READ), (T, "t", Op.DESCRIBE), (G, "g", Op.READ)}
    with pytest.raises(CliFailure):
        _add(allow=["User:c"], consumer=True, topics=["t"])  # no group


def test_operations_hosts_and_deny() -> None:
    got = _add(allow=["User:a"], deny=["User:b"], deny_hosts=["10.0.0.2"], operations=["Read", "describe"],
               topics=["orders."], pattern=PRE)
    assert {(b.principal, b.host, b.operation, b.permission, b.pattern_type) for b in got} == {
        ("User:a", "*", Op.READ, Permission.ALLOW, PRE), ("User:a", "*", Op.DESCRIBE, Permission.ALLOW, PRE),
        ("User:b", "10.0.0.2", Op.READ, Permission.DENY, PRE), ("User:b", "10.0.0.2", Op.DESCRIBE, Permission.DENY, PRE)}
    assert {b.operation for b in _add(allow=["User:a"], cluster=True)} == {Op.ALL}
    for bad in (dict(allow=["alice"], topics=["t"]), dict(allow=["User:a"]), dict(allow=["User:a"], topics=["t"],
                                                                                     operations=["Jump"])):
        with pytest.raises(CliFailure):
            _add(**bad)


def test_command_config_reads_sasl_and_tls(tmp_path: Path) -> None:
    f = tmp_path / "admin.properties"
    f.write_text('security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n'
                 'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
                 'username="admin" password="s3cr\\\\"et";\nssl.truststore.type=PEM\nssl.truststore.location=/etc/ca.pem\n')
    # kafka-acls.sh's --command-config: the one reader every kaflite command uses (kaflite.cli.kafka_flags)
    assert command_config(f) == {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
                                    "sasl.username": "admin", "sasl.password": 's3cr"et',
                                    "ssl.ca.location": "/etc/ca.pem"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedBroker, Path]]:
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="pw" user_alice="pw";'
    overrides = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                 "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
                 "inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
                 "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
                 "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin"}
    d = tmp_path_factory.mktemp("acls-cli")
    props = d / "admin.properties"
    props.write_text('security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config='
                     'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
                     'password="pw";\n')
    with EmbeddedBroker(data_dir=d / "data", overrides=overrides) as b:
        yield b, props


def test_add_list_remove(secured: tuple[EmbeddedBroker, Path], cli: Any) -> None:
    broker, props = secured
    base = ["acls", "--bootstrap-server", broker.bootstrap, "--command-config", str(props)]
    run = cli  # tests/cli/conftest.py's in-process runner
    r = run(*base, "--add", "--allow-principal", "User:alice", "--consumer", "--topic", "orders",
            "--group", "billing")
    assert r.exit_code == 0, r.output
    assert "Added 3 ACL(s)" in r.output
    r = run(*base, "--list", "--topic", "orders")
    assert r.exit_code == 0, r.output
    assert "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`" \
        in r.output
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in r.output
    assert "operation=DESCRIBE" in r.output and "billing" not in r.output
    r = run(*base, "--list")
    assert "name=billing" in r.output
    r = run(*base, "--remove", "--allow-principal", "User:alice", "--topic", "orders", "--force")
    assert r.exit_code == 0, r.output
    assert "Removed 2 ACL(s)" in r.output
    r = run(*base, "--list")
    assert "name=orders" not in r.output and "name=billing" in r.output
    r = run(*base, "--add", "--list")
    assert r.exit_code != 0
