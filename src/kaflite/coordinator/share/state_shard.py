"""The share coordinator's shard (Kafka's ShareCoordinatorShard): the durable state of the share partitions
whose keys hash to one `__share_group_state` partition, a pure state machine for the coordinator runtime
(kaflite.coordinator.runtime). No I/O, no clock of its own.

Rules (each is checked by tests/coordinator/share/test_state_shard.py):
- The shard holds, per share partition (group, topic id, partition), the state last written: a start
  offset and state batches ascending, non-overlapping, none below the start offset, adjacent batches of
  equal (state, count) merged; plus the snapshot epoch, the state epoch and the number of ShareUpdate
  records since the last ShareSnapshot.
- The topic is compacted (Kafka's is cleanup.policy=delete, its coordinator deleting the records below
  the oldest snapshot still needed), and compaction keeps only the last ShareSnapshot and the last
  ShareUpdate of a key. So a ShareUpdate carries every change since the key's last snapshot (cumulative),
  and replay applies it to that snapshot, not to the state after the previous update: the last snapshot
  and the last update of its snapshot epoch are the whole state, compacted or not.
- replay: a ShareSnapshot replaces the state of its key (and is the base of the updates that follow); a
  ShareUpdate of the base's snapshot epoch makes the state the base merged with it (its batches win where
  they overlap the base's, batches below its start offset are dropped, a start offset of -1 keeps the
  base's); one of another snapshot epoch (written before the last snapshot) changes nothing; an update
  for a key with no snapshot is replayed as if it were one; a tombstone (null value) removes the key.
- write(key, snapshot): the records that take the key's state to `snapshot`, already applied to the
  shard: a ShareSnapshot (snapshot epoch + 1) when the key has no state or `snapshot_every` updates were
  written since its last snapshot (share.coordinator.snapshot.update.records.per.snapshot), else a
  ShareUpdate carrying the offsets whose (state, count) differ from the last snapshot's and the start
  offset when it differs; nothing when nothing changed. Replaying the records written, or only the last
  record of each key (compaction), gives the same state as the shard holds.
- delete(keys): tombstones for the ShareSnapshot and ShareUpdate keys of each key that has state.
- The share coordinator's RPCs (Kafka's ShareCoordinatorShard, answers as `StateAnswer`):
  initialize(key, state epoch, start) writes a ShareSnapshot with that state epoch and start offset and no
  batches (snapshot epoch + 1), unless the key's state epoch is newer (FENCED_STATE_EPOCH, nothing
  written); write_state(key, state epoch, leader epoch, start, batches) merges the batches into the
  state as a ShareUpdate would (a snapshot for a key without state, or every `snapshot_every` updates),
  FENCED_LEADER_EPOCH when the key's leader epoch is newer than the request's, FENCED_STATE_EPOCH when
  its state epoch is; read_state(key, leader epoch) answers the state (a key without state: start offset
  -1, state epoch 0, no batches), FENCED_LEADER_EPOCH for an older leader epoch, and a newer one is
  written (a ShareUpdate without batches) before the answer; summary(key, leader epoch) answers the
  start offset, state epoch and leader epoch the same way without writing (leader epoch -1, an admin
  read, is fenced by nothing).
- A key's leader epoch only goes up (the highest of the records replayed, -1 in a record: unchanged).
- The shard has no timers and no transactional records (a transactional record is a ValueError, which the
  runtime's load logs and skips).
"""

from __future__ import annotations

import bisect
import uuid
from collections.abc import Collection, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kaflite.coordinator.share.partition import ShareSnapshot, StateBatch
from kaflite.coordinator.share.state_records import (
    SNAPSHOT,
    UPDATE,
    ShareStateKey,
    SnapshotValue,
    UpdateValue,
    decode_key,
    decode_snapshot,
    decode_update,
    encode_key,
    encode_snapshot,
    encode_update,
)
from kaflite.protocol.errors import ErrorCode

__all__ = ["DEFAULT_SNAPSHOT_EVERY", "PersistedState", "ShareStateResult", "ShareStateShard", "StateAnswer",
           "merge_batches"]

DEFAULT_SNAPSHOT_EVERY = 500  # Kafka's share.coordinator.snapshot.update.records.per.snapshot


@dataclass(frozen=True, slots=True)
class StateRecord:
    key: bytes
    value: bytes | None


@dataclass(slots=True)
class ShareStateResult:
    records: list[StateRecord] = field(default_factory=list)
    responses: list[tuple[Hashable, Any]] = field(default_factory=list)
    timers: list[Any] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class StateAnswer:
    """One share partition's answer to a share coordinator RPC."""

    error: ErrorCode
    start_offset: int = -1
    state_epoch: int = 0
    leader_epoch: int = -1
    batches: tuple[StateBatch, ...] = ()


@dataclass(slots=True)
class PersistedState:
    snapshot: ShareSnapshot  # the state now
    base: ShareSnapshot  # the state the last ShareSnapshot wrote: what updates apply to
    snapshot_epoch: int = 0
    state_epoch: int = 0
    leader_epoch: int = -1
    create_ms: int = 0
    updates: int = 0  # ShareUpdate records since the last ShareSnapshot


def _normalized(start: int, batches: Iterable[StateBatch]) -> tuple[StateBatch, ...]:
    """Batches clipped at `start`, sorted, adjacent equal ones merged (they must not overlap)."""
    out: list[StateBatch] = []
    for b in sorted(batches, key=lambda b: b.first_offset):
        if b.last_offset < start:
            continue
        if b.first_offset < start:
            b = StateBatch(start, b.last_offset, b.delivery_state, b.delivery_count)
        prev = out[-1] if out else None
        if (prev is not None and prev.last_offset + 1 == b.first_offset and prev.delivery_state == b.delivery_state
                and prev.delivery_count == b.delivery_count):
            out[-1] = StateBatch(prev.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        else:
            out.append(b)
    return tuple(out)


def merge_batches(base: ShareSnapshot, start_offset: int, batches: Sequence[StateBatch]) -> ShareSnapshot:
    """`base` with an update applied (Kafka's PersisterStateBatchCombiner): each of the update's batches, in
    order, replaces whatever was at its offsets before (so of two overlapping update batches the later
    wins); nothing below the new start offset (-1: base's) is kept."""
    start = base.start_offset if start_offset < 0 else start_offset
    merged = list(base.batches)
    for n in batches:
        kept: list[StateBatch] = []
        for old in merged:
            if old.last_offset < n.first_offset or old.first_offset > n.last_offset:
                kept.append(old)
                continue
            if old.first_offset < n.first_offset:
                kept.append(StateBatch(old.first_offset, n.first_offset - 1, old.delivery_state, old.delivery_count))
            if old.last_offset > n.last_offset:
                kept.append(StateBatch(n.last_offset + 1, old.last_offset, old.delivery_state, old.delivery_count))
        kept.append(n)
        merged = kept
    return ShareSnapshot(start, _normalized(start, merged))


def _changed(old: ShareSnapshot, new: ShareSnapshot) -> tuple[StateBatch, ...]:
    """The offsets of `new` whose (state, count) differ from `old`'s, as batches."""
    firsts = [b.first_offset for b in old.batches]

    def at(offset: int) -> tuple[int, int] | None:
        i = bisect.bisect_right(firsts, offset) - 1
        if i >= 0 and old.batches[i].last_offset >= offset:
            return old.batches[i].delivery_state, old.batches[i].delivery_count
        return None

    out: list[StateBatch] = []
    for b in new.batches:
        for off in range(b.first_offset, b.last_offset + 1):
            if at(off) == (b.delivery_state, b.delivery_count):
                continue
            prev = out[-1] if out else None
            if (prev is not None and prev.last_offset + 1 == off and prev.delivery_state == b.delivery_state
                    and prev.delivery_count == b.delivery_count):
                out[-1] = StateBatch(prev.first_offset, off, b.delivery_state, b.delivery_count)
            else:
                out.append(StateBatch(off, off, b.delivery_state, b.delivery_count))
    return tuple(out)


class ShareStateShard:
    """See the rules above."""

    def __init__(self, snapshot_every: int = DEFAULT_SNAPSHOT_EVERY) -> None:
        self.snapshot_every = max(1, snapshot_every)
        self.states: dict[ShareStateKey, PersistedState] = {}

    # --- the runtime's shard protocol ---------------------------------------------------------------
    def replay(self, key: bytes, value: bytes | None) -> None:
        record_type, k = decode_key(key)
        if value is None:
            self.states.pop(k, None)
            return
        if record_type == SNAPSHOT:
            s = decode_snapshot(value)
            snap = ShareSnapshot(s.start_offset, _normalized(s.start_offset, s.batches))
            self.states[k] = PersistedState(snap, snap, s.snapshot_epoch, s.state_epoch, s.leader_epoch,
                                            s.create_timestamp)
            return
        u = decode_update(value)
        current = self.states.get(k)
        if current is None:
            start = max(0, u.start_offset)
            snap = ShareSnapshot(start, _normalized(start, u.batches))
            self.states[k] = PersistedState(snap, snap, u.snapshot_epoch, leader_epoch=u.leader_epoch)
            return
        if u.snapshot_epoch != current.snapshot_epoch:
            return  # written for an earlier snapshot, which the current one includes
        current.snapshot = merge_batches(current.base, u.start_offset, u.batches)
        current.leader_epoch = max(current.leader_epoch, u.leader_epoch)
        current.updates += 1

    def replay_transactional(self, producer_id: int, key: bytes, value: bytes | None) -> None:
        raise ValueError("__share_group_state holds no transactional records")

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        raise ValueError("__share_group_state holds no transaction markers")

    def activate(self, now_ms: int) -> ShareStateResult:
        return ShareStateResult()

    def poll_timers(self, now_ms: int) -> ShareStateResult:
        return ShareStateResult()

    def next_deadline(self) -> int | None:
        return None

    # --- reads ----------------------------------------------------------------------------------------
    def read(self, key: ShareStateKey) -> ShareSnapshot | None:
        state = self.states.get(key)
        return None if state is None else state.snapshot

    def keys_of_group(self, group_id: str) -> list[ShareStateKey]:
        return sorted(k for k in self.states if k.group_id == group_id)

    def keys_of_topics(self, topic_ids: Collection[uuid.UUID]) -> list[ShareStateKey]:
        return sorted(k for k in self.states if k.topic_id in topic_ids)

    # --- writes (steps) -------------------------------------------------------------------------------
    def write(self, key: ShareStateKey, snapshot: ShareSnapshot, now_ms: int, leader_epoch: int = -1,
              state_epoch: int | None = None) -> ShareStateResult:
        """The records taking `key` to `snapshot` (see the rules), applied. `state_epoch`: a new state
        epoch (InitializeShareGroupState) forces a snapshot."""
        new = ShareSnapshot(snapshot.start_offset, _normalized(snapshot.start_offset, snapshot.batches))
        current = self.states.get(key)
        result = ShareStateResult()
        if (current is None or current.updates >= self.snapshot_every
                or (state_epoch is not None and state_epoch != current.state_epoch)):
            epoch = 0 if current is None else current.snapshot_epoch + 1
            state = current.state_epoch if current is not None and state_epoch is None else (state_epoch or 0)
            created = now_ms if current is None else current.create_ms
            leader = leader_epoch if current is None else max(leader_epoch, current.leader_epoch)
            value = SnapshotValue(epoch, state, leader, new.start_offset, created, now_ms, new.batches)
            result.records.append(StateRecord(encode_key(SNAPSHOT, key), encode_snapshot(value)))
        else:
            if new == current.snapshot and leader_epoch <= current.leader_epoch:
                return result
            moved = new.start_offset != current.base.start_offset
            value_u = UpdateValue(current.snapshot_epoch, max(leader_epoch, current.leader_epoch),
                                  new.start_offset if moved else -1, _changed(current.base, new))
            result.records.append(StateRecord(encode_key(UPDATE, key), encode_update(value_u)))
        for r in result.records:
            self.replay(r.key, r.value)
        return result

    # --- the share coordinator's RPCs (83-87) ----------------------------------------------------------
    @staticmethod
    def _answer(result: ShareStateResult, answer: StateAnswer) -> ShareStateResult:
        result.responses.append((None, answer))
        return result

    def _fenced(self, key: ShareStateKey, leader_epoch: int | None, state_epoch: int | None) -> ErrorCode | None:
        current = self.states.get(key)
        if current is None:
            return None
        if leader_epoch is not None and current.leader_epoch > leader_epoch:
            return ErrorCode.fenced_leader_epoch
        if state_epoch is not None and current.state_epoch > state_epoch:
            return ErrorCode.fenced_state_epoch
        return None

    def _state_answer(self, key: ShareStateKey) -> StateAnswer:
        state = self.states.get(key)
        if state is None:
            return StateAnswer(ErrorCode.none)
        return StateAnswer(ErrorCode.none, state.snapshot.start_offset, state.state_epoch, state.leader_epoch,
                           state.snapshot.batches)

    def initialize(self, key: ShareStateKey, state_epoch: int, start_offset: int, now_ms: int) -> ShareStateResult:
        fenced = self._fenced(key, None, state_epoch)
        if fenced is not None:
            return self._answer(ShareStateResult(), StateAnswer(fenced))
        current = self.states.get(key)
        epoch = 0 if current is None else current.snapshot_epoch + 1
        leader = -1 if current is None else current.leader_epoch
        created = now_ms if current is None else current.create_ms
        value = SnapshotValue(epoch, state_epoch, leader, start_offset, created, now_ms, ())
        result = ShareStateResult([StateRecord(encode_key(SNAPSHOT, key), encode_snapshot(value))])
        self.replay(result.records[0].key, result.records[0].value)
        return self._answer(result, StateAnswer(ErrorCode.none))

    def write_state(self, key: ShareStateKey, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: Sequence[StateBatch], now_ms: int) -> ShareStateResult:
        fenced = self._fenced(key, leader_epoch, state_epoch)
        if fenced is not None:
            return self._answer(ShareStateResult(), StateAnswer(fenced))
        current = self.states.get(key)
        if current is None:
            start = start_offset if start_offset >= 0 else min((b.first_offset for b in batches), default=0)
            base = ShareSnapshot(start, ())
        else:
            base = current.snapshot
        new = merge_batches(base, start_offset, batches)
        result = self.write(key, new, now_ms, leader_epoch, None if current is not None else max(0, state_epoch))
        return self._answer(result, StateAnswer(ErrorCode.none))

    def read_state(self, key: ShareStateKey, leader_epoch: int, now_ms: int) -> ShareStateResult:
        fenced = self._fenced(key, leader_epoch, None)
        if fenced is not None:
            return self._answer(ShareStateResult(), StateAnswer(fenced))
        current = self.states.get(key)
        result = ShareStateResult()
        if current is not None and leader_epoch > current.leader_epoch:  # the new leader epoch, written
            result = self.write(key, current.snapshot, now_ms, leader_epoch)
        return self._answer(result, self._state_answer(key))

    def summary(self, key: ShareStateKey, leader_epoch: int) -> ShareStateResult:
        # -1: an admin read (the group coordinator's, which has no leader epoch), fenced by nothing
        fenced = self._fenced(key, leader_epoch, None) if leader_epoch >= 0 else None
        if fenced is not None:
            return self._answer(ShareStateResult(), StateAnswer(fenced))
        a = self._state_answer(key)
        return self._answer(ShareStateResult(), StateAnswer(a.error, a.start_offset, a.state_epoch, a.leader_epoch))

    def delete(self, keys: Iterable[ShareStateKey]) -> ShareStateResult:
        result = ShareStateResult()
        for key in keys:
            if key in self.states:
                result.records.append(StateRecord(encode_key(SNAPSHOT, key), None))
                result.records.append(StateRecord(encode_key(UPDATE, key), None))
        for r in result.records:
            self.replay(r.key, r.value)
        return result
