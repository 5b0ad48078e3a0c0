"""The share-partition state machine of KIP-932 share groups: one (group, topic-partition) pair's records
in flight, who holds which, and how often each was delivered. Pure: no I/O, no clock of its own (every
time is an argument in ms), deterministic for the same calls.

Rules (each is checked by tests/coordinator/share/):
- A record is AVAILABLE, ACQUIRED, ACKNOWLEDGED or ARCHIVED (Kafka's RecordState codes 0, 1, 2, 4).
  Allowed moves: AVAILABLE -> ACQUIRED (acquire); ACQUIRED -> ACKNOWLEDGED (ACCEPT);
  ACQUIRED -> AVAILABLE (RELEASE, lock expiry, member leaving); ACQUIRED -> ARCHIVED (REJECT, GAP);
  AVAILABLE -> ARCHIVED (the log start moved past it; from_state, when its count is at the limit).
  ACKNOWLEDGED and ARCHIVED are final.
- Acquisition increments the record's delivery count. A record going back to AVAILABLE whose delivery
  count has reached `delivery_count_limit` becomes ARCHIVED instead, so no record is ever acquired more
  than `delivery_count_limit` times, and an AVAILABLE record always has delivery count < the limit.
- Only AVAILABLE records (or offsets never fetched before) are acquired: a record ACQUIRED by one member is
  never handed to another until its lock ends. The lock's deadline is acquire time +
  `record_lock_duration_ms`; at now >= deadline it has expired. Every operation that takes `now` first
  expires the locks due at `now`, so an expired lock can never be acknowledged.
- Only the member holding a record's lock may acknowledge it (GAP on an offset archived as having no
  record is the one exception: a no-op); otherwise the whole acknowledgement is
  refused with INVALID_RECORD_STATE (121) and nothing changes (Kafka rolls the partition's batches back
  together). A malformed request (first > last, ranges overlapping or not ascending, an unknown type, an
  offset past the share-partition end) is INVALID_REQUEST (42), nothing changes.
- The window [start_offset, end_offset) holds every offset fetched but not yet final at the front: the
  share-partition start offset (SPSO) only moves forward, past the contiguous prefix of ACKNOWLEDGED /
  ARCHIVED records; end_offset - start_offset never exceeds `max_record_locks`
  (group.share.partition.max.record.locks): no new offset is acquired past that.
- Every offset below the SPSO is final (ACKNOWLEDGED or ARCHIVED) except records still ACQUIRED when the
  log start offset moved past them; those are never AVAILABLE again (a lock ending archives them).
- Nothing at or past the high watermark is acquired; under read_committed nothing at or past the last
  stable offset either. Offsets the caller names as aborted (aborted transactions' records, control
  records) are archived on first sight under read_committed, never delivered. Offsets inside the fetched
  range that no batch covers (compacted away) are archived with delivery count 0.
- export() gives Kafka's share-group snapshot: the start offset and the state batches (first, last,
  delivery state, delivery count) of [start, end). A lock does not survive a restart, so ACQUIRED exports
  as AVAILABLE with its count (ARCHIVED if that count is at the limit, and the exported start offset is
  past a final prefix). from_state(export()) exports the same snapshot again, and has the same end offset.
- `changed` is set by initial() and by every transition that is not an acquisition (an acknowledgement,
  a release, a lock ending, a member leaving, the log start moving past the SPSO); the broker writes
  export() to `__share_group_state` before answering and clears it. An acquisition alone sets nothing:
  a restart makes ACQUIRED records AVAILABLE again, which is what the last snapshot says of them.
- `counts` (a ShareCounts, which the group coordinator shares among a group's partitions) only grows, by
  records: `acquired` per record acquired; `accepted` / `released_acks` / `rejected` per record an
  ACCEPT / RELEASE / REJECT acknowledgement applied to; `released` per record back to AVAILABLE (RELEASE,
  lock end, member leaving); `archived` per record made ARCHIVED by a transition (REJECT, GAP on a held
  record, a release at the delivery limit or below the log start, an AVAILABLE record the log start
  passed, an aborted transaction's record or marker under read_committed). Rebuilding from a snapshot
  counts nothing.
- `epochs` (a ShareEpochs, None until the broker sets it) is where the broker made the share partition: the
  partition's leader epoch then, the state epoch it read, and whether its state is another broker's. This
  module never reads it: it lives on the share partition so that it goes when the share partition goes
  (dropped, rebuilt, its group or topic deleted), never describing a share partition made later.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

from kaflite.protocol.errors import ErrorCode

__all__ = [
    "AUTO_OFFSET_RESETS",
    "DEFAULT_DELIVERY_COUNT_LIMIT",
    "DEFAULT_MAX_RECORD_LOCKS",
    "DEFAULT_RECORD_LOCK_DURATION_MS",
    "AckType",
    "AcknowledgeResult",
    "AcquiredRange",
    "RecordState",
    "ShareCounts",
    "ShareEpochs",
    "ShareConfig",
    "SharePartition",
    "ShareSnapshot",
    "StateBatch",
]

# Kafka 4.2's broker defaults: group.share.record.lock.duration.ms, group.share.delivery.count.limit,
# group.share.partition.max.record.locks.
DEFAULT_RECORD_LOCK_DURATION_MS = 30_000
DEFAULT_DELIVERY_COUNT_LIMIT = 5
DEFAULT_MAX_RECORD_LOCKS = 2000
AUTO_OFFSET_RESETS = ("latest", "earliest")
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")


class RecordState(IntEnum):
    """Kafka's RecordState codes (the same bytes go into the persisted state batches)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(IntEnum):
    """ShareFetch / ShareAcknowledge AcknowledgeTypes."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


FINAL = frozenset({RecordState.ACKNOWLEDGED, RecordState.ARCHIVED})
_ACK_TYPES = frozenset(int(t) for t in AckType)


@dataclass(frozen=True, slots=True)
class ShareConfig:
    record_lock_duration_ms: int = DEFAULT_RECORD_LOCK_DURATION_MS
    delivery_count_limit: int = DEFAULT_DELIVERY_COUNT_LIMIT
    max_record_locks: int = DEFAULT_MAX_RECORD_LOCKS
    auto_offset_reset: str = "latest"
    isolation_level: str = "read_uncommitted"

    def __post_init__(self) -> None:
        # Kafka's own bounds are checked where the keys are configured; these only keep the machine sane.
        if self.record_lock_duration_ms <= 0 or self.delivery_count_limit < 1 or self.max_record_locks < 1:
            raise ValueError(f"invalid share config {self}")
        if self.auto_offset_reset not in AUTO_OFFSET_RESETS:
            raise ValueError(
                f"share.auto.offset.reset {self.auto_offset_reset!r} is not one of {AUTO_OFFSET_RESETS}"
            )
        if self.isolation_level not in ISOLATION_LEVELS:
            raise ValueError(
                f"share.isolation.level {self.isolation_level!r} is not one of {ISOLATION_LEVELS}"
            )


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    """Kafka's AcquiredRecords: offsets first..last (inclusive), all with this delivery count."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class StateBatch:
    """One persisted state batch (ShareSnapshotValue.StateBatches)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    """What a share partition persists (ShareSnapshotValue's StartOffset and StateBatches)."""

    start_offset: int
    batches: tuple[StateBatch, ...]


@dataclass(frozen=True, slots=True)
class AcknowledgeResult:
    """The partition's error code (Kafka answers per partition) and, on an error, the index of the
    acknowledgement range that caused it."""

    error_code: int
    failed_range: int | None = None


@dataclass(slots=True)
class ShareCounts:
    """What happened to records (see the rules): plain ints, read by the broker's metrics at scrape time."""

    acquired: int = 0
    accepted: int = 0
    released_acks: int = 0
    rejected: int = 0
    released: int = 0
    archived: int = 0


@dataclass(frozen=True, slots=True)
class ShareEpochs:
    """Where the broker made a share partition (see the rules; Kafka's SharePartition leaderEpoch and
    stateEpoch): a write of its state carries them, and a share partition made at another leader epoch
    than the partition's now is stale."""

    leader_epoch: int
    state_epoch: int = 0
    state_elsewhere: bool = False  # its state is on another broker's share coordinator (the persister)


@dataclass(slots=True)
class _Record:
    state: RecordState
    delivery_count: int
    member_id: str | None = None
    deadline_ms: int = 0


class SharePartition:
    """See the rules above. Offsets are the log's offsets; ranges are inclusive, as on the wire."""

    def __init__(self, config: ShareConfig, start_offset: int) -> None:
        self.config = config
        self._start = start_offset
        self._end = start_offset  # exclusive: the next offset never seen before
        # Offsets in [start, end) plus the orphans: records still ACQUIRED when the log start moved past them.
        self._records: dict[int, _Record] = {}
        self._orphans: set[int] = set()
        # a change to persist before answering (see the rules); from_state's state is the persisted one
        self.changed = False
        self.counts = ShareCounts()
        self.epochs: ShareEpochs | None = None  # set by the broker (see the rules)

    # --- construction -----------------------------------------------------------------------------
    @classmethod
    def initial(cls, config: ShareConfig, log_start_offset: int, high_watermark: int) -> SharePartition:
        """A share partition with no persisted state: SPSO per share.auto.offset.reset."""
        start = log_start_offset if config.auto_offset_reset == "earliest" else high_watermark
        sp = cls(config, start)
        sp.changed = True  # the start offset chosen here must survive a restart
        return sp

    @classmethod
    def from_state(cls, config: ShareConfig, snapshot: ShareSnapshot) -> SharePartition:
        """Rebuild from a persisted snapshot (what export() gave): its batches ascending and contiguous
        from its start offset (a hole would leave offsets with no state; ValueError)."""
        start_offset = snapshot.start_offset
        sp = cls(config, start_offset)
        for b in snapshot.batches:
            if b.last_offset < start_offset:
                continue
            if max(b.first_offset, start_offset) != sp._end or b.last_offset < b.first_offset:
                raise ValueError(f"state batch {b} does not continue at offset {sp._end}")
            state = RecordState(b.delivery_state)
            if state is RecordState.ACQUIRED:
                state = RecordState.AVAILABLE  # a lock never survives a restart
            count = b.delivery_count
            if state is RecordState.AVAILABLE and count >= config.delivery_count_limit:
                state = RecordState.ARCHIVED
            for off in range(sp._end, b.last_offset + 1):
                sp._records[off] = _Record(state, count)
            sp._end = b.last_offset + 1
        sp._advance()
        return sp

    # --- views ------------------------------------------------------------------------------------
    @property
    def start_offset(self) -> int:
        """The share-partition start offset (SPSO)."""
        return self._start

    @property
    def end_offset(self) -> int:
        """One past the last offset in flight (SPEO + 1); the next offset never fetched before."""
        return self._end

    def in_flight(self) -> int:
        return self._end - self._start

    def state_of(self, offset: int) -> tuple[RecordState, int, str | None] | None:
        """(state, delivery count, lock holder) of an offset in flight; None outside the window."""
        rec = self._records.get(offset)
        return None if rec is None else (rec.state, rec.delivery_count, rec.member_id)

    def in_flight_ranges(self, limit: int = 100) -> tuple[list[tuple[int, int, RecordState, int, str | None, int]], int]:
        """The records in flight (the window, and held records the log start passed), as ascending ranges
        of adjacent offsets with the same (state, delivery count, lock holder, lock deadline): the first
        `limit` of them, and how many there are (a view for the console; deadline 0: not locked). At most
        `max_record_locks` offsets plus the orphans are walked."""
        out: list[tuple[int, int, RecordState, int, str | None, int]] = []
        for off in sorted(self._records):
            r = self._records[off]
            key = (r.state, r.delivery_count, r.member_id, r.deadline_ms)
            if out and out[-1][1] == off - 1 and out[-1][2:] == key:
                out[-1] = (out[-1][0], off, *key)
            else:
                out.append((off, off, *key))
        return out[:limit], len(out)

    def acquired_by(self, member_id: str) -> list[int]:
        return sorted(o for o, r in self._records.items() if r.member_id == member_id)

    def fetch_offset(self) -> int:
        """Where the broker should read the log from: the first AVAILABLE record in flight, else the end."""
        for off in range(self._start, self._end):
            if self._records[off].state is RecordState.AVAILABLE:
                return off
        return self._end

    def next_deadline(self) -> int | None:
        """The earliest lock deadline (for the broker's timer), None when nothing is locked."""
        deadlines = [r.deadline_ms for r in self._records.values() if r.state is RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    # --- transitions ------------------------------------------------------------------------------
    def acquire(
        self,
        member_id: str,
        batches: Sequence[tuple[int, int]],
        *,
        high_watermark: int,
        max_records: int,
        now: int,
        last_stable_offset: int | None = None,
        aborted: Sequence[tuple[int, int]] = (),
    ) -> list[AcquiredRange]:
        """Lock records of the fetched batches (inclusive offset ranges the log returned reading from
        fetch_offset()) for `member_id`, at most `max_records` of them; the acquired ranges come back
        with their delivery counts, ascending."""
        self.expire(now)
        read_committed = self.config.isolation_level == "read_committed"
        if read_committed:
            upper = high_watermark if last_stable_offset is None else min(high_watermark, last_stable_offset)
        else:
            upper = high_watermark
        skip = sorted(aborted) if read_committed else []
        deadline = now + self.config.record_lock_duration_ms
        acquired: list[int] = []
        budget = max_records
        for first, last in sorted(batches):
            for off in range(max(first, self._start), min(last, upper - 1) + 1):
                if budget <= 0:
                    break
                if off < self._end:
                    rec = self._records[off]
                    if rec.state is not RecordState.AVAILABLE:
                        continue  # held by a member, or final: never handed out twice
                    rec.state = RecordState.ACQUIRED
                else:
                    # A new offset: it (and any hole before it) must fit in the record-lock window.
                    if off + 1 - self._start > self.config.max_record_locks:
                        break
                    for hole in range(self._end, off):
                        self._records[hole] = _Record(RecordState.ARCHIVED, 0)
                    self._end = off + 1
                    if _covered(off, skip):
                        self._records[off] = _Record(RecordState.ARCHIVED, 0)
                        self.counts.archived += 1
                        self._advance()  # an archived front must not hold the window's room
                        continue
                    rec = self._records[off] = _Record(RecordState.ACQUIRED, 0)
                rec.delivery_count += 1
                rec.member_id = member_id
                rec.deadline_ms = deadline
                acquired.append(off)
                budget -= 1
        self._advance()
        self.counts.acquired += len(acquired)
        return self._ranges(acquired)

    def acknowledge(
        self, member_id: str, acks: Sequence[tuple[int, int, int]], now: int
    ) -> AcknowledgeResult:
        """Apply (first, last, type) acknowledgements all together, or none of them."""
        self.expire(now)
        prev_last = -1
        for i, (first, last, kind) in enumerate(acks):
            if first > last or first <= prev_last or kind not in _ACK_TYPES or last >= self._end:
                return AcknowledgeResult(ErrorCode.invalid_request.value, i)
            prev_last = last
            for off in range(first, last + 1):
                rec = self._records.get(off)
                if rec is None:
                    return AcknowledgeResult(ErrorCode.invalid_record_state.value, i)
                if kind == AckType.GAP and rec.state is RecordState.ARCHIVED and rec.member_id is None:
                    continue  # an offset with no record, archived when fetched: nothing to do
                if rec.state is not RecordState.ACQUIRED or rec.member_id != member_id:
                    return AcknowledgeResult(ErrorCode.invalid_record_state.value, i)
        for first, last, kind in acks:
            for off in range(first, last + 1):
                rec = self._records[off]
                if rec.state is not RecordState.ACQUIRED:
                    continue
                if kind == AckType.ACCEPT:
                    self._finish(rec, RecordState.ACKNOWLEDGED)
                    self.counts.accepted += 1
                elif kind == AckType.RELEASE:
                    self._release(off, rec)
                    self.counts.released_acks += 1
                else:  # REJECT, GAP
                    self._finish(rec, RecordState.ARCHIVED)
                    self.counts.archived += 1
                    if kind == AckType.REJECT:
                        self.counts.rejected += 1
                self.changed = True
        self._advance()
        return AcknowledgeResult(ErrorCode.none.value)

    def expire(self, now: int) -> list[int]:
        """Release every lock whose deadline is at or before `now`; the offsets released, ascending."""
        due = sorted(
            o for o, r in self._records.items() if r.state is RecordState.ACQUIRED and r.deadline_ms <= now
        )
        for off in due:
            self._release(off, self._records[off])
        self._advance()
        return due

    def release_member(self, member_id: str) -> list[int]:
        """A member left: everything it holds is released (as RELEASE would); the offsets, ascending."""
        held = self.acquired_by(member_id)
        for off in held:
            self._release(off, self._records[off])
        self._advance()
        return held

    def move_log_start(self, log_start_offset: int) -> bool:
        """The log's start offset moved (retention, DeleteRecords). If it passed the SPSO, the records
        below it are out of range: AVAILABLE ones are archived, held ones stay with their holder until the
        lock ends (then archived), and the SPSO jumps to the log start. True when the SPSO moved."""
        if log_start_offset <= self._start:
            return False
        for off in range(self._start, min(log_start_offset, self._end)):
            if self._records[off].state is RecordState.ACQUIRED:
                self._orphans.add(off)
            else:  # AVAILABLE is archived; final records below the SPSO are forgotten
                if self._records[off].state is RecordState.AVAILABLE:
                    self.counts.archived += 1
                del self._records[off]
        self._start = log_start_offset
        self._end = max(self._end, log_start_offset)
        self.changed = True
        self._advance()
        return True

    # --- persistence ------------------------------------------------------------------------------
    def export(self) -> ShareSnapshot:
        """The window [SPSO, end) as state batches, adjacent offsets of equal (state, count) merged. A
        lock ending archives the records at the limit, so a final prefix can appear: the snapshot's start
        offset is past it, as from_state would move it."""
        out: list[StateBatch] = []
        start = self._start
        for off in range(self._start, self._end):
            rec = self._records[off]
            state = rec.state
            if state is RecordState.ACQUIRED:
                limit = self.config.delivery_count_limit
                state = RecordState.ARCHIVED if rec.delivery_count >= limit else RecordState.AVAILABLE
            if off == start and state in FINAL:
                start += 1
                continue
            prev = out[-1] if out else None
            if prev and prev.delivery_state == state and prev.delivery_count == rec.delivery_count:
                out[-1] = StateBatch(prev.first_offset, off, state.value, rec.delivery_count)
            else:
                out.append(StateBatch(off, off, state.value, rec.delivery_count))
        return ShareSnapshot(start, tuple(out))

    # --- internals --------------------------------------------------------------------------------
    def _release(self, offset: int, rec: _Record) -> None:
        # Below the SPSO (log start moved past it) nothing is ever delivered again.
        self.changed = True
        if rec.delivery_count >= self.config.delivery_count_limit or offset < self._start:
            self._finish(rec, RecordState.ARCHIVED)
            self.counts.archived += 1
        else:
            self._finish(rec, RecordState.AVAILABLE)
            self.counts.released += 1

    @staticmethod
    def _finish(rec: _Record, state: RecordState) -> None:
        rec.state = state
        rec.member_id = None
        rec.deadline_ms = 0

    def _advance(self) -> None:
        """Move the SPSO past the final prefix and forget final records below it."""
        while self._start < self._end and self._records[self._start].state in FINAL:
            del self._records[self._start]
            self._start += 1
        for off in [o for o in self._orphans if self._records[o].state in FINAL]:
            del self._records[off]
            self._orphans.discard(off)

    def _ranges(self, offsets: list[int]) -> list[AcquiredRange]:
        out: list[AcquiredRange] = []
        for off in offsets:
            count = self._records[off].delivery_count
            if out and out[-1].last_offset == off - 1 and out[-1].delivery_count == count:
                out[-1] = AcquiredRange(out[-1].first_offset, off, count)
            else:
                out.append(AcquiredRange(off, off, count))
        return out


def _covered(offset: int, ranges: Sequence[tuple[int, int]]) -> bool:
    return any(first <= offset <= last for first, last in ranges)
