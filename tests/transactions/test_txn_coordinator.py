"""The pure transaction coordinator shard, driven with a manual clock: Kafka's state machine, the
`__transaction_state` record format, fencing, timeouts, expiration and replay."""

from __future__ import annotations

import itertools
import struct

from kaflite.coordinator.transaction import TransactionCoordinatorShard, TxnConfig, TxnState, partition_for
from kaflite.coordinator.transaction.txn_log import (
    TxnLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from kaflite.protocol.errors import ErrorCode, KafkaError

E = ErrorCode
S = TxnState


def shard(**kw: int) -> TransactionCoordinatorShard:
    ids = itertools.count(1000)
    return TransactionCoordinatorShard(TxnConfig(**kw), lambda: next(ids))


def replayed(s: TransactionCoordinatorShard, records: list) -> TransactionCoordinatorShard:  # type: ignore[type-arg]
    fresh = shard()
    for r in records:
        fresh.replay(r.key, r.value)
    assert {t: (m.producer_id, m.producer_epoch, m.state, m.partitions) for t, m in fresh.txns.items()} == \
        {t: (m.producer_id, m.producer_epoch, m.state, m.partitions) for t, m in s.txns.items()}
    return fresh


def test_partition_is_kafkas_hash() -> None:
    # Utils.abs("my-txn".hashCode()) % 50: Java's String.hashCode over UTF-16 code units
    h = 0
    for ch in "my-txn":
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    assert partition_for("my-txn") == abs(h) % 50


def test_record_format_round_trip_and_layout() -> None:
    key = encode_key("tx")
    assert key == struct.pack(">hh", 0, 2) + b"tx" and decode_key(key) == "tx"
    v = TxnLogValue(7, 3, 60000, 1, (("a", 1), ("a", 0), ("b", 2)), 111, 100)
    raw = encode_value(v)
    assert raw[:17] == struct.pack(">hqhib", 0, 7, 3, 60000, 1)
    back = decode_value(raw)
    assert back.partitions == (("a", 0), ("a", 1), ("b", 2)) and back.last_update_ms == 111 and back.start_ms == 100
    # version 1 (flexible): compact arrays / strings and tagged fields
    flex = struct.pack(">hqhib", 1, 7, 3, 60000, 4) + bytes([2, 2]) + b"a" + bytes([2]) + struct.pack(">i", 5) + \
        b"\x00" + struct.pack(">qq", 5, 6) + b"\x00"
    f = decode_value(flex)
    assert (f.status, f.partitions, f.last_update_ms, f.start_ms) == (4, (("a", 5),), 5, 6)


def test_commit_cycle_and_replay() -> None:
    s = shard()
    log = []
    r = s.init_producer_id("t", 60000, now=0)
    log += r.records
    a = r.response()
    assert (a.error, a.producer_id, a.producer_epoch) == (E.none, 1000, 0)
    r = s.add_partitions("t", 1000, 0, [("x", 0)], now=10)
    log += r.records
    assert r.response().error is E.none and s.txns["t"].state is S.ONGOING and s.txns["t"].start_ms == 10
    r = s.add_partitions("t", 1000, 0, [("x", 0)], now=11)
    assert r.records == [] and r.response().error is E.none  # already in: nothing written
    r = s.add_partitions("t", 1000, 0, [("y", 1)], now=12)
    log += r.records
    assert s.txns["t"].partitions == {("x", 0), ("y", 1)}
    r = s.end_txn("t", 1000, 0, True, now=20)
    log += r.records
    job = r.response().markers
    assert job.commit and job.partitions == (("x", 0), ("y", 1)) and s.txns["t"].state is S.PREPARE_COMMIT
    assert s.add_partitions("t", 1000, 0, [("x", 0)], 21).response().error is E.concurrent_transactions
    assert s.init_producer_id("t", 60000, 21).response().error is E.concurrent_transactions
    assert s.end_txn("t", 1000, 0, True, 21).response().error is E.concurrent_transactions
    assert s.end_txn("t", 1000, 0, False, 21).response().error is E.invalid_txn_state
    assert [j.transactional_id for j in replayed(s, log).pending_markers()] == ["t"]
    r = s.complete("t", 1000, 0, now=30)
    log += r.records
    assert s.txns["t"].state is S.COMPLETE_COMMIT and s.txns["t"].partitions == set()
    assert s.end_txn("t", 1000, 0, True, 31).response().error is E.none  # a retry
    replayed(s, log)


def test_errors_of_the_id_checks() -> None:
    s = shard(max_timeout_ms=1000)
    assert s.init_producer_id("t", 1001, 0).response().error is E.invalid_transaction_timeout
    assert s.init_producer_id("t", 0, 0).response().error is E.invalid_transaction_timeout
    assert s.add_partitions("nope", 1, 0, [("x", 0)], 0).response().error is E.invalid_producer_id_mapping
    s.init_producer_id("t", 1000, 0)
    assert s.add_partitions("t", 999, 0, [("x", 0)], 0).response().error is E.invalid_producer_id_mapping
    assert s.add_partitions("t", 1000, 1, [("x", 0)], 0).response().error is E.producer_fenced
    assert s.end_txn("t", 1000, 0, True, 0).response().error is E.invalid_txn_state  # Empty
    assert s.verify("t", 1000, 0, ("x", 0)) is E.invalid_txn_state
    s.add_partitions("t", 1000, 0, [("x", 0)], 0)
    assert s.verify("t", 1000, 0, ("x", 0)) is E.none
    assert s.verify("t", 1000, 0, ("x", 1)) is E.invalid_txn_state
    assert s.verify("t", 1000, 1, ("x", 0)) is E.invalid_producer_epoch


def test_new_incarnation_fences_and_aborts_the_open_transaction() -> None:
    s = shard()
    s.init_producer_id("t", 60000, 0)
    s.add_partitions("t", 1000, 0, [("x", 0)], 1)
    r = s.init_producer_id("t", 60000, 2)  # a second producer with the same transactional id
    a = r.response()
    assert a.error is E.concurrent_transactions and a.markers is not None and not a.markers.commit
    assert (a.markers.producer_epoch, a.markers.partitions) == (1, (("x", 0),))
    assert s.txns["t"].state is S.PREPARE_ABORT and s.txns["t"].producer_epoch == 1
    # the old producer is fenced
    assert s.end_txn("t", 1000, 0, True, 3).response().error is E.producer_fenced
    s.complete("t", 1000, 1, 4)
    assert s.txns["t"].state is S.COMPLETE_ABORT
    a = s.init_producer_id("t", 60000, 5).response()
    assert (a.error, a.producer_id, a.producer_epoch) == (E.none, 1000, 2)
    # KIP-360: an expected id/epoch that is not current is fenced
    assert s.init_producer_id("t", 60000, 6, expected_pid=1000, expected_epoch=0).response().error is E.producer_fenced
    assert s.init_producer_id("t", 60000, 6, expected_pid=1000, expected_epoch=2).response().producer_epoch == 3


def test_epoch_exhaustion_gives_a_new_producer_id() -> None:
    s = shard()
    s.init_producer_id("t", 60000, 0)
    s.txns["t"].producer_epoch = 32766
    a = s.init_producer_id("t", 60000, 1).response()
    assert (a.producer_id, a.producer_epoch) == (1001, 0)


def test_no_producer_id_at_hand_is_answered_and_nothing_written() -> None:
    """A cluster broker whose block of producer ids is used up while it claims the next one raises
    COORDINATOR_LOAD_IN_PROGRESS from next_producer_id: InitProducerId answers it (the client retries) and
    writes nothing, for a new transactional id and for an exhausted epoch alike."""
    ids: list[int] = [1000]

    def next_id() -> int:
        if not ids:
            raise KafkaError(E.coordinator_load_in_progress, "the next block is being claimed")
        return ids.pop()

    s = TransactionCoordinatorShard(TxnConfig(), next_id)
    out = s.init_producer_id("t", 60000, 0)
    assert out.response().error is E.none and len(out.records) == 1
    out = s.init_producer_id("new", 60000, 1)
    assert out.response().error is E.coordinator_load_in_progress and out.records == [] and "new" not in s.txns
    s.txns["t"].producer_epoch = 32766
    out = s.init_producer_id("t", 60000, 2)
    assert out.response().error is E.coordinator_load_in_progress and out.records == []
    assert (s.txns["t"].producer_id, s.txns["t"].producer_epoch) == (1000, 32766)
    ids.append(2000)  # the block arrived: the client's retry gets its id
    a = s.init_producer_id("new", 60000, 3).response()
    assert (a.error, a.producer_id, a.producer_epoch) == (E.none, 2000, 0)


def test_timeout_abort_and_expiration_with_a_manual_clock() -> None:
    s = shard(id_expiration_ms=10_000)
    s.init_producer_id("t", 1000, 0)
    s.add_partitions("t", 1000, 0, [("x", 0)], 100)
    assert s.timed_out(1100) == [] and s.timed_out(1101) == ["t"]
    job = s.abort_timed_out("t", 1101).response()
    assert job is not None and not job.commit and job.producer_epoch == 1
    assert s.txns["t"].state is S.PREPARE_ABORT
    assert s.abort_timed_out("t", 1102).response() is None  # not Ongoing any more
    s.complete("t", 1000, 1, 1200)
    assert s.expired(11_200) == [] and s.expired(11_201) == ["t"]
    r = s.expire(["t"], 11_201)
    assert r.response() == ["t"] and r.records[0].value is None and "t" not in s.txns
    fresh = shard()
    for rec in r.records:
        fresh.replay(rec.key, rec.value)
    assert fresh.txns == {}


def test_invalid_transition_is_refused() -> None:
    from kaflite.coordinator.transaction.state import can_transition

    assert can_transition(S.ONGOING, S.PREPARE_COMMIT)
    assert not can_transition(S.EMPTY, S.PREPARE_COMMIT)
    assert not can_transition(S.PREPARE_COMMIT, S.COMPLETE_ABORT)
    assert can_transition(S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT)
    assert S.PREPARE_EPOCH_FENCE.kafka_name == "PrepareEpochFence"
    assert S.from_kafka_name("CompleteCommit") is S.COMPLETE_COMMIT
