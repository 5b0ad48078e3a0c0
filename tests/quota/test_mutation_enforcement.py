"""controller_mutation_rate on the wire (KIP-599): CreateTopics, CreatePartitions and DeleteTopics take
their partitions from the client's token bucket; a strict version refuses the topics over it with
THROTTLING_QUOTA_EXCEEDED, an older version takes them and is throttled. The module's broker has Kafka's
default controller window (11 samples of 1 s): a quota of 2 per second is a burst of 22 partitions."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.create_partitions.v2 import request as cp2
from kio.schema.create_partitions.v3 import request as cp3
from kio.schema.create_topics.v5 import request as ct5
from kio.schema.create_topics.v7 import request as ct7
from kio.schema.delete_topics.v4 import request as dt4
from kio.schema.delete_topics.v6 import request as dt6
from kio.schema.errors import ErrorCode
from kwire import WireClient, decode_response

from kaflite.server.embedded import EmbeddedBroker
from kaflite.server.quota import CONTROLLER_MUTATION_RATE, DEFAULT, QuotaEntity

TIMEOUT = datetime.timedelta(seconds=5)
ZERO_ID = __import__("uuid").UUID(int=0)


def _call(broker: EmbeddedBroker, request: Any, client_id: str) -> Any:
    """One request on a connection of its own: a throttled connection reads nothing more for a while."""
    with WireClient(broker.bootstrap) as c:
        corr = c.send(request, client_id=client_id)
        return decode_response(request.__api_key__, request.__version__, c.read_frame(), corr)


def _create(v: Any, topics: dict[str, int], validate_only: bool = False) -> Any:
    return v.CreateTopicsRequest(topics=tuple(v.CreatableTopic(name=n, num_partitions=p, replication_factor=1,
                                                               assignments=(), configs=())
                                              for n, p in topics.items()),
                                 timeout=TIMEOUT, validate_only=validate_only)


@pytest.fixture
def per_client_quota(broker: EmbeddedBroker) -> Iterator[None]:
    """2 partitions per second for every client id, each its own bucket (a default client quota)."""
    q = broker.server.broker.quotas
    broker.call(q.set, QuotaEntity(None, DEFAULT), CONTROLLER_MUTATION_RATE, 2.0)
    yield
    broker.call(q.replace_all, {})


def test_create_topics_strict_refuses_the_topics_over_the_quota(broker: EmbeddedBroker,
                                                                 per_client_quota: None) -> None:
    b = broker.server.broker
    dry = _call(broker, _create(ct7, {"m-dry": 100}, validate_only=True), "ct-strict")
    assert dry.topics[0].error_code == ErrorCode.none and dry.throttle_time == datetime.timedelta(0)
    # 22 tokens: 20 leave 2, 5 overdraw to -3 (the quota was not exhausted yet), 1 is refused
    r = _call(broker, _create(ct7, {"m-a": 20, "m-b": 5, "m-c": 1}), "ct-strict")
    assert [(t.name, t.error_code) for t in r.topics] == [
        ("m-a", ErrorCode.none), ("m-b", ErrorCode.none), ("m-c", ErrorCode.throttling_quota_exceeded)]
    assert r.topics[2].error_message == "The throttling quota has been exceeded."
    assert 0 < r.throttle_time.total_seconds() <= 1.5  # 3 tokens at 2 per second, less the time since
    assert "m-b" in b.metadata.topics and "m-c" not in b.metadata.topics
    # another client id has its own bucket
    other = _call(broker, _create(ct7, {"m-c": 1}), "ct-other")
    assert other.topics[0].error_code == ErrorCode.none and other.throttle_time == datetime.timedelta(0)


def test_create_topics_below_v6_is_throttled_not_refused(broker: EmbeddedBroker, per_client_quota: None) -> None:
    r = _call(broker, _create(ct5, {"m-p1": 30}), "ct-permissive")
    assert r.topics[0].error_code == ErrorCode.none
    # 8 tokens overdrawn at 2 per second: 4 s, less the time the creation took since (as Kafka's)
    assert 0 < r.throttle_time.total_seconds() <= 4.0
    again = _call(broker, _create(ct5, {"m-p2": 2}), "ct-permissive")
    assert again.topics[0].error_code == ErrorCode.none
    assert 0 < again.throttle_time.total_seconds() <= 5.0  # about 10 overdrawn, less the time since


def test_delete_topics_and_create_partitions_take_their_partitions(broker: EmbeddedBroker,
                                                                    per_client_quota: None) -> None:
    b = broker.server.broker
    for name, n in (("d-20", 20), ("d-5", 5), ("d-1", 1), ("d-old", 30)):
        broker.call(b.create_topic, name, n, None)
    r = _call(broker, dt6.DeleteTopicsRequest(topics=tuple(dt6.DeleteTopicState(name=n, topic_id=ZERO_ID)
                                                           for n in ("d-20", "d-5", "d-1", "d-unknown")),
                                              timeout=TIMEOUT), "dt-strict")
    assert [(t.name, t.error_code) for t in r.responses] == [
        ("d-20", ErrorCode.none), ("d-5", ErrorCode.none), ("d-1", ErrorCode.throttling_quota_exceeded),
        ("d-unknown", ErrorCode.unknown_topic_or_partition)]  # a topic it does not know is answered as such
    # throttled: 3 tokens overdrawn at 2 a second, less the time the deletions took since (0.46 s left once
    # on a loaded CI machine); the arithmetic itself is tests/quota/test_mutation_quota.py's, on a clock
    assert r.throttle_time.total_seconds() > 0 and "d-1" in b.metadata.topics
    old = _call(broker, dt4.DeleteTopicsRequest(topic_names=("d-old",), timeout=TIMEOUT), "dt-permissive")
    assert old.responses[0].error_code == ErrorCode.none and old.throttle_time.total_seconds() > 0

    for name in ("g-1", "g-2", "g-3"):
        broker.call(b.create_topic, name, 1, None)

    def grow(v: Any, name: str, count: int) -> Any:
        return v.CreatePartitionsRequest(topics=(v.CreatePartitionsTopic(name=name, count=count, assignments=None),),
                                         timeout=TIMEOUT, validate_only=False)

    assert _call(broker, grow(cp3, "g-1", 24), "cp-strict").results[0].error_code == ErrorCode.none  # -1
    refused = _call(broker, grow(cp3, "g-2", 2), "cp-strict")
    assert refused.results[0].error_code == ErrorCode.throttling_quota_exceeded
    assert 0.0 < refused.throttle_time.total_seconds() <= 0.5 and b.metadata.topics["g-2"].num_partitions == 1
    assert _call(broker, grow(cp2, "g-3", 24), "cp-permissive").results[0].error_code == ErrorCode.none
    permissive = _call(broker, grow(cp2, "g-2", 2), "cp-permissive")
    assert permissive.results[0].error_code == ErrorCode.none and permissive.throttle_time.total_seconds() > 0


def test_confluent_admin_client_is_throttled(broker: EmbeddedBroker, per_client_quota: None) -> None:
    """librdkafka's AdminClient sends CreateTopics v4 and DeleteTopics v1 (permissive): its topics are
    created, the answer's throttle reaches its throttle_cb, and its next request waits for the throttle
    (the connection is muted, KIP-219)."""
    import time

    from confluent_kafka.admin import AdminClient, NewTopic

    events: list[Any] = []
    admin = AdminClient({**broker.confluent_config(), "client.id": "admin-tool", "throttle_cb": events.append})
    admin.create_topics([NewTopic("m-conf", 25, 1)], request_timeout=10)["m-conf"].result(timeout=15)
    created = time.monotonic()
    assert "m-conf" in broker.server.broker.metadata.topics
    deadline = created + 5
    while not events and time.monotonic() < deadline:
        admin.poll(0.1)
    assert events and 0.5 <= events[0].throttle_time <= 1.5  # 3 partitions over the burst at 2 per second
    throttle = events[0].throttle_time
    admin.delete_topics(["m-conf"], request_timeout=10)["m-conf"].result(timeout=15)
    assert time.monotonic() - created >= throttle - 0.3  # not read before the throttle was over
    assert "m-conf" not in broker.server.broker.metadata.topics


def test_auto_created_topics_take_from_the_quota(broker: EmbeddedBroker, per_client_quota: None) -> None:
    """Kafka's Metadata auto-creation records its partitions on a permissive quota: never refused, and
    they count against the client's next CreateTopics."""
    from kio.schema.metadata.v12 import request as md

    b = broker.server.broker
    assert b.setting("auto.create.topics.enable")
    meta = md.MetadataRequest(topics=tuple(md.MetadataRequestTopic(topic_id=ZERO_ID, name=f"m-auto-{i}")
                                           for i in range(2)),
                              allow_auto_topic_creation=True, include_topic_authorized_operations=False)
    r = _call(broker, meta, "auto")
    assert [t.error_code for t in r.topics] == [ErrorCode.none] * 2 and r.throttle_time == datetime.timedelta(0)
    partitions = int(b.setting("num.partitions"))
    left = 22 - 2 * partitions  # what the burst still holds
    ok = _call(broker, _create(ct7, {"m-auto-fill": left + 1}), "auto")  # passes (the bucket was >= 0)
    assert ok.topics[0].error_code == ErrorCode.none
    refused = _call(broker, _create(ct7, {"m-auto-more": 1}), "auto")
    assert refused.topics[0].error_code == ErrorCode.throttling_quota_exceeded
