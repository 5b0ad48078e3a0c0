"""KIP-848 regex subscriptions (SubscribedTopicRegex): a confluent-kafka consumer with
group.protocol=consumer subscribed to a pattern gets the matching topics, and a topic created later that
matches joins its assignment; ConsumerGroupDescribe shows the expression; a bad expression is refused."""

from __future__ import annotations

import datetime
import time

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest

from kaflite.protocol.errors import ErrorCode
from server.kwire import WireClient


def _assigned(c: ck.Consumer, want: set[tuple[str, int]], timeout: float = 30.0) -> set[tuple[str, int]]:
    deadline = time.monotonic() + timeout
    got: set[tuple[str, int]] = set()
    while time.monotonic() < deadline:
        c.poll(0.2)
        got = {(tp.topic, tp.partition) for tp in c.assignment()}
        if got == want:
            break
    return got


def test_regex_subscription_picks_up_a_topic_created_later(broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("rx-alpha", 2, 1), NewTopic("other-rx", 1, 1)])["rx-alpha"].result(10)
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "rx-group", "group.protocol": "consumer",
                     "topic.metadata.refresh.interval.ms": 1000})
    try:
        c.subscribe(["^rx-.*"])
        assert _assigned(c, {("rx-alpha", 0), ("rx-alpha", 1)}) == {("rx-alpha", 0), ("rx-alpha", 1)}
        admin.create_topics([NewTopic("rx-beta", 1, 1)])["rx-beta"].result(10)
        want = {("rx-alpha", 0), ("rx-alpha", 1), ("rx-beta", 0)}
        assert _assigned(c, want) == want
        with WireClient(broker.bootstrap) as w:
            [g] = w.request(ConsumerGroupDescribeRequest(group_ids=("rx-group",),
                                                         include_authorized_operations=False)).groups
        # librdkafka sends its patterns joined as one expression: "(^rx-.*)"
        assert [mb.subscribed_topic_regex for mb in g.members] == ["(^rx-.*)"]
    finally:
        c.close()


def test_a_bad_expression_is_invalid_regular_expression(broker) -> None:
    with WireClient(broker.bootstrap) as w:
        r = w.request(ConsumerGroupHeartbeatRequest(
            group_id="rx-bad", member_id="m-1", member_epoch=0, rebalance_timeout=datetime.timedelta(seconds=5),
            subscribed_topic_names=None, subscribed_topic_regex="rx-(", topic_partitions=()))
    assert r.error_code == ErrorCode.invalid_regular_expression
    assert r.error_message and "rx-(" in r.error_message
