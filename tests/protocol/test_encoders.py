"""The hand-written Produce, Fetch and Metadata response encoders produce exactly kio's bytes, for every
version the broker serves (the ranges come from the handlers' registry, so a new version is covered the
moment it is served)."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from helpers import kio_served_versions
from kaflite.protocol.encoders import encode_fetch_response, encode_produce_response
from kaflite.protocol.messages import encode_body
from kaflite.server.context import build
from kaflite.server.handlers import load_registry

ERRORS = st.sampled_from([ErrorCode.none, ErrorCode.offset_out_of_range, ErrorCode.unknown_topic_or_partition])
NAMES = st.text(alphabet="abcxyz._-09", min_size=1, max_size=12)
I64 = st.integers(min_value=-1, max_value=2**40)


def _dt(ms: int) -> datetime.datetime | None:
    return None if ms < 0 else datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)


fetch_partition = st.tuples(
    st.integers(0, 1000),
    ERRORS,
    I64,
    I64,
    I64,
    st.one_of(st.none(), st.lists(st.tuples(I64, I64), max_size=2)),
    st.integers(-1, 3),
    st.lists(st.binary(min_size=1, max_size=40), max_size=3),
)
fetch_topics = st.lists(st.tuples(NAMES, st.lists(fetch_partition, max_size=3)), max_size=3)


def _topic_key(version: int, name: str) -> Any:
    """A topic as a Fetch (Produce) response names it: by name up to v12, by id from v13 (KIP-516)."""
    return uuid.uuid5(uuid.NAMESPACE_DNS, name) if version >= 13 else name


def _served(api_key: int) -> list[int]:
    """The served versions kio has schemas for (Produce v0-v2 have none: test_legacy_response_layout)."""
    return [v for k, v in kio_served_versions(load_registry().ranges()) if k == api_key]


@pytest.mark.parametrize("version", _served(1))
@settings(max_examples=40, deadline=None)
@given(topics=fetch_topics, throttle=st.integers(0, 1000), session=st.integers(0, 5))
def test_fetch_response_matches_kio(version: int, topics, throttle: int, session: int) -> None:
    R = load_payload_module(1, version, EntityType.response)
    expected = encode_body(
        build(
            R.FetchResponse,
            throttle_time=datetime.timedelta(milliseconds=throttle),
            error_code=ErrorCode.none,
            session_id=session,
            responses=tuple(
                build(
                    R.FetchableTopicResponse,
                    topic=name,
                    topic_id=_topic_key(version, name),
                    partitions=tuple(
                        build(
                            R.PartitionData,
                            partition_index=p[0],
                            error_code=p[1],
                            high_watermark=p[2],
                            last_stable_offset=p[3],
                            log_start_offset=p[4],
                            aborted_transactions=None
                            if p[5] is None
                            else tuple(build(R.AbortedTransaction, producer_id=a, first_offset=b) for a, b in p[5]),
                            preferred_read_replica=p[6],
                            records=b"".join(p[7]),
                        )
                        for p in parts
                    ),
                )
                for name, parts in topics
            ),
        )
    )
    ours = encode_fetch_response(
        version,
        throttle,
        0,
        session,
        [
            (_topic_key(version, name),
             [(p[0], p[1].value, p[2], p[3], p[4], p[5], p[6], [memoryview(b) for b in p[7]], sum(map(len, p[7])))
              for p in parts])
            for name, parts in topics
        ],
    )
    assert b"".join(bytes(x) for x in ours) == expected


produce_partition = st.tuples(
    st.integers(0, 1000), ERRORS, I64, I64, I64, st.one_of(st.none(), st.text(max_size=10)),
    st.lists(st.tuples(st.integers(0, 100), st.one_of(st.none(), st.text(max_size=10))), max_size=3),
)
produce_topics = st.lists(st.tuples(NAMES, st.lists(produce_partition, max_size=3)), max_size=3)


def test_legacy_response_layout() -> None:
    """Produce v0-v2 answers, which kio has no schema for: v0 index, error, base offset; v1 adds the
    throttle time at the end; v2 the log append time after the base offset (Kafka's ProduceResponse.json)."""
    parts = [(3, 0, 42, 7, 0, None, ())]
    head = b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x03\x00\x00"
    base = (42).to_bytes(8, "big")
    assert encode_produce_response(0, 9, [("t", parts)]) == head + base
    assert encode_produce_response(1, 9, [("t", parts)]) == head + base + (9).to_bytes(4, "big")
    assert encode_produce_response(2, 9, [("t", parts)]) == head + base + (7).to_bytes(8, "big") + \
        (9).to_bytes(4, "big")


@pytest.mark.parametrize("version", _served(0))
@settings(max_examples=40, deadline=None)
@given(topics=produce_topics, throttle=st.integers(0, 1000))
def test_produce_response_matches_kio(version: int, topics, throttle: int) -> None:
    R = load_payload_module(0, version, EntityType.response)
    expected = encode_body(
        build(
            R.ProduceResponse,
            throttle_time=datetime.timedelta(milliseconds=throttle),
            responses=tuple(
                build(
                    R.TopicProduceResponse,
                    name=name,
                    topic_id=_topic_key(version, name),
                    partition_responses=tuple(
                        build(
                            R.PartitionProduceResponse,
                            index=p[0],
                            error_code=p[1],
                            base_offset=p[2],
                            log_append_time=_dt(p[3]),
                            log_start_offset=p[4],
                            record_errors=tuple(build(R.BatchIndexAndErrorMessage, batch_index=i,
                                                      batch_index_error_message=m) for i, m in p[6])
                            if version >= 8 else (),
                            error_message=p[5],
                        )
                        for p in parts
                    ),
                )
                for name, parts in topics
            ),
        )
    )
    ours = encode_produce_response(
        version, throttle, [(_topic_key(version, name), [(p[0], p[1].value, p[2], p[3], p[4], p[5],
                                                          tuple(p[6]) if version >= 8 else ()) for p in parts])
                            for name, parts in topics]
    )
    assert ours == expected


md_partition = st.tuples(st.integers(0, 100), st.integers(-1, 5), st.lists(st.integers(0, 5), max_size=3))
md_topics = st.lists(st.tuples(NAMES, st.booleans(), st.lists(md_partition, max_size=3)), max_size=3)


@pytest.mark.parametrize("version", _served(3))
@settings(max_examples=30, deadline=None)
@given(
    topics=md_topics,
    cluster_id=st.one_of(st.none(), NAMES),
    controller=st.integers(-1, 3),
    throttle=st.integers(0, 100),
    ops=st.sampled_from([-(2**31), 3320]),
    error=st.sampled_from([ErrorCode.none, ErrorCode.rebootstrap_required]),
)
def test_metadata_response_matches_kio(version: int, topics, cluster_id, controller: int, throttle: int, ops: int,
                                       error: ErrorCode) -> None:
    import uuid

    from kaflite.protocol.encoders import encode_metadata_response

    R = load_payload_module(3, version, EntityType.response)
    broker = build(R.MetadataResponseBroker, node_id=0, host="127.0.0.1", port=9092, rack=None)
    entities = [
        build(
            R.MetadataResponseTopic,
            error_code=ErrorCode.none,
            name=name,
            topic_id=uuid.UUID(int=len(name)),
            is_internal=internal,
            partitions=tuple(
                build(
                    R.MetadataResponsePartition,
                    error_code=ErrorCode.none,
                    partition_index=p,
                    leader_id=0,
                    leader_epoch=epoch,
                    replica_nodes=tuple(replicas),
                    isr_nodes=tuple(replicas),
                    offline_replicas=(),
                )
                for p, epoch, replicas in parts
            ),
            topic_authorized_operations=ops,
        )
        for name, internal, parts in topics
    ]
    expected = encode_body(
        build(
            R.MetadataResponse,
            throttle_time=datetime.timedelta(milliseconds=throttle),
            brokers=(broker,),
            cluster_id=cluster_id,
            controller_id=controller,
            topics=tuple(entities),
            cluster_authorized_operations=ops,
            error_code=error,
        )
    )
    ours = encode_metadata_response(
        version, throttle, [encode_body(broker)], cluster_id, controller, [encode_body(e) for e in entities], ops,
        error.value,
    )
    assert b"".join(ours) == expected


def _read(key: int, version: int, name: str, data: bytes) -> Any:
    from kio.serial import entity_reader

    R = load_payload_module(key, version, EntityType.response)
    body, size = entity_reader(getattr(R, name))(memoryview(data), 0)
    assert size == len(data), "trailing bytes"
    return body


@pytest.mark.parametrize("version", [12, 15, 16, 17, 18])
def test_fetch_leader_hints_kip951(version: int) -> None:
    """CurrentLeader (v12+, tag 1) on the hinted partition only, NodeEndpoints (v16+, tag 0) in the answer."""
    topic = _topic_key(version, "t")
    parts = [(0, ErrorCode.not_leader_or_follower.value, -1, -1, -1, None, -1, [], 0),
             (1, ErrorCode.none.value, 5, 5, 0, None, -1, [b"x"], 1)]
    body = encode_fetch_response(version, 0, 0, 0, [(topic, parts)], {(topic, 0): (2, 7)},
                                 [(2, "127.0.0.1", 9093, "r1"), (3, "h3", 9094, None)])
    resp = _read(1, version, "FetchResponse", b"".join(bytes(b) for b in body))
    p0, p1 = resp.responses[0].partitions
    assert (p0.current_leader.leader_id, p0.current_leader.leader_epoch) == (2, 7)
    assert (p1.current_leader.leader_id, p1.current_leader.leader_epoch) == (-1, -1)  # the default: omitted
    if version >= 16:
        assert [(n.node_id, n.host, n.port, n.rack) for n in resp.node_endpoints] == [
            (2, "127.0.0.1", 9093, "r1"), (3, "h3", 9094, None)]


@pytest.mark.parametrize("version", [12, 13, 16, 18])
def test_fetch_diverging_epoch_kip595(version: int) -> None:
    """DivergingEpoch (v12+, tag 0) alone, and before CurrentLeader (tag 1) on the same partition."""
    topic = _topic_key(version, "t")
    parts = [(0, ErrorCode.none.value, 3, 3, 0, None, -1, [], 0),
             (1, ErrorCode.none.value, 3, 3, 0, None, -1, [], 0),
             (2, ErrorCode.none.value, 3, 3, 0, None, -1, [b"x"], 1)]
    body = encode_fetch_response(version, 0, 0, 0, [(topic, parts)], {(topic, 1): (4, 9)}, (),
                                 {(topic, 0): (2, 17), (topic, 1): (5, 1 << 40)})
    resp = _read(1, version, "FetchResponse", b"".join(bytes(b) for b in body))
    p0, p1, p2 = resp.responses[0].partitions
    assert (p0.diverging_epoch.epoch, p0.diverging_epoch.end_offset) == (2, 17)
    assert (p0.current_leader.leader_id, p0.current_leader.leader_epoch) == (-1, -1)
    assert (p1.diverging_epoch.epoch, p1.diverging_epoch.end_offset) == (5, 1 << 40)
    assert (p1.current_leader.leader_id, p1.current_leader.leader_epoch) == (4, 9)
    assert (p2.diverging_epoch.epoch, p2.diverging_epoch.end_offset) == (-1, -1)  # the default: omitted
    assert bytes(p2.records) == b"x"


@pytest.mark.parametrize("version", [9, 10, 11, 12, 13])
def test_produce_leader_hints_kip951(version: int) -> None:
    topic = _topic_key(version, "t")
    parts = [(0, ErrorCode.not_leader_or_follower.value, -1, -1, -1, None, ()), (1, 0, 3, -1, 0, None, ())]
    body = encode_produce_response(version, 0, [(topic, parts)], {(topic, 0): (2, 7)},
                                   [(2, "127.0.0.1", 9093, None)])
    resp = _read(0, version, "ProduceResponse", body)
    p0, p1 = resp.responses[0].partition_responses
    if version >= 10:
        assert (p0.current_leader.leader_id, p0.current_leader.leader_epoch) == (2, 7)
        assert (p1.current_leader.leader_id, p1.current_leader.leader_epoch) == (-1, -1)
        assert [(n.node_id, n.host, n.port, n.rack) for n in resp.node_endpoints] == [(2, "127.0.0.1", 9093, None)]
    else:
        assert p0.error_code == ErrorCode.not_leader_or_follower and p1.base_offset == 3
