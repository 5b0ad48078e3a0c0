"""Kafka's znode JSON (cluster.zkdata): exact keys and value types, round trips, clear refusals."""

from __future__ import annotations

import json
import uuid

import pytest

from kaflite.cluster import zkdata as zd
from kaflite.cluster.zkdata import (
    BrokerInfo,
    ControllerInfo,
    LeaderAndIsr,
    ProducerIdsBlock,
    TopicAssignment,
    ZkDataError,
    ZkEndpoint,
    parse_connect,
)


def test_broker_registration_version_5() -> None:
    info = BrokerInfo(
        1,
        (ZkEndpoint("PLAINTEXT", "127.0.0.1", 9092), ZkEndpoint("SSL", "127.0.0.1", 9093, "SSL")),
        rack="r1",
        timestamp_ms=1700000000123,
    )
    obj = json.loads(info.encode())
    # Kafka's BrokerIdZNode.encode, version 5
    assert obj == {
        "features": {},
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"},
        "endpoints": ["PLAINTEXT://127.0.0.1:9092", "SSL://127.0.0.1:9093"],
        "jmx_port": -1,
        "port": 9092,
        "host": "127.0.0.1",
        "version": 5,
        "timestamp": "1700000000123",
        "rack": "r1",
    }
    assert b" " not in info.encode()  # compact, as Jackson writes it
    assert BrokerInfo.decode(1, info.encode()) == info


def test_broker_registration_as_kafka_documents_it() -> None:
    # the version 4 example of Kafka's BrokerIdZNode.decode: no protocol map -> the name is the protocol
    raw = (
        b'{"version":4,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
        b'"endpoints":["CLIENT://host1:9092", "REPLICATION://host1:9093"],"rack":"dc1"}'
    )
    info = BrokerInfo.decode(0, raw)
    assert info.rack == "dc1" and info.jmx_port == 9999 and info.timestamp_ms == 2233345666
    assert [e.connection_string for e in info.endpoints] == [
        "CLIENT://host1:9092",
        "REPLICATION://host1:9093",
    ]
    v1 = BrokerInfo.decode(3, b'{"version":1,"host":"h","port":9092,"jmx_port":-1,"timestamp":"1"}')
    assert v1.endpoints == (ZkEndpoint("PLAINTEXT", "h", 9092),)


def test_ipv6_endpoint_round_trip() -> None:
    info = BrokerInfo(2, (ZkEndpoint("PLAINTEXT", "::1", 9092),))
    assert json.loads(info.encode())["endpoints"] == ["PLAINTEXT://[::1]:9092"]
    assert BrokerInfo.decode(2, info.encode()).endpoints[0].host == "::1"


def test_controller_and_epoch() -> None:
    assert json.loads(ControllerInfo(2, 123).encode()) == {"version": 1, "brokerid": 2, "timestamp": "123"}
    assert ControllerInfo.decode(b'{"version":1,"brokerid":2,"timestamp":"123"}') == ControllerInfo(2, 123)
    assert zd.encode_controller_epoch(7) == b"7"
    assert zd.decode_controller_epoch(b"7") == 7
    with pytest.raises(ZkDataError, match="/controller_epoch"):
        zd.decode_controller_epoch(b"seven")


def test_topic_assignment() -> None:
    tid = uuid.UUID("5f2ed2a3-8a1c-4f1a-9c3b-1d2e3f405162")
    a = TopicAssignment("t", {1: (2, 0), 0: (0, 1)}, tid, adding_replicas={0: (2,)})
    obj = json.loads(a.encode())
    assert obj == {
        "partitions": {"0": [0, 1], "1": [2, 0]},
        "adding_replicas": {"0": [2]},
        "removing_replicas": {},
        "version": 3,
        "topic_id": zd.kafka_uuid(tid),
    }
    assert len(obj["topic_id"]) == 22  # Kafka's Uuid.toString: URL-safe base64, no padding
    back = TopicAssignment.decode("t", a.encode())
    assert (
        back.topic_id == tid
        and back.partitions == {0: (0, 1), 1: (2, 0)}
        and back.adding_replicas == {0: (2,)}
    )
    # version 1 (no topic id, no reassignment fields) as older Kafka wrote it
    old = TopicAssignment.decode("t", b'{"version":1,"partitions":{"0":[1,2]}}')
    assert old.topic_id is None and old.partitions == {0: (1, 2)}
    with pytest.raises(ZkDataError, match="/brokers/topics/t"):
        TopicAssignment.decode("t", b'{"version":1,"partitions":{"0":["a"]}}')


def test_partition_state() -> None:
    s = LeaderAndIsr(leader=1, leader_epoch=4, isr=(1, 2), controller_epoch=3)
    assert json.loads(s.encode()) == {
        "controller_epoch": 3,
        "leader": 1,
        "version": 1,
        "leader_epoch": 4,
        "isr": [1, 2],
    }
    path = zd.partition_state_path("t", 0)
    assert path == "/brokers/topics/t/partitions/0/state"
    assert LeaderAndIsr.decode(path, s.encode(), 9) == LeaderAndIsr(1, 4, (1, 2), 3, 9)
    with pytest.raises(ZkDataError, match="leader_epoch"):
        LeaderAndIsr.decode(path, b'{"leader":1,"isr":[1],"controller_epoch":1}', 0)
    with pytest.raises(ZkDataError, match="not JSON"):
        LeaderAndIsr.decode(path, b"{", 0)


def test_configs_and_notifications() -> None:
    assert json.loads(zd.encode_config({"retention.ms": "1000"})) == {
        "version": 1,
        "config": {"retention.ms": "1000"},
    }
    assert zd.decode_config("/config/topics/t", zd.encode_config({"a": "b"})) == {"a": "b"}
    assert zd.decode_config("/config/topics/t", b"") == {}
    assert json.loads(zd.encode_config_change("topics", "t")) == {"version": 2, "entity_path": "topics/t"}
    assert zd.decode_config_change("/config/changes/x", zd.encode_config_change("topics", "t")) == (
        "topics",
        "t",
    )


def test_admin_znodes() -> None:
    moves = {("t", 0): [2, 1], ("a", 3): [0]}
    assert json.loads(zd.encode_reassignment(moves)) == {
        "version": 1,
        "partitions": [
            {"topic": "a", "partition": 3, "replicas": [0]},
            {"topic": "t", "partition": 0, "replicas": [2, 1]},
        ],
    }
    assert zd.decode_reassignment(zd.encode_reassignment(moves)) == {("t", 0): (2, 1), ("a", 3): (0,)}
    raw = zd.encode_partition_list({("t", 1)})
    assert json.loads(raw) == {"version": 1, "partitions": [{"topic": "t", "partition": 1}]}
    assert zd.decode_partition_list(zd.PREFERRED_REPLICA_ELECTION, raw) == {("t", 1)}


def test_cluster_id_and_producer_id_blocks() -> None:
    assert json.loads(zd.encode_cluster_id("abc")) == {"version": "1", "id": "abc"}
    assert zd.decode_cluster_id(zd.encode_cluster_id("abc")) == "abc"
    b = ProducerIdsBlock(1, 0)
    assert b.last == 999
    assert json.loads(b.encode()) == {"version": 1, "broker": 1, "block_start": "0", "block_end": "999"}
    nxt = b.next_block(2)
    assert (nxt.broker, nxt.first, nxt.last) == (2, 1000, 1999)
    assert ProducerIdsBlock.decode(nxt.encode()) == nxt


@pytest.mark.parametrize(
    ("value", "hosts", "chroot"),
    [
        ("127.0.0.1:2181", [("127.0.0.1", 2181)], None),
        ("a:1,b:2/kafka", [("a", 1), ("b", 2)], "/kafka"),
        ("zk/a/b", [("zk", 2181)], "/a/b"),
        ("zk:2182/", [("zk", 2182)], None),
    ],
)
def test_parse_connect(value: str, hosts: list[tuple[str, int]], chroot: str | None) -> None:
    assert parse_connect(value) == (hosts, chroot)


@pytest.mark.parametrize("value", ["", "zk:x", "zk:70000", "zk:1/a/", "zk:1/a//b", "zk:1/a/../b", ",zk:1"])
def test_parse_connect_refusals(value: str) -> None:
    with pytest.raises(ValueError, match="zookeeper.connect"):
        parse_connect(value)
