"""KIP-848 consumer groups (`group.protocol=consumer`): ConsumerGroupHeartbeat, pure and synchronous.

Rules (Kafka's GroupMetadataManager.consumerGroupHeartbeat + CurrentAssignmentBuilder, simplified):
- a member joins with member epoch 0 (v0: the coordinator makes its id; v1: the client brings one),
  leaves with -1; a static member (instance id) leaving with -2 stays with epoch -2 and its partitions
  (no new group epoch) until a join with its instance id takes its place, epoch and partitions under the
  new member id, or its session times out; a join with an instance id whose member has not left is
  UNRELEASED_INSTANCE_ID (-2 without an instance id is a leave); any other epoch must be the member's current epoch,
  or its previous one when the partitions it reports are a subset of what it was given
  (FENCED_MEMBER_EPOCH otherwise; an unknown member id with an epoch is UNKNOWN_MEMBER_ID);
- the group epoch goes up whenever membership, a subscription, or a subscribed topic's partition count
  changes; then the target assignment is recomputed by the broker-side assignor (`uniform` or `range`,
  from kaflite.assign) and stamped with that epoch;
- a member subscribes by names, by a regular expression (`SubscribedTopicRegex`, v1), or both: its
  subscription is the names plus every existing non-internal topic the expression matches whole. Kafka
  uses RE2/J; kaflite approximates it with Python's `re.fullmatch` (the common syntax -- `.*`, classes,
  alternation, anchors -- means the same; Python-only constructs such as look-arounds are accepted, and
  an expression Python cannot compile is INVALID_REGULAR_EXPRESSION). The expression is resolved against
  the broker's topics at every heartbeat, so a topic created later that matches joins the group's
  subscription at the next heartbeat (the group epoch goes up, the target is recomputed); an empty
  expression clears it;
- reconciliation, per member, on its heartbeats: partitions it owns but the target does not give it
  are revoked first (the member keeps its epoch and state UNREVOKED_PARTITIONS until a heartbeat no
  longer reports them); only then does it move to the target epoch, receiving the target partitions that
  no other member still holds (UNRELEASED_PARTITIONS until they are released) — so no partition ever has
  two owners;
- a member without a heartbeat for `group.consumer.session.timeout.ms`, or that does not revoke within
  its rebalance timeout, is removed (its partitions are released, the group epoch goes up).
- every change is persisted: after each step the records of the groups it touched are diffed against
  what was last written (kaflite.coordinator.consumer_group_records) and the difference is appended to
  `__consumer_offsets` in Kafka's record formats (keys 3-8); loading replays them, and activation
  rebuilds the partition owners and gives every loaded member a fresh session timeout, so a group keeps
  its epochs and assignments across a broker restart.
- classic-protocol members of a consumer group (KIP-848 online upgrade; Kafka's
  classicGroup{Join,Sync,Heartbeat,Leave}ToConsumerGroup): a member that still speaks JoinGroup /
  SyncGroup / Heartbeat is a member like the others, with its session timeout and supported protocols
  kept (ClassicMemberMetadata). Its JoinGroup is its heartbeat: the subscription and owned partitions
  inside the protocol metadata update the member, the group epoch goes up as for a heartbeat, and it is
  reconciled at once; the answer has generation = its member epoch, protocol = its first protocol, no
  leader (so it never assigns), and a v4+ join without member id first gets MEMBER_ID_REQUIRED. SyncGroup
  (generation = member epoch, else ILLEGAL_GENERATION; REBALANCE_IN_PROGRESS if the group epoch moved on
  and the member is not revoking) answers its assigned partitions, encoded in its subscription's
  version. Heartbeat answers REBALANCE_IN_PROGRESS when the member must rejoin: its epoch is behind the
  group epoch, it has partitions to revoke, or partitions it waits for are now free; it must then rejoin
  within its rebalance timeout (join timer) and sync within it after joining (sync timer), or it is
  removed. LeaveGroup removes classic members only (a consumer-protocol member is UNKNOWN_MEMBER_ID
  there). OffsetCommit of a classic member may use any version; a wrong generation is ILLEGAL_GENERATION;
- a member revoking partitions it already reported as not owned (an eager classic member rejoins owning
  nothing) moves to the new epoch in the same step (Kafka's CurrentAssignmentBuilder.ownsRevokedPartitions);
- removing a consumer-protocol member (leave, session or rebalance timeout) first asks `on_fence`, which
  may downgrade the group to a classic group instead (kaflite.coordinator.group_migration).
- every membership, subscription or metadata change is reported to the rebalance timeline
  (kaflite.coordinator.timeline) with its cause, where it happens; a group epoch bump opens a rebalance
  there, and the rebalance completes at the end of the step that leaves the group Stable (or Empty);
- test kit (EmbeddedBroker.expire_member / force_rebalance): `expire_member` fences a member now, by the
  session timeout's path (removed, partitions released, group epoch + 1; its next heartbeat is
  UNKNOWN_MEMBER_ID and it rejoins with epoch 0); UNKNOWN_MEMBER_ID for a member the group does not have.
  `force_rebalance` raises the group epoch of a group with members by one, as a membership change would:
  the target is recomputed at the next heartbeat and every member moves to the new epoch; an empty group
  is left unchanged. Kafka has no such operation; it is the effect of a subscription change without one.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kaflite.assign.types import TopicPartition
from kaflite.protocol.consumer_protocol import (
    ConsumerAssignment,
    ConsumerProtocolError,
    decode_subscription,
    encode_assignment,
)
from kaflite.protocol.errors import ErrorCode

from . import messages as m
from .consumer_group_records import GroupLoader, diff, group_records, member_delta
from .consumer_group_state import (
    LEAVE_EPOCH,
    SERVER_ASSIGNORS,
    STABLE,
    STATIC_LEAVE_EPOCH,
    UNRELEASED,
    UNREVOKED,
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerMember,
)
from .consumer_records import ConsumerGroupMetadataKey
from .timeline import RebalanceTimeline, leave_cause


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    subscribed_topics: tuple[str, ...] | None = None  # None: unchanged
    owned: Mapping[str, frozenset[int]] | None = None  # None: unchanged
    rebalance_timeout_ms: int = -1
    instance_id: str | None = None
    rack_id: str | None = None
    server_assignor: str | None = None
    client_id: str = ""
    client_host: str = ""
    version: int = 0
    subscribed_regex: str | None = None  # None: unchanged, "": none (v1, SubscribedTopicRegex)


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatResponse:
    error: ErrorCode
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None  # None: unchanged since the last answer
    error_message: str | None = None


@functools.lru_cache(maxsize=256)
def _compiled(regex: str) -> re.Pattern[str]:
    return re.compile(regex)


def subscription(member: ConsumerMember, topics: Mapping[str, int]) -> tuple[str, ...]:
    """The names a member subscribes to, in its order, then (sorted) every topic its expression matches
    that it does not name; names of topics that do not exist are kept (the caller filters)."""
    if not member.subscribed_regex:
        return member.subscribed
    pattern = _compiled(member.subscribed_regex)
    named = set(member.subscribed)
    return member.subscribed + tuple(sorted(t for t in topics if t not in named and pattern.fullmatch(t)))


def _flat(a: Mapping[str, frozenset[int]]) -> set[tuple[str, int]]:
    return {(t, p) for t, ps in a.items() for p in ps}


def _group(tps: set[tuple[str, int]]) -> Assignment:
    out: dict[str, set[int]] = {}
    for t, p in tps:
        out.setdefault(t, set()).add(p)
    return {t: frozenset(ps) for t, ps in sorted(out.items())}


class ConsumerGroupManager:
    """Every KIP-848 group of the broker. Timers and answers go through the owner's hooks."""

    def __init__(self, schedule: Callable[[tuple[str, ...], int, Callable[[], None]], None],
                 cancel: Callable[[tuple[str, ...]], None], now: Callable[[], int],
                 session_timeout_ms: int = 45_000, heartbeat_interval_ms: int = 5_000,
                 max_size: int = 2**31 - 1, assignors: tuple[str, ...] = SERVER_ASSIGNORS) -> None:
        self.groups: dict[str, ConsumerGroup] = {}
        self._schedule, self._cancel, self._now = schedule, cancel, now
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_size = max_size
        self.assignors = assignors  # group.consumer.assignors: the first is a new group's
        self.topic_ids: dict[str, uuid.UUID] = {}  # topic name -> id, for the persisted assignments
        self.is_active: Callable[[], bool] = lambda: True
        # group id -> ids of the members whose records may have changed (None: every member's)
        self._dirty: dict[str, set[str] | None] = {}
        self._written: dict[str, Any] = {}  # group id -> its records as last written
        # the broker's topics (partition counts, ids) for requests that do not bring them (JoinGroup)
        self.topic_source: Callable[[], tuple[Mapping[str, int], Mapping[str, uuid.UUID]]] = lambda: ({}, {})
        # a consumer-protocol member is about to be removed: True if the owner converted the group instead
        self.on_fence: Callable[[ConsumerGroup, str], bool] = lambda group, member_id: False
        # a classic static member replaced the group's last consumer-protocol member: the owner may downgrade
        self.on_static_replace: Callable[[ConsumerGroup], bool] = lambda group: False
        self._join_timers: set[tuple[str, str]] = set()  # classic members told to rejoin
        self.timeline: RebalanceTimeline | None = None  # the owner's (None: nothing is reported)

    # --- the rebalance timeline -------------------------------------------------------------------
    def _event(self, group: ConsumerGroup, kind: str, cause: str, member_id: str = "", detail: str = "",
               start: bool = True) -> None:
        """Report a change to the timeline; `start`: the group epoch moved, so a rebalance is on."""
        if self.timeline is None:
            return
        self.timeline.record(group.group_id, kind, cause, "consumer", group.group_epoch, member_id, detail)
        if start:
            self.timeline.start(group.group_id, "consumer", group.group_epoch)

    def complete_rebalances(self) -> None:
        """End of a step: a rebalance of a group this step touched ends once the group is Stable (or Empty)."""
        if self.timeline is None:
            return
        for group_id in sorted(self._dirty):
            group = self.groups.get(group_id)
            if group is None or not self.timeline.is_open(group_id):
                continue  # gone, or converted to a classic group (which completes it)
            if not group.members or group.state == "Stable":
                self.timeline.complete(group_id, "consumer", group.group_epoch, dict(group.owners))

    # --- persistence ------------------------------------------------------------------------------
    def replay(self, key: Any, value: Any) -> None:
        """A consumer-group record read while loading; our own writes (active) are already the state,
        except a deletion's: the group goes when its ConsumerGroupMetadata tombstone is applied (the last
        of `deletion_records`), as replaying the log would remove it."""
        if self.is_active():
            if value is None and isinstance(key, ConsumerGroupMetadataKey):
                self._remove_group(key.group)
            return
        GroupLoader(self.groups, self.topic_ids).replay(key, value)

    def deletion_records(self, group_id: str) -> list[tuple[Any, None]]:
        """DeleteGroups of an empty group: a tombstone for every record the group has written, its
        ConsumerGroupMetadata last (Kafka's ConsumerGroup.createGroupTombstoneRecords: the epoch record
        goes last). The group stays in memory until that last tombstone is applied (`replay`)."""
        group = self.groups.get(group_id)
        written = self._written.get(group_id)
        if written is None:  # never written (cannot happen after a step's flush): what it would write
            written = group_records(group, self.topic_ids) if group is not None else {}
        out: list[tuple[Any, None]] = [(k, None) for k, _v in diff(written, {})
                                       if not isinstance(k, ConsumerGroupMetadataKey)]
        return [*out, (ConsumerGroupMetadataKey(group_id), None)]

    def _remove_group(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if group is not None:
            self.cancel_timers(group)
        self._written.pop(group_id, None)
        self._dirty.pop(group_id, None)

    def activate(self) -> None:
        """Loading is over: rebuild partition owners, restart every member's session (and revocation)
        timer from now, and remember the loaded records as written."""
        for group in self.groups.values():
            group.owners = {}
            for mid, mb in group.members.items():
                for tp in _flat(mb.assigned) | _flat(mb.pending_revocation):
                    group.owners[tp] = mid
                self._schedule_session(group, mb)
                if mb.state == UNREVOKED:
                    self._schedule(("cg-revoke", group.group_id, mid), self._now() + mb.rebalance_timeout_ms,
                                   self._expirer(group.group_id, mid, "rebalance-timeout", _REVOKE_LATE))
            self._written[group.group_id] = group_records(group, self.topic_ids)

    def _expirer(self, group_id: str, member_id: str, cause: str, detail: str = "") -> Callable[[], None]:
        return lambda: self._expire(group_id, member_id, cause, detail)

    def drop(self, group_id: str) -> None:
        """An empty group deleted (DeleteGroups) or replaced by a classic group: its records go too."""
        self.groups.pop(group_id, None)
        self._dirty[group_id] = None

    def drain_records(self) -> list[tuple[Any, Any]]:
        """The records that persist every change since the last call (tombstones for what is gone)."""
        out: list[tuple[Any, Any]] = []
        for group_id, members in sorted(self._dirty.items()):
            group = self.groups.get(group_id)
            old = self._written.get(group_id)
            if group is None or members is None or old is None:  # the whole group
                new = group_records(group, self.topic_ids) if group is not None else {}
                out += diff(old or {}, new)
                if new:
                    self._written[group_id] = new
                else:
                    self._written.pop(group_id, None)
                continue
            # the group's own records and those of the members that changed: O(changed), not O(group)
            records, removed = member_delta(group, members, self.topic_ids)
            out += [(k, None) for k in removed if k in old]
            out += [(k, v) for k, v in records.items() if old.get(k) != v]
            for k in removed:
                old.pop(k, None)
            old.update(records)
        self._dirty.clear()
        return out

    def _mark(self, group_id: str, member_id: str | None) -> None:
        """Records of `member_id` (None: of every member) may have changed this step."""
        if member_id is None:
            self._dirty[group_id] = None
            return
        members = self._dirty.setdefault(group_id, set())
        if members is not None:
            members.add(member_id)

    # --- the API ----------------------------------------------------------------------------------

    def heartbeat(self, req: ConsumerHeartbeatRequest, topics: Mapping[str, int]) -> ConsumerHeartbeatResponse:
        """`topics`: partition count of every existing topic (the broker's metadata image)."""

        def fail(code: ErrorCode, message: str) -> ConsumerHeartbeatResponse:
            return ConsumerHeartbeatResponse(code, error_message=message)

        if not req.group_id:
            return fail(ErrorCode.invalid_request, "GroupId can't be empty.")
        if req.server_assignor is not None and req.server_assignor not in self.assignors:
            return fail(ErrorCode.unsupported_assignor, f"ServerAssignor {req.server_assignor} is not supported. "
                                                          f"Supported assignors: {', '.join(self.assignors)}.")
        group = self.groups.get(req.group_id)
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            if group is None or req.member_id not in group.members:
                return fail(ErrorCode.unknown_member_id, f"Member {req.member_id} is not a member of the group.")
            leaving = group.members[req.member_id]
            if req.member_epoch == STATIC_LEAVE_EPOCH and leaving.instance_id is not None:
                # a static member's temporary leave: it keeps its partitions until it rejoins under its
                # instance id or its session times out (Kafka's consumerGroupStaticMemberGroupLeave)
                if leaving.member_epoch != STATIC_LEAVE_EPOCH:
                    leaving.previous_epoch, leaving.member_epoch = leaving.member_epoch, STATIC_LEAVE_EPOCH
                    self._mark(group.group_id, leaving.member_id)
                    self._event(group, "member-left", "leave-group", leaving.member_id,
                                f"static instance {leaving.instance_id} left for now (member epoch -2): its "
                                "partitions kept until it rejoins or its session times out", start=False)
                return ConsumerHeartbeatResponse(ErrorCode.none, req.member_id, req.member_epoch, 0)
            self._fence(group, req.member_id, "leave-group",
                        "static member left (member epoch -2)" if req.member_epoch == STATIC_LEAVE_EPOCH
                        else "member epoch -1")
            return ConsumerHeartbeatResponse(ErrorCode.none, req.member_id, req.member_epoch, 0)
        if req.subscribed_regex:
            try:
                _compiled(req.subscribed_regex)
            except re.error as e:
                return fail(ErrorCode.invalid_regular_expression,
                            f"SubscribedTopicRegex `{req.subscribed_regex}` is not a valid regular expression: {e}.")
        if req.member_epoch == 0:
            if req.subscribed_topics is None and req.subscribed_regex is None:
                return fail(ErrorCode.invalid_request,
                            "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
            if req.rebalance_timeout_ms < 0:
                return fail(ErrorCode.invalid_request, "RebalanceTimeoutMs must be provided in first request.")
            if group is None:
                group = self.groups[req.group_id] = ConsumerGroup(req.group_id, assignor=self.assignors[0])
            member_id = req.member_id or str(uuid.uuid4())
            static = None if req.instance_id is None else next(
                (mb for mb in group.members.values() if mb.instance_id == req.instance_id and mb.member_id != member_id),
                None)
            if static is not None and static.member_epoch != STATIC_LEAVE_EPOCH:
                return fail(ErrorCode.unreleased_instance_id,
                            f"Static member {member_id} with instance id {req.instance_id} cannot join the group "
                            f"because the instance id is owned by {static.member_id} member.")
            if static is not None:
                member = self._rejoin_static(group, static, member_id, req)
                self._refresh_and_reconcile(group, member, topics, None)
                self._schedule_session(group, member)
                member.last_sent = {t: ps for t, ps in member.assigned.items() if ps}
                return ConsumerHeartbeatResponse(ErrorCode.none, member.member_id, member.member_epoch,
                                                 self.heartbeat_interval_ms, member.last_sent)
            rejoined = member_id in group.members
            if rejoined:  # rejoining from scratch (e.g. after being fenced)
                self._remove(group, member_id)
            if len(group.members) >= self.max_size:
                return fail(ErrorCode.group_max_size_reached, f"The consumer group has reached its maximum "
                                                               f"capacity of {self.max_size} members.")
            member = ConsumerMember(member_id, req.instance_id, req.client_id, req.client_host,
                                    req.rebalance_timeout_ms, tuple(req.subscribed_topics or ()), req.rack_id,
                                    req.server_assignor, req.subscribed_regex or None)
            group.members[member_id] = member
            if req.server_assignor:
                group.assignor = req.server_assignor
            group.group_epoch += 1
            self._event(group, "member-joined", "new-member", member_id,
                        _joined_detail(req.client_id, req.client_host, req.instance_id,
                                       tuple(req.subscribed_topics or ()), req.subscribed_regex)
                        + ("; rejoined with member epoch 0, its previous incarnation removed" if rejoined else ""))
        else:
            if group is None or req.member_id not in group.members:
                return fail(ErrorCode.unknown_member_id, f"Member {req.member_id} is not a member of the group.")
            member = group.members[req.member_id]
            owned = _flat(req.owned) if req.owned is not None else None
            if req.member_epoch != member.member_epoch and not (
                    req.member_epoch == member.previous_epoch and owned is not None
                    and owned <= _flat(member.assigned)):
                return fail(ErrorCode.fenced_member_epoch, f"The consumer group member has a smaller member "
                                                            f"epoch ({req.member_epoch}) than the one known by the "
                                                            f"group coordinator ({member.member_epoch}).")
            if req.subscribed_topics is not None and tuple(req.subscribed_topics) != member.subscribed:
                before = member.subscribed
                member.subscribed = tuple(req.subscribed_topics)
                group.group_epoch += 1
                self._event(group, "subscription-changed", "subscription-change", member.member_id,
                            f"topics {', '.join(before) or '-'} -> {', '.join(member.subscribed) or '-'}")
            if req.subscribed_regex is not None and (req.subscribed_regex or None) != member.subscribed_regex:
                before_regex = member.subscribed_regex
                member.subscribed_regex = req.subscribed_regex or None
                group.group_epoch += 1
                self._event(group, "subscription-changed", "subscription-change", member.member_id,
                            f"regex {before_regex or '-'} -> {member.subscribed_regex or '-'}")
            if req.rebalance_timeout_ms >= 0:
                member.rebalance_timeout_ms = req.rebalance_timeout_ms
            if req.rack_id is not None:  # null: unchanged (as every field of a later heartbeat)
                member.rack_id = req.rack_id
        self._refresh_and_reconcile(group, member, topics, _flat(req.owned) if req.owned is not None else None)
        self._schedule_session(group, member)
        assignment = None
        current = {t: ps for t, ps in member.assigned.items() if ps}
        if member.last_sent != current:
            assignment = current
            member.last_sent = current
        return ConsumerHeartbeatResponse(ErrorCode.none, member.member_id, member.member_epoch,
                                         self.heartbeat_interval_ms, assignment)

    def _refresh_and_reconcile(self, group: ConsumerGroup, member: ConsumerMember, topics: Mapping[str, int],
                               owned: set[tuple[str, int]] | None) -> None:
        """Bring the target up to the group epoch (after a subscribed topic changed), reconcile `member`."""
        subscriptions = {mid: subscription(mb, topics) for mid, mb in group.members.items()}
        counts = {t: topics[t] for subs in subscriptions.values() for t in subs if t in topics}
        if counts != group.topic_snapshot and group.assignment_epoch == group.group_epoch:
            group.group_epoch += 1  # a subscribed topic appeared, vanished or grew
            self._event(group, "metadata-changed", "metadata-change",
                        detail=_metadata_detail(group.topic_snapshot, counts))
        if group.assignment_epoch < group.group_epoch:
            self._compute_target(group, counts, subscriptions)
        self._reconcile(group, member, owned)
        self._mark(group.group_id, member.member_id)

    def adopt(self, group: ConsumerGroup) -> None:
        """A group converted from a classic group (online upgrade): owners, sessions, every record written."""
        self.groups[group.group_id] = group
        group.owners = {}
        for mid, mb in group.members.items():
            for tp in _flat(mb.assigned):
                group.owners[tp] = mid
            self._schedule_session(group, mb)
        self._mark(group.group_id, None)

    # --- classic-protocol members (JoinGroup / SyncGroup / Heartbeat / LeaveGroup) ------------------

    def classic_join(self, group: ConsumerGroup, req: m.JoinGroupRequest) -> m.JoinGroupResponse:
        """JoinGroup of a classic member into this (non-empty) consumer group; answered at once."""
        topics, ids = self.topic_source()
        self.topic_ids.update(ids)
        member_id = req.member_id or str(uuid.uuid4())

        def fail(code: ErrorCode) -> m.JoinGroupResponse:
            return m.JoinGroupResponse(code, member_id=req.member_id)

        static = None
        if req.group_instance_id is not None:
            static = next((mb for mb in group.members.values() if mb.instance_id == req.group_instance_id), None)
            if static is not None and req.member_id and static.member_id != req.member_id:
                return fail(ErrorCode.fenced_instance_id)
        if member_id not in group.members and static is None and len(group.members) >= self.max_size:
            return fail(ErrorCode.group_max_size_reached)
        names = [p.name for p in req.protocols]
        if not self._supports_classic(group, member_id, req.protocol_type, names):
            return fail(ErrorCode.inconsistent_group_protocol)
        if not req.member_id and req.version >= 4 and req.group_instance_id is None:
            # KIP-394 as for a classic group: the id first, the member joins with it
            return m.JoinGroupResponse(ErrorCode.member_id_required, member_id=member_id)
        try:
            sub = decode_subscription(req.protocols[0].metadata)
        except (ConsumerProtocolError, UnicodeDecodeError):
            return fail(ErrorCode.unknown_server_error)  # Kafka: IllegalStateException, malformed metadata
        replaced_consumer_member = False
        if static is not None and static.member_id != member_id:
            replaced_consumer_member = static.classic is None
            old_id = static.member_id
            self._replace_static(group, static, member_id)
            self._event(group, "member-replaced", "static-member-replaced", member_id,
                        f"instance {req.group_instance_id}: {old_id} fenced, replaced by {member_id}", start=False)
        member = group.members.get(member_id)
        joined = member is None
        if member is None:
            member = group.members[member_id] = ConsumerMember(member_id, req.group_instance_id, req.client_id,
                                                               req.client_host, req.rebalance_timeout_ms)
            group.group_epoch += 1
        if tuple(sub.topics) != member.subscribed:
            before = member.subscribed
            member.subscribed = tuple(sub.topics)
            group.group_epoch += 1
            if not joined:
                self._event(group, "subscription-changed", "subscription-change", member_id,
                            f"topics {', '.join(before) or '-'} -> {', '.join(sub.topics) or '-'} (classic protocol)")
        if joined:
            self._event(group, "member-joined", "new-member", member_id,
                        _joined_detail(req.client_id, req.client_host, req.group_instance_id, tuple(sub.topics),
                                       None) + " (classic protocol)")
        member.instance_id = req.group_instance_id
        if sub.rack_id is not None:
            member.rack_id = sub.rack_id
        if req.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.client_id, member.client_host = req.client_id, req.client_host
        member.classic = ClassicMemberMetadata(req.session_timeout_ms,
                                               tuple((p.name, p.metadata) for p in req.protocols))
        owned = {(tp.topic, tp.partition) for tp in sub.owned_partitions if tp.topic in topics}
        self._refresh_and_reconcile(group, member, topics, owned)
        self._cancel_join_timer(group.group_id, member_id)
        self._schedule_session(group, member)
        group_id = group.group_id
        self._schedule(("cg-sync", group_id, member_id), self._now() + member.rebalance_timeout_ms,
                       self._expirer(group_id, member_id, "rebalance-timeout",
                                     "classic member did not send SyncGroup within its rebalance timeout"))
        response = m.JoinGroupResponse(ErrorCode.none, member_id=member_id, generation_id=member.member_epoch,
                                       protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=req.protocols[0].name)
        if replaced_consumer_member:
            self.on_static_replace(group)  # Kafka answers the join as above, downgraded or not
        return response

    def classic_sync(self, group: ConsumerGroup, req: m.SyncGroupRequest) -> m.SyncGroupResponse:
        member, error = self._classic_member(group, req.member_id, req.group_instance_id)
        if member is None or member.classic is None:
            return m.SyncGroupResponse(error)
        if req.generation_id != member.member_epoch:
            return m.SyncGroupResponse(ErrorCode.illegal_generation)
        protocol = member.classic.protocols[0][0]
        if (req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE) or \
                (req.protocol_name is not None and req.protocol_name != protocol):
            return m.SyncGroupResponse(ErrorCode.inconsistent_group_protocol)
        if group.group_epoch > member.member_epoch and member.state != UNREVOKED:
            self._schedule_join_timer(group, member)  # a new rebalance: rejoin to catch up
            return m.SyncGroupResponse(ErrorCode.rebalance_in_progress)
        self._cancel(("cg-sync", group.group_id, member.member_id))
        self._schedule_session(group, member)
        return m.SyncGroupResponse(ErrorCode.none, classic_assignment(member, member.assigned),
                                   CONSUMER_PROTOCOL_TYPE, protocol)

    def classic_heartbeat(self, group: ConsumerGroup, req: m.HeartbeatRequest) -> ErrorCode:
        member, error = self._classic_member(group, req.member_id, req.group_instance_id)
        if member is None:
            return error
        if req.generation_id != member.member_epoch:
            return ErrorCode.illegal_generation
        self._schedule_session(group, member)
        if member.member_epoch < group.group_epoch or member.state == UNREVOKED or (
                member.state == UNRELEASED and not self._waiting_on_unreleased(group, member)):
            self._schedule_join_timer(group, member)
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def classic_leave(self, group: ConsumerGroup, idents: tuple[m.MemberIdentity, ...]
                      ) -> list[m.LeaveMemberResponse]:
        out = []
        for ident in idents:
            if ident.group_instance_id is None:
                member = group.members.get(ident.member_id)
                error = ErrorCode.unknown_member_id if member is None or member.classic is None else ErrorCode.none
            else:
                member = next((mb for mb in group.members.values() if mb.instance_id == ident.group_instance_id),
                              None)
                if member is None:
                    error = ErrorCode.unknown_member_id
                elif ident.member_id and ident.member_id != member.member_id:
                    error = ErrorCode.fenced_instance_id
                else:
                    error = ErrorCode.unknown_member_id if member.classic is None else ErrorCode.none
            if member is not None and error is ErrorCode.none:
                self._event(group, "member-left", leave_cause(ident.reason), member.member_id,
                            _leave_detail(ident.reason, "LeaveGroup (classic protocol)"), start=False)
                self._remove(group, member.member_id)
                if self.timeline is not None:
                    self.timeline.start(group.group_id, "consumer", group.group_epoch)
                out.append(m.LeaveMemberResponse(member.member_id, ident.group_instance_id, error))
            else:
                out.append(m.LeaveMemberResponse(ident.member_id, ident.group_instance_id, error))
        return out

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None
                        ) -> tuple[ConsumerMember | None, ErrorCode]:
        if instance_id is None:
            member = group.members.get(member_id)
        else:
            member = next((mb for mb in group.members.values() if mb.instance_id == instance_id), None)
            if member is not None and member.member_id != member_id:
                return None, ErrorCode.fenced_instance_id
        if member is None or member.classic is None:  # a consumer-protocol member is unknown here
            return None, ErrorCode.unknown_member_id
        return member, ErrorCode.none

    def _supports_classic(self, group: ConsumerGroup, member_id: str, protocol_type: str, names: list[str]) -> bool:
        """Protocol type consumer and one of `names` supported by every other classic member."""
        if protocol_type != CONSUMER_PROTOCOL_TYPE or not names:
            return False
        others = [{name for name, _ in mb.classic.protocols} for mid, mb in group.members.items()
                  if mb.classic is not None and mid != member_id]
        return any(all(name in o for o in others) for name in names)

    def _replace_static(self, group: ConsumerGroup, old: ConsumerMember, new_id: str) -> None:
        """A static member restarted with a new id takes its predecessor's place, epoch and partitions."""
        old_id = old.member_id
        self._mark(group.group_id, old_id)
        self._cancel_member_timers(group.group_id, old_id)
        del group.members[old_id]
        old.member_id = new_id
        group.members[new_id] = old
        group.target[new_id] = group.target.pop(old_id, {})
        for tp, owner in list(group.owners.items()):
            if owner == old_id:
                group.owners[tp] = new_id

    def _waiting_on_unreleased(self, group: ConsumerGroup, member: ConsumerMember) -> bool:
        pending = _flat(group.target.get(member.member_id, {})) - _flat(member.assigned)
        return any(group.owners.get(tp) not in (None, member.member_id) for tp in pending)

    def _schedule_join_timer(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        key = (group.group_id, member.member_id)
        if key in self._join_timers:
            return  # scheduled if absent: the first REBALANCE_IN_PROGRESS starts the clock
        self._join_timers.add(key)
        group_id, mid = key
        self._schedule(("cg-join", group_id, mid), self._now() + member.rebalance_timeout_ms,
                       self._expirer(group_id, mid, "rebalance-timeout",
                                     "classic member did not rejoin within its rebalance timeout"))

    def _cancel_join_timer(self, group_id: str, member_id: str) -> None:
        self._join_timers.discard((group_id, member_id))
        self._cancel(("cg-join", group_id, member_id))

    def _cancel_member_timers(self, group_id: str, member_id: str) -> None:
        for kind in ("cg-session", "cg-revoke", "cg-sync"):
            self._cancel((kind, group_id, member_id))
        self._cancel_join_timer(group_id, member_id)

    def cancel_timers(self, group: ConsumerGroup) -> None:
        for mid in group.members:
            self._cancel_member_timers(group.group_id, mid)

    def validate_offset_commit(self, group: ConsumerGroup, member_id: str, epoch: int, version: int) -> ErrorCode | None:
        if epoch < 0 and not member_id and not group.members:
            return None  # an admin commit into an empty group
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if member.classic is not None:  # a classic member commits as in a classic group, any version
            return None if epoch == member.member_epoch else ErrorCode.illegal_generation
        if version < 9:
            return ErrorCode.unsupported_version  # members of the new protocol commit with v9+
        if epoch > member.member_epoch:
            return ErrorCode.fenced_member_epoch
        if epoch < member.member_epoch:
            return ErrorCode.stale_member_epoch
        return None

    # --- internals --------------------------------------------------------------------------------

    def _compute_target(self, group: ConsumerGroup, counts: dict[str, int],
                        subscriptions: Mapping[str, tuple[str, ...]]) -> None:
        self._mark(group.group_id, None)  # every member's target may change
        from kaflite.assign.registry import get_server_assignor
        from kaflite.assign.server import MemberSpec
        from kaflite.assign.types import TopicPartition

        specs = {mid: MemberSpec([t for t in subscriptions.get(mid, ()) if t in counts],
                                 [TopicPartition(t, p) for t, ps in group.target.get(mid, {}).items() for p in ps
                                  if t in counts and p < counts[t]], None, mb.instance_id)
                 for mid, mb in group.members.items()}
        assignor = get_server_assignor(group.assignor)
        result = assignor.assign(specs, counts) if specs else {}
        group.target = {mid: _group({(tp.topic, tp.partition) for tp in result.get(mid, [])}) for mid in group.members}
        group.topic_snapshot = counts
        group.assignment_epoch = group.group_epoch

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: set[tuple[str, int]] | None) -> None:
        mid = member.member_id
        if member.state == UNREVOKED:
            if owned is None or owned & _flat(member.pending_revocation):
                return  # still waiting for the member to give them up
            for tp in _flat(member.pending_revocation):
                if group.owners.get(tp) == mid:
                    del group.owners[tp]
            member.pending_revocation = {}
            member.state = STABLE
            self._cancel(("cg-revoke", group.group_id, mid))
        if member.member_epoch == group.assignment_epoch and member.state == STABLE:
            return
        target = _flat(group.target.get(mid, {}))
        assigned = _flat(member.assigned)
        revoke = assigned - target
        if revoke and owned is not None and not owned & revoke:
            # it already gave them up (an eager classic member rejoins owning nothing): no revocation step
            for tp in revoke:
                if group.owners.get(tp) == mid:
                    del group.owners[tp]
            assigned -= revoke
            revoke = set()
        if revoke:
            member.assigned = _group(assigned & target)
            member.pending_revocation = _group(revoke)
            member.state = UNREVOKED
            group_id = group.group_id
            self._schedule(("cg-revoke", group_id, mid), self._now() + member.rebalance_timeout_ms,
                           self._expirer(group_id, mid, "rebalance-timeout", _REVOKE_LATE))
            return
        grantable = {tp for tp in target - assigned if group.owners.get(tp) in (None, mid)}
        for tp in grantable:
            group.owners[tp] = mid
        member.assigned = _group(assigned | grantable)
        if member.member_epoch != group.assignment_epoch:
            member.previous_epoch = member.member_epoch
            member.member_epoch = group.assignment_epoch
        member.state = UNRELEASED if (target - assigned) - grantable else STABLE

    def _schedule_session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        group_id, mid = group.group_id, member.member_id
        timeout = member.classic.session_timeout_ms if member.classic is not None else self.session_timeout_ms
        self._schedule(("cg-session", group_id, mid), self._now() + timeout,
                       self._expirer(group_id, mid, "session-timeout", f"no heartbeat for {timeout} ms"))

    def expire_member(self, group: ConsumerGroup, member_id: str) -> ErrorCode:
        """The test kit's session timeout, now (rules at the top)."""
        if member_id not in group.members:
            return ErrorCode.unknown_member_id
        self._fence(group, member_id, "session-timeout", "expire_member (test kit)")
        return ErrorCode.none

    def force_rebalance(self, group: ConsumerGroup) -> None:
        """The test kit's rebalance on demand: a new group epoch, hence a new target (rules at the top)."""
        if group.members:
            group.group_epoch += 1
            self._dirty.setdefault(group.group_id, set())  # the group's epoch record; no member changed yet
            self._event(group, "rebalance-forced", "forced", detail="force_rebalance (test kit)")

    def _expire(self, group_id: str, member_id: str, cause: str, detail: str = "") -> None:
        group = self.groups.get(group_id)
        if group is not None and member_id in group.members:
            self._fence(group, member_id, cause, detail)

    def _fence(self, group: ConsumerGroup, member_id: str, cause: str, detail: str = "") -> None:
        """Remove a member, unless the owner downgrades the group to a classic group instead."""
        # reported first: a downgrade's rebalance takes its cause from it
        self._event(group, "member-left", cause, member_id, detail, start=False)
        if not self.on_fence(group, member_id):
            self._remove(group, member_id)
            if self.timeline is not None:
                self.timeline.start(group.group_id, "consumer", group.group_epoch)

    def _rejoin_static(self, group: ConsumerGroup, old: ConsumerMember, member_id: str,
                       req: ConsumerHeartbeatRequest) -> ConsumerMember:
        """A static member that left with epoch -2 rejoins under a new member id: it takes its
        predecessor's place, epoch, partitions and target (`_replace_static`); the group epoch moves only
        if the subscription changed (Kafka's consumerGroupJoin with an existing static member)."""
        old_id, old_subscribed, old_regex = old.member_id, old.subscribed, old.subscribed_regex
        self._replace_static(group, old, member_id)
        member = old  # the same object, under its new id
        member.client_id, member.client_host = req.client_id, req.client_host
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.member_epoch = member.previous_epoch  # the epoch it had before its epoch -2 leave
        member.subscribed = tuple(req.subscribed_topics or ())
        member.subscribed_regex = req.subscribed_regex or None
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        self._mark(group.group_id, member_id)
        self._event(group, "member-replaced", "static-member-replaced", member_id,
                    f"instance {req.instance_id}: {old_id} (left with epoch -2) replaced by {member_id}",
                    start=False)
        if member.subscribed != old_subscribed or member.subscribed_regex != old_regex:
            group.group_epoch += 1
            self._event(group, "subscription-changed", "subscription-change", member_id,
                        f"topics {', '.join(old_subscribed) or '-'} -> {', '.join(member.subscribed) or '-'}")
        return member

    def _remove(self, group: ConsumerGroup, member_id: str) -> None:
        self._mark(group.group_id, member_id)
        group.members.pop(member_id, None)
        group.target.pop(member_id, None)
        for tp in [tp for tp, owner in group.owners.items() if owner == member_id]:
            del group.owners[tp]
        self._cancel_member_timers(group.group_id, member_id)
        group.group_epoch += 1


CONSUMER_PROTOCOL_TYPE = "consumer"
_REVOKE_LATE = "did not revoke its partitions within its rebalance timeout"


def _joined_detail(client_id: str, host: str, instance_id: str | None, topics: tuple[str, ...],
                   regex: str | None) -> str:
    parts = [f"client {client_id or '-'} at {host or '-'}"]
    if instance_id is not None:
        parts.append(f"static instance {instance_id}")
    parts.append(f"topics {', '.join(topics) or '-'}" + (f" + regex {regex}" if regex else ""))
    return "; ".join(parts)


def _leave_detail(reason: str | None, default: str) -> str:
    return f"reason: {reason}" if reason else default


def _metadata_detail(before: Mapping[str, int], after: Mapping[str, int]) -> str:
    changes = []
    for t in sorted(set(before) | set(after)):
        b, a = before.get(t), after.get(t)
        if b != a:
            changes.append(f"{t}: {'-' if b is None else b} -> {'-' if a is None else a} partitions")
    return "; ".join(changes)


def classic_assignment(member: ConsumerMember, assigned: Mapping[str, Iterable[int]]) -> bytes:
    """Partitions as a consumer-protocol Assignment in the version of the member's subscription (Kafka:
    ConsumerProtocol.deserializeVersion of its first protocol's metadata), at most 3."""
    version = 0
    if member.classic is not None and member.classic.protocols:
        metadata = member.classic.protocols[0][1]
        version = min(max(int.from_bytes(metadata[:2], "big", signed=True), 0), 3) if len(metadata) >= 2 else 0
    tps = [TopicPartition(t, p) for t, ps in sorted(assigned.items()) for p in sorted(ps)]
    return encode_assignment(ConsumerAssignment(tps), version=version)
