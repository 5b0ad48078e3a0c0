"""The served version table against Apache Kafka's (3.9.0 and 4.1.0), and wire tests for the versions it
brought: Metadata v0 and by topic id with an empty name, DeleteTopics v6 by id, Fetch v13+ by topic id,
ListOffsets v8-9, zstd gated below Produce v7 and Fetch v10."""

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
# Kafka 4.1.0's newer versions not served yet (api keys); emptied as they land
PENDING_41 = frozenset({0, 1, 2, 3, 15, 26, 28, 45, 60, 66})


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
    for key, (lo, hi) in served.items():
        assert key in kafka, f"api key {key} is not one of Kafka's APIs"
        if path is KAFKA_41 and key in PENDING_41:
            continue
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
