"""Client quotas on a cluster of three `python -m kaflite.server` processes on a real ZooKeeper: a quota
altered through one broker (AlterClientQuotas on the wire: neither confluent-kafka nor kafka-python has
the client quota admin API) is stored in Kafka's znode, described by another broker at once, and enforced
by a third within a second; its removal likewise. A controller_mutation_rate quota refuses the topics of a
CreateTopics over it, after the topics' own checks."""

from __future__ import annotations

import datetime
import json
import time
from typing import Any

from kio.schema.alter_client_quotas.v1 import request as areq
from kio.schema.create_topics.v7 import request as ctreq
from kio.schema.describe_client_quotas.v1 import request as dreq
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from cluster.conftest import BrokerProcesses
from helpers import wait_until
from kaflite.cluster.zk import KafkaZkClient
from kaflite.protocol.record_batch import build_record_batch
from server.kwire import WireClient, decode_response

IDS = (1, 2, 3)


def _alter(bootstrap: str, remove: bool, client_id: str = "slow", key: str = "producer_byte_rate",
           value: float = 10.0) -> None:
    with WireClient(bootstrap) as c:
        r = c.request(areq.AlterClientQuotasRequest(validate_only=False, entries=(areq.EntryData(
            entity=(areq.EntityData(entity_type="client-id", entity_name=client_id),),
            ops=(areq.OpData(key=key, value=value, remove=remove),)),)))
    assert [(e.error_code, e.error_message) for e in r.entries] == [(ErrorCode.none, None)]


def _described(bootstrap: str) -> list[tuple[Any, ...]]:
    with WireClient(bootstrap) as c:
        r = c.request(dreq.DescribeClientQuotasRequest(components=(dreq.ComponentData(
            entity_type="client-id", match_type=0, match="slow"),), strict=False))
    assert r.error_code == ErrorCode.none, r.error_message
    return [(tuple((e.entity_type, e.entity_name) for e in entry.entity),
             tuple((v.key, v.value) for v in entry.values)) for entry in r.entries]


def _throttle_ms(bootstrap: str, client_id: str) -> float:
    """A 1 KB Produce (to a topic nobody has: the bytes count all the same) on a fresh connection."""
    records = build_record_batch([(None, b"x" * 1000, [])])
    request = ProduceRequest(transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=5), topic_data=(
        TopicProduceData(name="no-such-topic", partition_data=(PartitionProduceData(index=0, records=records),)),))
    with WireClient(bootstrap) as c:
        corr = c.send(request, client_id=client_id)
        r = decode_response(0, 9, c.read_frame(), corr)
    return float(r.throttle_time.total_seconds() * 1000)


def test_a_quota_altered_through_one_broker_is_described_and_enforced_by_the_others(
        brokers: BrokerProcesses, zk: KafkaZkClient) -> None:
    brokers.start_registered(zk, *IDS, overrides=("auto.create.topics.enable=false",))
    assert _throttle_ms(brokers.bootstrap(3), "slow") == 0
    _alter(brokers.bootstrap(1), remove=False)
    altered = time.monotonic()
    # Kafka's znode and notification
    assert json.loads(zk._zk.get("/config/clients/slow")[0]) == \
        {"version": 1, "config": {"producer_byte_rate": "10"}}
    changes = [zk._zk.get(f"/config/changes/{c}")[0] for c in zk._zk.get_children("/config/changes")]
    assert b'{"version":2,"entity_path":"clients/slow"}' in changes
    # another broker describes it at once (it reads ZooKeeper, as Kafka's)
    assert _described(brokers.bootstrap(2)) == [((("client-id", "slow"),), (("producer_byte_rate", 10.0),))]
    # a third throttles it within a second (1 KB over 10 assumed windows against 10 B/s), not another id
    wait_until("broker 3 throttles client id slow", lambda: _throttle_ms(brokers.bootstrap(3), "slow") > 0,
               timeout=5.0, interval=0.02)
    assert time.monotonic() - altered < 1.0
    assert _throttle_ms(brokers.bootstrap(3), "fast") == 0
    # removed through broker 2: broker 3 lets it through again, broker 1 describes nothing
    _alter(brokers.bootstrap(2), remove=True)
    removed = time.monotonic()
    wait_until("broker 3 no longer throttles", lambda: _throttle_ms(brokers.bootstrap(3), "slow") == 0,
               timeout=5.0, interval=0.02)
    assert time.monotonic() - removed < 1.0
    assert _described(brokers.bootstrap(1)) == []
    assert json.loads(zk._zk.get("/config/clients/slow")[0]) == {"version": 1, "config": {}}


def _create_topics(bootstrap: str, client_id: str, topics: list[tuple[str, int, int]]) -> list[tuple[str, int]]:
    request = ctreq.CreateTopicsRequest(topics=tuple(
        ctreq.CreatableTopic(name=n, num_partitions=p, replication_factor=rf, assignments=(), configs=())
        for n, p, rf in topics), timeout=datetime.timedelta(seconds=10), validate_only=False)
    with WireClient(bootstrap) as c:
        corr = c.send(request, client_id=client_id)
        r = decode_response(19, 7, c.read_frame(), corr)
    return [(t.name, t.error_code) for t in r.topics]


def test_controller_mutation_quota_in_a_cluster(brokers: BrokerProcesses, zk: KafkaZkClient) -> None:
    """The cluster's CreateTopics plans every topic before the quota (one ZooKeeper round), so a topic
    refused by its own checks takes nothing, then creates the admitted ones."""
    brokers.start_registered(zk, 1, 2)
    # 1 partition per second: a burst of 11 (Kafka's 11 one-second windows); in force on broker 1 at once
    _alter(brokers.bootstrap(1), remove=False, client_id="admin", key="controller_mutation_rate", value=1.0)
    got = _create_topics(brokers.bootstrap(1), "admin", [("m-rf3", 11, 3), ("m-12", 12, 2), ("m-1", 1, 1)])
    assert got == [("m-rf3", ErrorCode.invalid_replication_factor), ("m-12", ErrorCode.none),
                   ("m-1", ErrorCode.throttling_quota_exceeded)]
    assert zk._zk.exists("/brokers/topics/m-12") and not zk._zk.exists("/brokers/topics/m-1")
    # another client id is not held to it
    assert _create_topics(brokers.bootstrap(1), "other", [("m-1", 1, 1)]) == [("m-1", ErrorCode.none)]
