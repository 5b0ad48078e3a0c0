"""Idempotent-producer state of one partition: producer id -> epoch + the last 5 batches' sequences.

Rules (Kafka's ProducerStateManager / ProducerAppendInfo, client-origin appends):
1. A batch without a producer id (pid < 0) is not checked.
2. Duplicate: same pid, same epoch, and (first seq, last seq) equal to one of the last 5 batches kept
   for that pid -> the append is answered with the ORIGINAL offsets and nothing is written.
3. Epoch smaller than the known epoch -> INVALID_PRODUCER_EPOCH.
4. A new (larger) epoch must start at sequence 0 -> else OUT_OF_ORDER_SEQUENCE_NUMBER (unless the pid
   had no epoch yet).
5. Same epoch: first seq must be last seq + 1 (Int32.MAX wraps to 0) -> else
   OUT_OF_ORDER_SEQUENCE_NUMBER. A pid with no state at all (new, or its batches were deleted by
   retention) accepts any sequence.
6. Transactions (Kafka's ProducerStateManager with KIP-98): a transactional batch opens the producer's
   transaction at its first offset unless one is open; the transaction stays open (it holds the last
   stable offset back, `first_unstable_offset`) until the producer's COMMIT / ABORT marker. A
   non-transactional batch from a producer with an open transaction is INVALID_TXN_STATE. A marker with
   an older producer epoch is INVALID_PRODUCER_EPOCH, one from an older coordinator epoch
   TRANSACTION_COORDINATOR_FENCED; an ABORT marker yields the `AbortedTxn` for the transaction index
   (its last stable offset is the first offset of the earliest OTHER open transaction, or the marker's
   offset + 1). A producer with an open transaction is never expired.
`check()` is pure (no mutation); `update()` / `complete_txn()` apply an accepted batch / marker.
7. Log's hot path (Log._append, one client batch with a producer id) applies rules 2-5 and 6's batch part
   inline on `producers` for the accepted and duplicate cases only, and hands every refused batch to the
   general path (check() then raises the precise error); tests/storage/test_idempotent_fast_path.py checks
   that both paths give the same offsets, errors and state. Its replica hot path (Log._append_replica)
   applies update() inline for each data batch of a fetched set, complete_txn() for a marker;
   tests/storage/test_replica_fast_path.py checks it against update() (the general path).
8. An entry keeps its last 5 batches in `retained` as plain tuples (first seq, last seq, first offset, last
   offset, timestamp), oldest first, so that the hot path stores one with no constructor call;
   `ProducerEntry.batches` is the same batches as `BatchMetadata` (a read-only copy, for readers off the
   hot path), and check() returns a duplicate as a `BatchMetadata`.
The state is rebuilt from the log's batch headers on load (replaying both), or from a snapshot file plus the tail.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.storage.txn_index import AbortedTxn

__all__ = ["BatchMetadata", "BatchTuple", "ProducerEntry", "ProducerStateManager", "NUM_BATCHES_TO_RETAIN"]

NUM_BATCHES_TO_RETAIN = 5
_INT32_MAX = 0x7FFFFFFF


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


# what `ProducerEntry.retained` holds per batch: BatchMetadata's fields, in its order, in a plain tuple
BatchTuple = tuple[int, int, int, int, int]


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    producer_epoch: int
    retained: deque[BatchTuple] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    current_txn_first_offset: int = -1  # the open transaction's first offset, -1 when none
    coordinator_epoch: int = -1  # of the last marker written for this producer
    last_timestamp: int = -1  # of the last batch or marker (expiration)

    @property
    def batches(self) -> tuple[BatchMetadata, ...]:
        """The retained batches by field name, oldest first: a copy (the state changes only through
        `retained`)."""
        return tuple(map(BatchMetadata._make, self.retained))

    @property
    def last_seq(self) -> int:
        return self.retained[-1][1] if self.retained else -1

    @property
    def last_offset(self) -> int:
        return self.retained[-1][3] if self.retained else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for b in self.retained:
            if b[0] == first_seq and b[1] == last_seq:
                return BatchMetadata._make(b)
        return None


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest open transaction (the last stable offset's bound), None when
        no transaction is open."""
        return min(self.ongoing.values()) if self.ongoing else None

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
              is_transactional: bool = False) -> BatchMetadata | None:
        """Validate one client batch against the state (pure). Returns the original batch if it is a
        duplicate, None if it may be appended; raises KafkaError otherwise."""
        if producer_id < 0:
            return None
        entry = self.producers.get(producer_id)
        if entry is None:
            return None  # unknown producer: any sequence is accepted (rule 5)
        dup = entry.find_duplicate(epoch, first_seq, last_seq)
        if dup is not None:
            return dup
        if not is_transactional and entry.current_txn_first_offset >= 0:
            raise KafkaError(ErrorCode.invalid_txn_state,
                             f"expected a transactional write from producer {producer_id}: its transaction "
                             f"from offset {entry.current_txn_first_offset} is open")
        if epoch < entry.producer_epoch:
            raise KafkaError(
                ErrorCode.invalid_producer_epoch,
                f"producer {producer_id} epoch {epoch} is smaller than the last seen epoch {entry.producer_epoch}",
            )
        if epoch != entry.producer_epoch:
            if first_seq != 0 and entry.producer_epoch >= 0:
                raise KafkaError(
                    ErrorCode.out_of_order_sequence_number,
                    f"invalid sequence {first_seq} for new epoch {epoch} of producer {producer_id} (expected 0)",
                )
        elif entry.retained and not in_sequence(entry.last_seq, first_seq):
            raise KafkaError(
                ErrorCode.out_of_order_sequence_number,
                f"out of order sequence for producer {producer_id}: got {first_seq}, "
                f"expected {(entry.last_seq + 1) & _INT32_MAX}",
            )
        return None

    def update(
        self, producer_id: int, epoch: int, first_seq: int, last_seq: int, first_offset: int, last_offset: int,
        timestamp: int, is_transactional: bool = False,
    ) -> None:
        if producer_id < 0:
            return
        entry = self._entry(producer_id, epoch)
        if first_seq >= 0:
            entry.retained.append((first_seq, last_seq, first_offset, last_offset, timestamp))
        entry.last_timestamp = timestamp
        if is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self.ongoing[producer_id] = first_offset

    def _entry(self, producer_id: int, epoch: int) -> ProducerEntry:
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_id, epoch)
        elif epoch != entry.producer_epoch:
            entry.producer_epoch = epoch
            entry.retained.clear()
        return entry

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Validate a COMMIT / ABORT marker from the transaction coordinator (pure)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if epoch < entry.producer_epoch:
            raise KafkaError(ErrorCode.invalid_producer_epoch,
                             f"marker for producer {producer_id} with epoch {epoch} is older than the last "
                             f"seen epoch {entry.producer_epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(ErrorCode.transaction_coordinator_fenced,
                             f"marker for producer {producer_id} from coordinator epoch {coordinator_epoch}, "
                             f"older than {entry.coordinator_epoch}")

    def complete_txn(self, producer_id: int, epoch: int, marker_offset: int, commit: bool,
                     coordinator_epoch: int, timestamp: int) -> AbortedTxn | None:
        """Apply a marker written at `marker_offset`: the producer's transaction is closed; an ABORT
        returns the aborted-transaction index entry (also for a transaction without data, as Kafka)."""
        entry = self._entry(producer_id, epoch)
        first = entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else marker_offset
        entry.current_txn_first_offset = -1
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        self.ongoing.pop(producer_id, None)
        if commit:
            return None
        fuo = self.first_unstable_offset
        return AbortedTxn(producer_id, first, marker_offset, marker_offset + 1 if fuo is None else fuo)

    def evict_before(self, log_start_offset: int) -> None:
        """Forget producers whose last batch lies entirely below the log start offset (Kafka's
        truncateHead / evictUnretainedProducers)."""
        for pid in [p for p, e in self.producers.items()
                    if 0 <= e.last_offset < log_start_offset and e.current_txn_first_offset < 0]:
            del self.producers[pid]

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers whose last batch is older than `producer.id.expiration.ms` (Kafka's
        removeExpiredProducers, by the batch timestamp); returns how many were removed."""
        doomed = [
            pid for pid, e in self.producers.items()
            if e.current_txn_first_offset < 0
            and (not e.retained or now_ms - max(e.retained[-1][4], e.last_timestamp) > expiration_ms)
        ]
        for pid in doomed:
            del self.producers[pid]
        return len(doomed)

    def clear(self) -> None:
        self.producers.clear()
        self.ongoing.clear()

    # --- snapshot (a bonus over rebuilding from the log) ---------------------------------------------
    def to_json(self) -> str:
        return json.dumps(
            [
                [e.producer_id, e.producer_epoch, [list(b) for b in e.retained],
                 e.current_txn_first_offset, e.coordinator_epoch, e.last_timestamp]
                for e in self.producers.values()
            ]
        )

    @classmethod
    def from_json(cls, text: str) -> ProducerStateManager:
        m = cls()
        for item in json.loads(text):
            pid, epoch, batches = item[:3]
            e = ProducerEntry(int(pid), int(epoch))
            for b in batches:
                first_seq, last_seq, first_offset, last_offset, timestamp = (int(x) for x in b)
                e.retained.append((first_seq, last_seq, first_offset, last_offset, timestamp))
            if len(item) >= 6:  # snapshots written before transactions have three fields
                e.current_txn_first_offset, e.coordinator_epoch, e.last_timestamp = (int(x) for x in item[3:6])
            m.producers[e.producer_id] = e
            if e.current_txn_first_offset >= 0:
                m.ongoing[e.producer_id] = e.current_txn_first_offset
        return m

    def write_snapshot(self, directory: Path, offset: int, *, sync: bool = True) -> Path:
        """Write `<20-digit offset>.snapshot` (state of every batch below `offset`) by a rename; fsync'd
        with its directory unless `sync` is False (the caller fsyncs it later: `Log.sync_snapshots`)."""
        from kaflite.storage.checkpoint import atomic_write, replace_unsynced

        path = directory / f"{offset:020d}.snapshot"
        (atomic_write if sync else replace_unsynced)(path, self.to_json().encode())
        return path
