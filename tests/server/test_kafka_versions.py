"""The served version table against Apache Kafka's (3.9.0 and 4.1.0), and wire tests for the versions it
brought: Metadata v0 and by topic id with an empty name, DeleteTopics v6 by id, Fetch v13+ by topic id,
ListOffsets v8-9, zstd gated below Produce v7 and Fetch v10; Kafka 4.1's Produce v12-13 (by topic id),
Fetch v18 (a follower's high watermark), Metadata v13, ListOffsets v10, DescribeCluster v2 and
AlterPartitionReassignments v1. (DescribeGroups v6: tests/groups/test_wire_apis.py; EndTxn v5,
TxnOffsetCommit v5, ListTransactions v2: tests/transactions/test_txn_versions.py.)"""

from __future__ import annotations

import datetime
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map, schema_name_map
from kio.schema.metadata.v0.request import MetadataRequest as MetadataV0
from kio.schema.metadata.v0.request import MetadataRequestTopic as MetadataTopicV0
from kio.schema.metadata.v12.request import MetadataRequest as MetadataV12
from kio.schema.metadata.v12.request import MetadataRequestTopic as MetadataTopicV12
from kwire import WireClient

from kaflite.protocol.compression import CODECS
from kaflite.protocol.record_batch import build_record_batch
from kaflite.server.context import build
from kaflite.server.embedded import EmbeddedBroker
from kaflite.server.handlers import load_registry

DATA = Path(__file__).parent.parent / "data"
KAFKA_39 = DATA / "kafka-api-versions.json"  # Kafka 3.9.0's validVersions
KAFKA_41 = DATA / "kafka-4.1-api-versions.json"  # Kafka 4.1.0's, with latestVersionUnstable
SECOND = datetime.timedelta(seconds=1)
ZERO_ID = uuid.UUID(int=0)


def _range(text: str) -> tuple[int, int]:
    lo, _, hi = text.partition("-")
    return int(lo), int(hi or lo)


def kafka_served(path: Path) -> dict[int, tuple[str, tuple[int, int]]]:
    """api key -> (name, the versions a broker of that release advertises): its requests' validVersions, less
    the top version when it is marked latestVersionUnstable (not advertised unless
    unstable.api.versions.enable=true)."""
    out = {}
    for name, v in json.loads(path.read_text())["apis"].items():
        lo, hi = _range(v["validVersions"])
        out[v["apiKey"]] = (name, (lo, hi - 1 if v.get("latestVersionUnstable") else hi))
    return out


def _kio(key: int) -> tuple[int, int]:
    """The oldest and newest versions kio has a schema for (its oldest is Kafka 4.x's floor, KIP-896)."""
    versions = schema_name_map[api_key_map[key]]
    return min(versions), max(versions)


def _served() -> dict[int, tuple[int, int]]:
    return {k: (lo, hi) for k, lo, hi in load_registry().ranges()}


@pytest.mark.parametrize("path", [KAFKA_39, KAFKA_41], ids=["3.9.0", "4.1.0"])
def test_served_ranges_cover_kafkas(path: Path) -> None:
    """Every API kaflite serves covers the versions that Kafka release serves, from Kafka 4.x's floor (KIP-896)
    up to the newest one kio has a schema for."""
    kafka = kafka_served(path)
    served = _served()
    assert len(served) >= 29
    missing = []
    newer = kafka_served(KAFKA_41)
    for key, (lo, hi) in served.items():
        if key not in kafka and path != KAFKA_41 and key in newer:
            continue  # an API that release did not have yet (KIP-932's share-group offsets APIs, 90-92)
        assert key in kafka, f"api key {key} is not one of Kafka's APIs"
        name, (k_lo, k_hi) = kafka[key]
        floor, newest = _kio(key)
        want_lo, want_hi = max(k_lo, floor), min(k_hi, newest)
        if lo > want_lo or hi < want_hi:
            missing.append(f"{name} ({key}): serves {lo}-{hi}, Kafka {k_lo}-{k_hi} (wanted {want_lo}-{want_hi})")
    assert not missing, missing


def test_nothing_served_beyond_kafka_41() -> None:
    """The served table equals Kafka 4.1.0's at the top: no version a 4.1.0 broker does not advertise (a newer
    release's, or one 4.1.0 marks latestVersionUnstable such as OffsetCommit / OffsetFetch v10 and
    InitProducerId v6, whose v6 kio holds in a later release's shape)."""
    kafka = kafka_served(KAFKA_41)
    beyond = [f"{kafka[k][0]} ({k}): serves up to v{hi}, Kafka 4.1.0 up to v{kafka[k][1][1]}"
              for k, (_lo, hi) in _served().items() if hi > kafka[k][1][1]]
    assert not beyond, beyond


def test_metadata_v0_lists_every_topic_with_an_empty_list(broker: EmbeddedBroker) -> None:
    broker.call(broker.server.broker.create_topic, "v0-topic", 2, None)
    with WireClient(broker.bootstrap) as c:
        every = c.request(MetadataV0(topics=()))
        one = c.request(MetadataV0(topics=(MetadataTopicV0(name="v0-topic"),)))
    assert [b.node_id for b in every.brokers] == [0]
    assert "v0-topic" in {t.name for t in every.topics}
    assert [(t.name, t.error_code, len(t.partitions)) for t in one.topics] == [("v0-topic", ErrorCode.none, 2)]


def test_metadata_by_topic_id_with_an_empty_name(broker: EmbeddedBroker) -> None:
    topic = broker.call(broker.server.broker.create_topic, "by-id", 3, None)
    unknown = uuid.uuid4()
    with WireClient(broker.bootstrap) as c:
        r = c.request(MetadataV12(topics=(MetadataTopicV12(topic_id=topic.topic_id, name=""),
                                          MetadataTopicV12(topic_id=unknown, name="")),
                                  allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    got = {t.topic_id: t for t in r.topics}
    assert got[topic.topic_id].error_code == ErrorCode.none
    assert got[topic.topic_id].name == "by-id" and len(got[topic.topic_id].partitions) == 3
    assert got[unknown].error_code == ErrorCode.unknown_topic_id and got[unknown].name is None


def test_delete_topics_v6_by_id_and_by_name(broker: EmbeddedBroker) -> None:
    b = broker.server.broker
    a = broker.call(b.create_topic, "del-by-id", 1, None)
    n = broker.call(b.create_topic, "del-by-name", 1, None)
    unknown = uuid.uuid4()
    with WireClient(broker.bootstrap) as c:
        r = c.request(DeleteTopicsRequest(topics=(DeleteTopicState(name=None, topic_id=a.topic_id),
                                                  DeleteTopicState(name="del-by-name", topic_id=ZERO_ID),
                                                  DeleteTopicState(name=None, topic_id=unknown)),
                                          timeout=5 * SECOND))
        both = c.request(DeleteTopicsRequest(topics=(DeleteTopicState(name="x", topic_id=unknown),),
                                             timeout=5 * SECOND))
    got = [(x.name, x.topic_id, x.error_code) for x in r.responses]
    assert got == [("del-by-id", a.topic_id, ErrorCode.none), ("del-by-name", n.topic_id, ErrorCode.none),
                   (None, unknown, ErrorCode.unknown_topic_id)]
    assert "del-by-id" not in b.metadata.topics and "del-by-name" not in b.metadata.topics
    assert [x.error_code for x in both.responses] == [ErrorCode.invalid_request]


def _fetch_v(version: int, topic: Any, offset: int = 0) -> Any:
    mod = __import__(f"kio.schema.fetch.v{version}.request", fromlist=["x"])
    key = {"topic_id": topic} if version >= 13 else {"topic": topic}
    return build(
        mod.FetchRequest,
        max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, forgotten_topics_data=(), rack_id="",
        topics=(mod.FetchTopic(**key, partitions=(build(
            mod.FetchPartition, partition=0, fetch_offset=offset, log_start_offset=-1,
            partition_max_bytes=1 << 20),)),),
    )


def _produce_v(version: int, topic: str, records: bytes) -> Any:
    mod = __import__(f"kio.schema.produce.v{version}.request", fromlist=["x"])
    return mod.ProduceRequest(transactional_id=None, acks=-1, timeout=5 * SECOND, topic_data=(
        mod.TopicProduceData(name=topic, partition_data=(mod.PartitionProduceData(index=0, records=records),)),))


@pytest.mark.parametrize("version", [13, 14, 15, 16, 17])
def test_fetch_by_topic_id(broker: EmbeddedBroker, version: int) -> None:
    name = f"fetch-ids-{version}"
    topic = broker.call(broker.server.broker.create_topic, name, 1, None)
    batch = build_record_batch([(b"k", b"v%d" % i, ()) for i in range(3)])
    unknown = uuid.uuid4()
    with WireClient(broker.bootstrap) as c:
        assert c.request(_produce_v(9, name, batch)).responses[0].partition_responses[0].error_code == ErrorCode.none
        r = c.request(_fetch_v(version, topic.topic_id))
        miss = c.request(_fetch_v(version, unknown))
    assert r.error_code == ErrorCode.none
    [t] = r.responses
    assert t.topic_id == topic.topic_id
    [p] = t.partitions
    assert p.error_code == ErrorCode.none and p.high_watermark == 3 and p.records == batch[:12] + p.records[12:]
    assert len(p.records) == len(batch)
    [mt] = miss.responses
    assert mt.topic_id == unknown and [x.error_code for x in mt.partitions] == [ErrorCode.unknown_topic_id]


def test_list_offsets_v8_v9_special_timestamps(broker: EmbeddedBroker) -> None:
    from kio.schema.list_offsets.v9.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic

    broker.call(broker.server.broker.create_topic, "lo-v9", 1, None)
    with WireClient(broker.bootstrap) as c:
        c.request(_produce_v(9, "lo-v9", build_record_batch([(None, b"a", ()), (None, b"b", ())])))
        r = c.request(ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(ListOffsetsTopic(
            name="lo-v9", partitions=tuple(ListOffsetsPartition(partition_index=0, timestamp=ts)
                                           for ts in (-4, -5))),)))
    earliest_local, latest_tiered = r.topics[0].partitions
    assert (earliest_local.error_code, earliest_local.offset) == (ErrorCode.none, 0)
    assert (latest_tiered.error_code, latest_tiered.offset, latest_tiered.timestamp) == (ErrorCode.none, -1, -1)


def test_zstd_refused_below_produce_v7_and_fetch_v10(broker: EmbeddedBroker) -> None:
    b = broker.server.broker
    broker.call(b.create_topic, "zstd-gate", 1, {"compression.type": "zstd"})
    broker.call(b.create_topic, "zstd-plain", 1, None)
    zstd = build_record_batch([(None, b"z" * 100, ())], compression=CODECS["zstd"])
    plain = build_record_batch([(None, b"p", ())])
    with WireClient(broker.bootstrap) as c:
        old = c.request(_produce_v(6, "zstd-plain", zstd)).responses[0].partition_responses[0]
        ok_old = c.request(_produce_v(6, "zstd-plain", plain)).responses[0].partition_responses[0]
        new = c.request(_produce_v(7, "zstd-gate", zstd)).responses[0].partition_responses[0]
        f9 = c.request(_fetch_v(9, "zstd-gate")).responses[0].partitions[0]
        f10 = c.request(_fetch_v(10, "zstd-gate")).responses[0].partitions[0]
        f9_plain = c.request(_fetch_v(9, "zstd-plain")).responses[0].partitions[0]
    assert old.error_code == ErrorCode.unsupported_compression_type
    assert ok_old.error_code == ErrorCode.none and ok_old.base_offset == 0  # the zstd batch was not written
    assert new.error_code == ErrorCode.none
    assert f9.error_code == ErrorCode.unsupported_compression_type and f9.records in (None, b"")
    assert f10.error_code == ErrorCode.none and f10.high_watermark == 1 and f10.records
    assert f9_plain.error_code == ErrorCode.none and f9_plain.high_watermark == 1


# --- Kafka 4.1's versions ---------------------------------------------------------------------------

def _produce_by_id(topics: list[tuple[uuid.UUID, list[tuple[int, bytes | None]]]], acks: int = -1) -> Any:
    from kio.schema.produce.v13.request import PartitionProduceData, ProduceRequest, TopicProduceData

    return ProduceRequest(transactional_id=None, acks=acks, timeout=5 * SECOND, topic_data=tuple(
        TopicProduceData(topic_id=tid, partition_data=tuple(PartitionProduceData(index=p, records=r)
                                                            for p, r in parts))
        for tid, parts in topics))


@pytest.mark.parametrize("version", [12, 13])
def test_produce_v12_v13_append_and_fetch_back(broker: EmbeddedBroker, version: int) -> None:
    """v12 is v11 (its only meaning, KIP-890's transaction V2, needs a feature kaflite does not finalize);
    v13 names the topic by id in the request and in the answer."""
    name = f"produce-v{version}"
    topic = broker.call(broker.server.broker.create_topic, name, 2, None)
    batch = build_record_batch([(b"k", b"v%d" % i, ()) for i in range(4)])
    with WireClient(broker.bootstrap) as c:
        if version == 12:
            r = c.request(_produce_v(12, name, batch))
            [t] = r.responses
            assert t.name == name
        else:
            r = c.request(_produce_by_id([(topic.topic_id, [(0, batch)])]))
            [t] = r.responses
            assert t.topic_id == topic.topic_id
        [p] = t.partition_responses
        assert (p.index, p.error_code, p.base_offset) == (0, ErrorCode.none, 0)
        f = c.request(_fetch_v(18, topic.topic_id))
    [fp] = f.responses[0].partitions
    assert fp.error_code == ErrorCode.none and fp.high_watermark == 4 and len(fp.records) == len(batch)


def test_produce_v13_unknown_topic_id(broker: EmbeddedBroker) -> None:
    """An id no topic has, and the zero id, are UNKNOWN_TOPIC_ID for each of their partitions, named by the
    request's id; the known topic of the same request is written; acks=0 closes the connection."""
    topic = broker.call(broker.server.broker.create_topic, "produce-v13-mixed", 1, None)
    unknown = uuid.uuid4()
    batch = build_record_batch([(None, b"x", ())])
    with WireClient(broker.bootstrap) as c:
        r = c.request(_produce_by_id([(unknown, [(0, batch), (3, batch)]), (topic.topic_id, [(0, batch)]),
                                      (ZERO_ID, [(0, batch)])]))
    got = [(t.topic_id, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses])
           for t in r.responses]
    assert got == [(unknown, [(0, ErrorCode.unknown_topic_id, -1), (3, ErrorCode.unknown_topic_id, -1)]),
                   (topic.topic_id, [(0, ErrorCode.none, 0)]),
                   (None, [(0, ErrorCode.unknown_topic_id, -1)])]  # kio reads the zero id as None
    with WireClient(broker.bootstrap) as c:
        c.send(_produce_by_id([(unknown, [(0, batch)])], acks=0))
        assert c.is_closed()


def _fetch_v18(topic_id: uuid.UUID, offset: int, *, replica_id: int = -1, known_hw: int = 2**63 - 1,
               max_wait_ms: int = 0, min_bytes: int = 1) -> Any:
    from kio.schema.fetch.v18.request import FetchPartition, FetchRequest, FetchTopic, ReplicaState

    return FetchRequest(replica_state=ReplicaState(replica_id=replica_id, replica_epoch=-1),
                        max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=min_bytes,
                        max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                        topics=(FetchTopic(topic_id=topic_id, partitions=(FetchPartition(
                            partition=0, fetch_offset=offset, partition_max_bytes=1 << 20, high_watermark=known_hw),)),),
                        forgotten_topics_data=(), rack_id="")


def test_fetch_v18_follower_high_watermark(broker: EmbeddedBroker) -> None:
    """KIP-1166: a follower's fetch that has nothing to read is answered at once when the leader's high
    watermark is above the one the follower says it knows, and waits out max_wait otherwise; a consumer's
    high watermark changes nothing. (On one node the broker's own id is the partition's only replica, so it
    stands in for the follower.)"""
    import time

    topic = broker.call(broker.server.broker.create_topic, "fetch-v18-hw", 1, None)
    node = broker.server.broker.node_id
    with WireClient(broker.bootstrap) as c:
        c.request(_produce_by_id([(topic.topic_id, [(0, build_record_batch([(None, b"a", ()), (None, b"b", ())]))])]))

        def timed(req: Any) -> tuple[float, Any]:
            t0 = time.monotonic()
            r = c.request(req)
            return time.monotonic() - t0, r

        news, r_news = timed(_fetch_v18(topic.topic_id, 2, replica_id=node, known_hw=1, max_wait_ms=5000))
        unknown, _ = timed(_fetch_v18(topic.topic_id, 2, replica_id=node, known_hw=-1, max_wait_ms=5000))
        current, r_current = timed(_fetch_v18(topic.topic_id, 2, replica_id=node, known_hw=2, max_wait_ms=600))
        consumer, _ = timed(_fetch_v18(topic.topic_id, 2, known_hw=-1, max_wait_ms=600))
    [p] = r_news.responses[0].partitions
    assert (p.error_code, p.high_watermark, len(p.records or b"")) == (ErrorCode.none, 2, 0)
    assert news < 2.5 and unknown < 2.5
    assert current >= 0.5 and r_current.responses[0].partitions[0].high_watermark == 2
    assert consumer >= 0.5


def test_metadata_v13_top_level_error_code(broker: EmbeddedBroker) -> None:
    from kio.schema.metadata.v13.request import MetadataRequest, MetadataRequestTopic

    topic = broker.call(broker.server.broker.create_topic, "md-v13", 2, None)
    with WireClient(broker.bootstrap) as c:
        r = c.request(MetadataRequest(topics=(MetadataRequestTopic(topic_id=ZERO_ID, name="md-v13"),
                                              MetadataRequestTopic(topic_id=uuid.uuid4(), name=None)),
                                      allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        every = c.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                          include_topic_authorized_operations=False))
    assert r.error_code == ErrorCode.none and every.error_code == ErrorCode.none
    assert [b.node_id for b in r.brokers] == [broker.server.broker.node_id]
    known, missing = r.topics
    assert (known.name, known.topic_id, known.error_code, len(known.partitions)) == (
        "md-v13", topic.topic_id, ErrorCode.none, 2)
    assert missing.error_code == ErrorCode.unknown_topic_id
    assert "md-v13" in {t.name for t in every.topics}


@pytest.mark.parametrize("version", [9, 10])
def test_list_offsets_v10_answers_as_v9(broker: EmbeddedBroker, version: int) -> None:
    """v10 adds `timeout_ms` for reads from tiered storage (KIP-1075); without tiered storage every special
    timestamp and a lookup by time answer at once, as in v9, whatever the timeout (even 0)."""
    mod = __import__(f"kio.schema.list_offsets.v{version}.request", fromlist=["x"])
    name = f"lo-as-v9-{version}"
    broker.call(broker.server.broker.create_topic, name, 1, None)
    batch = build_record_batch([(None, b"a", ()), (None, b"b", ()), (None, b"c", ())], timestamp_ms=1_000)
    with WireClient(broker.bootstrap) as c:
        c.request(_produce_v(9, name, batch))
        r = c.request(build(mod.ListOffsetsRequest, replica_id=-1, isolation_level=0, timeout=datetime.timedelta(0),
                            topics=(mod.ListOffsetsTopic(name=name, partitions=tuple(
                                mod.ListOffsetsPartition(partition_index=0, timestamp=ts)
                                for ts in (-2, -1, -3, -4, -5, 1_000, 10**12))),)))
    got = [(p.error_code, p.offset) for p in r.topics[0].partitions]
    assert got == [(ErrorCode.none, 0), (ErrorCode.none, 3), (ErrorCode.none, 0), (ErrorCode.none, 0),
                   (ErrorCode.none, -1), (ErrorCode.none, 0), (ErrorCode.none, -1)]


@pytest.mark.parametrize("include_fenced", [False, True])
def test_describe_cluster_v2_no_fenced_brokers(broker: EmbeddedBroker, include_fenced: bool) -> None:
    """v2 (KIP-1073): every broker kaflite knows is registered and unfenced, whether fenced ones are asked
    for or not."""
    from kio.schema.describe_cluster.v2.request import DescribeClusterRequest

    host, port = broker.bootstrap.rsplit(":", 1)
    with WireClient(broker.bootstrap) as c:
        r = c.request(DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=1,
                                             include_fenced_brokers=include_fenced))
    assert r.error_code == ErrorCode.none and r.endpoint_type == 1
    assert [(b.broker_id, b.host, b.port, b.is_fenced) for b in r.brokers] == [
        (broker.server.broker.node_id, host, int(port), False)]
    assert r.controller_id == broker.server.broker.metadata.controller_id


@pytest.mark.parametrize("allow", [False, True])
def test_alter_partition_reassignments_v1_single_node(broker: EmbeddedBroker, allow: bool) -> None:
    """v1 (KIP-860) echoes allow_replication_factor_change; on one node the only target it accepts is the node
    itself, of the size of every replica set, so the flag refuses nothing (the controller's check is in
    tests/cluster/test_controller_reassignment.py)."""
    from kio.schema.alter_partition_reassignments.v1.request import (
        AlterPartitionReassignmentsRequest,
        ReassignablePartition,
        ReassignableTopic,
    )

    name = f"apr-v1-{allow}"
    broker.call(broker.server.broker.create_topic, name, 1, None)
    node = broker.server.broker.node_id
    with WireClient(broker.bootstrap) as c:
        r = c.request(AlterPartitionReassignmentsRequest(
            timeout=5 * SECOND, allow_replication_factor_change=allow, topics=(ReassignableTopic(name=name, partitions=(
                ReassignablePartition(partition_index=0, replicas=(node,)),
                ReassignablePartition(partition_index=1, replicas=(node,)))),)))
    assert (r.error_code, r.allow_replication_factor_change) == (ErrorCode.none, allow)
    assert [(p.partition_index, p.error_code) for t in r.responses for p in t.partitions] == [
        (0, ErrorCode.none), (1, ErrorCode.unknown_topic_or_partition)]
