"""What one coordinator step writes into (Kafka's coordinator "context" of a shard): the result being
built (records, responses, timer changes), the clock of the step, the shard's timers and its config.

Rules:
- state changes only through `append(key, value)`: the record is encoded for `__consumer_offsets` and
  applied to the shard through the same `apply` that loading uses (so what is written is what is held);
- a timer is set or cancelled by key; `poll(now)` fires the due ones earliest first, each seeing its own
  deadline as the time; a rescheduled or cancelled timer's heap entry is stale and skipped;
- responses are (token, response): token None is the caller's answer, others answer parked requests.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from .config import CoordinatorConfig
from .offsets_topic import partition_for
from .records import RecordKey, RecordValue, encode_key, encode_value

TimerKey = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class TimerOp:
    """Set (deadline_ms) or cancel (deadline_ms None) the timer `key`."""

    key: TimerKey
    deadline_ms: int | None


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    """One record for partition `partition` of `__consumer_offsets` (value None = tombstone)."""

    partition: int
    key: bytes
    value: bytes | None
    record_key: RecordKey
    record_value: RecordValue | None


@dataclass(slots=True)
class CoordinatorResult:
    records: list[CoordinatorRecord] = field(default_factory=list)
    responses: list[tuple[Hashable, Any]] = field(default_factory=list)
    timers: list[TimerOp] = field(default_factory=list)

    def response(self, token: Hashable = None) -> Any:
        """The answer to `token` produced by this step (None if it stays parked)."""
        for t, resp in self.responses:
            if t == token:
                return resp
        return None

    def extend(self, other: CoordinatorResult) -> None:
        self.records += other.records
        self.responses += other.responses
        self.timers += other.timers



class ShardContext:
    """The plumbing a shard's managers share: config, clock, timers, the current step's result."""

    def __init__(self, config: CoordinatorConfig, new_uuid: Callable[[], str] | None,
                 apply: Callable[[RecordKey, RecordValue | None], None], active: bool) -> None:
        self.config = config
        self.new_uuid = new_uuid or (lambda: str(uuid.uuid4()))
        self.apply = apply
        # Not active = still loading __consumer_offsets: replay rebuilds groups, requests are refused.
        self.active = active
        self.now = 0
        self._res: CoordinatorResult | None = None
        self._timers: dict[TimerKey, tuple[int, Callable[[], None], int]] = {}
        # A heap of (deadline, seq, key); an entry whose seq no longer matches _timers[key] is stale
        # (rescheduled or cancelled) and skipped: every heartbeat reschedules, so this stays O(log n).
        self._heap: list[tuple[int, int, TimerKey]] = []
        self._seq = 0

    # --- the step -------------------------------------------------------------------------------

    def begin(self, now_ms: int) -> CoordinatorResult:
        self.now = now_ms
        self._res = CoordinatorResult()
        return self._res

    def end(self) -> None:
        self._res = None

    @property
    def out(self) -> CoordinatorResult:
        if self._res is None:
            self._res = CoordinatorResult()
        return self._res

    def respond(self, token: Hashable, response: Any) -> None:
        self.out.responses.append((token, response))

    def append(self, key: RecordKey, value: RecordValue | None) -> None:
        record = CoordinatorRecord(partition_for(key.group, self.config.offsets_topic_num_partitions),
                                   encode_key(key), None if value is None else encode_value(value), key, value)
        self.out.records.append(record)
        self.apply(key, value)  # the same path as loading: state changes only through replay

    def emit(self, key: RecordKey, value: RecordValue | None) -> CoordinatorRecord:
        """A record to write that the caller applies itself, as loading will (a transactional offset
        commit: pending, not committed)."""
        record = CoordinatorRecord(partition_for(key.group, self.config.offsets_topic_num_partitions),
                                   encode_key(key), None if value is None else encode_value(value), key, value)
        self.out.records.append(record)
        return record

    # --- timers ---------------------------------------------------------------------------------

    def schedule(self, key: TimerKey, deadline_ms: int, callback: Callable[[], None]) -> None:
        self._seq += 1
        self._timers[key] = (deadline_ms, callback, self._seq)
        heapq.heappush(self._heap, (deadline_ms, self._seq, key))
        if len(self._heap) > 64 and len(self._heap) > 4 * len(self._timers):
            self._heap = [(d, q, k) for k, (d, _, q) in self._timers.items()]  # drop stale entries
            heapq.heapify(self._heap)
        self.out.timers.append(TimerOp(key, deadline_ms))

    def cancel(self, key: TimerKey) -> None:
        if self._timers.pop(key, None) is not None:
            self.out.timers.append(TimerOp(key, None))

    def next_deadline(self) -> int | None:
        head = self._live_head()
        return None if head is None else head[0]

    def _live_head(self) -> tuple[int, int, TimerKey] | None:
        while self._heap:
            deadline, seq, key = self._heap[0]
            entry = self._timers.get(key)
            if entry is not None and entry[2] == seq:
                return self._heap[0]
            heapq.heappop(self._heap)
        return None

    def timer_deadline(self, key: TimerKey) -> int | None:
        entry = self._timers.get(key)
        return None if entry is None else entry[0]

    def poll(self, now_ms: int) -> None:
        """Fire every timer due at `now_ms`, earliest first, each seeing its own deadline as the time."""
        for _ in range(10_000_000):
            head = self._live_head()
            if head is None or head[0] > now_ms:
                break
            deadline, _, key = heapq.heappop(self._heap)
            _, callback, _ = self._timers.pop(key)
            self.now = deadline
            callback()
        self.now = now_ms
