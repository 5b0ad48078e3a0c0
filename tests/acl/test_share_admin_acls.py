"""The share-group offsets APIs (handlers/share_admin.py) called in-process with an AclAuthorizer: Kafka's
checks, DESCRIBE on the group and each topic (Describe), READ on the group and each topic (Alter), DELETE on
the group and READ on each topic (Delete)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_payload_module
from kio.static.constants import EntityType

from acl.test_acl_apis import ACL_AUTHORIZER, ALLOW, DESCRIBE, GROUP, READ, TOPIC, Node, create, creation
from kaflite.coordinator.share.group import ShareGroup
from kaflite.protocol.errors import ErrorCode
from kaflite.server.handlers import share
from kaflite.server.handlers.share_admin import (
    handle_alter_share_group_offsets,
    handle_delete_share_group_offsets,
    handle_describe_share_group_offsets,
)

DELETE = 6  # Kafka's AclOperation.DELETE


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    n = Node(tmp_path, **{"authorizer.class.name": ACL_AUTHORIZER, "super.users": "User:admin"})
    n.broker.create_topic("t", 1)
    share.coordinator(n.broker).groups["g"] = ShareGroup("g")  # an empty share group
    yield n
    n.close()


def req(api_key: int) -> Any:
    return load_payload_module(api_key, 0, EntityType.request)


def describe(node: Node, principal: str) -> Any:
    r = req(90)
    q = r.DescribeShareGroupOffsetsRequest(groups=(r.DescribeShareGroupOffsetsRequestGroup(
        group_id="g", topics=(r.DescribeShareGroupOffsetsRequestTopic(topic_name="t", partitions=(0,)),)),))
    (g,) = node.call(90, handle_describe_share_group_offsets, q, principal, 0).groups
    return g


def alter(node: Node, principal: str) -> Any:
    r = req(91)
    q = r.AlterShareGroupOffsetsRequest(group_id="g", topics=(r.AlterShareGroupOffsetsRequestTopic(
        topic_name="t", partitions=(r.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0),)),))
    return node.call(91, handle_alter_share_group_offsets, q, principal, 0)


def delete(node: Node, principal: str) -> Any:
    r = req(92)
    q = r.DeleteShareGroupOffsetsRequest(group_id="g", topics=(r.DeleteShareGroupOffsetsRequestTopic(topic_name="t"),))
    return node.call(92, handle_delete_share_group_offsets, q, principal, 0)


def test_describe_needs_describe_on_the_group_and_the_topic(node: Node) -> None:
    assert describe(node, "User:alice").error_code == ErrorCode.group_authorization_failed
    assert create(node, creation(GROUP, "g", "User:alice", DESCRIBE, ALLOW)) == [ErrorCode.none]
    g = describe(node, "User:alice")
    assert g.error_code == ErrorCode.none
    ((p,),) = [t.partitions for t in g.topics]
    assert (p.error_code, p.start_offset) == (ErrorCode.topic_authorization_failed, -1)
    assert create(node, creation(TOPIC, "t", "User:alice", DESCRIBE, ALLOW)) == [ErrorCode.none]
    ((p,),) = [t.partitions for t in describe(node, "User:alice").topics]
    assert (p.error_code, p.start_offset) == (ErrorCode.none, -1)


def test_alter_needs_read_on_the_group_and_the_topic(node: Node) -> None:
    assert alter(node, "User:alice").error_code == ErrorCode.group_authorization_failed
    assert create(node, creation(GROUP, "g", "User:alice", READ, ALLOW)) == [ErrorCode.none]
    r = alter(node, "User:alice")
    assert r.error_code == ErrorCode.none
    assert [p.error_code for t in r.responses for p in t.partitions] == [ErrorCode.topic_authorization_failed]
    assert create(node, creation(TOPIC, "t", "User:alice", READ, ALLOW)) == [ErrorCode.none]
    r = alter(node, "User:alice")
    assert [p.error_code for t in r.responses for p in t.partitions] == [ErrorCode.none]


def test_delete_needs_delete_on_the_group_and_read_on_the_topic(node: Node) -> None:
    assert create(node, creation(GROUP, "g", "User:alice", READ, ALLOW)) == [ErrorCode.none]
    assert delete(node, "User:alice").error_code == ErrorCode.group_authorization_failed  # READ is not DELETE
    assert create(node, creation(GROUP, "g", "User:alice", DELETE, ALLOW)) == [ErrorCode.none]
    r = delete(node, "User:alice")
    assert r.error_code == ErrorCode.none
    assert [(t.topic_name, t.error_code) for t in r.responses] == [("t", ErrorCode.topic_authorization_failed)]
    assert create(node, creation(TOPIC, "t", "User:alice", READ, ALLOW)) == [ErrorCode.none]
    # allowed now; the group has no state of the topic
    r = delete(node, "User:alice")
    assert [(t.topic_name, t.error_code, t.error_message) for t in r.responses] == [
        ("t", ErrorCode.unknown_topic_or_partition, "There is no offset information to delete.")]
