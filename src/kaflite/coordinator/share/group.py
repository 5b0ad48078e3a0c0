"""The share-group coordinator of KIP-932: membership by ShareGroupHeartbeat, the simple assignor, share
sessions (ShareFetch / ShareAcknowledge epochs) and the share partitions of every group. Pure: no I/O, no
clock of its own (every time is an argument in ms), deterministic for the same calls.

Rules (each is checked by tests/coordinator/share/test_group.py or test_group_subscriptions.py):
- A member joins with member epoch 0 and a non-empty member id of its own (KIP-932: the client makes it;
  empty is INVALID_REQUEST) and a non-empty subscription (else INVALID_REQUEST); a new member of a group
  that has `max_size` members is GROUP_MAX_SIZE_REACHED; it leaves with -1. Any
  other epoch must be the member's current one (FENCED_MEMBER_EPOCH); an id the group does not know with
  an epoch other than 0 is UNKNOWN_MEMBER_ID.
- The group epoch goes up when a member joins or leaves, a subscription changes, or a subscribed topic's
  partition count changes; the assignment is then recomputed and stamped with the group epoch. Share
  groups revoke nothing (a partition may have many members), so every member moves to the new epoch at
  its next heartbeat, and a heartbeat answer carries the assignment exactly when the member's epoch moved
  (join included); otherwise the assignment is null (unchanged).
- Each group keeps `subscriptions` (topic -> number of its members subscribing, Kafka's ModernGroup
  subscribedTopicNames), changed at a join, a leave or expiry, a subscription change, and recounted when a
  group is put into `groups` (an import), so it always equals a recount over the members; with it and the
  targeted partitions cached per assignment epoch (`targeted_partitions`), a heartbeat that changes
  nothing (the group Stable, no rebalance open, before the earliest expiry deadline) reads no member
  but its own: its cost does not grow with the group (tests/coordinator/share/test_group_subscriptions.py,
  bench/share_heartbeat_bench.py). The assignment itself still looks at every member.
- The assignor (`simple_assign`): every subscribed partition gets at least one member and every member
  with a subscription at least one partition when there are enough partitions. Members and partitions
  are sorted; with at least as many members as partitions member i gets partition i mod P, else
  partition j goes to member j mod M (of the members subscribed to its topic).
- Share-state initialization (`initialize_partitions`, the broker; off, every subscribed partition is
  assignable at once), as Kafka 4.1+'s group coordinator: the assignor hands out only a group's
  `initialized` partitions. A heartbeat moves every subscribed partition that is neither initialized nor
  initializing to `initializing` and answers it in `HeartbeatAnswer.initialize` (with the group epoch as
  the state epoch), itself answered without it; one initializing for `initialize_retry_ms` (Kafka's
  group.share.initialize.retry.interval.ms) or since before a load (the time is memory only) is answered
  again. `initialized` moves partitions still initializing to initialized, `initialize_failed` drops them
  from initializing (sent again at the next heartbeat). A heartbeat that finds an initialized partition
  of a subscribed topic in no member's target bumps the group epoch (Kafka's
  initializedAssignmentPending), so every member gets it at its next heartbeat. `mark_initialized`
  (AlterShareGroupOffsets) and `uninitialize_topics` (a topic deleted, DeleteShareGroupOffsets) change
  the sets directly; every change marks the group `touched` (its key 15 record).
- A member that leaves (-1) while its share session is open keeps that session and what it holds: the
  session still takes the closing -1 with its acknowledgements (librdkafka sends the closing
  ShareAcknowledge and the leaving heartbeat at the same time on two connections, so the leave may come
  first; Kafka's share sessions do not end with the membership either). What it holds is released when
  that session closes, or by `expire` at the leave + the group's record lock duration (its locks end then
  anyway), when the session is dropped too; a rejoin with the same id keeps the session. A member that
  leaves without an open session releases everything it holds at once.
- A member without a heartbeat for `session_timeout_ms` is removed by `expire(now)` (deadline =
  last heartbeat + session timeout; removed at now >= deadline), as if it had left: everything it holds
  in any share partition of its group is released (RELEASE semantics: redelivered, or archived at the
  delivery limit), its share sessions end, and the group epoch goes up.
- `expire(now)` (which every heartbeat and share-session step runs first) scans members and sessions only
  when now has reached `_expiry_due`, a lower bound of every member's deadline and every left session's
  release time: set by a scan to the earliest found, lowered when a deadline is set (a heartbeat, a leave
  with its session open), and made unknown (next call scans) when a group is put into `groups` from
  outside (an import of __consumer_offsets records) or a group config changes; so it removes exactly
  what a scan at every call would, and a call before the earliest deadline costs O(1).
- Share sessions, one per (group, member): epoch 0 opens (or replaces) the session with the request's
  partitions; -1 closes it (and is answered with the acknowledgements only; after them `release_session`
  releases what the member still holds in the session's partitions, as Kafka's final epoch does); any
  other epoch must be the
  session's next epoch (INVALID_SHARE_SESSION_EPOCH), which then increments (after 2^31-1 comes 1); no
  session is SHARE_SESSION_NOT_FOUND. `release_session` (a close, or the session's connection closing) ends a
  member's session and releases what it holds in the session's partitions (the member stays in the group). Only a member of the group may open a session or fetch
  (UNKNOWN_MEMBER_ID), unless the caller says the membership is held elsewhere (`check_member=False`: a
  share-partition leader that is not the group coordinator, which, as Kafka's, does not ask it).
- Share partitions are created on first fetch per (group, topic, partition): from the state `load_state`
  gives (the durable state of `__share_group_state`, read by the broker shell) when it gives one, else with
  their start offset from `share.auto.offset.reset` (latest by default): the state machine kaflite.coordinator.share.partition
  decides everything about records; this module only routes members to it. A member may acknowledge
  only in partitions of its own group.
- Group configs (`set_group_configs`, Kafka's GroupConfig keys of share groups): share.auto.offset.reset,
  share.isolation.level, share.record.lock.duration.ms (these two also change the group's share partitions
  in use), share.delivery.count.limit (share partitions created after the change), share.session.timeout.ms and
  share.heartbeat.interval.ms (from the member's next heartbeat). A value out of bounds or an unknown key
  refuses the whole change (ValueError), nothing changes; None deletes a key (back to the broker's).
- The rebalance timeline (kaflite.coordinator.timeline, protocol "share", in memory as the membership
  is, the last `history_size` events of each group, stamped with the `now` of the call that caused them):
  a join is member-joined / new-member, a rejoin with epoch 0 member-rejoined / member-rejoin (no epoch
  bump, no rebalance), -1 member-left / leave-group, a session expiry member-left / session-timeout, a
  subscription change subscription-changed / subscription-change, a subscribed topic's partition count
  change, or partitions initialized since the target was computed, metadata-changed / metadata-change; each group epoch bump opens a rebalance (one open at a
  time), which completes when every member is at the group epoch (Stable) or none is left (Empty), with
  the partitions whose members changed (a share partition may have several: its owner is the sorted
  member ids joined by ","). Deleting the group deletes its timeline.
- `touched` maps the ids of the groups whose records may have changed (a heartbeat that changed the
  group's epochs or its member's metadata, epoch or assignment, a member removed, a group deleted, key 15
  changed) to the members whose own records (keys 10, 13, 14) may have changed, or to None when the
  group is to be written whole; the broker shell writes their records (membership_records) and empties
  it (`take_touched()`). The members named are the heartbeating member, a member removed, and, when the
  target is recomputed, every member whose target changed (compared then, as the assignment already
  looks at every member); every other record of the group is its own (keys 9, 11, 12, 15: O(topics)).
  So the shell writes a heartbeat that moves one member's epoch by building and diffing that member's
  records only, not the group's (as Kafka's GroupMetadataManager writes per-member records): a rebalance
  of N members no longer costs O(N) per heartbeat in records built. A deleted group is written whole, and
  so is every group after the topic ids changed (`rewrite_all`: the member records name topics by id),
  at its next write: a group not touched then waits in `_rewrite_whole` until it is.
  `session_timeout_for(group)` is the session timeout of a group's members (group config first).
- `counts[group]` is one ShareCounts shared by every share partition of the group (partition.py's rules
  say what it counts), so a share partition rebuilt after a failed write keeps adding to the same
  totals; deleting the group drops it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from kaflite.coordinator.share.partition import (
    AcknowledgeResult,
    AcquiredRange,
    ShareConfig,
    ShareCounts,
    SharePartition,
    ShareSnapshot,
)
from kaflite.coordinator.timeline import DEFAULT_HISTORY_SIZE, RebalanceEvent, RebalanceTimeline
from kaflite.protocol.errors import ErrorCode

__all__ = [
    "ASSIGNOR_NAME",
    "GROUP_CONFIG_KEYS",
    "DEFAULT_HEARTBEAT_INTERVAL_MS",
    "DEFAULT_SESSION_TIMEOUT_MS",
    "HeartbeatAnswer",
    "SessionAnswer",
    "ShareGroup",
    "ShareGroupCoordinator",
    "ShareMember",
    "simple_assign",
]

# Kafka 4.2's defaults: group.share.session.timeout.ms, group.share.heartbeat.interval.ms
DEFAULT_SESSION_TIMEOUT_MS = 45_000
DEFAULT_HEARTBEAT_INTERVAL_MS = 5_000
DEFAULT_MAX_SIZE = 200  # group.share.max.size
DEFAULT_INITIALIZE_RETRY_MS = 30_000  # Kafka's group.share.initialize.retry.interval.ms
ASSIGNOR_NAME = "simple"
_MAX_EPOCH = 2**31 - 1
_SCAN = -(2**63)  # `_expiry_due` unknown: the next expire scans
_NEVER = 2**63  # nothing to expire (no member, no left session)

TP = tuple[str, int]
Assignment = dict[str, frozenset[int]]


def _int_between(lo: int, hi: int) -> Callable[[str], bool]:
    return lambda v: v.lstrip("-").isdigit() and lo <= int(v) <= hi


# Kafka's share-group GroupConfig keys with kaflite's bounds (those of the broker keys they override)
GROUP_CONFIG_KEYS: dict[str, tuple[Callable[[str], bool], str]] = {
    "share.auto.offset.reset": (lambda v: v in ("latest", "earliest"), "latest or earliest"),
    "share.isolation.level": (lambda v: v in ("read_uncommitted", "read_committed"),
                              "read_uncommitted or read_committed"),
    "share.record.lock.duration.ms": (_int_between(1000, 2**31 - 1), "an int >= 1000"),
    "share.delivery.count.limit": (_int_between(2, 10), "an int in 2..10"),
    "share.session.timeout.ms": (_int_between(1, 2**31 - 1), "an int >= 1"),
    "share.heartbeat.interval.ms": (_int_between(1, 2**31 - 1), "an int >= 1"),
}


def simple_assign(subscriptions: Mapping[str, frozenset[str]], topics: Mapping[str, int],
                  assignable: Mapping[str, frozenset[int]] | None = None) -> dict[str, Assignment]:
    """Every member's partitions (see the rules). `topics`: partition counts of existing topics; a
    subscribed topic that does not exist assigns nothing. `assignable`: only these partitions of each
    topic are handed out (those whose share state is initialized); None: all of them."""
    def parts_of(topic: str) -> list[int]:
        every = range(topics.get(topic, 0))
        if assignable is None:
            return list(every)
        return [p for p in every if p in assignable.get(topic, frozenset())]
    out: dict[str, dict[str, set[int]]] = {m: {} for m in subscriptions}
    by_topic: dict[str, list[str]] = {}
    for member in sorted(subscriptions):
        for topic in subscriptions[member]:
            if parts_of(topic):
                by_topic.setdefault(topic, []).append(member)
    homogeneous = len({subscriptions[m] for m in subscriptions}) <= 1
    if homogeneous and by_topic:
        # one pool of partitions for the whole group, balanced across topics
        members = sorted(subscriptions)
        parts = [(t, p) for t in sorted(by_topic) for p in parts_of(t)]
        _spread(members, parts, out)
    else:
        for topic in sorted(by_topic):
            _spread(by_topic[topic], [(topic, p) for p in parts_of(topic)], out)
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in out.items()}


def _spread(members: list[str], parts: list[TP], out: dict[str, dict[str, set[int]]]) -> None:
    if not members or not parts:
        return
    if len(members) >= len(parts):
        for i, member in enumerate(members):
            t, p = parts[i % len(parts)]
            out[member].setdefault(t, set()).add(p)
    else:
        for j, (t, p) in enumerate(parts):
            out[members[j % len(members)]].setdefault(t, set()).add(p)


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int
    subscribed: frozenset[str]
    deadline_ms: int
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    assigned: Assignment = field(default_factory=dict)


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    topics_seen: dict[str, int] = field(default_factory=dict)  # partition counts the target was built on
    # share partitions whose state the share coordinator is initializing / has initialized (key 15)
    initializing: dict[str, frozenset[int]] = field(default_factory=dict)
    initialized: dict[str, frozenset[int]] = field(default_factory=dict)
    # when each initializing partition was last sent (memory only: after a load, sent again at once)
    initializing_since: dict[TP, int] = field(default_factory=dict, compare=False)
    # topic -> how many members subscribe to it (Kafka's ModernGroup.subscribedTopicNames): kept by the
    # coordinator at each join, leave and subscription change, recounted when the group is put into
    # `ShareGroupCoordinator.groups` (a group built from records), so a heartbeat need not look at members
    subscriptions: dict[str, int] = field(default_factory=dict, compare=False)
    # the partitions in some member's target, and the assignment epoch of the target they were taken from
    # (None: not known yet); a cache of `target` for the initialized-assignment-pending check
    targeted: tuple[int, frozenset[TP]] | None = field(default=None, compare=False)

    def recount_subscriptions(self) -> None:
        """`subscriptions` recomputed from the members (a group built or changed from outside)."""
        counts: dict[str, int] = {}
        for m in self.members.values():
            for t in m.subscribed:
                counts[t] = counts.get(t, 0) + 1
        self.subscriptions = counts

    def subscribe(self, topics: Iterable[str], by: int) -> None:
        """A member subscribing to `topics` joined (by=1) or left (by=-1)."""
        for t in topics:
            n = self.subscriptions.get(t, 0) + by
            if n > 0:
                self.subscriptions[t] = n
            else:
                self.subscriptions.pop(t, None)

    def targeted_partitions(self) -> frozenset[TP]:
        """The partitions in some member's target (cached per assignment epoch)."""
        if self.targeted is None or self.targeted[0] != self.assignment_epoch:
            self.targeted = (self.assignment_epoch, frozenset(
                (t, p) for a in self.target.values() for t, ps in a.items() for p in ps))
        return self.targeted[1]

    @property
    def state(self) -> str:
        """Kafka's ShareGroup states: Empty, Stable (no revocation, so never Reconciling for long)."""
        if not self.members:
            return "Empty"
        if any(m.member_epoch != self.group_epoch for m in self.members.values()):
            return "Reconciling"
        return "Stable"


@dataclass(frozen=True, slots=True)
class HeartbeatAnswer:
    error: ErrorCode
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None
    error_message: str | None = None
    # share partitions whose state this heartbeat started initializing (the shell sends
    # InitializeShareGroupState for them, state epoch `state_epoch`, once the heartbeat is written)
    initialize: Assignment = field(default_factory=dict)
    state_epoch: int = 0


@dataclass(frozen=True, slots=True)
class SessionAnswer:
    """A share session after a request: its error, and the partitions it now holds (what to fetch)."""

    error: ErrorCode
    partitions: tuple[TP, ...] = ()
    closed: bool = False


@dataclass(slots=True)
class _Session:
    next_epoch: int
    partitions: dict[TP, None]  # ordered set
    left_at: int | None = None  # when its member left the group with this session open (see the rules)


class _Groups(dict[str, ShareGroup]):
    """`ShareGroupCoordinator.groups`: a group put in from outside (share_membership imports groups
    rebuilt from records) may hold any deadline, so the expiry bound is forgotten (see the rules)."""

    __slots__ = ("_changed",)

    def __init__(self, changed: Callable[[], None]) -> None:
        super().__init__()
        self._changed = changed

    def __setitem__(self, key: str, value: ShareGroup) -> None:
        value.recount_subscriptions()  # its members may have been set by anyone (see ShareGroup.subscriptions)
        super().__setitem__(key, value)
        self._changed()


class ShareGroupCoordinator:
    """See the rules above."""

    def __init__(self, share_config: ShareConfig | None = None,
                 session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
                 heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS,
                 max_size: int = DEFAULT_MAX_SIZE, history_size: int = DEFAULT_HISTORY_SIZE,
                 initialize_partitions: bool = False,
                 initialize_retry_ms: int = DEFAULT_INITIALIZE_RETRY_MS) -> None:
        self.share_config = share_config or ShareConfig()
        # True (the broker): only partitions whose share state is initialized are assigned (see the rules)
        self.initialize_partitions = initialize_partitions
        self.initialize_retry_ms = initialize_retry_ms
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_size = max_size
        # no deadline before this (see the rules): expire returns at once while now < it
        self._expiry_due = _SCAN
        self.groups: dict[str, ShareGroup] = _Groups(self._forget_expiry_due)
        self.partitions: dict[tuple[str, str, int], SharePartition] = {}
        self._sessions: dict[tuple[str, str], _Session] = {}
        self.group_configs: dict[str, dict[str, str]] = {}
        # (group, topic, partition) -> the persisted state of a share partition, or None (never persisted)
        self.load_state: Callable[[str, str, int], ShareSnapshot | None] | None = None
        # the rebalance timeline, stamped with the `now` of the call being served (no clock of its own)
        self._now_ms = 0
        self.timeline = RebalanceTimeline(history_size, lambda: self._now_ms, lambda: True, durable=False)
        # what happened to each group's records, summed over its share partitions (the broker's metrics)
        self.counts: dict[str, ShareCounts] = {}
        # groups whose records may need writing (the shell writes them to __consumer_offsets and takes them),
        # each with the members whose own records may have changed since its last write (None: every
        # member's, the group is written whole); see the rules
        self.touched: dict[str, set[str] | None] = {}
        # groups not touched since the topic ids changed: written whole when they next are (rewrite_all)
        self._rewrite_whole: set[str] = set()

    # --- group configs ----------------------------------------------------------------------------
    def set_group_configs(self, group_id: str, configs: Mapping[str, str | None]) -> None:
        """Replace the group's configs by `configs` (None values dropped); ValueError names a bad key."""
        for key, value in configs.items():
            rule = GROUP_CONFIG_KEYS.get(key)
            if rule is None:
                raise ValueError(f"Unknown group config name: {key}")
            if value is not None and not rule[0](value):
                raise ValueError(f"Invalid value {value} for configuration {key}: expected {rule[1]}")
        kept = {k: v for k, v in configs.items() if v is not None}
        if kept:
            self.group_configs[group_id] = kept
        else:
            self.group_configs.pop(group_id, None)
        # the isolation level and the lock duration also apply to the share partitions in use (neither can
        # break the state machine's rules: they only decide future acquisitions); the delivery limit and
        # the start offset do not (a lower limit would leave AVAILABLE records at or past it)
        self._forget_expiry_due()  # a left session's release time follows the lock duration
        new = self.config_for(group_id)
        for (gid, _t, _p), sp in self.partitions.items():
            if gid == group_id:
                sp.config = replace(sp.config, isolation_level=new.isolation_level,
                                    record_lock_duration_ms=new.record_lock_duration_ms)

    def config_for(self, group_id: str) -> ShareConfig:
        """The broker's share config with the group's overrides."""
        own = self.group_configs.get(group_id)
        if not own:
            return self.share_config
        changes: dict[str, object] = {}
        if "share.auto.offset.reset" in own:
            changes["auto_offset_reset"] = own["share.auto.offset.reset"]
        if "share.isolation.level" in own:
            changes["isolation_level"] = own["share.isolation.level"]
        if "share.record.lock.duration.ms" in own:
            changes["record_lock_duration_ms"] = int(own["share.record.lock.duration.ms"])
        if "share.delivery.count.limit" in own:
            changes["delivery_count_limit"] = int(own["share.delivery.count.limit"])
        return replace(self.share_config, **changes)  # type: ignore[arg-type]

    def session_timeout_for(self, group_id: str) -> int:
        return self._group_int(group_id, "share.session.timeout.ms", self.session_timeout_ms)

    def _group_int(self, group_id: str, key: str, default: int) -> int:
        value = self.group_configs.get(group_id, {}).get(key)
        return default if value is None else int(value)

    # --- membership -------------------------------------------------------------------------------
    def heartbeat(self, group_id: str, member_id: str, member_epoch: int, subscribed: Sequence[str] | None,
                  topics: Mapping[str, int], now: int, *, rack_id: str | None = None,
                  client_id: str = "", client_host: str = "") -> HeartbeatAnswer:
        self._now_ms = now
        self.expire(now)
        if not group_id:
            return HeartbeatAnswer(ErrorCode.invalid_request, error_message="GroupId can't be empty.")
        if not member_id:
            return HeartbeatAnswer(ErrorCode.invalid_request, error_message="MemberId can't be empty.")
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        recorded = self._record_view(group, member)
        if member_epoch == -1:
            if member is not None and group is not None:
                self._remove(group, member_id, "leave-group")
            return HeartbeatAnswer(ErrorCode.none, member_id, -1, 0)
        if member_epoch == 0:
            if not subscribed and member is None:
                return HeartbeatAnswer(ErrorCode.invalid_request, error_message="SubscribedTopicNames must be "
                                       "set in first request.")
            if member is None and group is not None and len(group.members) >= self.max_size:
                return HeartbeatAnswer(ErrorCode.group_max_size_reached, error_message=f"The share group has "
                                       f"reached its maximum capacity of {self.max_size} members.")
            if group is None:
                group = self.groups[group_id] = ShareGroup(group_id)
            if member is None:
                member = group.members[member_id] = ShareMember(member_id, 0, frozenset(subscribed or ()), 0)
                group.subscribe(member.subscribed, 1)
                group.group_epoch += 1
                self._event(group, "member-joined", "new-member", member_id,
                            "subscribed to " + ", ".join(sorted(member.subscribed)))
            else:
                member.member_epoch = 0  # a rejoin: it gets the whole assignment again
                self._event(group, "member-rejoined", "member-rejoin", member_id, start=False)
            left = self._sessions.get((group_id, member_id))
            if left is not None:  # back before its session closed: not released at the leave's deadline
                left.left_at = None
        elif member is None or group is None:
            return HeartbeatAnswer(ErrorCode.unknown_member_id, error_message=f"Member {member_id} is not in "
                                   f"group {group_id}.")
        elif member_epoch != member.member_epoch:
            return HeartbeatAnswer(ErrorCode.fenced_member_epoch, error_message=f"The share group member has "
                                   f"a different epoch ({member.member_epoch}) than the one sent "
                                   f"({member_epoch}).")
        member.deadline_ms = now + self._group_int(group_id, "share.session.timeout.ms", self.session_timeout_ms)
        self._expiry_due = min(self._expiry_due, member.deadline_ms)
        member.rack_id = rack_id if rack_id is not None else member.rack_id
        member.client_id, member.client_host = client_id, client_host
        if subscribed is not None and frozenset(subscribed) != member.subscribed:
            before, member.subscribed = member.subscribed, frozenset(subscribed)
            group.subscribe(before, -1)
            group.subscribe(member.subscribed, 1)
            group.group_epoch += 1
            self._event(group, "subscription-changed", "subscription-change", member_id,
                        f"{', '.join(sorted(before))} -> {', '.join(sorted(member.subscribed))}")
        self._refresh(group, topics)
        assignment = None
        if member.member_epoch != group.assignment_epoch:
            member.member_epoch = group.assignment_epoch
            member.assigned = group.target.get(member_id, {})
            assignment = member.assigned
        self._maybe_complete(group)
        interval = self._group_int(group_id, "share.heartbeat.interval.ms", self.heartbeat_interval_ms)
        initialize = self._start_initializing(group, topics, now) if self.initialize_partitions else {}
        if self._record_view(group, member) != recorded:
            self._touch(group_id, member_id)  # else its records are as written: no write, nothing to wait for
        return HeartbeatAnswer(ErrorCode.none, member_id, member.member_epoch, interval, assignment,
                               initialize=initialize, state_epoch=group.group_epoch)

    @staticmethod
    def _record_view(group: ShareGroup | None, member: ShareMember | None) -> tuple[object, ...] | None:
        """What of the group's records a heartbeat of `member` may change (membership_records writes them):
        the epochs, the member's metadata and assignment (target changes come with an epoch)."""
        if group is None or member is None:
            return None
        return (group.group_epoch, group.assignment_epoch, member.member_epoch, member.subscribed,
                member.rack_id, member.client_id, member.client_host, member.assigned)

    def expire(self, now: int) -> list[tuple[str, str]]:
        """Remove the members whose session timed out; the (group, member) pairs removed. O(1) before the
        earliest deadline (see the rules), a scan of every member and session otherwise."""
        self._now_ms = now
        if now < self._expiry_due:
            return []
        gone = [(g.group_id, m.member_id) for g in self.groups.values() for m in g.members.values()
                if now >= m.deadline_ms]
        for group_id, member_id in gone:
            self._remove(self.groups[group_id], member_id, "session-timeout")
        due = _NEVER
        for (group_id, member_id), sess in list(self._sessions.items()):
            if sess.left_at is None:
                continue
            release = sess.left_at + self.config_for(group_id).record_lock_duration_ms
            if now >= release:
                del self._sessions[(group_id, member_id)]
                self._release_held(group_id, member_id)
            else:
                due = min(due, release)
        # every member left has its deadline after now (those at or before it were just removed)
        self._expiry_due = min([due, *(m.deadline_ms for g in self.groups.values() for m in g.members.values())])
        return gone

    def _touch(self, group_id: str, *member_ids: str) -> None:
        """The group's records may have changed: its own, and those of `member_ids` (see the rules)."""
        touched = self.touched
        if group_id in touched:
            known = touched[group_id]
            if known is not None:
                known.update(member_ids)
        elif group_id in self._rewrite_whole:
            self._rewrite_whole.discard(group_id)
            touched[group_id] = None
        else:
            touched[group_id] = set(member_ids)

    def rewrite_all(self, written: Iterable[str] = ()) -> None:
        """The topic ids the member records name changed: every group's next write is whole, but for the
        groups of `written` (being written whole now)."""
        done = set(written)
        for group_id in self.groups:
            if group_id in done:
                self._rewrite_whole.discard(group_id)
            elif group_id in self.touched:
                self.touched[group_id] = None
            else:
                self._rewrite_whole.add(group_id)

    def take_touched(self) -> dict[str, frozenset[str] | None]:
        """The touched groups, each with the members whose records may have changed (None: write it whole),
        now no longer touched (the shell writes them)."""
        out = {group_id: None if members is None else frozenset(members)
               for group_id, members in self.touched.items()}
        self.touched = {}
        return out

    def _forget_expiry_due(self) -> None:
        self._expiry_due = _SCAN

    def next_deadline(self) -> int | None:
        deadlines = [m.deadline_ms for g in self.groups.values() for m in g.members.values()]
        return min(deadlines) if deadlines else None

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members

    def _remove(self, group: ShareGroup, member_id: str, cause: str = "leave-group") -> None:
        group.subscribe(group.members.pop(member_id).subscribed, -1)
        self._touch(group.group_id, member_id)  # its records' tombstones
        group.group_epoch += 1
        self._event(group, "member-left", cause, member_id)
        group.target.pop(member_id, None)
        group.targeted = None
        sess = self._sessions.get((group.group_id, member_id))
        if cause == "leave-group" and sess is not None:
            sess.left_at = self._now_ms  # its closing -1 may still come: released then (see the rules)
            self._expiry_due = min(self._expiry_due,
                                   sess.left_at + self.config_for(group.group_id).record_lock_duration_ms)
        else:
            self._release_held(group.group_id, member_id)
            self._sessions.pop((group.group_id, member_id), None)
        self._maybe_complete(group)

    def _release_held(self, group_id: str, member_id: str, only: Iterable[TP] | None = None) -> None:
        wanted = None if only is None else set(only)
        for (gid, t, p), sp in self.partitions.items():
            if gid == group_id and (wanted is None or (t, p) in wanted):
                sp.release_member(member_id)

    def _refresh(self, group: ShareGroup, topics: Mapping[str, int]) -> None:
        """Recompute the target when the group epoch moved or a subscribed topic's partition count did, or
        (initialize_partitions) a partition initialized since is in no member's target."""
        seen = {t: topics.get(t, 0) for t in group.subscriptions}  # O(topics), not O(members)
        if seen != group.topics_seen and group.assignment_epoch == group.group_epoch:
            group.group_epoch += 1
            self._event(group, "metadata-changed", "metadata-change", detail=", ".join(
                f"{t}: {group.topics_seen.get(t, 0)} -> {n} partitions" for t, n in sorted(seen.items())
                if group.topics_seen.get(t, 0) != n))
        assignable = self._assignable(group, seen) if self.initialize_partitions else None
        if assignable is not None and group.assignment_epoch == group.group_epoch and group.members:
            targeted = group.targeted_partitions()
            pending = sorted((t, p) for t, ps in assignable.items() for p in ps if (t, p) not in targeted)
            if pending:  # Kafka's initializedAssignmentPending: initialized since the target was computed
                group.group_epoch += 1
                self._event(group, "metadata-changed", "metadata-change", detail="initialized: " + ", ".join(
                    f"{t}-{p}" for t, p in pending))
        if group.assignment_epoch == group.group_epoch:
            return
        group.topics_seen = seen
        before, group.target = group.target, simple_assign(
            {m.member_id: m.subscribed for m in group.members.values()}, topics, assignable)
        group.assignment_epoch = group.group_epoch
        # the members whose target record changed (O(members), as the assignment itself)
        self._touch(group.group_id, *(m for m in before.keys() | group.target.keys()
                                      if before.get(m) != group.target.get(m)))

    @staticmethod
    def _assignable(group: ShareGroup, seen: Mapping[str, int]) -> dict[str, frozenset[int]]:
        """The initialized partitions of the subscribed topics that exist."""
        out = {t: frozenset(p for p in group.initialized.get(t, ()) if p < n) for t, n in seen.items()}
        return {t: ps for t, ps in out.items() if ps}

    # --- share-partition state initialization (key 15) --------------------------------------------
    def _start_initializing(self, group: ShareGroup, topics: Mapping[str, int], now: int) -> Assignment:
        """The subscribed partitions neither initialized nor initializing (or initializing for
        `initialize_retry_ms` without an answer, or since before a load), now initializing."""
        out: dict[str, set[int]] = {}
        for topic in sorted(group.subscriptions):
            done = group.initialized.get(topic, frozenset())
            pending = group.initializing.get(topic, frozenset())
            for p in range(topics.get(topic, 0)):
                if p in done:
                    continue
                since = group.initializing_since.get((topic, p))
                if p in pending and since is not None and now - since < self.initialize_retry_ms:
                    continue
                out.setdefault(topic, set()).add(p)
                group.initializing_since[(topic, p)] = now
        for topic, ps in out.items():
            group.initializing[topic] = group.initializing.get(topic, frozenset()) | ps
        if out:
            self._touch(group.group_id)
        return {t: frozenset(ps) for t, ps in out.items()}

    def initialized(self, group_id: str, parts: Mapping[str, Iterable[int]], now: int) -> None:
        """The share coordinator initialized these partitions' state: the next heartbeat assigns them.
        Only partitions still initializing move (a topic deleted or a group deleted meanwhile: nothing)."""
        self._now_ms = now
        group = self.groups.get(group_id)
        if group is None:
            return
        for topic, ps in parts.items():
            moved = frozenset(ps) & group.initializing.get(topic, frozenset())
            if not moved:
                continue
            self._drop_initializing(group, topic, moved)
            group.initialized[topic] = group.initialized.get(topic, frozenset()) | moved
            self._touch(group_id)

    def initialize_failed(self, group_id: str, parts: Mapping[str, Iterable[int]]) -> None:
        """Initializing these partitions failed: no longer initializing, so the next heartbeat sends them
        again (Kafka's uninitializeShareGroupState)."""
        group = self.groups.get(group_id)
        if group is None:
            return
        for topic, ps in parts.items():
            gone = frozenset(ps) & group.initializing.get(topic, frozenset())
            if gone:
                self._drop_initializing(group, topic, gone)
                self._touch(group_id)

    def mark_initialized(self, group_id: str, topic: str, partitions: Iterable[int]) -> None:
        """AlterShareGroupOffsets wrote these partitions' state: they are initialized (as Kafka's)."""
        group = self.groups.get(group_id)
        ps = frozenset(partitions)
        if group is None or not ps:
            return
        self._drop_initializing(group, topic, ps)
        group.initialized[topic] = group.initialized.get(topic, frozenset()) | ps
        self._touch(group_id)

    def uninitialize_topics(self, topics: Iterable[str], group_id: str | None = None) -> None:
        """The state of these topics is gone (the topic deleted: every group; DeleteShareGroupOffsets: one
        group): neither initialized nor initializing any more."""
        names = set(topics)
        for group in self.groups.values():
            if group_id is not None and group.group_id != group_id:
                continue
            for topic in names & (set(group.initialized) | set(group.initializing)):
                group.initialized.pop(topic, None)
                self._drop_initializing(group, topic, group.initializing.get(topic, frozenset()))
                self._touch(group.group_id)

    @staticmethod
    def _drop_initializing(group: ShareGroup, topic: str, ps: frozenset[int]) -> None:
        left = group.initializing.get(topic, frozenset()) - ps
        if left:
            group.initializing[topic] = left
        else:
            group.initializing.pop(topic, None)
        for p in ps:
            group.initializing_since.pop((topic, p), None)

    # --- share sessions ---------------------------------------------------------------------------
    def session(self, group_id: str, member_id: str, epoch: int, add: Iterable[TP], forget: Iterable[TP],
                now: int, *, check_member: bool = True) -> SessionAnswer:
        """Open, continue or close the (group, member) share session (see the rules). `check_member`
        False: this coordinator does not hold the group's membership (a share-partition leader that is not
        the group coordinator, in a cluster), so any member id may have a session, as on Kafka's leaders."""
        self.expire(now)
        key = (group_id, member_id)
        if epoch == -1:
            sess = self._sessions.pop(key, None)
            if sess is None:
                return SessionAnswer(ErrorCode.share_session_not_found)
            return SessionAnswer(ErrorCode.none, tuple(sess.partitions), closed=True)
        if check_member and not self.is_member(group_id, member_id):
            return SessionAnswer(ErrorCode.unknown_member_id)
        if epoch == 0:
            sess = self._sessions[key] = _Session(1, {})
        else:
            found = self._sessions.get(key)
            if found is None:
                return SessionAnswer(ErrorCode.share_session_not_found)
            if epoch != found.next_epoch:
                return SessionAnswer(ErrorCode.invalid_share_session_epoch)
            sess = found
            sess.next_epoch = 1 if sess.next_epoch == _MAX_EPOCH else sess.next_epoch + 1
        for tp in forget:
            sess.partitions.pop(tp, None)
        for tp in add:
            sess.partitions[tp] = None
        return SessionAnswer(ErrorCode.none, tuple(sess.partitions))

    def close_sessions_of(self, group_id: str, member_id: str) -> None:
        self._sessions.pop((group_id, member_id), None)

    def has_session(self, group_id: str, member_id: str) -> bool:
        return (group_id, member_id) in self._sessions

    def has_sessions(self, group_id: str) -> bool:
        """Some member of the group has a share session here (Kafka's leader calls a group without one
        empty on that broker)."""
        return any(g == group_id for g, _m in self._sessions)

    def release_session(self, group_id: str, member_id: str, partitions: Iterable[TP] | None = None) -> list[TP]:
        """The member's share session here ended: closed with epoch -1 (called after the closing request's
        acknowledgements, with the closed session's `partitions`), or its connection closed. The session goes,
        and what the member holds in the session's partitions (`partitions`, else those of the session
        still open, else every share partition of the group here) is released (RELEASE semantics), as
        Kafka's final epoch releases the session's records; the member stays in the group. The (topic,
        partition) pairs where something was released."""
        sess = self._sessions.pop((group_id, member_id), None)
        if partitions is None and sess is not None:
            partitions = list(sess.partitions)
        wanted = None if partitions is None else set(partitions)
        return [(t, p) for (g, t, p), sp in self.partitions.items()
                if g == group_id and (wanted is None or (t, p) in wanted) and sp.release_member(member_id)]

    def forget_share_partitions(self, group_id: str) -> list[TP]:
        """Drop the group's share partitions without an unwritten change from memory (rebuilt from their
        durable state at their next use); the (topic, partition) pairs dropped."""
        gone = [k for k, sp in self.partitions.items() if k[0] == group_id and not sp.changed]
        for k in gone:
            del self.partitions[k]
        return [(t, p) for _g, t, p in gone]

    # --- records ----------------------------------------------------------------------------------
    def share_partition(self, group_id: str, topic: str, partition: int, log_start_offset: int,
                        high_watermark: int) -> SharePartition:
        sp = self.partitions.get((group_id, topic, partition))
        if sp is None:
            persisted = self.load_state(group_id, topic, partition) if self.load_state is not None else None
            sp = self.install(group_id, topic, partition, persisted, log_start_offset, high_watermark)
        return sp

    def install(self, group_id: str, topic: str, partition: int, persisted: ShareSnapshot | None,
                log_start_offset: int, high_watermark: int) -> SharePartition:
        """The share partition made from its persisted state (None: never persisted, so from
        share.auto.offset.reset), replacing any held in memory."""
        config = self.config_for(group_id)
        if persisted is not None:
            sp = SharePartition.from_state(config, persisted)
        else:
            sp = SharePartition.initial(config, log_start_offset, high_watermark)
        sp.counts = self.counts.setdefault(group_id, ShareCounts())  # one per group: survives a rebuild
        self.partitions[(group_id, topic, partition)] = sp
        return sp

    def acquire(self, group_id: str, member_id: str, topic: str, partition: int,
                batches: Sequence[tuple[int, int]], *, log_start_offset: int, high_watermark: int,
                max_records: int, now: int, last_stable_offset: int | None = None,
                aborted: Sequence[tuple[int, int]] = ()) -> list[AcquiredRange]:
        sp = self.share_partition(group_id, topic, partition, log_start_offset, high_watermark)
        sp.move_log_start(log_start_offset)
        return sp.acquire(member_id, batches, high_watermark=high_watermark, max_records=max_records, now=now,
                          last_stable_offset=last_stable_offset, aborted=aborted)

    def acknowledge(self, group_id: str, member_id: str, topic: str, partition: int,
                    acks: Sequence[tuple[int, int, int]], now: int) -> AcknowledgeResult:
        sp = self.partitions.get((group_id, topic, partition))
        if sp is None:  # never fetched in this group: nothing of it can be held
            return AcknowledgeResult(ErrorCode.invalid_record_state.value, 0)
        return sp.acknowledge(member_id, acks, now)

    def delete_group(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found
        if group.members:
            return ErrorCode.non_empty_group
        del self.groups[group_id]
        self.touched[group_id] = None  # written whole: every record of it goes
        self._rewrite_whole.discard(group_id)
        for key in [k for k in self.partitions if k[0] == group_id]:
            del self.partitions[key]
        self.timeline.delete(group_id)
        self.counts.pop(group_id, None)
        return ErrorCode.none

    # --- the rebalance timeline -------------------------------------------------------------------
    def history(self, group_id: str) -> list[RebalanceEvent] | None:
        """The group's rebalance timeline, oldest first; None when no share group has this id."""
        if group_id not in self.groups:
            return None
        return self.timeline.history(group_id)

    def _event(self, group: ShareGroup, kind: str, cause: str, member_id: str = "", detail: str = "",
               start: bool = True) -> None:
        """Report a change; `start`: the group epoch moved, so a rebalance is on (one open at a time)."""
        self.timeline.record(group.group_id, kind, cause, "share", group.group_epoch, member_id, detail)
        if start:
            self.timeline.start(group.group_id, "share", group.group_epoch, cause)

    def _maybe_complete(self, group: ShareGroup) -> None:
        """The open rebalance ends once the group is Stable (every member at the group epoch) or Empty."""
        if not self.timeline.is_open(group.group_id) or group.state == "Reconciling":
            return
        if group.members and group.assignment_epoch != group.group_epoch:
            return  # a change not assigned yet (the next heartbeat recomputes the target)
        members: dict[TP, list[str]] = {}
        for member_id, assignment in sorted(group.target.items()):
            if member_id in group.members:
                for topic, parts in assignment.items():
                    for p in parts:
                        members.setdefault((topic, p), []).append(member_id)
        owners = {tp: ",".join(ids) for tp, ids in members.items()}
        self.timeline.complete(group.group_id, "share", group.group_epoch, owners)
