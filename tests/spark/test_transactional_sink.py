"""The exactly-once sink's own transactional client (kaflite.spark.transaction) against the Spark tests'
embedded kaflite broker, no Spark session: read_committed consumers see a transaction's rows only once
it commits; an aborted or fenced incarnation's rows never; the progress offset commits in the same
transaction as the rows; the writer uses this client by default and librdkafka when the broker lacks the
transaction APIs; error answers map to named failures (without sockets)."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest

from kaflite.protocol.errors import ErrorCode
from kaflite.protocol.record_batch import iter_batches
from kaflite.spark import transaction, writer
from kaflite.spark.fetch import FetchConnection
from kaflite.spark.options import parse_writer_options
from kaflite.spark.produce import ProducerConnection, Unsupported
from kaflite.spark.transaction import ProducerFenced, TransactionalArrowProducer, TransactionError
from kaflite.spark.writer import produce_arrow, produce_exactly_once

pytestmark = pytest.mark.spark


def _rows(*values: bytes) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"value": pa.array(list(values), pa.binary())})


def _options(kafka: Any, topic: str, prefix: str = "unused") -> Any:
    return parse_writer_options({"kafka.bootstrap.servers": kafka.bootstrap, "topic": topic,
                                 "exactlyOnce": "true", "transactionalIdPrefix": prefix})


def _read(bootstrap: str, topic: str, partitions: int, committed: bool, want: int, quiet_s: float = 1.0
          ) -> Counter[bytes]:
    """The values a consumer reads (read_committed or not): until `want` arrived, then `quiet_s` more."""
    import confluent_kafka as ck

    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                     "isolation.level": "read_committed" if committed else "read_uncommitted",
                     "enable.auto.commit": False})
    try:
        c.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
        out: Counter[bytes] = Counter()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and sum(out.values()) < want:
            m = c.poll(0.2)
            if m is not None and not m.error():
                out[m.value()] += 1
        end = time.monotonic() + quiet_s
        while time.monotonic() < end:
            m = c.poll(0.2)
            if m is not None and not m.error():
                out[m.value()] += 1
        return out
    finally:
        c.close()


def _committed(bootstrap: str, group: str, topic: str, partition: int) -> tuple[int, str | None]:
    """The group's committed offset as a plain (read_uncommitted) consumer sees it: a pending
    transactional offset is not shown."""
    import confluent_kafka as ck

    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                     "isolation.level": "read_uncommitted"})
    try:
        tp = c.committed([ck.TopicPartition(topic, partition)], timeout=30)[0]
        return tp.offset, tp.metadata
    finally:
        c.close()


def _batches(bootstrap: str, topic: str, partition: int) -> list[Any]:
    host, port = bootstrap.rsplit(":", 1)
    conn = FetchConnection(host, int(port), "test", 30)
    try:
        part = conn.receive_fetch(conn.send_fetch(topic, partition, 0, 64 << 20, False), topic, partition)
        return list(iter_batches(bytes(part.records or b"")))
    finally:
        conn.close()


def test_rows_and_progress_become_visible_together_at_commit(kafka: Any) -> None:
    topic = kafka.topic("txn-commit", 2)
    tid, group = f"txn-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    options = _options(kafka, topic)
    with TransactionalArrowProducer({"bootstrap.servers": kafka.bootstrap}, tid).start() as p:
        assert p.committed_offset(group, topic, 0) == -1
        rows = [b"r%d" % i for i in range(50)]
        assert produce_arrow(p, options, iter([_rows(*rows[:20]), _rows(*rows[20:])]), 7) == 50
        p.send_offsets(group, topic, 0, 8, "marker")
        # acknowledged, in the log, and still invisible to read_committed, as is the offset
        assert sum(_read(kafka.bootstrap, topic, 2, committed=False, want=50).values()) == 50
        assert _read(kafka.bootstrap, topic, 2, committed=True, want=0) == Counter()
        assert _committed(kafka.bootstrap, group, topic, 0)[0] < 0
        p.commit()
        pid, epoch = p.producer_id, p.producer_epoch
        assert p.committed_offset(group, topic, 0) == 8
    assert _read(kafka.bootstrap, topic, 2, committed=True, want=50) == Counter(rows)
    assert _committed(kafka.bootstrap, group, topic, 0) == (8, "marker")
    data = [v for part in range(2) for v in _batches(kafka.bootstrap, topic, part) if not v.is_control]
    assert data and all(v.is_transactional and (v.producer_id, v.producer_epoch) == (pid, epoch) for v in data)
    assert sum(v.records_count for v in data) == 50


def test_an_aborted_transaction_leaves_neither_rows_nor_progress(kafka: Any) -> None:
    topic = kafka.topic("txn-abort", 1)
    tid, group = f"txn-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    options = _options(kafka, topic)
    with TransactionalArrowProducer({"bootstrap.servers": kafka.bootstrap}, tid).start() as p:
        produce_arrow(p, options, iter([_rows(b"lost-1", b"lost-2")]), 0)
        p.send_offsets(group, topic, 0, 1, "marker")
        p.abort()
        assert p.committed_offset(group, topic, 0) == -1
        # the same producer goes on with a new transaction
        produce_arrow(p, options, iter([_rows(b"kept")]), 1)
        p.send_offsets(group, topic, 0, 2, "marker")
        p.commit()
    assert _read(kafka.bootstrap, topic, 1, committed=True, want=1) == Counter({b"kept": 1})
    assert sum(_read(kafka.bootstrap, topic, 1, committed=False, want=3).values()) == 3  # the aborted are there
    assert _committed(kafka.bootstrap, group, topic, 0)[0] == 2


def test_a_second_incarnation_fences_the_first_and_aborts_its_rows(kafka: Any) -> None:
    topic = kafka.topic("txn-fence", 1)
    tid, group = f"txn-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    options = _options(kafka, topic)
    conf = {"bootstrap.servers": kafka.bootstrap}
    old = TransactionalArrowProducer(conf, tid).start()
    try:
        produce_arrow(old, options, iter([_rows(b"zombie-1", b"zombie-2")]), 0)  # acknowledged, open
        # the new incarnation's InitProducerId aborts the open transaction (CONCURRENT_TRANSACTIONS retried
        # meanwhile) and bumps the epoch of the same producer id
        with TransactionalArrowProducer(conf, tid).start() as new:
            assert new.producer_id == old.producer_id and new.producer_epoch > old.producer_epoch
            with pytest.raises(ProducerFenced, match=rf"transactional id {tid} was fenced "
                                                     r"\((PRODUCER_FENCED|INVALID_PRODUCER_EPOCH)\)"):
                produce_arrow(old, options, iter([_rows(b"zombie-3")]), 0)
            with pytest.raises(ProducerFenced):  # and nothing more is sent for it
                old.commit()
            produce_arrow(new, options, iter([_rows(b"new")]), 0)
            new.send_offsets(group, topic, 0, 1, "marker")
            new.commit()
    finally:
        old.close()
    assert _read(kafka.bootstrap, topic, 1, committed=True, want=1) == Counter({b"new": 1})


def test_a_fenced_commit_is_named(kafka: Any) -> None:
    """A zombie whose rows were all acknowledged fails at EndTxn (or AddOffsetsToTxn) with the name."""
    topic = kafka.topic("txn-fence-end", 1)
    tid, group = f"txn-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    conf = {"bootstrap.servers": kafka.bootstrap}
    with TransactionalArrowProducer(conf, tid).start() as old:
        produce_arrow(old, _options(kafka, topic), iter([_rows(b"zombie")]), 0)
        TransactionalArrowProducer(conf, tid).start().close()
        with pytest.raises(ProducerFenced, match=r"\((PRODUCER_FENCED|INVALID_PRODUCER_EPOCH)\) at "
                                                 r"(AddOffsetsToTxn|EndTxn)"):
            old.send_offsets(group, topic, 0, 1, "marker")
            old.commit()
    assert _read(kafka.bootstrap, topic, 1, committed=True, want=0) == Counter()


def test_the_writer_uses_the_fast_client_and_librdkafka_for_an_old_broker(kafka: Any,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    topic = kafka.topic("txn-writer", 2)
    prefix = f"eosf-{uuid.uuid4().hex[:6]}"
    options = _options(kafka, topic, prefix)

    def no_librdkafka(*args: Any) -> int:
        raise AssertionError("the librdkafka path ran")

    with monkeypatch.context() as m:
        m.setattr(writer, "_exactly_once_librdkafka", no_librdkafka)
        assert produce_exactly_once(options, iter([_rows(b"a", b"b")]), 0, 0) == 2
        assert produce_exactly_once(options, iter([_rows(b"a", b"b")]), 0, 0) == 0  # replayed: skipped
    # the progress bytes the librdkafka path commits (confluent-kafka reads the metadata up to its NUL)
    assert _committed(kafka.bootstrap, f"{prefix}-0", topic, 0) == (1, writer.progress_metadata(0))
    # a broker without AddPartitionsToTxn v3: librdkafka writes (and finds the fast path's progress)
    versions = ProducerConnection.api_versions

    def old_broker(self: ProducerConnection) -> dict[int, tuple[int, int]]:
        return {k: v for k, v in versions(self).items() if k != 24}

    monkeypatch.setattr(ProducerConnection, "api_versions", old_broker)
    with pytest.raises(Unsupported, match="lacks API 24 v3"):
        TransactionalArrowProducer({"bootstrap.servers": kafka.bootstrap}, "never-used").start()
    assert produce_exactly_once(options, iter([_rows(b"a", b"b")]), 0, 0) == 0
    assert produce_exactly_once(options, iter([_rows(b"c")]), 1, 0) == 1
    assert _read(kafka.bootstrap, topic, 2, committed=True, want=3) == Counter({b"a": 1, b"b": 1, b"c": 1})
    assert _committed(kafka.bootstrap, f"{prefix}-0", topic, 0) == (2, writer.progress_metadata(1))


# --- error mapping, without sockets -----------------------------------------------------------------

class _Answers:
    """A coordinator connection that answers from a list of error codes."""

    def __init__(self, codes: list[ErrorCode]) -> None:
        self.codes = codes
        self.sent = 0

    def request(self, req: Any, reader: Any) -> Any:
        self.sent += 1
        return self.codes.pop(0)

    def close(self) -> None:
        pass


def _offline(codes: list[ErrorCode], max_block_s: float = 5.0) -> tuple[TransactionalArrowProducer, _Answers]:
    p = TransactionalArrowProducer({"bootstrap.servers": "127.0.0.1:1"}, "tid-x", max_block_s=max_block_s)
    conn = _Answers(codes)
    p._coordinators[(transaction.TRANSACTION, "tid-x")] = conn  # type: ignore[assignment]
    return p, conn


def test_retriable_answers_are_retried_and_others_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transaction.time, "sleep", lambda s: None)
    p, conn = _offline([ErrorCode.concurrent_transactions, ErrorCode.coordinator_load_in_progress,
                        ErrorCode.none])
    assert p._call(transaction.TRANSACTION, "tid-x", object.__new__(transaction.EndTxnRequest),
                   lambda code: [code], "EndTxn(tid-x, commit)") is ErrorCode.none
    assert conn.sent == 3
    for code, exc, name in ((ErrorCode.producer_fenced, ProducerFenced, "PRODUCER_FENCED"),
                            (ErrorCode.invalid_producer_epoch, ProducerFenced, "INVALID_PRODUCER_EPOCH"),
                            (ErrorCode.transactional_id_authorization_failed, TransactionError,
                             "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
                            (ErrorCode.invalid_txn_state, TransactionError, "INVALID_TXN_STATE")):
        p, conn = _offline([code, ErrorCode.none])
        with pytest.raises(exc, match=f"EndTxn.*{name}|{name}.*EndTxn"):
            p._call(transaction.TRANSACTION, "tid-x", object.__new__(transaction.EndTxnRequest),
                    lambda c: [c], "EndTxn(tid-x, commit)")
        assert conn.sent == 1
    # a fenced producer sends nothing more
    p, conn = _offline([ErrorCode.producer_fenced, ErrorCode.none])
    for _ in range(2):
        with pytest.raises(ProducerFenced):
            p._call(transaction.TRANSACTION, "tid-x", object.__new__(transaction.EndTxnRequest),
                    lambda c: [c], "EndTxn")
    assert conn.sent == 1
    # NOT_COORDINATOR drops the coordinator's connection, to be looked up again
    p, conn = _offline([ErrorCode.not_coordinator], max_block_s=0)
    with pytest.raises(TransactionError, match="EndTxn still answered NOT_COORDINATOR after 0 s"):
        p._call(transaction.TRANSACTION, "tid-x", object.__new__(transaction.EndTxnRequest),
                lambda c: [c], "EndTxn")
    assert (transaction.TRANSACTION, "tid-x") not in p._coordinators and conn.sent == 1


def test_retries_stop_at_max_block(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(range(0, 1000, 10))
    monkeypatch.setattr(transaction.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(transaction.time, "sleep", lambda s: None)
    p, conn = _offline([ErrorCode.concurrent_transactions] * 100, max_block_s=30)
    with pytest.raises(TransactionError, match="EndTxn still answered CONCURRENT_TRANSACTIONS after 30 s"):
        p._call(transaction.TRANSACTION, "tid-x", object.__new__(transaction.EndTxnRequest),
                lambda c: [c], "EndTxn")
    assert 2 <= conn.sent <= 5


def test_the_deciding_code_of_a_multi_partition_answer() -> None:
    E = ErrorCode
    assert transaction._worst([E.none, E.none]) is E.none
    assert transaction._worst([E.operation_not_attempted, E.unknown_topic_or_partition]) in (
        E.operation_not_attempted, E.unknown_topic_or_partition)
    assert transaction._worst([E.operation_not_attempted, E.topic_authorization_failed]) is \
        E.topic_authorization_failed
    assert transaction._worst([E.topic_authorization_failed, E.producer_fenced]) is E.producer_fenced
