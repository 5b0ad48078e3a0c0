"""The transaction coordinator shard (Kafka's TransactionCoordinator + TransactionStateManager for one
`__transaction_state` partition): a pure state machine over the transactional ids of that partition.

Every operation takes the time and returns a `TxnResult`: the `__transaction_state` records to append
(already applied through `replay`, the path loading takes, so the state is always what the log says) and
the caller's answer; the coordinator runtime answers once the records are committed. The markers a
PrepareCommit / PrepareAbort needs are part of the answer (`MarkerJob`): the shell writes them to the
partition leaders, then runs `complete()`.

Rules (Kafka 3.x's TransactionCoordinator):
- InitProducerId: a timeout <= 0 or > transaction.max.timeout.ms is INVALID_TRANSACTION_TIMEOUT; a new
  transactional id gets a new producer id at epoch 0; an existing one in Empty / Complete* gets its epoch
  bumped (a new producer id when the epoch is exhausted), which fences every older incarnation; one in
  Ongoing is fenced (PrepareEpochFence: epoch + 1, then PrepareAbort with that epoch, ABORT markers) and
  answered CONCURRENT_TRANSACTIONS, so the client retries once the abort completed; Prepare* is
  CONCURRENT_TRANSACTIONS; an expected producer id / epoch (KIP-360) that is not the current one (or the
  one before a fencing bump) is PRODUCER_FENCED; a new producer id that cannot be had now (a KafkaError
  from `next_producer_id`: COORDINATOR_LOAD_IN_PROGRESS while a cluster broker claims its next block) is
  that error, with nothing written, as Kafka answers a failed generateProducerId;
- AddPartitionsToTxn / AddOffsetsToTxn (the group's `__consumer_offsets` partition): unknown id or other
  producer id INVALID_PRODUCER_ID_MAPPING, other epoch PRODUCER_FENCED, Prepare* CONCURRENT_TRANSACTIONS;
  partitions already in the Ongoing transaction write nothing; else Ongoing with the union (the start time
  set when the transaction begins);
- EndTxn: the same id checks; Ongoing -> PrepareCommit / PrepareAbort (+ markers); a retry of a
  transaction already completed the same way is NONE, one still in Prepare of the same kind
  CONCURRENT_TRANSACTIONS, anything else INVALID_TXN_STATE;
- complete(): after every marker is written, PrepareCommit -> CompleteCommit, PrepareAbort ->
  CompleteAbort, with no partitions (a stale call, for an older epoch, changes nothing);
- an Ongoing transaction older than its timeout is fenced and aborted like a new incarnation
  (`abort_timed_out`); an id idle in Empty / Complete* longer than transactional.id.expiration.ms is
  removed with a tombstone (Dead);
- verify(): the partition is in the Ongoing transaction of that producer id and epoch (the check a
  transactional Produce makes, KIP-890): else INVALID_TXN_STATE, PRODUCER_FENCED for another epoch.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kaflite.protocol.errors import ErrorCode, KafkaError

from .state import TxnMetadata, TxnState, can_transition
from .txn_log import TxnLogValue, decode_key, decode_value, encode_key, encode_value

__all__ = ["MarkerJob", "TxnConfig", "TxnRecord", "TxnResult", "TransactionCoordinatorShard", "InitPidAnswer",
           "TxnAnswer"]

S = TxnState


@dataclass(frozen=True, slots=True)
class TxnConfig:
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 604_800_000
    num_partitions: int = 50


@dataclass(frozen=True, slots=True)
class TxnRecord:
    key: bytes
    value: bytes | None


@dataclass(frozen=True, slots=True)
class MarkerJob:
    """Markers to write for one transaction: what WriteTxnMarkers carries."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class InitPidAnswer:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1
    markers: MarkerJob | None = None


@dataclass(frozen=True, slots=True)
class TxnAnswer:
    error: ErrorCode
    markers: MarkerJob | None = None


@dataclass(slots=True)
class TxnResult:
    records: list[TxnRecord] = field(default_factory=list)
    responses: list[tuple[Hashable, Any]] = field(default_factory=list)
    timers: list[Any] = field(default_factory=list)

    def response(self) -> Any:
        return self.responses[0][1] if self.responses else None


def _valid_timeout(timeout_ms: int, config: TxnConfig) -> bool:
    return 0 < timeout_ms <= config.max_timeout_ms


class TransactionCoordinatorShard:
    def __init__(self, config: TxnConfig, next_producer_id: Callable[[], int]) -> None:
        self.config = config
        self.next_producer_id = next_producer_id
        self.txns: dict[str, TxnMetadata] = {}
        self._out: TxnResult | None = None

    # === the runtime's interface ====================================================================
    def replay(self, key: bytes, value: bytes | None) -> None:
        tid = decode_key(key)
        self._apply(tid, None if value is None else decode_value(value))

    def replay_transactional(self, producer_id: int, key: bytes, value: bytes | None) -> None:
        raise ValueError("__transaction_state holds no transactional records")

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        raise ValueError("__transaction_state holds no transaction markers")

    def _apply(self, tid: str, v: TxnLogValue | None) -> None:
        if v is None:
            self.txns.pop(tid, None)
            return
        old = self.txns.get(tid)
        last_epoch = -1
        if old is not None:
            last_epoch = old.producer_epoch if v.producer_epoch == old.producer_epoch + 1 and \
                old.producer_id == v.producer_id else old.last_producer_epoch
        self.txns[tid] = TxnMetadata(tid, v.producer_id, v.producer_epoch, v.timeout_ms, TxnState(v.status),
                                     set(v.partitions), v.last_update_ms, v.start_ms, last_epoch)

    def activate(self, now_ms: int) -> TxnResult:
        return TxnResult()

    def poll_timers(self, now_ms: int) -> TxnResult:
        return TxnResult()

    def next_deadline(self) -> int | None:
        return None  # timeouts and expiration are scanned by the shell's periodic task (as Kafka's)

    # === writing ====================================================================================
    def _begin(self) -> TxnResult:
        self._out = TxnResult()
        return self._out

    def _answer(self, response: Any) -> TxnResult:
        out = self._out or TxnResult()
        out.responses.append((None, response))
        self._out = None
        return out

    def _write(self, meta: TxnMetadata, state: TxnState, now: int, *, producer_id: int | None = None,
               epoch: int | None = None, partitions: Iterable[tuple[str, int]] | None = None,
               start_ms: int | None = None, timeout_ms: int | None = None) -> None:
        if meta.state is not state and not can_transition(meta.state, state):
            raise ValueError(f"transactional id {meta.transactional_id!r}: {meta.state.kafka_name} -> "
                             f"{state.kafka_name} is not a valid transition")
        v = TxnLogValue(
            meta.producer_id if producer_id is None else producer_id,
            meta.producer_epoch if epoch is None else epoch,
            meta.timeout_ms if timeout_ms is None else timeout_ms,
            int(state),
            tuple(sorted(meta.partitions if partitions is None else partitions)),
            now,
            meta.start_ms if start_ms is None else start_ms,
        )
        assert self._out is not None
        self._out.records.append(TxnRecord(encode_key(meta.transactional_id), encode_value(v)))
        self._apply(meta.transactional_id, v)

    def _fence_and_abort(self, meta: TxnMetadata, now: int) -> MarkerJob:
        """Ongoing -> PrepareEpochFence (epoch + 1, not written) -> PrepareAbort (written)."""
        if not can_transition(meta.state, S.PREPARE_EPOCH_FENCE):
            raise ValueError(f"cannot fence {meta.transactional_id!r} in {meta.state.kafka_name}")
        old_epoch = meta.producer_epoch
        new_epoch = old_epoch if meta.epoch_exhausted else old_epoch + 1
        meta.state = S.PREPARE_EPOCH_FENCE
        self._write(meta, S.PREPARE_ABORT, now, epoch=new_epoch)
        fenced = self.txns[meta.transactional_id]
        fenced.last_producer_epoch = old_epoch
        return MarkerJob(fenced.transactional_id, fenced.producer_id, fenced.producer_epoch, False,
                         tuple(sorted(fenced.partitions)))

    # === requests ===================================================================================
    def init_producer_id(self, tid: str, timeout_ms: int, now: int, expected_pid: int = -1,
                         expected_epoch: int = -1) -> TxnResult:
        self._begin()
        if not _valid_timeout(timeout_ms, self.config):
            return self._answer(InitPidAnswer(ErrorCode.invalid_transaction_timeout))
        meta = self.txns.get(tid)
        if meta is None or meta.state is S.DEAD:
            try:
                pid = self.next_producer_id()
            except KafkaError as e:  # no id at hand (a cluster broker waiting for its next block): retriable
                return self._answer(InitPidAnswer(e.code))
            meta = TxnMetadata(tid, pid, -1, timeout_ms, S.EMPTY)
            self._write(meta, S.EMPTY, now, epoch=0, timeout_ms=timeout_ms, partitions=(), start_ms=-1)
            new = self.txns[tid]
            return self._answer(InitPidAnswer(ErrorCode.none, new.producer_id, new.producer_epoch))
        if expected_pid >= 0 and not (expected_pid == meta.producer_id and expected_epoch in (
                meta.producer_epoch, meta.last_producer_epoch)):
            return self._answer(InitPidAnswer(ErrorCode.producer_fenced))
        if meta.in_prepare:
            return self._answer(InitPidAnswer(ErrorCode.concurrent_transactions))
        if meta.state is S.ONGOING:
            job = self._fence_and_abort(meta, now)
            return self._answer(InitPidAnswer(ErrorCode.concurrent_transactions, markers=job))
        if meta.epoch_exhausted:
            try:
                pid = self.next_producer_id()
            except KafkaError as e:
                return self._answer(InitPidAnswer(e.code))
            self._write(meta, S.EMPTY, now, producer_id=pid, epoch=0, timeout_ms=timeout_ms, partitions=(),
                        start_ms=-1)
        else:
            self._write(meta, S.EMPTY, now, epoch=meta.producer_epoch + 1, timeout_ms=timeout_ms, partitions=(),
                        start_ms=-1)
        new = self.txns[tid]
        return self._answer(InitPidAnswer(ErrorCode.none, new.producer_id, new.producer_epoch))

    def _check_producer(self, tid: str, pid: int, epoch: int) -> tuple[TxnMetadata | None, ErrorCode]:
        meta = self.txns.get(tid)
        if meta is None or meta.state is S.DEAD or meta.producer_id != pid:
            return None, ErrorCode.invalid_producer_id_mapping
        if epoch != meta.producer_epoch:
            return None, ErrorCode.producer_fenced
        return meta, ErrorCode.none

    def add_partitions(self, tid: str, pid: int, epoch: int, partitions: Iterable[tuple[str, int]],
                       now: int) -> TxnResult:
        self._begin()
        meta, error = self._check_producer(tid, pid, epoch)
        if meta is None:
            return self._answer(TxnAnswer(error))
        if meta.in_prepare:
            return self._answer(TxnAnswer(ErrorCode.concurrent_transactions))
        wanted = set(partitions)
        if meta.state is S.ONGOING and wanted <= meta.partitions:
            return self._answer(TxnAnswer(ErrorCode.none))
        start = meta.start_ms if meta.state is S.ONGOING else now
        self._write(meta, S.ONGOING, now, partitions=meta.partitions | wanted if meta.state is S.ONGOING else wanted,
                    start_ms=start)
        return self._answer(TxnAnswer(ErrorCode.none))

    def verify(self, tid: str, pid: int, epoch: int, partition: tuple[str, int]) -> ErrorCode:
        """Is `partition` part of this producer's ongoing transaction? (pure read, KIP-890)"""
        meta = self.txns.get(tid)
        if meta is None or meta.producer_id != pid:
            return ErrorCode.invalid_txn_state
        if epoch != meta.producer_epoch:
            return ErrorCode.invalid_producer_epoch
        if meta.state is not S.ONGOING or partition not in meta.partitions:
            return ErrorCode.invalid_txn_state
        return ErrorCode.none

    def end_txn(self, tid: str, pid: int, epoch: int, commit: bool, now: int) -> TxnResult:
        self._begin()
        meta, error = self._check_producer(tid, pid, epoch)
        if meta is None:
            return self._answer(TxnAnswer(error))
        state = meta.state
        if state is S.ONGOING:
            self._write(meta, S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, now)
            new = self.txns[tid]
            return self._answer(TxnAnswer(ErrorCode.none, MarkerJob(tid, new.producer_id, new.producer_epoch, commit,
                                                                    tuple(sorted(new.partitions)))))
        if (state is S.COMPLETE_COMMIT and commit) or (state is S.COMPLETE_ABORT and not commit):
            return self._answer(TxnAnswer(ErrorCode.none))
        if (state is S.PREPARE_COMMIT and commit) or (state is S.PREPARE_ABORT and not commit):
            return self._answer(TxnAnswer(ErrorCode.concurrent_transactions))
        return self._answer(TxnAnswer(ErrorCode.invalid_txn_state))

    def complete(self, tid: str, pid: int, epoch: int, now: int) -> TxnResult:
        self._begin()
        meta = self.txns.get(tid)
        if meta is None or meta.producer_id != pid or meta.producer_epoch != epoch:
            return self._answer(None)
        if meta.state is S.PREPARE_COMMIT:
            self._write(meta, S.COMPLETE_COMMIT, now, partitions=())
        elif meta.state is S.PREPARE_ABORT:
            self._write(meta, S.COMPLETE_ABORT, now, partitions=())
        return self._answer(None)

    # === the periodic tasks =========================================================================
    def timed_out(self, now: int) -> list[str]:
        return sorted(t for t, m in self.txns.items()
                      if m.state is S.ONGOING and m.start_ms >= 0 and now - m.start_ms > m.timeout_ms)

    def abort_timed_out(self, tid: str, now: int) -> TxnResult:
        self._begin()
        meta = self.txns.get(tid)
        if meta is None or meta.state is not S.ONGOING or now - meta.start_ms <= meta.timeout_ms:
            return self._answer(None)
        return self._answer(self._fence_and_abort(meta, now))

    def expired(self, now: int) -> list[str]:
        done = (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
        return sorted(t for t, m in self.txns.items()
                      if m.state in done and now - m.last_update_ms > self.config.id_expiration_ms)

    def expire(self, tids: Iterable[str], now: int) -> TxnResult:
        self._begin()
        removed = []
        for tid in tids:
            meta = self.txns.get(tid)
            if meta is None or tid not in self.expired(now):
                continue
            if not can_transition(meta.state, S.DEAD):
                continue
            assert self._out is not None
            self._out.records.append(TxnRecord(encode_key(tid), None))
            self._apply(tid, None)
            removed.append(tid)
        return self._answer(removed)

    def pending_markers(self) -> list[MarkerJob]:
        """Transactions in Prepare* (after a load: their markers may not all be written yet)."""
        return [MarkerJob(t, m.producer_id, m.producer_epoch, m.state is S.PREPARE_COMMIT, tuple(sorted(m.partitions)))
                for t, m in sorted(self.txns.items()) if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)]
