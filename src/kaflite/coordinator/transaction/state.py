"""A transactional id's state (Kafka's TransactionState / TransactionMetadata).

Rules (the transitions Kafka's TransactionMetadata allows; anything else is a bug of the coordinator):
    Empty             <- Empty, CompleteCommit, CompleteAbort       (InitProducerId: a new epoch)
    Ongoing           <- Ongoing, Empty, CompleteCommit, CompleteAbort (AddPartitionsToTxn / AddOffsetsToTxn)
    PrepareCommit     <- Ongoing                                    (EndTxn commit: markers to write)
    PrepareAbort      <- Ongoing, PrepareEpochFence                 (EndTxn abort, timeout, fencing)
    CompleteCommit    <- PrepareCommit                              (every COMMIT marker written)
    CompleteAbort     <- PrepareAbort                               (every ABORT marker written)
    PrepareEpochFence <- Ongoing                                    (a new producer incarnation or a
                                                                     timeout fences the old one: the
                                                                     epoch is bumped, then PrepareAbort)
    Dead              <- Empty, CompleteCommit, CompleteAbort       (transactional.id.expiration.ms)
PrepareEpochFence is transient, as in Kafka: it is never written to `__transaction_state` (the
PrepareAbort record that follows carries the bumped epoch). The byte of each state is the one Kafka
stores in TransactionLogValue.TransactionStatus.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

__all__ = ["MAX_EPOCH", "TxnMetadata", "TxnState", "can_transition"]

MAX_EPOCH = 32767  # Short.MAX_VALUE: an epoch at MAX_EPOCH - 1 is exhausted (a new producer id is issued)


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions / ListTransactions use (Kafka's TransactionState.name)."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def from_kafka_name(cls, name: str) -> TxnState | None:
        for s in cls:
            if s.kafka_name == name:
                return s
        return None


_S = TxnState
_VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
}


def can_transition(old: TxnState, new: TxnState) -> bool:
    return old in _VALID_PREVIOUS[new]


@dataclass(slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set[tuple[str, int]] = field(default_factory=set)
    last_update_ms: int = -1
    start_ms: int = -1
    last_producer_epoch: int = -1  # the epoch before a fencing bump (in memory, as Kafka 3.x)

    @property
    def in_prepare(self) -> bool:
        return self.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE)

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= MAX_EPOCH - 1
