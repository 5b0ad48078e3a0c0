"""The Access page (/access) over real HTTP: ACL bindings by principal and client quotas from a kaflite
broker with Kafka's ACL authorizer (the console connects as User:ANONYMOUS, a super user there), one
principal's view, and a broker without an authorizer (DescribeAcls answers SECURITY_DISABLED)."""

from __future__ import annotations

import html
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from console_harness import ConsoleServer
from test_pages import _cells as _raw_cells
from test_pages import _text

from kaflite.cli.quotas_cmd import alter
from kaflite.server.embedded import EmbeddedBroker

pytestmark = pytest.mark.timeout(120)

ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
TAG = uuid.uuid4().hex[:6]
ORDERS = f"orders-{TAG}"
# (principal, host, operation, permission, resource type, pattern type, name) as the page shows them
BINDINGS = [
    ("User:alice", "*", "READ", "ALLOW", "TOPIC", "LITERAL", ORDERS),
    ("User:alice", "*", "WRITE", "ALLOW", "TOPIC", "LITERAL", ORDERS),
    ("User:alice", "10.0.0.9", "READ", "DENY", "GROUP", "PREFIXED", "billing-"),
    ("User:bob", "*", "DESCRIBE", "ALLOW", "CLUSTER", "LITERAL", "kafka-cluster"),
    ("User:*", "*", "DESCRIBE", "ALLOW", "TOPIC", "PREFIXED", "public-"),
]
# (entity, quotas) set with AlterClientQuotas
QUOTAS: list[tuple[list[tuple[str, str | None]], dict[str, str]]] = [
    ([("user", "alice")], {"producer_byte_rate": "1048576", "consumer_byte_rate": "2097152"}),
    ([("user", "alice"), ("client-id", "app")], {"request_percentage": "12.5"}),
    ([("user", None)], {"producer_byte_rate": "524288"}),
    ([("user", "bob")], {"consumer_byte_rate": "4096"}),
    ([("client-id", None)], {"producer_byte_rate": "65536"}),
]


def _cells(page: str, table_id: str) -> list[list[str]]:
    return [[html.unescape(c) for c in row] for row in _raw_cells(page, table_id)]


def _binding(row: tuple[str, ...]) -> AclBinding:
    principal, host, op, perm, rtype, ptype, name = row
    # librdkafka's name of Kafka's CLUSTER resource type is BROKER
    return AclBinding(ResourceType["BROKER" if rtype == "CLUSTER" else rtype], name, ResourcePatternType[ptype], principal, host, AclOperation[op],
                      AclPermissionType[perm])


@pytest.fixture(scope="module")
def acl_console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleServer]:
    """A console over a broker with the ACL authorizer, holding BINDINGS and QUOTAS."""
    overrides = {"authorizer.class.name": ACL_AUTHORIZER, "super.users": "User:ANONYMOUS"}
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("access"), overrides=overrides) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.create_acls([_binding(b) for b in BINDINGS]).values():
            f.result(timeout=30)
        for entity, values in QUOTAS:
            alter(broker.bootstrap, entity, values, [], 10.0)
        srv = ConsoleServer(broker.bootstrap, sample_interval=0).start()
        try:
            yield srv
        finally:
            srv.stop()
            del admin


def test_access_page_lists_every_acl_by_principal_and_every_quota(acl_console: ConsoleServer) -> None:
    status, html, _ = acl_console.get("/access")
    assert status == 200 and 'id="nav-access"' in html and 'id="acl-note"' not in html
    rows = [tuple(r) for r in _cells(html, "acls")]
    assert sorted(rows) == sorted(BINDINGS)
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)  # grouped by principal
    quotas = _cells(html, "quotas")
    assert ["user 'alice'", "consumer_byte_rate=2097152, producer_byte_rate=1048576"] in quotas
    assert ["user 'alice', client-id 'app'", "request_percentage=12.5"] in quotas
    assert ["the default user", "producer_byte_rate=524288"] in quotas
    assert ["the default client-id", "producer_byte_rate=65536"] in quotas
    assert len(quotas) == len(QUOTAS)
    # each principal links to its own view; the filter offers every principal of an ACL or a user quota
    assert f'href="/access?principal={quote("User:alice", safe="")}"' in html
    assert '<option value="User:bob">' in html


def test_one_principals_acls_and_the_quotas_that_apply_to_it(acl_console: ConsoleServer) -> None:
    status, html, _ = acl_console.get("/access?principal=User:alice")
    assert status == 200 and _text(html, "principal") == "User:alice"
    rows = [tuple(r) for r in _cells(html, "acls")]
    # alice's own bindings, then the wildcard's; bob's is not there
    assert rows == sorted(b for b in BINDINGS if b[0] == "User:alice") + [b for b in BINDINGS if b[0] == "User:*"]
    # in Kafka's precedence order; bob's quota does not apply
    assert _cells(html, "quotas") == [
        ["user 'alice', client-id 'app'", "request_percentage=12.5"],
        ["user 'alice'", "consumer_byte_rate=2097152, producer_byte_rate=1048576"],
        ["the default user", "producer_byte_rate=524288"],
        ["the default client-id", "producer_byte_rate=65536"],
    ]
    _, html, _ = acl_console.get("/access?principal=User:carol")  # no ACL of her own: the wildcard's
    assert [tuple(r) for r in _cells(html, "acls")] == [b for b in BINDINGS if b[0] == "User:*"]
    assert [q[0] for q in _cells(html, "quotas")] == ["the default user", "the default client-id"]
    _, html, _ = acl_console.get("/access?principal=Group:ops")  # User:* matches every principal type
    assert [tuple(r) for r in _cells(html, "acls")] == [b for b in BINDINGS if b[0] == "User:*"]
    assert _cells(html, "quotas") == [["no client quotas apply to Group:ops"]]  # quotas are per User
    _, html, _ = acl_console.get("/access?principal=User:*")
    assert [tuple(r) for r in _cells(html, "acls")] == [b for b in BINDINGS if b[0] == "User:*"]
    _, html, _ = acl_console.get("/access?principal=User:nobody-" + TAG)
    assert [tuple(r) for r in _cells(html, "acls")] == [b for b in BINDINGS if b[0] == "User:*"]


def test_access_page_bad_principal(acl_console: ConsoleServer) -> None:
    status, html, _ = acl_console.get("/access?principal=alice")
    assert status == 400 and "principal: expected TYPE:NAME" in html


def test_access_page_without_an_authorizer(kaflite_broker: Any) -> None:
    """A broker without an authorizer answers DescribeAcls SECURITY_DISABLED: the page says so, and still
    lists the client quotas (they do not need an authorizer)."""
    alter(kaflite_broker.bootstrap, [("user", "dave")], {"producer_byte_rate": "1000"}, [], 10.0)
    srv = ConsoleServer(kaflite_broker.bootstrap, sample_interval=0).start()
    try:
        status, html, _ = srv.get("/access")
        assert status == 200
        note = _text(html, "acl-note")
        assert "ACLs are not enabled" in note and "SECURITY_DISABLED" in note
        assert 'id="acls"' not in html
        assert _cells(html, "quotas") == [["user 'dave'", "producer_byte_rate=1000"]]
        status, html, _ = srv.get("/access?principal=User:dave")
        assert status == 200 and "SECURITY_DISABLED" in _text(html, "acl-note")
        assert _cells(html, "quotas") == [["user 'dave'", "producer_byte_rate=1000"]]
    finally:
        srv.stop()


def test_access_page_when_the_console_may_not_describe(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The console's principal (ANONYMOUS) is no super user and has no ACL: the page says what was refused."""
    overrides = {"authorizer.class.name": ACL_AUTHORIZER, "super.users": "User:admin"}
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("access-refused"), overrides=overrides) as broker:
        srv = ConsoleServer(broker.bootstrap, sample_interval=0).start()
        try:
            status, html, _ = srv.get("/access")
            assert status == 200
            assert "CLUSTER_AUTHORIZATION_FAILED" in _text(html, "acl-note")
            assert "DescribeClientQuotas" in _text(html, "quota-note")
        finally:
            srv.stop()
