"""KIP-219 on the wire: a throttled produce / fetch is answered at once with its throttle time, then its
connection reads nothing for that long; other clients and follower fetches are not held up."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kwire import WireClient, decode_response

from kaflite.protocol.record_batch import build_record_batch
from kaflite.server.embedded import EmbeddedBroker
from kaflite.server.quota import (
    CONSUMER_BYTE_RATE,
    DEFAULT,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaEntity,
)

SECOND = datetime.timedelta(seconds=1)
APIV = ApiVersionsRequest(client_software_name="kwire", client_software_version="0")


def _produce(topic: str, value: bytes) -> ProduceRequest:
    records = build_record_batch([(None, value, [])])
    return ProduceRequest(transactional_id=None, acks=1, timeout=5 * SECOND, topic_data=(
        TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=0, records=records),)),))


def _fetch(topic: str, replica_id: int = -1) -> FetchRequest:
    return FetchRequest(replica_id=replica_id, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
                        isolation_level=0, session_id=0, session_epoch=-1, topics=(FetchTopic(topic=topic, partitions=(
                            FetchPartition(partition=0, fetch_offset=0, log_start_offset=-1,
                                           partition_max_bytes=1 << 20),),),),
                        forgotten_topics_data=(), rack_id="")


def _call(c: WireClient, request: object, client_id: str) -> object:
    corr = c.send(request, client_id=client_id)
    return decode_response(request.__api_key__, request.__version__, c.read_frame(), corr)  # type: ignore[attr-defined]


@pytest.fixture
def quotas(broker: EmbeddedBroker) -> Iterator[object]:
    q = broker.server.broker.quotas
    yield q
    broker.call(q.replace_all, {})


def test_throttled_produce_answers_at_once_then_mutes(broker: EmbeddedBroker, quotas: object) -> None:
    broker.call(broker.server.broker.create_topic, "q-produce", 1, None)
    broker.call(quotas.set, QuotaEntity(None, "slow"), PRODUCER_BYTE_RATE, 1000.0)  # type: ignore[attr-defined]
    with WireClient(broker.bootstrap) as slow, WireClient(broker.bootstrap) as fast:
        started = time.monotonic()
        r = _call(slow, _produce("q-produce", b"x" * 1500), "slow")
        answered = time.monotonic() - started
        # about 1600 bytes over the 1 s window (2 samples, 1 assumed full) against 1000 B/s: ~600 ms
        throttle = r.throttle_time.total_seconds()  # type: ignore[attr-defined]
        assert 0.5 <= throttle <= 0.75, throttle
        assert answered < 0.4  # the answer is not delayed (KIP-219)
        assert r.responses[0].partition_responses[0].error_code == 0  # type: ignore[attr-defined]
        # another client id is neither throttled nor delayed meanwhile
        t0 = time.monotonic()
        other = _call(fast, _produce("q-produce", b"y" * 1500), "fast")
        assert other.throttle_time.total_seconds() == 0  # type: ignore[attr-defined]
        assert time.monotonic() - t0 < 0.3
        # the throttled connection reads its next request only once the throttle is over
        _call(slow, APIV, "slow")
        assert time.monotonic() - started >= throttle - 0.05


def test_throttled_fetch_answers_empty_and_follower_is_exempt(broker: EmbeddedBroker, quotas: object) -> None:
    broker.call(broker.server.broker.create_topic, "q-fetch", 1, None)
    with WireClient(broker.bootstrap) as c:
        _call(c, _produce("q-fetch", b"z" * 3000), "writer")
    broker.call(quotas.set, QuotaEntity(None, DEFAULT), CONSUMER_BYTE_RATE, 1000.0)  # type: ignore[attr-defined]
    with WireClient(broker.bootstrap) as c:
        first = _call(c, _fetch("q-fetch"), "reader")
        # Kafka's throttled fetch: throttle time, no data, the bytes taken back from the rate
        assert first.throttle_time.total_seconds() > 0  # type: ignore[attr-defined]
        assert first.responses == ()  # type: ignore[attr-defined]
    # "reader" is now far over its quota: any consumer fetch of it is throttled, even one reading nothing
    b = broker.server.broker
    broker.call(lambda: quotas.record(CONSUMER_BYTE_RATE, "User:ANONYMOUS", "reader",  # type: ignore[attr-defined]
                                      50_000, b.now_ms()))
    with WireClient(broker.bootstrap) as c:
        # a follower's fetch is not held to client quotas (Kafka uses the replication quota for those)
        follower = _call(c, _fetch("q-fetch", replica_id=1), "reader")
        assert follower.throttle_time.total_seconds() == 0  # type: ignore[attr-defined]
    with WireClient(broker.bootstrap) as c:
        again = _call(c, _fetch("q-fetch"), "reader")
        assert again.throttle_time.total_seconds() > 0  # type: ignore[attr-defined]





def test_consumer_fetch_is_capped_at_its_quota_window(broker: EmbeddedBroker, quotas: object) -> None:
    broker.call(broker.server.broker.create_topic, "q-cap", 1, None)
    with WireClient(broker.bootstrap) as c:
        for _ in range(5):
            _call(c, _produce("q-cap", b"w" * 500), "writer")
    # the module's window: 2 samples of 1 s, so one fetch may take 1 * 1 s * 1200 B/s
    broker.call(quotas.set, QuotaEntity(None, "capped"), CONSUMER_BYTE_RATE, 1200.0)  # type: ignore[attr-defined]
    with WireClient(broker.bootstrap) as c:
        r = _call(c, _fetch("q-cap"), "capped")
    assert r.throttle_time.total_seconds() == 0  # type: ignore[attr-defined]
    got = len(r.responses[0].partitions[0].records or b"")  # type: ignore[attr-defined]
    assert 500 < got <= 1200  # some batches, not all five (about 2900 bytes): the quota's window caps it


def test_request_percentage_throttles_by_the_handlers_loop_time(broker: EmbeddedBroker, quotas: object) -> None:
    from kio.schema.metadata.v12.request import MetadataRequest

    broker.call(broker.server.broker.create_topic, "q-request", 1, None)
    with WireClient(broker.bootstrap) as c:
        _call(c, _produce("q-request", b"r" * 100), "writer")
    # a ten-thousandth of a percent: any request's loop time (tens of microseconds at least) is far over it
    broker.call(quotas.set, QuotaEntity(None, "busy"), REQUEST_PERCENTAGE, 0.0001)  # type: ignore[attr-defined]
    metadata = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                               include_topic_authorized_operations=False)
    with WireClient(broker.bootstrap) as busy, WireClient(broker.bootstrap) as calm:
        r = _call(busy, metadata, "busy")
        # the request quota's throttle is bounded by one window (the module's: 1 s), as Kafka's
        assert 0 < r.throttle_time.total_seconds() <= 1.0  # type: ignore[attr-defined]
        assert r.brokers  # type: ignore[attr-defined]  # answered in full
        assert _call(calm, metadata, "calm").throttle_time.total_seconds() == 0  # type: ignore[attr-defined]
    with WireClient(broker.bootstrap) as busy:
        # Produce carries it in its hot-encoded answer; a Fetch throttled by it answers no data, as Kafka's
        produced = _call(busy, _produce("q-request", b"s" * 100), "busy")
        assert produced.throttle_time.total_seconds() > 0  # type: ignore[attr-defined]
    with WireClient(broker.bootstrap) as busy:
        fetched = _call(busy, _fetch("q-request"), "busy")
        assert fetched.throttle_time.total_seconds() > 0  # type: ignore[attr-defined]
        assert fetched.responses == ()  # type: ignore[attr-defined]
    with WireClient(broker.bootstrap) as busy:
        # a follower's fetch is exempt
        follower = _call(busy, _fetch("q-request", replica_id=1), "busy")
        assert follower.throttle_time.total_seconds() == 0  # type: ignore[attr-defined]
