"""CreateAcls, DescribeAcls and DeleteAcls called in-process on a real broker (handlers/acls.py): Kafka's
error codes, filters, persistence across a restart."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_payload_module
from kio.static.constants import EntityType

from kaflite.protocol.errors import ErrorCode
from kaflite.protocol.messages import RequestHeader
from kaflite.server.authorizer import Session
from kaflite.server.broker import Broker
from kaflite.server.context import RequestContext
from kaflite.server.embedded import load_broker_config
from kaflite.server.handlers.acls import handle_create_acls, handle_delete_acls, handle_describe_acls

ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
TOPIC, GROUP, CLUSTER = 2, 3, 4
LITERAL, PREFIXED, MATCH, ANY = 3, 4, 2, 1
READ, WRITE, ALTER, DESCRIBE, ALL = 3, 4, 7, 8, 2
DENY, ALLOW = 2, 3


class Node:
    def __init__(self, tmp: Path, **overrides: str) -> None:
        self.loop = asyncio.new_event_loop()
        cfg = load_broker_config({"log.dirs": str(tmp), "listeners": "PLAINTEXT://127.0.0.1:0", **overrides}, True)
        self.broker = Broker(cfg)
        self.loop.run_until_complete(self.broker.start())

    def call(self, api_key: int, handler: Any, request: Any, principal: str = "User:admin", version: int = 3) -> Any:
        ctx = RequestContext(self.broker, RequestHeader(api_key, version, 1, "t"),
                             session=Session("SASL_PLAINTEXT", "SASL_PLAINTEXT", principal, "127.0.0.1"))
        return self.loop.run_until_complete(handler(ctx, request))

    def close(self) -> None:
        self.loop.run_until_complete(self.broker.stop())
        self.loop.close()


def req(api_key: int, version: int = 3) -> Any:
    return load_payload_module(api_key, version, EntityType.request)


def creation(rt: int, name: str, principal: str, op: int, perm: int = ALLOW, pattern: int = LITERAL,
             host: str = "*", version: int = 3) -> Any:
    return req(30, version).AclCreation(resource_type=rt, resource_name=name, resource_pattern_type=pattern,
                                        principal=principal, host=host, operation=op, permission_type=perm)


def create(node: Node, *creations: Any, principal: str = "User:admin", version: int = 3) -> list[int]:
    out = node.call(30, handle_create_acls, req(30, version).CreateAclsRequest(creations=creations), principal,
                    version)
    return [r.error_code for r in out.results]


def describe(node: Node, rt: int = 1, name: str | None = None, pattern: int = ANY, principal: str | None = None,
             caller: str = "User:admin", version: int = 3) -> Any:
    q = req(29, version).DescribeAclsRequest(resource_type_filter=rt, resource_name_filter=name,
                                              pattern_type_filter=pattern, principal_filter=principal,
                                              host_filter=None, operation=1, permission_type=1)
    return node.call(29, handle_describe_acls, q, caller, version)


def flat(resp: Any) -> set[tuple[Any, ...]]:
    return {(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation, a.permission_type)
            for r in resp.resources for a in r.acls}


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    n = Node(tmp_path, **{"authorizer.class.name": ACL_AUTHORIZER, "super.users": "User:admin"})
    yield n
    n.close()


def test_without_an_authorizer_every_acl_api_is_security_disabled(tmp_path: Path) -> None:
    n = Node(tmp_path)
    try:
        assert create(n, creation(TOPIC, "t", "User:a", READ)) == [ErrorCode.security_disabled]
        assert describe(n).error_code == ErrorCode.security_disabled
        q = req(31).DeleteAclsRequest(filters=(req(31).DeleteAclsFilter(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
            host_filter=None, operation=1, permission_type=1),))
        assert [r.error_code for r in n.call(31, handle_delete_acls, q).filter_results] == [ErrorCode.security_disabled]
    finally:
        n.close()


def test_create_describe_delete_and_persist(node: Node, tmp_path: Path) -> None:
    assert create(node, creation(TOPIC, "orders", "User:alice", READ),
                  creation(TOPIC, "ord", "User:bob", WRITE, DENY, PREFIXED, "10.0.0.2"),
                  creation(GROUP, "billing", "User:alice", READ),
                  creation(TOPIC, "", "User:alice", READ),
                  creation(CLUSTER, "other", "User:alice", ALTER),
                  creation(TOPIC, "x", "alice", READ),
                  creation(TOPIC, "x", "User:alice", 1),
                  creation(TOPIC, "x", "User:alice", READ, pattern=MATCH)) == \
        [0, 0, 0] + [ErrorCode.invalid_request] * 5
    everything = flat(describe(node))
    assert everything == {(TOPIC, "orders", LITERAL, "User:alice", "*", READ, ALLOW),
                          (TOPIC, "ord", PREFIXED, "User:bob", "10.0.0.2", WRITE, DENY),
                          (GROUP, "billing", LITERAL, "User:alice", "*", READ, ALLOW)}
    assert flat(describe(node, TOPIC, "orders", MATCH)) == {
        (TOPIC, "orders", LITERAL, "User:alice", "*", READ, ALLOW),
        (TOPIC, "ord", PREFIXED, "User:bob", "10.0.0.2", WRITE, DENY)}
    assert flat(describe(node, principal="User:bob")) == {(TOPIC, "ord", PREFIXED, "User:bob", "10.0.0.2", WRITE, DENY)}
    assert flat(describe(node, version=1)) == everything  # the oldest version kio serves
    # the ACLs decide at once
    alice = Session("SASL_PLAINTEXT", "SASL_PLAINTEXT", "User:alice", "10.0.0.9")
    assert node.broker.authorizer.authorize(alice, READ, TOPIC, "orders")  # type: ignore[arg-type]
    assert not node.broker.authorizer.authorize(alice, WRITE, TOPIC, "orders")  # type: ignore[arg-type]
    # delete: a filter matching two bindings, one matching nothing, one unknown
    D = req(31)

    def flt(rt: int, name: str | None, pattern: int, principal: str | None = None, op: int = 1) -> Any:
        return D.DeleteAclsFilter(resource_type_filter=rt, resource_name_filter=name, pattern_type_filter=pattern,
                                  principal_filter=principal, host_filter=None, operation=op, permission_type=1)

    out = node.call(31, handle_delete_acls, D.DeleteAclsRequest(filters=(
        flt(1, None, ANY, "User:alice"), flt(TOPIC, "nothing", LITERAL), flt(0, None, ANY))))
    codes = [r.error_code for r in out.filter_results]
    assert codes == [0, 0, ErrorCode.invalid_request]
    assert {(m.resource_type, m.resource_name) for m in out.filter_results[0].matching_acls} == \
        {(TOPIC, "orders"), (GROUP, "billing")}
    assert out.filter_results[1].matching_acls == ()
    remaining = flat(describe(node))
    assert remaining == {(TOPIC, "ord", PREFIXED, "User:bob", "10.0.0.2", WRITE, DENY)}
    node.close()
    again = Node(tmp_path, **{"authorizer.class.name": ACL_AUTHORIZER, "super.users": "User:admin"})
    try:
        assert flat(describe(again)) == remaining
    finally:
        node.broker = again.broker
        node.loop = again.loop


def test_acl_apis_need_cluster_alter_and_describe(node: Node) -> None:
    assert create(node, creation(TOPIC, "t", "User:a", READ), principal="User:mallory") == \
        [ErrorCode.cluster_authorization_failed]
    assert describe(node, caller="User:mallory").error_code == ErrorCode.cluster_authorization_failed
    assert create(node, creation(CLUSTER, "kafka-cluster", "User:ops", ALTER),
                  creation(CLUSTER, "kafka-cluster", "User:viewer", DESCRIBE)) == [0, 0]
    assert create(node, creation(TOPIC, "t", "User:a", READ), principal="User:ops") == [0]
    assert describe(node, caller="User:viewer").error_code == 0
    assert describe(node, caller="User:ops").error_code == 0  # ALTER implies DESCRIBE
    assert create(node, creation(TOPIC, "t", "User:a", READ), principal="User:viewer") == \
        [ErrorCode.cluster_authorization_failed]


def test_a_bad_authorizer_class_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    from kaflite.server.config import ConfigError
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        load_broker_config({"log.dirs": str(tmp_path), "authorizer.class.name": "com.example.Nope"}, True)
    cfg = load_broker_config({"log.dirs": str(tmp_path),
                              "authorizer.class.name": "kafka.security.auth.SimpleAclAuthorizer"}, True)
    assert cfg["authorizer.class.name"] == "kafka.security.auth.SimpleAclAuthorizer"
