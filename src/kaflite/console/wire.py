"""The few requests the console sends itself, with the kio schemas over a plain socket: DescribeLogDirs
(partition sizes) and the group descriptions that carry each member's subscription and rack
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

__all__ = ["describe_log_dirs", "MemberSubscription", "group_subscriptions"]

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
