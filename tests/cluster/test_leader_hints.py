"""KIP-951 leader discovery on the wire: a broker that does not lead a partition answers Fetch v16+ and
Produce v10+ with NOT_LEADER_OR_FOLLOWER plus the partition's current leader and epoch, and the leader's
endpoint in `node_endpoints` (Kafka's KafkaApis.getCurrentLeader); older versions carry neither."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.conftest import BrokerProcesses
from helpers import wait_until
from kaflite.cluster.admin import ZkAdmin
from kaflite.cluster.zk import KafkaZkClient
from kaflite.protocol.record_batch import build_record_batch
from kaflite.server.context import build
from server.kwire import WireClient

SECOND = datetime.timedelta(seconds=1)


def _fetch(version: int, topic_id: Any) -> Any:
    mod = __import__(f"kio.schema.fetch.v{version}.request", fromlist=["x"])
    return build(mod.FetchRequest, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
                 isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
                 topics=(mod.FetchTopic(topic_id=topic_id, partitions=(build(
                     mod.FetchPartition, partition=0, fetch_offset=0, log_start_offset=-1,
                     partition_max_bytes=1 << 20),)),))


def _produce(version: int, topic: str) -> Any:
    mod = __import__(f"kio.schema.produce.v{version}.request", fromlist=["x"])
    records = build_record_batch([(None, b"v", ())])
    return mod.ProduceRequest(transactional_id=None, acks=1, timeout=5 * SECOND, topic_data=(
        mod.TopicProduceData(name=topic, partition_data=(mod.PartitionProduceData(index=0, records=records),)),))


def test_not_leader_answers_carry_the_current_leader(brokers: BrokerProcesses, zk_connect: str) -> None:
    zk = KafkaZkClient(zk_connect)
    zk.start()
    try:
        brokers.start_registered(zk, 1, 2)
        created = ZkAdmin(zk).create_topic("hinted", -1, -1, {}, assignment=[[1]])
        state = wait_until("hinted-0 led", lambda: zk.get_partition_states([("hinted", 0)])[("hinted", 0)])
        assert state.leader == 1
        leader_endpoint = [(1, "127.0.0.1", brokers.ports[1], None)]
        with WireClient(brokers.bootstrap(2)) as c:
            def fetch_error(version: int) -> Any:
                return c.request(_fetch(version, created.topic_id)).responses[0].partitions[0].error_code
            # broker 2 learns the topic from ZooKeeper: until then the id is unknown to it
            wait_until("broker 2 knows the topic", lambda: fetch_error(16) == ErrorCode.not_leader_or_follower)
            for version in (16, 17):
                r = c.request(_fetch(version, created.topic_id))
                p = r.responses[0].partitions[0]
                assert p.error_code == ErrorCode.not_leader_or_follower
                assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, state.leader_epoch)
                assert [(n.node_id, n.host, n.port, n.rack) for n in r.node_endpoints] == leader_endpoint
            old = c.request(_fetch(15, created.topic_id)).responses[0].partitions[0]
            assert old.error_code == ErrorCode.not_leader_or_follower
            assert old.current_leader.leader_id == -1  # v12-15 have the field; Kafka fills it from v16 only
            for version in (10, 11):
                r = c.request(_produce(version, "hinted"))
                p = r.responses[0].partition_responses[0]
                assert p.error_code == ErrorCode.not_leader_or_follower
                assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, state.leader_epoch)
                assert [(n.node_id, n.host, n.port, n.rack) for n in r.node_endpoints] == leader_endpoint
            r9 = c.request(_produce(9, "hinted"))
            assert r9.responses[0].partition_responses[0].error_code == ErrorCode.not_leader_or_follower
        # the leader itself answers normally, without hints
        with WireClient(brokers.bootstrap(1)) as c:
            r = c.request(_produce(10, "hinted"))
            p = r.responses[0].partition_responses[0]
            assert p.error_code == ErrorCode.none and p.current_leader.leader_id == -1 and not r.node_endpoints
    finally:
        zk.close()
