"""Kafka 4.1's versions of the transaction APIs on the wire: EndTxn v5, TxnOffsetCommit v5 and Produce v12
keep transaction protocol 1's meaning (KIP-890's protocol 2 needs a finalized transaction.version 2, which
kaflite does not advertise); ListTransactions v2's transactional id pattern (KIP-1152)."""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.add_offsets_to_txn.v4.request import AddOffsetsToTxnRequest
from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest as AddV3
from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnTopic as TopicV3
from kio.schema.end_txn.v5.request import EndTxnRequest
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest
from kio.schema.offset_fetch.v9.request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from kio.schema.produce.v12.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.txn_offset_commit.v5.request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kio.static.primitive import i16, i32, i64

from kaflite.protocol.errors import ErrorCode
from kaflite.protocol.record_batch import build_record_batch
from server.kwire import WireClient

E = ErrorCode


def _init(c: WireClient, tid: str) -> tuple[int, int]:
    r = c.request(InitProducerIdRequest(transactional_id=tid, transaction_timeout=datetime.timedelta(seconds=60),
                                        producer_id=i64(-1), producer_epoch=i16(-1)))
    assert r.error_code == E.none
    return int(r.producer_id), int(r.producer_epoch)


def test_produce_v12_end_txn_v5_txn_offset_commit_v5(broker: Any, topic_factory: Callable[[int], str]) -> None:
    topic = topic_factory(2)
    tid = f"v5-{uuid.uuid4().hex[:6]}"
    group = f"g-{uuid.uuid4().hex[:6]}"
    with WireClient(broker.bootstrap) as c:
        pid, epoch = _init(c, tid)

        def produce(partition: int, sequence: int) -> ErrorCode:
            records = build_record_batch([(None, b"x", [])], producer_id=pid, producer_epoch=epoch,
                                         base_sequence=sequence, is_transactional=True)
            r = c.request(ProduceRequest(transactional_id=tid, acks=i16(-1), timeout=datetime.timedelta(seconds=5),
                                         topic_data=(TopicProduceData(name=topic, partition_data=(
                                             PartitionProduceData(index=i32(partition), records=records),)),)))
            return r.responses[0].partition_responses[0].error_code

        def commit_offset(offset: int) -> ErrorCode:
            r = c.request(TxnOffsetCommitRequest(
                transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=i16(epoch),
                generation_id=i32(-1), member_id="", group_instance_id=None, topics=(TxnOffsetCommitRequestTopic(
                    name=topic, partitions=(TxnOffsetCommitRequestPartition(
                        partition_index=i32(0), committed_offset=i64(offset), committed_leader_epoch=i32(-1),
                        committed_metadata="v5"),)),)))
            return r.topics[0].partitions[0].error_code

        def end(committed: bool, producer_id: int = pid) -> tuple[ErrorCode, int, int]:
            r = c.request(EndTxnRequest(transactional_id=tid, producer_id=producer_id, producer_epoch=i16(epoch),
                                        committed=committed))
            return r.error_code, int(r.producer_id), int(r.producer_epoch)

        # Produce v12 does not add its partition to the transaction (protocol 2 would): refused, unwritten;
        assert produce(0, 0) == E.invalid_txn_state
        # nor does TxnOffsetCommit v5 add the group's partition
        assert commit_offset(3) == E.invalid_txn_state
        r = c.request(AddV3(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                            v3_and_below_producer_epoch=i16(epoch),
                            v3_and_below_topics=(TopicV3(name=topic, partitions=(i32(0),)),)))
        assert r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == E.none
        assert produce(0, 0) == E.none
        assert c.request(AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=i16(epoch),
                                                group_id=group)).error_code == E.none
        assert commit_offset(3) == E.none
        # EndTxn v5: an error answers no producer; the end answers the producer's own id and epoch (no bump)
        assert end(True, producer_id=pid + 1000) == (E.invalid_producer_id_mapping, -1, -1)
        assert end(True) == (E.none, pid, epoch)
        deadline = time.monotonic() + 30  # the commit markers reach __consumer_offsets (10 s missed once at load 8)
        while True:
            r = c.request(OffsetFetchRequest(groups=(OffsetFetchRequestGroup(group_id=group, topics=(
                OffsetFetchRequestTopics(name=topic, partition_indexes=(i32(0),)),)),), require_stable=True))
            p = r.groups[0].topics[0].partitions[0]
            if p.error_code == E.none or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert (p.error_code, int(p.committed_offset)) == (E.none, 3)
        assert end(True) == (E.none, pid, epoch)  # a retry of the completed commit
        # the next transaction runs at the same epoch (protocol 1), its sequences continuing
        c.request(AddV3(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                        v3_and_below_producer_epoch=i16(epoch),
                        v3_and_below_topics=(TopicV3(name=topic, partitions=(i32(1),)),)))
        assert produce(1, 0) == E.none
        assert end(False) == (E.none, pid, epoch)


def test_list_transactions_v2_transactional_id_pattern(broker: Any) -> None:
    """KIP-1152: only the ids the whole pattern matches; null or empty: every id; v1 has no pattern; a pattern
    that does not compile is INVALID_REGULAR_EXPRESSION."""
    from kio.schema.list_transactions.v1.request import ListTransactionsRequest as V1
    from kio.schema.list_transactions.v2.request import ListTransactionsRequest as V2

    prefix = f"pat-{uuid.uuid4().hex[:6]}"
    ids = [f"{prefix}-cat", f"{prefix}-bat", f"{prefix}-dog"]
    with WireClient(broker.bootstrap) as c:
        for tid in ids:
            _init(c, tid)

        def listed(pattern: str | None) -> tuple[ErrorCode, list[str]]:
            r = c.request(V2(state_filters=(), producer_id_filters=(), duration_filter=i64(-1),
                             transactional_id_pattern=pattern))
            return r.error_code, sorted(s.transactional_id for s in r.transaction_states
                                        if s.transactional_id.startswith(prefix))

        assert listed(f"{prefix}-.at") == (E.none, [f"{prefix}-bat", f"{prefix}-cat"])
        assert listed(".at") == (E.none, [])  # the whole id must match
        assert listed(f"{prefix}-(cat|dog)") == (E.none, [f"{prefix}-cat", f"{prefix}-dog"])
        assert listed(None) == listed("") == (E.none, sorted(ids))
        assert listed("[") == (E.invalid_regular_expression, [])
        v1 = c.request(V1(state_filters=(), producer_id_filters=(), duration_filter=i64(-1)))
        assert sorted(s.transactional_id for s in v1.transaction_states if s.transactional_id.startswith(prefix)) \
            == sorted(ids)
