"""The transaction APIs on the wire (kio requests, a real broker): AddPartitionsToTxn v3 and the v4
batched / verify-only form, the transactional Produce check, AddOffsetsToTxn + TxnOffsetCommit with
OffsetFetch require_stable answering UNSTABLE_OFFSET_COMMIT until the COMMIT marker, EndTxn, fencing
errors, DescribeTransactions / ListTransactions / DescribeProducers."""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest as AddV3
from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnTopic as TopicV3
from kio.schema.add_partitions_to_txn.v4.request import AddPartitionsToTxnRequest as AddV4
from kio.schema.add_partitions_to_txn.v4.request import AddPartitionsToTxnTopic as TopicV4
from kio.schema.add_partitions_to_txn.v4.request import AddPartitionsToTxnTransaction
from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.list_transactions.v0.request import ListTransactionsRequest
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest, OffsetFetchRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.txn_offset_commit.v3.request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kio.static.primitive import i16, i32, i64

from kaflite.protocol.errors import ErrorCode
from kaflite.protocol.record_batch import build_record_batch
from server.kwire import WireClient

E = ErrorCode


def _errors_v3(resp: Any) -> dict[tuple[str, int], ErrorCode]:
    return {(t.name, int(p.partition_index)): p.partition_error_code for t in resp.results_by_topic_v3_and_below
            for p in t.results_by_partition}


def _init_producer(c: WireClient, tid: str) -> tuple[int, int]:
    """InitProducerId for a new transactional id: its (producer id, epoch)."""
    init = c.request(InitProducerIdRequest(transactional_id=tid, transaction_timeout=datetime.timedelta(seconds=60),
                                           producer_id=i64(-1), producer_epoch=i16(-1)))
    assert init.error_code == E.none
    return int(init.producer_id), int(init.producer_epoch)


def _fetch_stable(c: WireClient, group: str, topic: str) -> Any:
    r = c.request(OffsetFetchRequest(group_id=group, topics=(OffsetFetchRequestTopic(
        name=topic, partition_indexes=(i32(0),)),), require_stable=True))
    return r.topics[0].partitions[0]


def test_transaction_apis_on_the_wire(broker: Any, topic_factory: Callable[[int], str]) -> None:
    topic = topic_factory(2)
    tid = f"wire-{uuid.uuid4().hex[:6]}"
    group = f"g-{uuid.uuid4().hex[:6]}"
    with WireClient(broker.bootstrap) as c:
        pid, epoch = _init_producer(c, tid)

        def verify(partition: int) -> ErrorCode:
            r = c.request(AddV4(transactions=(AddPartitionsToTxnTransaction(
                transactional_id=tid, producer_id=pid, producer_epoch=i16(epoch), verify_only=True,
                topics=(TopicV4(name=topic, partitions=(i32(partition),)),)),)))
            assert r.error_code == E.none
            return r.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code

        assert verify(0) == E.invalid_txn_state  # not added yet
        r = c.request(AddV3(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                            v3_and_below_producer_epoch=i16(epoch), v3_and_below_topics=(
                                TopicV3(name=topic, partitions=(i32(0),)), TopicV3(name="no-such", partitions=(i32(0),)))))
        assert _errors_v3(r) == {(topic, 0): E.operation_not_attempted, ("no-such", 0): E.unknown_topic_or_partition}
        r = c.request(AddV3(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                            v3_and_below_producer_epoch=i16(epoch + 1), v3_and_below_topics=(
                                TopicV3(name=topic, partitions=(i32(0),)),)))
        assert _errors_v3(r) == {(topic, 0): E.producer_fenced}
        r = c.request(AddV3(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                            v3_and_below_producer_epoch=i16(epoch), v3_and_below_topics=(
                                TopicV3(name=topic, partitions=(i32(0),)),)))
        assert _errors_v3(r) == {(topic, 0): E.none}
        assert verify(0) == E.none and verify(1) == E.invalid_txn_state

        def produce(partition: int) -> ErrorCode:
            records = build_record_batch([(None, b"x", [])], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                                         is_transactional=True)
            r = c.request(ProduceRequest(transactional_id=tid, acks=i16(-1), timeout=datetime.timedelta(seconds=5),
                                         topic_data=(TopicProduceData(name=topic, partition_data=(
                                             PartitionProduceData(index=i32(partition), records=records),)),)))
            return r.responses[0].partition_responses[0].error_code

        assert produce(1) == E.invalid_txn_state  # partition 1 is not in the transaction: refused, unwritten
        assert produce(0) == E.none
        r = c.request(AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=i16(epoch),
                                             group_id=group))
        assert r.error_code == E.none
        r = c.request(TxnOffsetCommitRequest(
            transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=i16(epoch),
            generation_id=i32(-1), member_id="", group_instance_id=None, topics=(TxnOffsetCommitRequestTopic(
                name=topic, partitions=(TxnOffsetCommitRequestPartition(
                    partition_index=i32(0), committed_offset=i64(7), committed_leader_epoch=i32(-1),
                    committed_metadata="m"),)),)))
        assert r.topics[0].partitions[0].error_code == E.none
        pending = _fetch_stable(c, group, topic)
        assert pending.error_code == E.unstable_offset_commit
        producers = c.request(DescribeProducersRequest(topics=(TopicRequest(name=topic, partition_indexes=(i32(0),)),)))
        (state,) = [s for s in producers.topics[0].partitions[0].active_producers if int(s.producer_id) == pid]
        assert int(state.current_txn_start_offset) == 0
        assert c.request(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=i16(epoch + 1),
                                       committed=True)).error_code == E.producer_fenced
        assert c.request(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=i16(epoch),
                                       committed=True)).error_code == E.none
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            stable = _fetch_stable(c, group, topic)
            if stable.error_code == E.none:
                break
            time.sleep(0.1)
        assert (stable.error_code, int(stable.committed_offset), stable.metadata) == (E.none, 7, "m")
        listed = c.request(ListTransactionsRequest(state_filters=("CompleteCommit", "Bogus"), producer_id_filters=()))
        assert list(listed.unknown_state_filters) == ["Bogus"]
        assert [(s.transactional_id, s.transaction_state) for s in listed.transaction_states
                if s.transactional_id == tid] == [(tid, "CompleteCommit")]
        from kio.schema.list_transactions.v1.request import ListTransactionsRequest as ListV1

        long_running = c.request(ListV1(state_filters=(), producer_id_filters=(), duration_filter=i64(3_600_000)))
        assert tid not in [s.transactional_id for s in long_running.transaction_states]  # started < 1 h ago
        every = c.request(ListV1(state_filters=(), producer_id_filters=(), duration_filter=i64(-1)))
        assert tid in [s.transactional_id for s in every.transaction_states]


def test_txn_offset_commit_answers_unknown_topics_and_partitions(broker: Any,
                                                                 topic_factory: Callable[[int], str]) -> None:
    """Kafka's KafkaApis answers UNKNOWN_TOPIC_OR_PARTITION for a topic not in the metadata and for a
    partition beyond the topic's count before the group coordinator sees the request: the rest of it is
    written in the transaction, and only the rest is committed by the COMMIT marker. A request with no
    partition left is answered without the coordinator's checks (a wrong epoch is not even looked at)."""
    topic = topic_factory(2)
    tid = f"unknown-{uuid.uuid4().hex[:6]}"
    group = f"g-{uuid.uuid4().hex[:6]}"
    with WireClient(broker.bootstrap) as c:
        pid, epoch = _init_producer(c, tid)
        assert c.request(AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=i16(epoch),
                                                group_id=group)).error_code == E.none

        def commit(wanted: dict[str, tuple[int, ...]], producer_epoch: int = epoch) -> dict[tuple[str, int], ErrorCode]:
            r = c.request(TxnOffsetCommitRequest(
                transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=i16(producer_epoch),
                generation_id=i32(-1), member_id="", group_instance_id=None, topics=tuple(
                    TxnOffsetCommitRequestTopic(name=t, partitions=tuple(TxnOffsetCommitRequestPartition(
                        partition_index=i32(p), committed_offset=i64(11), committed_leader_epoch=i32(-1),
                        committed_metadata="batch-1") for p in ps)) for t, ps in wanted.items())))
            return {(t.name, int(p.partition_index)): p.error_code for t in r.topics for p in t.partitions}

        assert commit({topic: (1, 2), f"{topic}.progress": (0,)}) == {
            (topic, 1): E.none, (topic, 2): E.unknown_topic_or_partition,
            (f"{topic}.progress", 0): E.unknown_topic_or_partition}
        assert commit({"no-such": (0,)}, producer_epoch=epoch + 5) == {("no-such", 0): E.unknown_topic_or_partition}
        assert commit({"no-such": (0,), topic: (0,)}, producer_epoch=epoch + 5) == {
            ("no-such", 0): E.unknown_topic_or_partition, (topic, 0): E.producer_fenced}
        assert c.request(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=i16(epoch),
                                       committed=True)).error_code == E.none
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            r = c.request(OffsetFetchRequest(group_id=group, topics=(
                OffsetFetchRequestTopic(name=topic, partition_indexes=(i32(0), i32(1))),
                OffsetFetchRequestTopic(name=f"{topic}.progress", partition_indexes=(i32(0),))), require_stable=True))
            got = {(t.name, int(p.partition_index)): (p.error_code, int(p.committed_offset), p.metadata)
                   for t in r.topics for p in t.partitions}
            if got[(topic, 1)][0] == E.none:
                break
            time.sleep(0.1)
        assert got == {(topic, 0): (E.none, -1, ""), (topic, 1): (E.none, 11, "batch-1"),
                       (f"{topic}.progress", 0): (E.none, -1, "")}


def test_transactional_produce_reads_the_batch_header(broker: Any, topic_factory: Callable[[int], str]) -> None:
    """The transactional Produce check reads the batch header in place: a batch without the transactional
    bit is INVALID_RECORD; a truncated header or batch is left to the log (CORRUPT_MESSAGE), unwritten."""
    topic = topic_factory(1)
    tid = f"hdr-{uuid.uuid4().hex[:6]}"
    with WireClient(broker.bootstrap) as c:
        pid, epoch = _init_producer(c, tid)
        r = c.request(AddV3(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                            v3_and_below_producer_epoch=i16(epoch), v3_and_below_topics=(
                                TopicV3(name=topic, partitions=(i32(0),)),)))
        assert _errors_v3(r) == {(topic, 0): E.none}

        def produce(records: bytes) -> tuple[ErrorCode, int]:
            r = c.request(ProduceRequest(transactional_id=tid, acks=i16(-1), timeout=datetime.timedelta(seconds=5),
                                         topic_data=(TopicProduceData(name=topic, partition_data=(
                                             PartitionProduceData(index=i32(0), records=records),)),)))
            answer = r.responses[0].partition_responses[0]
            return answer.error_code, int(answer.base_offset)

        txn = build_record_batch([(None, b"x", [])], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                                 is_transactional=True)
        plain = build_record_batch([(None, b"x", [])], producer_id=pid, producer_epoch=epoch, base_sequence=0)
        assert produce(plain)[0] == E.invalid_record
        assert produce(txn[:40])[0] == E.corrupt_message
        assert produce(txn[:-3])[0] == E.corrupt_message
        assert produce(txn) == (E.none, 0)  # nothing was written before it
