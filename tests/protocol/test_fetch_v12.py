"""kaflite.protocol.fetch_v12: the replica fetcher's Fetch v12, encoded and decoded by hand, checked against
kio's encoder and decoder (hypothesis), and broken answers refused with ProtocolError only."""

from __future__ import annotations

import datetime
import io
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as rq
from kio.schema.fetch.v12 import response as rs
from kio.schema.types import BrokerId, ProducerId, TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32, i32Timedelta, i64

from kaflite.protocol.errors import ProtocolError
from kaflite.protocol.fetch_v12 import decode_response, encode_request

_I32 = st.integers(-(2**31), 2**31 - 1)
_I64 = st.integers(-(2**63), 2**63 - 1)
_PARTS = st.lists(st.tuples(_I32, _I32, _I64, _I32, _I64, _I32), max_size=4)
_TOPICS = st.lists(st.tuples(st.text(max_size=10), _PARTS), max_size=4)


@settings(max_examples=100, deadline=None)
@given(head=st.tuples(_I32, st.integers(0, 2**31 - 1), _I32, _I32, st.integers(0, 1), _I32, _I32), topics=_TOPICS)
def test_the_request_is_what_kio_reads(head: tuple[int, ...], topics: list[tuple[str, list[Any]]]) -> None:
    body = encode_request(*head, topics)
    req, size = entity_reader(rq.FetchRequest)(body, 0)
    assert size == len(body)
    assert (req.replica_id, req.max_wait, req.min_bytes, req.max_bytes, req.isolation_level, req.session_id,
            req.session_epoch) == (head[0], datetime.timedelta(milliseconds=head[1]), *head[2:])
    assert [(t.topic, [(p.partition, p.current_leader_epoch, p.fetch_offset, p.last_fetched_epoch,
                        p.log_start_offset, p.partition_max_bytes) for p in t.partitions]) for t in req.topics] == [
        (name, list(parts)) for name, parts in topics]
    assert req.forgotten_topics_data == () and req.rack_id == "" and req.cluster_id is None


_PARTITION = st.builds(
    lambda i, code, hw, lso, start, div, leader, aborted, pref, records: rs.PartitionData(
        partition_index=i32(i), error_code=code, high_watermark=i64(hw), last_stable_offset=i64(lso),
        log_start_offset=i64(start),
        diverging_epoch=rs.EpochEndOffset(epoch=i32(div[0]), end_offset=i64(div[1])),
        current_leader=rs.LeaderIdAndEpoch(leader_id=BrokerId(leader[0]), leader_epoch=i32(leader[1])),
        snapshot_id=rs.SnapshotId(end_offset=i64(-1), epoch=i32(-1)),
        aborted_transactions=None if aborted is None else tuple(
            rs.AbortedTransaction(producer_id=ProducerId(a), first_offset=i64(b)) for a, b in aborted),
        preferred_read_replica=BrokerId(pref), records=records),
    _I32, st.sampled_from([ErrorCode.none, ErrorCode.offset_out_of_range, ErrorCode.not_leader_or_follower]),
    _I64, _I64, _I64, st.tuples(_I32, _I64), st.tuples(_I32, _I32),
    st.one_of(st.none(), st.lists(st.tuples(_I64, _I64), max_size=3)), _I32,
    st.one_of(st.none(), st.binary(max_size=200)))


def _answer_bytes(topics: list[tuple[str, list[Any]]], session: int) -> bytes:
    resp = rs.FetchResponse(throttle_time=i32Timedelta.parse(datetime.timedelta(milliseconds=5)),
                            error_code=ErrorCode.none, session_id=i32(session),
                            responses=tuple(rs.FetchableTopicResponse(topic=TopicName(n), partitions=tuple(ps))
                                            for n, ps in topics))
    buf = io.BytesIO()
    entity_writer(rs.FetchResponse)(buf, resp)
    return buf.getvalue()


@settings(max_examples=100, deadline=None)
@given(topics=st.lists(st.tuples(st.text(max_size=10), st.lists(_PARTITION, max_size=4)), max_size=3),
       session=_I32, prefix=st.binary(max_size=4))
def test_the_answer_reads_as_kio_wrote_it(topics: list[tuple[str, list[Any]]], session: int, prefix: bytes) -> None:
    answer = decode_response(prefix + _answer_bytes(topics, session), len(prefix))
    assert (answer.throttle_time_ms, answer.error_code, answer.session_id) == (5, 0, session)
    assert [t.topic for t in answer.responses] == [n for n, _ in topics]
    for got, (_n, parts) in zip(answer.responses, topics, strict=True):
        for mine, kio in zip(got.partitions, parts, strict=True):
            assert (mine.partition_index, mine.error_code, mine.high_watermark, mine.last_stable_offset,
                    mine.log_start_offset, mine.preferred_read_replica) == (
                kio.partition_index, kio.error_code.value, kio.high_watermark, kio.last_stable_offset,
                kio.log_start_offset, kio.preferred_read_replica)
            # kio leaves a tagged field out when it holds Kafka's default (-1, -1): read back as that
            assert mine.diverging_epoch == (kio.diverging_epoch.epoch, kio.diverging_epoch.end_offset)
            assert mine.current_leader == (kio.current_leader.leader_id, kio.current_leader.leader_epoch)
            assert mine.aborted_transactions == (None if kio.aborted_transactions is None else [
                (a.producer_id, a.first_offset) for a in kio.aborted_transactions])
            assert (None if mine.records is None else bytes(mine.records)) == kio.records


@settings(max_examples=300, deadline=None)
@given(topics=st.lists(st.tuples(st.text(max_size=5), st.lists(_PARTITION, max_size=3)), max_size=2),
       cut=st.integers(0, 1000), flips=st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 255)), max_size=3))
def test_a_broken_answer_is_a_protocol_error_or_an_answer(topics: list[tuple[str, list[Any]]], cut: int,
                                                         flips: list[tuple[int, int]]) -> None:
    body = bytearray(_answer_bytes(topics, 1))
    for at, value in flips:
        body[at % len(body)] = value
    try:
        decode_response(bytes(body[:cut]), 0)
    except ProtocolError:
        pass
