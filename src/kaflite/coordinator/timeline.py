"""The rebalance timeline of every group of a shard: who joined or left and why, each rebalance's start,
end and duration, the generation (group epoch for KIP-848 groups) and the partitions that moved.

Kafka's coordinator knows why a group rebalances and tells no one (KAFKA-9275); this module keeps it.
The group managers report what happens (`record`, `start`, `complete`) at the place where it happens; the
timeline keeps the last `size` events of each group (`kaflite.group.rebalance.history.size`) and persists
them in `__consumer_offsets` beside the group's own records.

Rules:
- an event is one of KINDS and names one of CAUSES; events of a group are numbered 0, 1, 2, ... (`seq`)
  and stamped with the step's injected clock (`now`), never a wall clock;
- a rebalance is open from its `rebalance-started` event until its `rebalance-completed` event; `start`
  while one is open records nothing (one rebalance, several causes: each cause is its own member event);
  its cause is the cause of the last member event of the same step (or the cause given);
- an event's detail is at most MAX_DETAIL characters;
- `complete` on an open rebalance records its duration (now - start) and the partitions whose owner
  changed since the last completed rebalance (at most MAX_MOVED listed, `moved_total` counts them all);
- persistence: event `seq` of a group is the record key (group, seq % size) with key version
  KEY_VERSION, a version Kafka does not use (docs/consumer-groups.md says why this is safe); a newer event
  overwrites the slot of the one `size` events older, so compaction keeps exactly the last `size`;
  deleting a group writes a tombstone for each of its slots, before the group's own tombstone. The
  records of events are appended at the end of a step that writes records of its own (`drain`), after
  them: a step that writes nothing (a read, a heartbeat, a classic join that parks, a session expiry
  during a rebalance) never waits on, nor fails by, a write of the timeline alone; its events ride with
  the shard's next written step (an event not yet written is lost if the coordinator stops first, as the
  unwritten state of the rebalance it describes is); a step writes at most MAX_RECORDS_PER_STEP of them,
  oldest first, the rest wait for the next; a TxnOffsetCommit step (the producer's transactional batch,
  which must hold offsets only) writes none;
- loading replays the records (`replay`); our own writes while active are already the state. At
  activation the events beyond the last `size` (the size was lowered) are dropped and tombstoned, a
  rebalance left open is closed by the `coordinator-loaded` event that every group with members gets
  (written with the next step that writes: activation itself writes nothing).
- a timeline made with `durable=False` (share groups, whose membership kaflite keeps in memory only:
  docs/share-groups.md) queues nothing for writing: `drain` gives no records, events live in memory.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CAUSES", "DEFAULT_HISTORY_SIZE", "KEY_VERSION", "KINDS", "MAX_MOVED", "RebalanceEvent",
           "RebalanceEventKey", "RebalanceEventValue", "RebalanceTimeline", "leave_cause"]

# int16 key version of a timeline record in __consumer_offsets. Kafka numbers its record types upwards
# from 0 (0-8 up to 3.9, 9-16 and on for share / streams groups in 4.x); 32000 stays clear of them.
KEY_VERSION = 32000
VALUE_VERSION = 0
DEFAULT_HISTORY_SIZE = 100  # kaflite.group.rebalance.history.size
MAX_MOVED = 200  # partitions listed in one rebalance-completed event (all counted in moved_total)
# records of the timeline one step writes at most: a shard loaded with many groups records a
# coordinator-loaded event for each, and one batch of them all could exceed what the log accepts
MAX_RECORDS_PER_STEP = 64
MAX_DETAIL = 500  # characters of an event's detail kept (a subscription of thousands of topics)

KINDS = ("member-joined", "member-left", "member-replaced", "member-rejoined", "subscription-changed",
         "metadata-changed",
         "rebalance-forced", "rebalance-started", "rebalance-completed", "coordinator-loaded",
         "protocol-upgraded", "protocol-downgraded")

CAUSES = {
    "new-member": "a member joined",
    "leave-group": "a member left (LeaveGroup, or a KIP-848 heartbeat with member epoch -1 / -2)",
    "max-poll-interval": "a member left because its poll loop exceeded max.poll.interval.ms "
                         "(the LeaveGroup reason said so, KIP-800)",
    "session-timeout": "no heartbeat within the session timeout",
    "rebalance-timeout": "a member did not rejoin, sync or revoke within its rebalance timeout",
    "subscription-change": "a member's subscription (or its protocols) changed",
    "static-member-replaced": "a static member restarted under a new member id, fencing the old one",
    "metadata-change": "the partition count of a subscribed topic changed (classic: the leader rejoined "
                       "with an unchanged subscription, which is what it does on a metadata change)",
    "member-rejoin": "a member rejoined a stable group with the same topics (e.g. a cooperative member's "
                     "second join after revoking partitions)",
    "group-max-size": "the member was evicted by group.max.size",
    "coordinator-loaded": "the coordinator (re)loaded the group: a restart or a coordinator move",
    "protocol-migration": "the group changed protocol (KIP-848 online upgrade or downgrade)",
    "forced": "a rebalance forced by the test kit (force_rebalance)",
}


# what the clients' LeaveGroup reasons (KIP-800) say when the poll loop was too slow: the Java consumer's
# "consumer poll timeout has expired", librdkafka's "maximum poll interval ... exceeded"
_POLL_REASONS = ("max.poll.interval", "poll timeout", "maximum poll interval")


def leave_cause(reason: str | None) -> str:
    """The cause of a LeaveGroup: max-poll-interval when its reason names the poll interval."""
    text = (reason or "").lower()
    return "max-poll-interval" if any(r in text for r in _POLL_REASONS) else "leave-group"


@dataclass(frozen=True, slots=True)
class RebalanceEventKey:
    group: str
    slot: int


@dataclass(frozen=True, slots=True)
class RebalanceEvent:
    seq: int
    time_ms: int
    kind: str
    cause: str
    protocol: str  # "classic", "consumer" (KIP-848) or "share" (KIP-932)
    generation: int  # the classic generation, or the group epoch of a KIP-848 group
    member_id: str = ""
    detail: str = ""
    duration_ms: int | None = None  # rebalance-completed only
    moved: tuple[tuple[str, int, str, str], ...] = ()  # (topic, partition, from member, to member)
    moved_total: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "time_ms": self.time_ms, "kind": self.kind, "cause": self.cause,
                "protocol": self.protocol, "generation": self.generation, "member_id": self.member_id,
                "detail": self.detail, "duration_ms": self.duration_ms,
                "moved": [list(m) for m in self.moved], "moved_total": self.moved_total}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RebalanceEvent:
        return cls(int(d["seq"]), int(d["time_ms"]), str(d["kind"]), str(d["cause"]), str(d["protocol"]),
                   int(d["generation"]), str(d.get("member_id", "")), str(d.get("detail", "")),
                   None if d.get("duration_ms") is None else int(d["duration_ms"]),
                   tuple((str(t), int(p), str(a), str(b)) for t, p, a, b in d.get("moved", ())),
                   int(d.get("moved_total", 0)))


@dataclass(frozen=True, slots=True)
class RebalanceEventValue:
    event: RebalanceEvent


def encode_key(key: RebalanceEventKey) -> bytes:
    group = key.group.encode("utf-8")
    return struct.pack(">hh", KEY_VERSION, len(group)) + group + struct.pack(">i", key.slot)


def decode_key(data: bytes) -> RebalanceEventKey:
    """`data` after the int16 version."""
    if len(data) < 2:
        raise ValueError("rebalance event key truncated")
    (n,) = struct.unpack_from(">h", data, 0)
    if n < 0 or len(data) < 2 + n + 4:
        raise ValueError("rebalance event key truncated")
    (slot,) = struct.unpack_from(">i", data, 2 + n)
    return RebalanceEventKey(data[2:2 + n].decode("utf-8"), slot)


def encode_value(value: RebalanceEventValue) -> bytes:
    # a private record: a version, then the event as compact JSON (new fields need no new version)
    return struct.pack(">h", VALUE_VERSION) + json.dumps(value.event.to_json(), separators=(",", ":")).encode()


def decode_value(data: bytes) -> RebalanceEventValue:
    (version,) = struct.unpack_from(">h", data, 0)
    if version != VALUE_VERSION:
        raise ValueError(f"unsupported rebalance event value version {version}")
    try:
        return RebalanceEventValue(RebalanceEvent.from_json(json.loads(data[2:].decode("utf-8"))))
    except (KeyError, TypeError, json.JSONDecodeError) as e:
        raise ValueError(f"malformed rebalance event: {e}") from e


Owners = Mapping[tuple[str, int], str]


@dataclass(slots=True)
class _Open:
    start_ms: int
    cause: str


@dataclass(slots=True)
class _GroupTimeline:
    slots: dict[int, RebalanceEvent] = field(default_factory=dict)
    next_seq: int = 0
    open: _Open | None = None
    owners: dict[tuple[str, int], str] | None = None  # after the last completed rebalance (None: unknown)

    def events(self) -> list[RebalanceEvent]:
        return sorted(self.slots.values(), key=lambda e: e.seq)


class RebalanceTimeline:
    """The timelines of one shard's groups (rules at the top)."""

    def __init__(self, size: int, now: Callable[[], int], is_active: Callable[[], bool],
                 durable: bool = True) -> None:
        self.size = max(1, size)
        self.durable = durable
        self._now = now
        self._is_active = is_active
        self._groups: dict[str, _GroupTimeline] = {}
        self._unwritten: list[tuple[str, int]] = []  # (group, seq) recorded, not yet appended
        self._tombstones: list[RebalanceEventKey] = []
        self._step_cause: dict[str, str] = {}  # group -> the cause of its last member event this step

    # --- reads --------------------------------------------------------------------------------------

    def history(self, group_id: str) -> list[RebalanceEvent]:
        """The group's events, oldest first (at most `size`)."""
        tl = self._groups.get(group_id)
        return [] if tl is None else tl.events()

    def is_open(self, group_id: str) -> bool:
        tl = self._groups.get(group_id)
        return tl is not None and tl.open is not None

    # --- what the group managers report --------------------------------------------------------------

    def record(self, group_id: str, kind: str, cause: str, protocol: str, generation: int, member_id: str = "",
               detail: str = "", duration_ms: int | None = None, moved: tuple[tuple[str, int, str, str], ...] = (),
               moved_total: int = 0) -> RebalanceEvent:
        assert kind in KINDS and cause in CAUSES, (kind, cause)
        tl = self._groups.setdefault(group_id, _GroupTimeline())
        if len(detail) > MAX_DETAIL:
            detail = detail[:MAX_DETAIL - 3] + "..."
        event = RebalanceEvent(tl.next_seq, self._now(), kind, cause, protocol, generation, member_id, detail,
                               duration_ms, moved, moved_total)
        tl.next_seq += 1
        tl.slots[event.seq % self.size] = event
        if self.durable:  # an in-memory timeline would only grow the queue
            self._unwritten.append((group_id, event.seq))
        if kind not in ("rebalance-started", "rebalance-completed", "coordinator-loaded", "protocol-upgraded",
                        "protocol-downgraded"):
            self._step_cause[group_id] = cause
        return event

    def start(self, group_id: str, protocol: str, generation: int, cause: str | None = None,
              detail: str = "") -> None:
        """A rebalance begins (nothing when one is open): its cause is the step's last member event's."""
        tl = self._groups.setdefault(group_id, _GroupTimeline())
        if tl.open is not None:
            return
        cause = cause or self._step_cause.get(group_id) or "forced"
        tl.open = _Open(self._now(), cause)
        self.record(group_id, "rebalance-started", cause, protocol, generation, detail=detail)

    def complete(self, group_id: str, protocol: str, generation: int, owners: Owners | None,
                 detail: str = "") -> None:
        """The open rebalance (if any) ended with `owners` (None: the assignment is not readable)."""
        tl = self._groups.get(group_id)
        if tl is None or tl.open is None:
            if tl is not None and owners is not None:
                tl.owners = dict(owners)
            return
        opened, tl.open = tl.open, None
        moved: list[tuple[str, int, str, str]] = []
        if owners is not None and tl.owners is not None:
            for tp in sorted(set(tl.owners) | set(owners)):
                before, after = tl.owners.get(tp, ""), owners.get(tp, "")
                if before != after:
                    moved.append((tp[0], tp[1], before, after))
        elif owners is not None:  # no assignment known before: everything assigned now moved to its owner
            moved = [(t, p, "", mid) for (t, p), mid in sorted(owners.items())]
        if owners is None and not detail:
            detail = "the assignment is not a consumer-protocol assignment: moved partitions unknown"
        self.record(group_id, "rebalance-completed", opened.cause, protocol, generation, detail=detail,
                    duration_ms=self._now() - opened.start_ms, moved=tuple(moved[:MAX_MOVED]),
                    moved_total=len(moved))
        tl.owners = None if owners is None else dict(owners)

    def set_owners(self, group_id: str, owners: Owners | None) -> None:
        """The assignment a loaded group holds (the base the next rebalance's moves are counted from)."""
        self._groups.setdefault(group_id, _GroupTimeline()).owners = None if owners is None else dict(owners)

    def loaded(self, group_id: str, protocol: str, generation: int, members: int) -> None:
        """Activation: the group was (re)loaded by this coordinator."""
        tl = self._groups.setdefault(group_id, _GroupTimeline())
        detail = f"{members} member(s) must heartbeat within their session timeout"
        if tl.open is not None:
            detail += f"; the rebalance started at {tl.open.start_ms} was interrupted"
            tl.open = None
        self.record(group_id, "coordinator-loaded", "coordinator-loaded", protocol, generation, detail=detail)

    def delete(self, group_id: str) -> list[RebalanceEventKey]:
        """The group is deleted: its events go; the caller writes these tombstones (one per slot) before the
        group's own."""
        tl = self._groups.pop(group_id, None)
        self._step_cause.pop(group_id, None)
        self._unwritten = [(g, s) for g, s in self._unwritten if g != group_id]
        return [] if tl is None else [RebalanceEventKey(group_id, slot) for slot in sorted(tl.slots)]

    # --- persistence --------------------------------------------------------------------------------

    def drain(self, write: bool = True) -> list[tuple[RebalanceEventKey, RebalanceEventValue | None]]:
        """End of a step: the records of the events not written yet (and tombstones), when `write` (the step
        writes records of its own), else none (they wait); the step's causes are forgotten either way."""
        self._step_cause.clear()
        if not write:
            return []
        out: list[tuple[RebalanceEventKey, RebalanceEventValue | None]] = [
            (k, None) for k in self._tombstones[:MAX_RECORDS_PER_STEP]]
        del self._tombstones[:MAX_RECORDS_PER_STEP]
        taken = 0
        for group_id, seq in self._unwritten:
            if len(out) >= MAX_RECORDS_PER_STEP:
                break
            taken += 1
            tl = self._groups.get(group_id)
            event = tl.slots.get(seq % self.size) if tl is not None else None
            if event is not None and event.seq == seq:  # not overwritten since by a newer event
                out.append((RebalanceEventKey(group_id, seq % self.size), RebalanceEventValue(event)))
        del self._unwritten[:taken]
        return out

    def replay(self, key: RebalanceEventKey, value: RebalanceEventValue | None) -> None:
        if self._is_active():
            return  # our own write: already the state
        if value is None:
            tl = self._groups.get(key.group)
            if tl is not None:
                tl.slots.pop(key.slot, None)
            return
        tl = self._groups.setdefault(key.group, _GroupTimeline())
        event = value.event
        tl.slots[key.slot] = event
        tl.next_seq = max(tl.next_seq, event.seq + 1)

    def activate(self, groups: Iterable[tuple[str, str, int, int, Owners | None]]) -> None:
        """Loading is over. `groups`: (id, protocol, generation, members, owners) of every loaded group."""
        for group_id, tl in list(self._groups.items()):
            events = tl.events()
            keep = events[-self.size:]
            kept = {e.seq for e in keep}
            for slot, event in list(tl.slots.items()):
                if event.seq not in kept or slot != event.seq % self.size:
                    del tl.slots[slot]  # beyond the history size, or in a slot of another size
                    self._tombstones.append(RebalanceEventKey(group_id, slot))
            for event in keep:
                if event.seq % self.size not in tl.slots:
                    tl.slots[event.seq % self.size] = event
                    self._unwritten.append((group_id, event.seq))  # rewritten in its slot for this size
            last_start = next((e for e in reversed(keep) if e.kind in ("rebalance-started", "rebalance-completed",
                                                                        "coordinator-loaded")), None)
            if last_start is not None and last_start.kind == "rebalance-started":
                tl.open = _Open(last_start.time_ms, last_start.cause)
            if not tl.slots:
                del self._groups[group_id]
        with_members = set()
        for group_id, protocol, generation, members, owners in groups:
            if members:
                with_members.add(group_id)
                self.set_owners(group_id, owners)
                self.loaded(group_id, protocol, generation, members)
        for group_id, tl in self._groups.items():
            if group_id not in with_members:
                tl.open = None  # nobody is left to finish it: the next rebalance starts afresh
        self._step_cause.clear()
