"""The few requests the console sends itself, with the kio schemas over a plain socket: DescribeLogDirs
(partition sizes), DescribeAcls and DescribeClientQuotas (the Access page) and the group descriptions that carry each member's subscription and rack
(DescribeGroups' member metadata, ConsumerGroupDescribe). confluent-kafka's AdminClient exposes none of
these; they are the same wire protocol, so they work against Apache Kafka too. A broker that does not
answer, or answers with an error, leaves the figure unknown on the page.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.describe_log_dirs.v1.request import DescribableLogDirTopic, DescribeLogDirsRequest
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32

from kaflite.cluster.wire import request
from kaflite.protocol.consumer_protocol import decode_subscription
from kaflite.protocol.errors import error_name

__all__ = ["describe_log_dirs", "MemberSubscription", "group_subscriptions", "describe_client_quotas",
           "describe_acls", "list_share_groups", "share_group_member_counts"]

_MAX_FRAME = 64 * 1024 * 1024


def _code(v: Any) -> int:
    return int(v.value if hasattr(v, "value") else v)


def describe_log_dirs(host: str, port: int, timeout: float = 3.0, topics: Mapping[str, list[int]] | None = None
                      ) -> dict[tuple[str, int], int]:
    """{(topic, partition): size in bytes} of the replicas on the broker at host:port (current logs, not
    future ones): every one, or those of `topics` {name: partitions}. Raises OSError / ConnectionError /
    ValueError when the broker cannot answer."""
    from kio.schema.describe_log_dirs.v1.response import DescribeLogDirsResponse

    wanted = None if topics is None else tuple(
        DescribableLogDirTopic(topic=TopicName(t), partitions=tuple(i32(p) for p in ps)) for t, ps in topics.items())
    response = request(host, port, DescribeLogDirsRequest(topics=wanted), DescribeLogDirsResponse, timeout)
    sizes: dict[tuple[str, int], int] = {}
    for result in response.results:
        if _code(result.error_code):
            continue
        for t in result.topics:
            for p in t.partitions:
                if not p.is_future_key:
                    sizes[(str(t.name), int(p.partition_index))] = int(p.partition_size)
    return sizes


def list_share_groups(host: str, port: int, timeout: float = 3.0) -> list[tuple[str, str]]:
    """[(group id, state)] of the share groups the broker at host:port coordinates: ListGroups v5 with the
    type filter "share" (KIP-932; librdkafka's ListGroups leaves share groups out). Raises OSError /
    ConnectionError / ValueError when the broker cannot answer, ValueError naming the error it answers."""
    from kio.schema.list_groups.v5.request import ListGroupsRequest
    from kio.schema.list_groups.v5.response import ListGroupsResponse

    response = request(host, port, ListGroupsRequest(states_filter=(), types_filter=("share",)),
                       ListGroupsResponse, timeout)
    if _code(response.error_code):
        raise ValueError(f"ListGroups answered {error_name(_code(response.error_code))}")
    return [(str(g.group_id), str(g.group_state).lower()) for g in response.groups]


def share_group_member_counts(host: str, port: int, group_ids: list[str], timeout: float = 3.0) -> dict[str, int]:
    """{group id: member count} of the share groups among `group_ids` that the broker at host:port
    coordinates, in one ShareGroupDescribe (it takes many groups, so a page of N share groups costs one
    request per coordinator, not N); a group it answers with an error is left out. Raises OSError /
    ConnectionError / ValueError when the broker cannot answer."""
    from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
    from kio.schema.share_group_describe.v1.response import ShareGroupDescribeResponse

    response = request(host, port, ShareGroupDescribeRequest(group_ids=tuple(GroupId(g) for g in group_ids),
                                                             include_authorized_operations=False),
                       ShareGroupDescribeResponse, timeout)
    return {str(g.group_id): len(g.members) for g in response.groups if not _code(g.error_code)}


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    topics: tuple[str, ...]
    rack: str | None


def group_subscriptions(host: str, port: int, group_id: str, group_type: str, timeout: float = 3.0
                        ) -> dict[str, MemberSubscription]:
    """{member id: subscribed topics and rack} of a group, asked of its coordinator at host:port:
    ConsumerGroupDescribe for a KIP-848 group, DescribeGroups' member metadata (the ConsumerProtocol
    subscription) for a classic one."""
    out: dict[str, MemberSubscription] = {}
    if group_type == "consumer":
        from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest
        from kio.schema.consumer_group_describe.v0.response import ConsumerGroupDescribeResponse

        resp = request(host, port, ConsumerGroupDescribeRequest(group_ids=(GroupId(group_id),),
                                                                include_authorized_operations=False),
                       ConsumerGroupDescribeResponse, timeout)
        for g in resp.groups:
            if _code(g.error_code):
                raise ValueError(f"ConsumerGroupDescribe {group_id}: error {_code(g.error_code)}")
            for m in g.members:
                out[str(m.member_id)] = MemberSubscription(tuple(str(t) for t in m.subscribed_topic_names),
                                                           m.rack_id or None)
        return out
    from kio.schema.describe_groups.v3.request import DescribeGroupsRequest
    from kio.schema.describe_groups.v3.response import DescribeGroupsResponse

    resp = request(host, port, DescribeGroupsRequest(groups=(GroupId(group_id),), include_authorized_operations=False),
                   DescribeGroupsResponse, timeout)
    for g in resp.groups:
        if _code(g.error_code):
            raise ValueError(f"DescribeGroups {group_id}: error {_code(g.error_code)}")
        if g.protocol_type != "consumer":
            continue
        for m in g.members:
            if m.member_metadata:
                sub = decode_subscription(bytes(m.member_metadata))
                out[str(m.member_id)] = MemberSubscription(tuple(sub.topics), sub.rack_id or None)
    return out


def describe_client_quotas(host: str, port: int, timeout: float = 3.0
                           ) -> list[tuple[tuple[tuple[str, str | None], ...], tuple[tuple[str, float], ...]]]:
    """Every client quota entity the broker at host:port knows, with its quotas: [(entity, values)], the
    entity as ((type, name or None for the default), ...) user part first, values ((key, value), ...) by
    key. An empty, non-strict filter matches every entity (Kafka's DescribeClientQuotas). Raises
    ValueError with the broker's message when it answers an error."""
    from kio.schema.describe_client_quotas.v1 import request as dreq
    from kio.schema.describe_client_quotas.v1 import response as dresp

    resp = request(host, port, dreq.DescribeClientQuotasRequest(components=(), strict=False),
                   dresp.DescribeClientQuotasResponse, timeout)
    if _code(resp.error_code):
        raise ValueError(f"DescribeClientQuotas: error {_code(resp.error_code)}: {resp.error_message or ''}")
    out = []
    for e in resp.entries or ():
        entity = tuple(sorted(((str(p.entity_type), None if p.entity_name is None else str(p.entity_name))
                               for p in e.entity), key=lambda p: (p[0] != "user", p[0])))
        out.append((entity, tuple(sorted((str(v.key), float(v.value)) for v in e.values))))
    return out


# A DescribeAcls binding as the wire carries it: (principal, host, operation, permission, resource type,
# pattern type, resource name), the four enums as Kafka's int8 codes.
WireAcl = tuple[str, str, int, int, int, int, str]


def describe_acls(host: str, port: int, timeout: float = 3.0) -> tuple[int, str, list[WireAcl]]:
    """(error code, error message, bindings) of DescribeAcls v3 with a filter matching every binding
    (resource type, pattern type, operation and permission ANY; name, principal and host null).
    confluent-kafka's describe_acls is not used: with librdkafka 2.16 it returns an empty list where the
    broker answered SECURITY_DISABLED, and the page must tell "no authorizer" from "no ACLs"."""
    from kio.schema.describe_acls.v3.request import DescribeAclsRequest
    from kio.schema.describe_acls.v3.response import DescribeAclsResponse
    from kio.static.primitive import i8

    any_code = i8(1)
    resp = request(host, port, DescribeAclsRequest(resource_type_filter=any_code, resource_name_filter=None,
                                                   pattern_type_filter=any_code, principal_filter=None,
                                                   host_filter=None, operation=any_code, permission_type=any_code),
                   DescribeAclsResponse, timeout)
    found: list[WireAcl] = [
        (str(a.principal), str(a.host), int(a.operation), int(a.permission_type), int(r.resource_type),
         int(r.pattern_type), str(r.resource_name))
        for r in resp.resources for a in r.acls]
    return _code(resp.error_code), str(resp.error_message or ""), found
