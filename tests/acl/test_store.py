"""ACL storage formats and the single node's file (server/acl/store.py), without ZooKeeper."""

from __future__ import annotations

import json
from pathlib import Path

from kaflite.server.acl.model import AccessControlEntry, Op, PatternType, Permission, ResourcePattern
from kaflite.server.acl.store import (
    LocalAclStore,
    change_notification,
    decode_change,
    decode_entries,
    encode_entries,
    znode_path,
)
from kaflite.server.authorizer import ResourceType

ALICE_READ = AccessControlEntry("User:alice", "*", Op.READ, Permission.ALLOW)
BOB_DENY = AccessControlEntry("User:bob", "10.0.0.2", Op.IDEMPOTENT_WRITE, Permission.DENY)


def test_znode_paths_and_json_are_kafkas() -> None:
    assert znode_path(ResourcePattern(ResourceType.TOPIC, "orders")) == "/kafka-acl/Topic/orders"
    assert znode_path(ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", PatternType.PREFIXED)) == \
        "/kafka-acl-extended/prefixed/TransactionalId/tx"
    doc = json.loads(encode_entries(frozenset({BOB_DENY})))
    assert doc == {"version": 1, "acls": [{"principal": "User:bob", "permissionType": "Deny",
                                           "operation": "IdempotentWrite", "host": "10.0.0.2"}]}
    # what Kafka writes (its example in ZkData.scala) reads back
    kafka = b'{"version": 1, "acls": [ { "host":"host1", "permissionType": "Allow","operation": "Read",' \
            b'"principal": "User:alice"}]}'
    assert decode_entries(kafka) == {AccessControlEntry("User:alice", "host1", Op.READ, Permission.ALLOW)}


def test_change_notifications_are_kafkas() -> None:
    lit = ResourcePattern(ResourceType.GROUP, "g:1")
    parent, data = change_notification(lit)
    assert (parent, data) == ("/kafka-acl-changes", b"GROUP:g:1")
    assert decode_change(parent, data) == lit
    assert decode_change(parent, b"Topic:orders") == ResourcePattern(ResourceType.TOPIC, "orders")
    pre = ResourcePattern(ResourceType.TOPIC, "ord", PatternType.PREFIXED)
    parent, data = change_notification(pre)
    assert parent == "/kafka-acl-extended-changes"
    assert json.loads(data) == {"version": 1, "resourceType": "TOPIC", "name": "ord", "patternType": "PREFIXED"}
    assert decode_change(parent, data) == pre


def test_local_store_survives_a_restart_and_drops_empty_patterns(tmp_path: Path) -> None:
    path = tmp_path / "acls.json"
    store = LocalAclStore(path)
    assert store.load() == {}
    t = ResourcePattern(ResourceType.TOPIC, "orders")
    p = ResourcePattern(ResourceType.TOPIC, "ord", PatternType.PREFIXED)
    assert store.update(t, lambda cur: cur | {ALICE_READ}) == {ALICE_READ}
    store.update(p, lambda cur: cur | {BOB_DENY})
    assert LocalAclStore(path).load() == {t: {ALICE_READ}, p: {BOB_DENY}}
    store.update(t, lambda cur: frozenset())
    assert LocalAclStore(path).load() == {p: {BOB_DENY}}
    assert not (tmp_path / "acls.json.tmp").exists()
