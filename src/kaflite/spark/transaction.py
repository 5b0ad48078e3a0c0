"""The exactly-once sink's fast path: kaflite's idempotent Arrow producer (kaflite.spark.produce) made
transactional (KIP-98), so `exactlyOnce=true` writes encoded record batches instead of a librdkafka
`produce()` per row, with the transactions done by kaflite's own client half of the protocol.

Rules:
- used only where the idempotent fast path is (`produce.supported`, with the sink's own transactional id
  set aside) and the bootstrap broker's ApiVersions answer covers, besides Produce v9, Metadata v12 and
  InitProducerId v4, FindCoordinator v3, AddPartitionsToTxn v3, AddOffsetsToTxn v3, EndTxn v3,
  TxnOffsetCommit v3 and OffsetFetch v7 (`TXN_APIS`); otherwise `start` raises `Unsupported` before any
  request with the transactional id is sent, and the caller uses librdkafka;
- every transactional request goes to the coordinator FindCoordinator names for its key (key type 1,
  TRANSACTION, for the transactional id; 0, GROUP, for the progress group), over a connection of its own
  (never one with Produce requests in flight, whose answers are read in order);
- InitProducerId carries the transactional id, `transaction.timeout.ms` (60 s by default, librdkafka's
  and Java's) and producer id / epoch -1: the coordinator bumps the id's epoch, which fences every older
  incarnation, and aborts the transaction it left open (meanwhile answering CONCURRENT_TRANSACTIONS);
- CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a
  lost connection (and, per partition, UNKNOWN_TOPIC_OR_PARTITION, OPERATION_NOT_ATTEMPTED,
  UNSTABLE_OFFSET_COMMIT) are retried, as Kafka's producer does: after a pause (20 ms for
  CONCURRENT_TRANSACTIONS, 100 ms otherwise), looking the coordinator up again when it moved, for up to
  `max_block_s` (60 s, Java's max.block.ms), then the task fails naming the error;
- PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED (to any request, Produce
  included) raise `ProducerFenced` naming the error and the transactional id, and nothing more is sent
  for this incarnation; any other error raises `TransactionError` (Produce: `ProduceError`) naming it;
- a partition is added to the transaction (AddPartitionsToTxn, answered) before its first batch is queued;
  batches carry the transactional bit, and Produce requests the transactional id;
- the progress offset is committed in the transaction: AddOffsetsToTxn (the group) to the transaction
  coordinator, then TxnOffsetCommit to the group coordinator with generation -1 and no member (the group
  is never joined, as the librdkafka path's `send_offsets_to_transaction` with a non-member consumer);
- `commit` sends EndTxn(commit) only after every batch is acknowledged (`flush`); `abort` sends
  EndTxn(abort) after reading every answer in flight; a fenced producer sends neither; after an abort that
  dropped unsent batches (their sequence numbers given) the producer refuses further batches;
- `committed_offset` reads a group's offset with OffsetFetch `require_stable` (read_committed: an offset
  of a transaction still open is waited for, UNSTABLE_OFFSET_COMMIT retried); -1 when there is none.
This runs in an executor task with blocking sockets: never on an event loop.
"""

from __future__ import annotations

import datetime
import random
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn

from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
from kio.schema.add_offsets_to_txn.v3.response import AddOffsetsToTxnResponse
from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from kio.schema.add_partitions_to_txn.v3.response import AddPartitionsToTxnResponse
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.end_txn.v3.response import EndTxnResponse
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v3.response import FindCoordinatorResponse
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.init_producer_id.v4.response import InitProducerIdResponse
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest, OffsetFetchRequestTopic
from kio.schema.offset_fetch.v7.response import OffsetFetchResponse
from kio.schema.txn_offset_commit.v3.request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kio.schema.txn_offset_commit.v3.response import TxnOffsetCommitResponse
from kio.schema.types import GroupId, ProducerId, TopicName, TransactionalId
from kio.serial import entity_reader
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from kaflite.protocol.errors import ErrorCode
from kaflite.spark.encode import EncodedBatch
from kaflite.spark.produce import (
    METADATA_VERSION,
    PRODUCE_VERSION,
    RETRY_BACKOFF_S,
    ArrowProducer,
    ProduceError,
    ProducerConnection,
    _code,
)

__all__ = ["TXN_APIS", "ProducerFenced", "TransactionError", "TransactionalArrowProducer"]

GROUP, TRANSACTION = 0, 1  # FindCoordinator key types
TXN_APIS = {0: PRODUCE_VERSION, 3: METADATA_VERSION, 22: 4, 10: 3, 24: 3, 25: 3, 26: 3, 28: 3, 9: 7}
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000
CONCURRENT_BACKOFF_S = 0.02  # Java's producer retries CONCURRENT_TRANSACTIONS after 20 ms, not 100
_MOVED = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available})
_RETRY = _MOVED | {ErrorCode.concurrent_transactions, ErrorCode.coordinator_load_in_progress,
                   ErrorCode.unknown_topic_or_partition, ErrorCode.operation_not_attempted,
                   ErrorCode.unstable_offset_commit, ErrorCode.request_timed_out}
FENCED = frozenset({ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch,
                    ErrorCode.transaction_coordinator_fenced})
_read: dict[type, Any] = {t: entity_reader(t) for t in (
    FindCoordinatorResponse, InitProducerIdResponse, AddPartitionsToTxnResponse, AddOffsetsToTxnResponse,
    TxnOffsetCommitResponse, EndTxnResponse, OffsetFetchResponse)}


class TransactionError(ProduceError):
    """A transactional request was refused with an error that is not retried (or retried too long)."""


class ProducerFenced(TransactionError):
    """A newer incarnation of the transactional id took over (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH)."""


def _worst(codes: Iterable[ErrorCode]) -> ErrorCode:
    """The code that decides a multi-code answer: fenced first, then any other error that is not retried,
    then a retried one; NONE when all are."""
    found = [c for c in codes if c is not ErrorCode.none]
    for group in (lambda c: c in FENCED, lambda c: c not in _RETRY, lambda c: True):
        for c in found:
            if group(c):
                return c
    return ErrorCode.none


class TransactionalArrowProducer(ArrowProducer):
    """A transactional producer of pre-encoded record batches (module rules): one transaction at a time,
    begun implicitly by the first partition or offsets added, ended by `commit` or `abort`."""

    def __init__(self, conf: dict[str, Any], transactional_id: str, delivery_timeout_s: float = 120.0,
                 max_block_s: float = 60.0) -> None:
        super().__init__({k: v for k, v in conf.items() if k != "transactional.id"}, delivery_timeout_s,
                         max_block_s)
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = int(conf.get("transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS))
        self.in_transaction: set[tuple[str, int]] = set()
        self.groups_added: set[str] = set()
        self.fenced: ProducerFenced | None = None
        self.broken: str | None = None  # why this producer can start no further transaction
        self._coordinators: dict[tuple[int, str], ProducerConnection] = {}

    def _required_apis(self) -> dict[int, int]:
        return dict(TXN_APIS)

    @property
    def tid(self) -> str:
        assert self.transactional_id is not None
        return self.transactional_id

    def close(self) -> None:
        for conn in self._coordinators.values():
            conn.close()
        self._coordinators.clear()
        super().close()

    # --- coordinators -------------------------------------------------------------------------------
    def _coordinator(self, key_type: int, key: str, deadline: float) -> ProducerConnection:
        conn = self._coordinators.get((key_type, key))
        if conn is not None:
            return conn
        what = f"FindCoordinator({'group' if key_type == GROUP else 'transaction'} {key})"
        while True:
            try:
                if self._meta_conn is None:
                    self._meta_conn = self._connect(*self._any_broker())
                resp = self._meta_conn.request(FindCoordinatorRequest(key=key, key_type=i8(key_type)),
                                               _read[FindCoordinatorResponse])
                code = _code(resp.error_code)
                if code is ErrorCode.none:
                    conn = self._connect(str(resp.host), int(resp.port))
                    self._coordinators[(key_type, key)] = conn
                    return conn
            except (OSError, ConnectionError):  # the broker asked is gone: ask another after a pause
                if self._meta_conn is not None:
                    self._meta_conn.close()
                    self._meta_conn = None
                code = ErrorCode.coordinator_not_available
            self._retry_or_raise(code, what, deadline)

    def _any_broker(self) -> tuple[str, int]:
        """A broker of the metadata, else the first bootstrap server."""
        if self.brokers:
            return random.choice(list(self.brokers.values()))
        host, _, port = self.bootstrap[0].rpartition(":")
        return host.strip("[]") or "localhost", int(port or 9092)

    def _retry_or_raise(self, code: ErrorCode, what: str, deadline: float) -> None:
        """Pause before a retry of a retriable `code`; raise for any other, or once `deadline` passed."""
        if code in FENCED:
            self.fenced = ProducerFenced(
                f"Kafka sink: transactional id {self.tid} was fenced ({code.name.upper()}) at {what}: a newer "
                "incarnation of this task took over")
            raise self.fenced
        if code not in _RETRY:
            raise TransactionError(f"Kafka sink: {what} refused: {code.name.upper()}")
        if time.monotonic() > deadline:
            raise TransactionError(f"Kafka sink: {what} still answered {code.name.upper()} after "
                                   f"{self.max_block_s:g} s")
        time.sleep(CONCURRENT_BACKOFF_S if code is ErrorCode.concurrent_transactions else RETRY_BACKOFF_S)

    def _call(self, key_type: int, key: str, request: Any, codes: Callable[[Any], Iterable[ErrorCode]],
              what: str) -> Any:
        """`request` to the coordinator of `key`, retried (module rules) until every code is NONE."""
        if self.fenced is not None:
            raise self.fenced
        reader = _read[_response_of[type(request)]]
        deadline = time.monotonic() + self.max_block_s
        while True:
            conn = self._coordinator(key_type, key, deadline)
            try:
                resp = conn.request(request, reader)
            except (OSError, ConnectionError):
                code = ErrorCode.coordinator_not_available  # the connection is gone: find it again
            else:
                code = _worst(codes(resp))
                if code is ErrorCode.none:
                    return resp
            if code in _MOVED:
                dropped = self._coordinators.pop((key_type, key), None)
                if dropped is not None:
                    dropped.close()
            self._retry_or_raise(code, what, deadline)

    # --- the transaction ----------------------------------------------------------------------------
    def _init_producer_id(self) -> None:
        resp = self._call(TRANSACTION, self.tid, InitProducerIdRequest(
            transactional_id=TransactionalId(self.tid),
            transaction_timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=self.transaction_timeout_ms)),
            producer_id=ProducerId(-1), producer_epoch=i16(-1)),
            lambda r: [_code(r.error_code)], f"InitProducerId({self.tid})")
        self.producer_id, self.producer_epoch = int(resp.producer_id), int(resp.producer_epoch)

    def add_partitions(self, tps: Iterable[tuple[str, int]]) -> None:
        """AddPartitionsToTxn for the partitions not yet in the transaction."""
        new = sorted(set(tps) - self.in_transaction)
        if not new:
            return
        by_topic: dict[str, list[int]] = {}
        for topic, partition in new:
            by_topic.setdefault(topic, []).append(partition)
        self._call(TRANSACTION, self.tid, AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=TransactionalId(self.tid),
            v3_and_below_producer_id=ProducerId(self.producer_id),
            v3_and_below_producer_epoch=i16(self.producer_epoch),
            v3_and_below_topics=tuple(AddPartitionsToTxnTopic(name=TopicName(t), partitions=tuple(map(i32, ps)))
                                      for t, ps in by_topic.items())),
            lambda r: [_code(p.partition_error_code) for t in r.results_by_topic_v3_and_below
                       for p in t.results_by_partition],
            f"AddPartitionsToTxn({self.tid}: {', '.join(f'{t}-{p}' for t, p in new)})")
        self.in_transaction.update(new)

    def send(self, batches: Sequence[EncodedBatch]) -> None:
        if self.broken is not None:
            raise TransactionError(self.broken)
        # a partition joins the transaction before its first batch can leave
        self.add_partitions((b.topic, b.partition) for b in batches)
        super().send(batches)

    def _refused(self, tp: tuple[str, int], code: ErrorCode) -> NoReturn:
        if code in FENCED:
            self.fenced = ProducerFenced(
                f"Kafka sink: transactional id {self.tid} was fenced ({code.name.upper()}) producing to "
                f"{tp[0]}-{tp[1]}: a newer incarnation of this task took over")
            raise self.fenced
        super()._refused(tp, code)

    def send_offsets(self, group: str, topic: str, partition: int, offset: int, metadata: str) -> None:
        """Commit `offset` of (topic, partition) for `group` within the transaction."""
        if group not in self.groups_added:
            self._call(TRANSACTION, self.tid, AddOffsetsToTxnRequest(
                transactional_id=TransactionalId(self.tid), producer_id=ProducerId(self.producer_id),
                producer_epoch=i16(self.producer_epoch), group_id=GroupId(group)),
                lambda r: [_code(r.error_code)], f"AddOffsetsToTxn({self.tid}, group {group})")
            self.groups_added.add(group)
        self._call(GROUP, group, TxnOffsetCommitRequest(
            transactional_id=TransactionalId(self.tid), group_id=GroupId(group),
            producer_id=ProducerId(self.producer_id), producer_epoch=i16(self.producer_epoch),
            topics=(TxnOffsetCommitRequestTopic(name=TopicName(topic), partitions=(
                TxnOffsetCommitRequestPartition(partition_index=i32(partition), committed_offset=i64(offset),
                                                committed_metadata=metadata),)),)),
            lambda r: [_code(p.error_code) for t in r.topics for p in t.partitions],
            f"TxnOffsetCommit({self.tid}, group {group}, {topic}-{partition})")

    def _end(self, commit: bool) -> None:
        if self.in_transaction or self.groups_added:
            self._call(TRANSACTION, self.tid, EndTxnRequest(
                transactional_id=TransactionalId(self.tid), producer_id=ProducerId(self.producer_id),
                producer_epoch=i16(self.producer_epoch), committed=commit),
                lambda r: [_code(r.error_code)], f"EndTxn({self.tid}, {'commit' if commit else 'abort'})")
        self.in_transaction.clear()
        self.groups_added.clear()
        self.acked = 0  # `flush` counts the records of the current transaction

    def commit(self) -> None:
        """Wait for every batch's acknowledgement, then commit (EndTxn)."""
        self.flush()
        self._end(commit=True)

    def abort(self) -> None:
        """Read the answers in flight, drop what is unsent, and abort (EndTxn) unless fenced."""
        if self.fenced is not None:
            return
        for state in self.parts.values():
            if state.unsent:
                # their sequence numbers are given: a later batch of this producer would leave a gap
                self.broken = "Kafka sink: the producer dropped unsent batches at an abort"
            state.unsent.clear()
        self._drain()
        if any(state.unsent for state in self.parts.values()):  # retries the drain queued
            self.broken = "Kafka sink: the producer dropped unsent batches at an abort"
        self._end(commit=False)

    # --- progress -----------------------------------------------------------------------------------
    def committed_offset(self, group: str, topic: str, partition: int) -> int:
        """The offset `group` committed for (topic, partition), read_committed (require_stable); -1 when
        none."""
        resp = self._call(GROUP, group, OffsetFetchRequest(
            group_id=GroupId(group), require_stable=True,
            topics=(OffsetFetchRequestTopic(name=TopicName(topic), partition_indexes=(i32(partition),)),)),
            lambda r: [_code(r.error_code)] + [_code(p.error_code) for t in r.topics for p in t.partitions],
            f"OffsetFetch(group {group}, {topic}-{partition})")
        for t in resp.topics:
            for p in t.partitions:
                if str(t.name) == topic and int(p.partition_index) == partition:
                    return max(int(p.committed_offset), -1)
        return -1


_response_of: dict[type, type] = {
    FindCoordinatorRequest: FindCoordinatorResponse, InitProducerIdRequest: InitProducerIdResponse,
    AddPartitionsToTxnRequest: AddPartitionsToTxnResponse, AddOffsetsToTxnRequest: AddOffsetsToTxnResponse,
    TxnOffsetCommitRequest: TxnOffsetCommitResponse, EndTxnRequest: EndTxnResponse,
    OffsetFetchRequest: OffsetFetchResponse,
}
