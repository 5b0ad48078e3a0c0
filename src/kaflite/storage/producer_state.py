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
`check()` is pure (no mutation); `update()` applies an accepted batch. The state is rebuilt from the
log's batch headers on load (replaying `update()`), or from a snapshot file plus the tail.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from kaflite.protocol.errors import ErrorCode, KafkaError

__all__ = ["BatchMetadata", "ProducerEntry", "ProducerStateManager", "NUM_BATCHES_TO_RETAIN"]

NUM_BATCHES_TO_RETAIN = 5
_INT32_MAX = 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    producer_epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
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
        elif entry.batches and not in_sequence(entry.last_seq, first_seq):
            raise KafkaError(
                ErrorCode.out_of_order_sequence_number,
                f"out of order sequence for producer {producer_id}: got {first_seq}, "
                f"expected {(entry.last_seq + 1) & _INT32_MAX}",
            )
        return None

    def update(
        self, producer_id: int, epoch: int, first_seq: int, last_seq: int, first_offset: int, last_offset: int,
        timestamp: int,
    ) -> None:
        if producer_id < 0:
            return
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_id, epoch)
        elif epoch != entry.producer_epoch:
            entry.producer_epoch = epoch
            entry.batches.clear()
        if first_seq >= 0:
            entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))

    def evict_before(self, log_start_offset: int) -> None:
        """Forget producers whose last batch lies entirely below the log start offset (Kafka's
        truncateHead / evictUnretainedProducers)."""
        for pid in [p for p, e in self.producers.items() if 0 <= e.last_offset < log_start_offset]:
            del self.producers[pid]

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers whose last batch is older than `producer.id.expiration.ms` (Kafka's
        removeExpiredProducers, by the batch timestamp); returns how many were removed."""
        doomed = [
            pid for pid, e in self.producers.items() if not e.batches or now_ms - e.batches[-1].timestamp > expiration_ms
        ]
        for pid in doomed:
            del self.producers[pid]
        return len(doomed)

    def clear(self) -> None:
        self.producers.clear()

    # --- snapshot (a bonus over rebuilding from the log) ---------------------------------------------
    def to_json(self) -> str:
        return json.dumps(
            [
                [e.producer_id, e.producer_epoch, [[b.first_seq, b.last_seq, b.first_offset, b.last_offset,
                                                     b.timestamp] for b in e.batches]]
                for e in self.producers.values()
            ]
        )

    @classmethod
    def from_json(cls, text: str) -> ProducerStateManager:
        m = cls()
        for pid, epoch, batches in json.loads(text):
            e = ProducerEntry(int(pid), int(epoch))
            for b in batches:
                e.batches.append(BatchMetadata(*(int(x) for x in b)))
            m.producers[e.producer_id] = e
        return m

    def write_snapshot(self, directory: Path, offset: int) -> Path:
        """Write `<20-digit offset>.snapshot` atomically (state of every batch below `offset`)."""
        from kaflite.storage.checkpoint import atomic_write

        path = directory / f"{offset:020d}.snapshot"
        atomic_write(path, self.to_json().encode())
        return path
