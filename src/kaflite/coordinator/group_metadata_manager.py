"""Classic and KIP-848 consumer groups of one shard (Kafka's GroupMetadataManager): the rebalance
protocol, membership, timers, the GroupMetadata records, and the admin views of groups.

Rules (the rebalance protocol, Kafka's classic GroupMetadataManager):
- JoinGroup, new member: group id must be non-empty, session timeout within
  [group.min.session.timeout.ms, group.max.session.timeout.ms]. A dynamic member on JoinGroup v4+
  first gets MEMBER_ID_REQUIRED with an id `clientId-UUID` (parked as pending, expiring after the
  session timeout) and must rejoin with it; a static member (group.instance.id) is added at once with
  `instanceId-UUID`, or replaces the previous id of its instance (fencing that id).
- A join into an Empty group starts PreparingRebalance with `group.initial.rebalance.delay.ms`, extended
  by the same delay while members keep arriving, within the rebalance timeout. Otherwise the join phase
  ends when every member rejoined, or at the rebalance timeout, dropping dynamic members that did not
  rejoin (static ones stay). Then generation += 1, the protocol is voted, the leader (a rejoined member)
  gets every member's metadata and the group is CompletingRebalance.
- SyncGroup: the leader's assignment is persisted (GroupMetadata record), every member gets its own
  part (missing = empty) and the group is Stable. Members that do not sync within the rebalance timeout
  are removed and the group rebalances.
- Heartbeat: resets the member's session timer; REBALANCE_IN_PROGRESS while PreparingRebalance. A member
  with no heartbeat for session.timeout.ms is removed (unless parked in the rebalance), which rebalances.
- LeaveGroup removes members (by member id, or by group.instance.id with an empty member id) and
  rebalances (or lets a pending join phase complete).
- Fencing, in this order: Dead -> COORDINATOR_NOT_AVAILABLE; unknown member / unmapped instance ->
  UNKNOWN_MEMBER_ID; instance mapped to another member id -> FENCED_INSTANCE_ID; generation mismatch
  -> ILLEGAL_GENERATION; then REBALANCE_IN_PROGRESS where the state requires it.
- KIP-848 groups (ConsumerGroupHeartbeat) live in `consumer` (kaflite.coordinator.consumer_group); a
  group id is either classic or consumer, an empty group of one kind may become the other. A non-empty
  group changes kind online (kaflite.coordinator.group_migration): a consumer-protocol member joining a
  classic group upgrades it, and classic JoinGroup / SyncGroup / Heartbeat / LeaveGroup into a non-empty
  consumer group are served by the consumer group (its classic-protocol members); the last
  consumer-protocol member leaving a group of classic members downgrades it.
- The rebalance timeline (kaflite.coordinator.timeline) hears every change where it happens, with its
  cause: a member added (new-member), removed (leave-group / max-poll-interval by its LeaveGroup reason,
  session-timeout, rebalance-timeout when it did not rejoin or sync in time, group-max-size), a rejoin
  that starts a rebalance (other subscribed topics: subscription-change; the same topics: the leader's
  metadata-change, another member's member-rejoin), a static member replaced; a rejoin while
  PreparingRebalance is the rebalance itself (no event); a classic rebalance starts when the group enters
  PreparingRebalance and completes when the leader's assignment makes it Stable (or the join phase leaves
  it Empty). Its records are appended at the end of a step that writes records (`flush_step`).
- Test kit (EmbeddedBroker.expire_member / force_rebalance), classic groups: `expire_member` does now what
  the member's session timeout would do (removed, the group rebalances; UNKNOWN_MEMBER_ID for a member
  the group does not have, GROUP_ID_NOT_FOUND for no such group); `force_rebalance` moves a Stable or
  CompletingRebalance group to PreparingRebalance as a membership change would (its members rejoin at
  their next heartbeat), and changes nothing for a group already rebalancing or Empty. For a KIP-848
  group both go to the consumer group manager (its rules: kaflite.coordinator.consumer_group).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from kaflite.assign.types import TopicPartition
from kaflite.protocol.consumer_protocol import (
    ConsumerAssignment,
    assignment_partitions,
    encode_assignment,
    subscription_topics,
)
from kaflite.protocol.errors import ErrorCode

from . import messages as m
from .consumer_group import (
    ConsumerGroup,
    ConsumerGroupManager,
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResponse,
)
from .group import ClassicGroup, ClassicGroupMember
from .group_migration import (
    MigrationError,
    can_downgrade,
    can_downgrade_after_replacement,
    can_upgrade,
    classic_group_from_consumer,
    consumer_group_from_classic,
)
from .records import GroupMetadataKey, GroupMetadataValue, MemberMetadata
from .shard_context import ShardContext
from .state import GroupState, IllegalStateError, can_rebalance
from .timeline import RebalanceTimeline, leave_cause


class GroupMetadataManager:
    """Every group of one shard and the rules that move them."""

    def __init__(self, ctx: ShardContext) -> None:
        self.ctx = ctx
        self.groups: dict[str, ClassicGroup] = {}
        # KIP-848 groups (group.protocol=consumer) share the clock, the timers and the offsets
        config = ctx.config
        self.consumer = ConsumerGroupManager(ctx.schedule, ctx.cancel, lambda: ctx.now,
                                             config.consumer_session_timeout_ms,
                                             config.consumer_heartbeat_interval_ms, config.consumer_max_size,
                                             config.consumer_assignors)
        self.consumer.is_active = lambda: ctx.active
        self.consumer.on_fence = self._maybe_downgrade
        self.consumer.on_static_replace = self._maybe_downgrade_after_replacement
        self.timeline = RebalanceTimeline(config.rebalance_history_size, lambda: ctx.now, lambda: ctx.active)
        self.consumer.timeline = self.timeline

    def _event(self, group: ClassicGroup, kind: str, cause: str, member_id: str = "", detail: str = "") -> None:
        self.timeline.record(group.group_id, kind, cause, "classic", group.generation_id, member_id, detail)

    # === loading ====================================================================================

    def replay(self, key: GroupMetadataKey, value: GroupMetadataValue | None) -> None:
        """Apply a GroupMetadata record (value None: the group was deleted)."""
        if value is None:
            group = self.groups.pop(key.group, None)
            if group is not None and not group.is_in(GroupState.DEAD):
                group.transition_to(GroupState.DEAD, self.ctx.now)
            return
        if self.ctx.active and key.group in self.groups:
            return  # written by us from the live group: that state is already this record's content
        self.groups[key.group] = self._group_from_record(key.group, value)

    def simple_group(self, group_id: str, state_timestamp_ms: int) -> ClassicGroup:
        """The group of offsets committed without group metadata (manual assignment, admin tools)."""
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id, state_timestamp_ms=state_timestamp_ms)
        return group

    @staticmethod
    def _group_from_record(group_id: str, value: GroupMetadataValue) -> ClassicGroup:
        group = ClassicGroup(group_id, generation_id=value.generation,
                             protocol_type=value.protocol_type or None, protocol_name=value.protocol,
                             state_timestamp_ms=value.current_state_timestamp)
        for mm in value.members:
            member = ClassicGroupMember(mm.member_id, mm.group_instance_id, mm.client_id, mm.client_host,
                                        mm.rebalance_timeout, mm.session_timeout, value.protocol_type,
                                        (m.Protocol(value.protocol or "", mm.subscription),), mm.assignment)
            group.add(member, awaiting=False)
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        if group.members:
            group.state = GroupState.STABLE
            group.previous_state = GroupState.COMPLETING_REBALANCE
        return group

    def activate(self) -> None:
        """Loading is over: loaded members must heartbeat within their session timeout from now."""
        self.consumer.activate()
        for group in self.groups.values():
            for member in group.members.values():
                self._schedule_heartbeat(group, member.member_id, member.session_timeout_ms)
        loaded = [(g.group_id, "classic", g.generation_id, len(g.members), _classic_owners(g))
                  for g in self.groups.values() if g.group_id not in self.consumer.groups]
        loaded += [(g.group_id, "consumer", g.group_epoch, len(g.members), dict(g.owners))
                   for g in self.consumer.groups.values()]
        self.timeline.activate(sorted(loaded))

    # === JoinGroup ==================================================================================

    def join(self, req: m.JoinGroupRequest) -> None:
        token = req.token

        def fail(error: ErrorCode, member_id: str = req.member_id) -> None:
            self.ctx.respond(token, m.JoinGroupResponse(error, member_id=member_id))

        if not self.ctx.active:
            return fail(ErrorCode.coordinator_not_available)
        group_id = req.group_id
        if not group_id:
            return fail(ErrorCode.invalid_group_id)
        if not (self.ctx.config.group_min_session_timeout_ms <= req.session_timeout_ms
                <= self.ctx.config.group_max_session_timeout_ms):
            return fail(ErrorCode.invalid_session_timeout)
        if req.rebalance_timeout_ms < 0:
            req = _replace(req, rebalance_timeout_ms=req.session_timeout_ms)
        is_unknown = req.member_id == m.UNKNOWN_MEMBER_ID
        other = self.consumer.groups.get(group_id)
        if other is not None:
            if other.members:  # a consumer group: the member joins it as a classic-protocol member
                return self.ctx.respond(token, self.consumer.classic_join(other, req))
            self.consumer.drop(group_id)
        group = self.groups.get(group_id)
        is_new_group = group is None
        if group is None:
            if not is_unknown:
                return fail(ErrorCode.unknown_member_id)
            group = ClassicGroup(group_id, state_timestamp_ms=self.ctx.now)
            self.groups[group_id] = group
        records_before = len(self.ctx.out.records)
        if not self._accept_joining_member(group, req.member_id):
            if group.has_member(req.member_id) or group.is_pending_member(req.member_id):
                self._remove_member(group, req.member_id, "group-max-size",
                                    f"group.max.size {self.ctx.config.group_max_size} reached")
            fail(ErrorCode.group_max_size_reached, m.UNKNOWN_MEMBER_ID)
        elif is_unknown:
            self._join_new_member(group, req)
        else:
            self._join_existing_member(group, req)
        if is_new_group and len(self.ctx.out.records) == records_before:
            # a group exists once something about it is in the log (as Kafka does for new groups)
            self.ctx.append(GroupMetadataKey(group.group_id),
                            GroupMetadataValue("", 0, None, None, self.ctx.now, ()))

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        max_size = self.ctx.config.group_max_size
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_in(GroupState.PREPARING_REBALANCE):
            # awaiting members (not group size) count: a shrunk max size then evicts the last joiners
            return (group.has_member(member_id) and group.member(member_id).awaiting_join) or \
                group.num_awaiting_join < max_size
        return group.has_member(member_id) or group.size() < max_size

    def _join_new_member(self, group: ClassicGroup, req: m.JoinGroupRequest) -> None:
        if group.is_in(GroupState.DEAD):
            return self.ctx.respond(req.token, m.JoinGroupResponse(ErrorCode.coordinator_not_available))
        if not group.supports_protocols(req.protocol_type, [p.name for p in req.protocols]):
            return self.ctx.respond(req.token, m.JoinGroupResponse(ErrorCode.inconsistent_group_protocol))
        prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
        new_member_id = f"{prefix}-{self.ctx.new_uuid()}"
        if req.group_instance_id is not None:
            existing = group.static_member_id(req.group_instance_id)
            if existing is not None:
                return self._update_static_member(group, req, existing, new_member_id)
            return self._add_member_then_rebalance(group, req, new_member_id)
        if req.version >= 4:
            # KIP-394: the id is handed out first, so a client that times out rejoins as the same member
            group.pending_join_members.add(new_member_id)
            self._schedule_heartbeat(group, new_member_id, req.session_timeout_ms)
            return self.ctx.respond(req.token, m.JoinGroupResponse(ErrorCode.member_id_required,
                                                                 member_id=new_member_id))
        self._add_member_then_rebalance(group, req, new_member_id)

    def _join_existing_member(self, group: ClassicGroup, req: m.JoinGroupRequest) -> None:
        member_id = req.member_id

        def reply(error: ErrorCode) -> None:
            self.ctx.respond(req.token, m.JoinGroupResponse(error, member_id=member_id))

        if group.is_in(GroupState.DEAD):
            return reply(ErrorCode.coordinator_not_available)
        if not group.supports_protocols(req.protocol_type, [p.name for p in req.protocols]):
            return reply(ErrorCode.inconsistent_group_protocol)
        if group.is_pending_member(member_id):
            return self._add_member_then_rebalance(group, req, member_id)
        error = group.validate_member(member_id, req.group_instance_id)
        if error is not None:
            return reply(error)
        member = group.member(member_id)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return self._update_member_then_rebalance(group, req, member)
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                # it probably lost the JoinGroup answer: give the current generation again
                return self.ctx.respond(req.token, self._join_response(group, member_id))
            return self._update_member_then_rebalance(group, req, member)
        if group.is_in(GroupState.STABLE):
            if group.is_leader(member_id) or not member.matches(req.protocols):
                # a leader's rejoin asks for a new assignment (e.g. topic metadata changed)
                return self._update_member_then_rebalance(group, req, member)
            return self.ctx.respond(req.token, self._join_response(group, member_id, with_members=False))
        reply(ErrorCode.unknown_member_id)  # Empty: the member must reset its generation and rejoin

    def _join_response(self, group: ClassicGroup, member_id: str, with_members: bool = True,
                       leader: str | None = None, skip_assignment: bool = False) -> m.JoinGroupResponse:
        members = group.current_members_for_leader() if with_members and group.is_leader(member_id) else ()
        return m.JoinGroupResponse(ErrorCode.none, member_id=member_id, generation_id=group.generation_id,
                                   protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                                   leader=(leader if leader is not None else group.leader_id) or "",
                                   members=members, skip_assignment=skip_assignment)

    def _add_member_then_rebalance(self, group: ClassicGroup, req: m.JoinGroupRequest, member_id: str) -> None:
        member = ClassicGroupMember(member_id, req.group_instance_id, req.client_id, req.client_host,
                                    req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                                    req.protocols, is_new=True)
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.previous_state is GroupState.EMPTY:
            group.new_member_added = True
        group.add(member, req.token)
        self._event(group, "member-joined", "new-member", member_id,
                    f"client {req.client_id or '-'} at {req.client_host or '-'}"
                    + (f"; static instance {req.group_instance_id}" if req.group_instance_id is not None else "")
                    + f"; protocols {', '.join(p.name for p in req.protocols) or '-'}")
        # A new member cannot heartbeat while parked; if its client gave up, it must not stay forever.
        self._schedule_heartbeat(group, member_id, self.ctx.config.group_new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(group)

    def _update_member_then_rebalance(self, group: ClassicGroup, req: m.JoinGroupRequest,
                                      member: ClassicGroupMember) -> None:
        if member.awaiting_join and member.join_token is not None and member.join_token != req.token:
            # a duplicate JoinGroup replaces the parked one; answer the old so no connection hangs
            self.ctx.respond(member.join_token, m.JoinGroupResponse(ErrorCode.rebalance_in_progress,
                                                                 member_id=member.member_id))
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._rejoin_event(group, member, req)  # this rejoin starts a rebalance: why
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms,
                            req.token, awaiting=True)
        self._maybe_prepare_rebalance_or_complete_join(group)

    def _rejoin_event(self, group: ClassicGroup, member: ClassicGroupMember, req: m.JoinGroupRequest) -> None:
        """A member rejoins a Stable (or CompletingRebalance) group. A consumer's subscribed topics tell a
        subscription change from a rejoin with the same topics: the leader's is a metadata change (what
        a consumer leader does when a subscribed topic's partition count changed), another member's a
        plain rejoin (e.g. a cooperative member's second join after revoking: its owned partitions, in
        the protocol metadata, changed). Without consumer-protocol metadata, any protocol change counts
        as a subscription change."""
        reason = f"; reason: {req.reason}" if req.reason else ""
        before = _topics(member.protocols) if group.protocol_type == "consumer" else None
        after = _topics(req.protocols) if group.protocol_type == "consumer" else None
        if before is not None and after is not None:
            changed = before != after
            detail = f"topics {', '.join(before) or '-'} -> {', '.join(after) or '-'}"
        else:
            changed, detail = not member.matches(req.protocols), "rejoined with other protocols"
        if changed:
            self._event(group, "subscription-changed", "subscription-change", member.member_id, detail + reason)
        elif group.is_in(GroupState.STABLE) and group.is_leader(member.member_id) and before is not None:
            self._event(group, "metadata-changed", "metadata-change", member.member_id,
                        "the leader rejoined with the same topics (its topic metadata changed)" + reason)
        else:
            self._event(group, "member-rejoined", "member-rejoin", member.member_id,
                        "rejoined with the same topics" + reason)

    def _update_static_member(self, group: ClassicGroup, req: m.JoinGroupRequest,
                              old_member_id: str, new_member_id: str) -> None:
        assert req.group_instance_id is not None
        old = group.member(old_member_id)
        current_leader = group.leader_id
        # the previous incarnation is fenced at once: its parked requests fail
        self._complete_join(group, old, m.JoinGroupResponse(ErrorCode.fenced_instance_id, member_id=old_member_id))
        self._complete_sync(group, old, m.SyncGroupResponse(ErrorCode.fenced_instance_id))
        new = group.replace_static_member(req.group_instance_id, old_member_id, new_member_id)
        self._event(group, "member-replaced", "static-member-replaced", new_member_id,
                    f"instance {req.group_instance_id}: {old_member_id} fenced, replaced by {new_member_id}")
        self.ctx.cancel(("heartbeat", group.group_id, old_member_id))
        self._schedule_heartbeat(group, new_member_id, new.session_timeout_ms)
        group.update_member(new, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms,
                            req.token, awaiting=True)
        if group.is_in(GroupState.STABLE):
            if (group.protocol_name or "") == group.select_protocol():
                # KIP-345: same instance, same protocol -> keep the assignment, no rebalance
                self._append_group_metadata(group, {mid: mem.assignment for mid, mem in group.members.items()})
                if req.version >= 9:
                    is_leader = group.is_leader(new_member_id)
                    resp = self._join_response(group, new_member_id, skip_assignment=is_leader)
                else:
                    # the old leader id is returned so a restarted leader does not recompute assignments
                    resp = self._join_response(group, new_member_id, with_members=False, leader=current_leader)
                self._complete_join(group, new, resp)
            else:
                self._maybe_prepare_rebalance_or_complete_join(group)
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            # the leader may already be assigning to the old id: start over
            self._prepare_rebalance(group)
        elif group.state in (GroupState.EMPTY, GroupState.DEAD):
            raise IllegalStateError(f"group {group.group_id} cannot be {group.state} with static member "
                                    f"{req.group_instance_id}")
        else:
            self._maybe_complete_join_phase(group)

    # === the rebalance ==============================================================================

    def _rebalance_timeout(self, group: ClassicGroup) -> int:
        return max((mem.rebalance_timeout_ms for mem in group.members.values()), default=0)

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup) -> None:
        if can_rebalance(group.state):
            self._prepare_rebalance(group)
        else:
            self._maybe_complete_join_phase(group)

    def _prepare_rebalance(self, group: ClassicGroup) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            # members parked in SyncGroup must rejoin: their generation is over
            self._reset_and_propagate_assignment_with_error(group, ErrorCode.rebalance_in_progress)
        self.ctx.cancel(("sync", group.group_id))
        self.timeline.start(group.group_id, "classic", group.generation_id)
        initial = group.is_in(GroupState.EMPTY)
        if initial:
            delay = self.ctx.config.group_initial_rebalance_delay_ms
            remaining = max(self._rebalance_timeout(group) - delay, 0)
            self._schedule_initial_rebalance(group.group_id, delay, remaining)
        group.transition_to(GroupState.PREPARING_REBALANCE, self.ctx.now)
        if not initial:
            self._maybe_complete_join_else_schedule(group)

    def _schedule_initial_rebalance(self, group_id: str, delay: int, remaining: int) -> None:
        self.ctx.schedule(("join", group_id), self.ctx.now + delay,
                          lambda: self._try_complete_initial_rebalance(group_id, delay, remaining))

    def _try_complete_initial_rebalance(self, group_id: str, delay: int, remaining: int) -> None:
        group = self.groups.get(group_id)
        if group is None or not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        if group.new_member_added and remaining != 0:
            # someone arrived during the delay: wait once more, never beyond the rebalance timeout
            group.new_member_added = False
            new_delay = min(self.ctx.config.group_initial_rebalance_delay_ms, remaining)
            self._schedule_initial_rebalance(group_id, new_delay, max(remaining - delay, 0))
        else:
            self._complete_join_phase(group)

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup) -> None:
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
            self._complete_join_phase(group)
        else:
            self._schedule_join_expiry(group)

    def _schedule_join_expiry(self, group: ClassicGroup) -> None:
        group_id = group.group_id
        self.ctx.schedule(("join", group_id), self.ctx.now + self._rebalance_timeout(group),
                          lambda: self._complete_join_phase_by_id(group_id))

    def _complete_join_phase_by_id(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and group.is_in(GroupState.PREPARING_REBALANCE):
            self._complete_join_phase(group)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        # during the initial delay only the delay timer may end the join phase
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined() \
                and group.previous_state is not GroupState.EMPTY:
            self._complete_join_phase(group)

    def _complete_join_phase(self, group: ClassicGroup) -> None:
        self.ctx.cancel(("join", group.group_id))
        for member in group.not_yet_rejoined_members():
            if not member.is_static:  # static members keep their slot until their session expires
                self._remove_member(group, member.member_id, "rebalance-timeout",
                                    "did not rejoin within the rebalance timeout")
        if group.is_in(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # nobody rejoined: wait for the session timeouts to clear the group
            self._schedule_join_expiry(group)
            return
        group.init_next_generation(self.ctx.now)
        if group.is_in(GroupState.EMPTY):
            self._append_group_metadata(group, {})
            self.timeline.complete(group.group_id, "classic", group.generation_id, {},
                                   "the group is Empty: no member rejoined")
            return
        for member in list(group.members.values()):
            self._complete_join(group, member, self._join_response(group, member.member_id))
            self._schedule_heartbeat(group, member.member_id, member.session_timeout_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        generation = group.generation_id
        group_id = group.group_id
        self.ctx.schedule(("sync", group_id), self.ctx.now + self._rebalance_timeout(group),
                          lambda: self._expire_pending_sync(group_id, generation))

    def _expire_pending_sync(self, group_id: str, generation: int) -> None:
        group = self.groups.get(group_id)
        if group is None or group.generation_id != generation:
            return
        if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            for member_id in list(group.pending_sync_members):
                self._remove_member(group, member_id, "rebalance-timeout",
                                    "did not send SyncGroup within the rebalance timeout")
            self._prepare_rebalance(group)

    def _complete_join(self, group: ClassicGroup, member: ClassicGroupMember, resp: m.JoinGroupResponse) -> bool:
        if not member.awaiting_join:
            return False
        if member.join_token is not None:
            self.ctx.respond(member.join_token, resp)
        member.awaiting_join = False
        member.join_token = None
        group.num_awaiting_join -= 1
        return True

    def _complete_sync(self, group: ClassicGroup, member: ClassicGroupMember, resp: m.SyncGroupResponse) -> bool:
        if not member.awaiting_sync:
            return False
        if member.sync_token is not None:
            self.ctx.respond(member.sync_token, resp)
        member.awaiting_sync = False
        member.sync_token = None
        return True

    def _remove_member(self, group: ClassicGroup, member_id: str, cause: str | None = None,
                       detail: str = "") -> None:
        """Remove a member (or a pending member id), answering whatever it still has parked; `cause`:
        why, for the timeline (a pending id never joined: nothing to report)."""
        member = group.members.get(member_id)
        if member is not None and cause is not None:
            self._event(group, "member-left", cause, member_id, detail)
        if member is not None:
            self._complete_join(group, member, m.JoinGroupResponse(ErrorCode.unknown_member_id))
            self._complete_sync(group, member, m.SyncGroupResponse(ErrorCode.unknown_member_id))
        group.remove(member_id)
        self.ctx.cancel(("heartbeat", group.group_id, member_id))

    def _remove_member_and_update_group(self, group: ClassicGroup, member_id: str, cause: str,
                                        detail: str = "") -> None:
        self._remove_member(group, member_id, cause, detail)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group)
        elif group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
            self._complete_join_phase(group)

    def expire_member(self, group_id: str, member_id: str) -> ErrorCode:
        """The test kit's session timeout, now (rules at the top)."""
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None:
            return self.consumer.expire_member(consumer_group, member_id)
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.group_id_not_found
        if group.is_pending_member(member_id):
            self._expire_heartbeat(group_id, member_id)
            return ErrorCode.none
        if member_id not in group.members:
            return ErrorCode.unknown_member_id
        self._remove_member_and_update_group(group, member_id, "session-timeout", "expire_member (test kit)")
        return ErrorCode.none

    def force_rebalance(self, group_id: str) -> ErrorCode:
        """The test kit's rebalance on demand (rules at the top)."""
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None:
            self.consumer.force_rebalance(consumer_group)
            return ErrorCode.none
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.group_id_not_found
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._event(group, "rebalance-forced", "forced", detail="force_rebalance (test kit)")
            self._prepare_rebalance(group)
        return ErrorCode.none

    def _schedule_heartbeat(self, group: ClassicGroup, member_id: str, timeout_ms: int) -> None:
        group_id = group.group_id
        self.ctx.schedule(("heartbeat", group_id, member_id), self.ctx.now + timeout_ms,
                          lambda: self._expire_heartbeat(group_id, member_id))

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return
        if group.is_pending_member(member_id):
            group.remove(member_id)
            if group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
                self._complete_join_phase(group)
            return
        member = group.members.get(member_id)
        if member is not None and not member.has_satisfied_heartbeat():
            detail = (f"new member did not complete its join within {self.ctx.config.group_new_member_join_timeout_ms} ms"
                      if member.is_new else f"no heartbeat for {member.session_timeout_ms} ms")
            self._remove_member_and_update_group(group, member_id, "session-timeout", detail)

    # === SyncGroup ==================================================================================

    def sync(self, req: m.SyncGroupRequest) -> None:
        def fail(error: ErrorCode) -> None:
            self.ctx.respond(req.token, m.SyncGroupResponse(error))

        if not self.ctx.active:
            return fail(ErrorCode.coordinator_not_available)
        consumer_group = self.consumer.groups.get(req.group_id)
        if consumer_group is not None:
            if not consumer_group.members:
                return fail(ErrorCode.unknown_member_id)
            return self.ctx.respond(req.token, self.consumer.classic_sync(consumer_group, req))
        group = self.groups.get(req.group_id)
        if group is None:
            return fail(ErrorCode.unknown_member_id)
        if group.is_in(GroupState.DEAD):
            return fail(ErrorCode.coordinator_not_available)
        error = group.validate_member(req.member_id, req.group_instance_id)
        if error is not None:
            return fail(error)
        if req.generation_id != group.generation_id:
            return fail(ErrorCode.illegal_generation)
        if _inconsistent(req.protocol_type, group.protocol_type) or \
                _inconsistent(req.protocol_name, group.protocol_name):
            return fail(ErrorCode.inconsistent_group_protocol)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return fail(ErrorCode.rebalance_in_progress)
        member = group.member(req.member_id)
        if group.is_in(GroupState.STABLE):
            self._remove_pending_sync_member(group, req.member_id)
            return self.ctx.respond(req.token, m.SyncGroupResponse(ErrorCode.none, member.assignment,
                                                                group.protocol_type, group.protocol_name))
        # CompletingRebalance: park; the leader's assignment answers everyone
        if member.awaiting_sync and member.sync_token is not None and member.sync_token != req.token:
            self.ctx.respond(member.sync_token, m.SyncGroupResponse(ErrorCode.rebalance_in_progress))
        member.awaiting_sync = True
        member.sync_token = req.token
        self._remove_pending_sync_member(group, req.member_id)
        if group.is_leader(req.member_id):
            assignment = {mid: b"" for mid in group.members}
            for mid, data in req.assignments:
                if mid in assignment:
                    assignment[mid] = data
            self._append_group_metadata(group, assignment)
            for mid, mem in group.members.items():
                mem.assignment = assignment[mid]
            self._propagate_assignment(group, ErrorCode.none)
            group.transition_to(GroupState.STABLE, self.ctx.now)
            self.timeline.complete(group.group_id, "classic", group.generation_id, _classic_owners(group))

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            if not group.pending_sync_members:
                self.ctx.cancel(("sync", group.group_id))
        else:
            self.ctx.cancel(("sync", group.group_id))

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        ok = error is ErrorCode.none
        for member in list(group.members.values()):
            resp = m.SyncGroupResponse(error, member.assignment, group.protocol_type if ok else None,
                                       group.protocol_name if ok else None)
            if self._complete_sync(group, member, resp):
                # a session that lapsed while parked was ignored; it starts again from here
                self._schedule_heartbeat(group, member.member_id, member.session_timeout_ms)

    def _reset_and_propagate_assignment_with_error(self, group: ClassicGroup, error: ErrorCode) -> None:
        if not group.is_in(GroupState.COMPLETING_REBALANCE):
            raise IllegalStateError(f"group {group.group_id} must be CompletingRebalance, is {group.state}")
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _append_group_metadata(self, group: ClassicGroup, assignment: Mapping[str, bytes]) -> None:
        members = tuple(
            MemberMetadata(mem.member_id, mem.group_instance_id, mem.client_id, mem.client_host,
                           mem.rebalance_timeout_ms, mem.session_timeout_ms,
                           mem.metadata(group.protocol_name), assignment.get(mid, b""))
            for mid, mem in group.members.items()
        ) if group.members and group.protocol_name is not None else ()
        self.ctx.append(GroupMetadataKey(group.group_id),
                        GroupMetadataValue(group.protocol_type or "", group.generation_id, group.protocol_name,
                                        group.leader_id, group.state_timestamp_ms, members))

    # === Heartbeat ==================================================================================

    def heartbeat(self, req: m.HeartbeatRequest) -> ErrorCode:
        if not self.ctx.active:
            return ErrorCode.coordinator_not_available
        consumer_group = self.consumer.groups.get(req.group_id)
        if consumer_group is not None:
            return self.consumer.classic_heartbeat(consumer_group, req)
        group = self.groups.get(req.group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        if group.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        error = group.validate_member(req.member_id, req.group_instance_id)
        if error is not None:
            return error
        if req.generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if group.is_in(GroupState.EMPTY):
            return ErrorCode.unknown_member_id
        member = group.member(req.member_id)
        self._schedule_heartbeat(group, req.member_id, member.session_timeout_ms)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    # === LeaveGroup =================================================================================

    def leave(self, req: m.LeaveGroupRequest) -> m.LeaveGroupResponse:
        if not self.ctx.active:
            return m.LeaveGroupResponse(ErrorCode.coordinator_not_available)
        consumer_group = self.consumer.groups.get(req.group_id)
        if consumer_group is not None:
            return m.LeaveGroupResponse(ErrorCode.none, tuple(self.consumer.classic_leave(consumer_group, req.members)))
        group = self.groups.get(req.group_id)
        if group is None:
            return m.LeaveGroupResponse(ErrorCode.unknown_member_id)
        if group.is_in(GroupState.DEAD):
            return m.LeaveGroupResponse(ErrorCode.coordinator_not_available)
        results: list[m.LeaveMemberResponse] = []
        for ident in req.members:
            error = ErrorCode.none
            if ident.member_id == m.UNKNOWN_MEMBER_ID:
                # administrative removal of a static member by its group.instance.id
                if group.has_static_member(ident.group_instance_id):
                    assert ident.group_instance_id is not None
                    self._remove_member(group, group.static_members[ident.group_instance_id], "leave-group",
                                        f"static instance {ident.group_instance_id} removed by an administrator"
                                        + (f"; reason: {ident.reason}" if ident.reason else ""))
                else:
                    error = ErrorCode.unknown_member_id
            elif group.is_pending_member(ident.member_id):
                self._remove_member(group, ident.member_id)
            else:
                error = group.validate_member(ident.member_id, ident.group_instance_id) or ErrorCode.none
                if error is ErrorCode.none:
                    self._remove_member(group, ident.member_id, leave_cause(ident.reason),
                                        f"reason: {ident.reason}" if ident.reason else "LeaveGroup")
            results.append(m.LeaveMemberResponse(ident.member_id, ident.group_instance_id, error))
        if any(r.error is ErrorCode.none for r in results):
            if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self._prepare_rebalance(group)
            elif group.is_in(GroupState.PREPARING_REBALANCE):
                self._maybe_complete_join_phase(group)
        return m.LeaveGroupResponse(ErrorCode.none, tuple(results))

    # === ConsumerGroupHeartbeat (KIP-848) ===========================================================

    def flush_consumer_records(self) -> None:
        """Append the records of every consumer-group change of this step."""
        for key, value in self.consumer.drain_records():
            self.ctx.append(key, value)

    def flush_step(self, timeline: bool = True) -> None:
        """End of a step: complete the KIP-848 rebalances it finished, append the consumer groups' records,
        then the timeline's if the step writes anything (kaflite.coordinator.timeline's rules)."""
        self.consumer.complete_rebalances()
        self.flush_consumer_records()
        for key, value in self.timeline.drain(write=timeline and bool(self.ctx.out.records)):
            self.ctx.append(key, value)

    def consumer_heartbeat(self, req: ConsumerHeartbeatRequest, topics: Mapping[str, int],
                           topic_ids: Mapping[str, Any] | None = None) -> ConsumerHeartbeatResponse:
        """`topics`: partition count of every topic in the broker's metadata (`topic_ids`: their ids)."""
        if topic_ids:
            self.consumer.topic_ids.update(topic_ids)
        classic = self.groups.get(req.group_id)
        if not self.ctx.active:
            return ConsumerHeartbeatResponse(ErrorCode.coordinator_not_available)
        if classic is not None and classic.members and not (
                req.member_epoch == 0 and self._upgrade(classic, topics)):
            return ConsumerHeartbeatResponse(ErrorCode.group_id_not_found,
                                             error_message=f"Group {req.group_id} is not a consumer group.")
        if classic is not None and not classic.members and req.member_epoch == 0:
            # an empty classic group is replaced by the consumer group (its record tombstoned, as Kafka)
            self.ctx.append(GroupMetadataKey(req.group_id), None)
            self.groups.pop(req.group_id, None)
        return self.consumer.heartbeat(req, topics)

    # === online migration (kaflite.coordinator.group_migration) =====================================

    def _upgrade(self, classic: ClassicGroup, topics: Mapping[str, int]) -> bool:
        """Convert a non-empty classic group into a consumer group; False when not allowed."""
        config = self.ctx.config
        if not can_upgrade(config.consumer_migration_policy, classic, config.consumer_max_size):
            return False
        try:
            converted = consumer_group_from_classic(classic, topics, self.consumer.assignors[0])
        except MigrationError:
            return False
        group_id = classic.group_id
        for member in list(classic.members.values()):
            # parked requests: a new rebalance is coming, rejoin (now as classic members of the consumer group)
            self._complete_join(classic, member, m.JoinGroupResponse(ErrorCode.rebalance_in_progress,
                                                                     member_id=member.member_id))
            self._complete_sync(classic, member, m.SyncGroupResponse(ErrorCode.rebalance_in_progress))
            self.ctx.cancel(("heartbeat", group_id, member.member_id))
        for member_id in classic.pending_join_members:
            self.ctx.cancel(("heartbeat", group_id, member_id))
        self.ctx.cancel(("join", group_id))
        self.ctx.cancel(("sync", group_id))
        self.ctx.append(GroupMetadataKey(group_id), None)  # the classic group's tombstone first
        self.groups.pop(group_id, None)
        self.consumer.adopt(converted)
        self.timeline.record(group_id, "protocol-upgraded", "protocol-migration", "consumer", converted.group_epoch,
                             detail="a consumer-protocol member joined: the classic group is now a consumer group")
        return True

    def _maybe_downgrade_after_replacement(self, group: ConsumerGroup) -> bool:
        """A static classic member took the last consumer-protocol member's place: downgrade, no rebalance."""
        config = self.ctx.config
        if not can_downgrade_after_replacement(config.consumer_migration_policy, group, config.group_max_size):
            return False
        self._convert_to_classic(group, "")
        return True

    def _convert_to_classic(self, group: ConsumerGroup, leaving_member_id: str) -> ClassicGroup:
        classic = classic_group_from_consumer(group, leaving_member_id, self.ctx.now)
        self.consumer.cancel_timers(group)
        self.consumer.drop(group.group_id)
        self.flush_consumer_records()  # the consumer group's tombstones before the classic record
        self.groups[group.group_id] = classic
        self._append_group_metadata(classic, {mid: mem.assignment for mid, mem in classic.members.items()})
        for member in classic.members.values():
            self._schedule_heartbeat(classic, member.member_id, member.session_timeout_ms)
        return classic

    def _maybe_downgrade(self, group: ConsumerGroup, leaving_member_id: str) -> bool:
        """The consumer-protocol member `leaving_member_id` goes: convert the group back to a classic group
        when only classic members remain and the policy allows it (else False: the caller removes it)."""
        config = self.ctx.config
        if not can_downgrade(config.consumer_migration_policy, group, leaving_member_id, config.group_max_size):
            return False
        classic = self._convert_to_classic(group, leaving_member_id)
        self.timeline.record(group.group_id, "protocol-downgraded", "protocol-migration", "classic",
                             classic.generation_id,
                             detail="the last consumer-protocol member left: the group is now a classic group")
        self._prepare_rebalance(classic)  # the members rejoin and their leader assigns
        return True

    # === admin ======================================================================================

    def describe_groups(self, group_ids: Iterable[str]) -> list[m.DescribedGroup]:
        out = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            cg = self.consumer.groups.get(group_id)
            if not self.ctx.active:
                out.append(m.DescribedGroup(group_id, ErrorCode.coordinator_load_in_progress, "", "", ""))
            elif cg is not None:
                # a KIP-848 group seen through the classic API: members with their partitions encoded
                # as a consumer-protocol Assignment, so classic tools can still show who owns what
                members = tuple(m.DescribedMember(mb.member_id, mb.instance_id, mb.client_id, mb.client_host, b"",
                                                  _assignment_bytes(mb.assigned))
                                for mb in cg.members.values())
                out.append(m.DescribedGroup(group_id, ErrorCode.none, cg.state, "consumer", cg.assignor, members))
            elif group is None or group.is_in(GroupState.DEAD):
                out.append(m.DescribedGroup(group_id, ErrorCode.none, GroupState.DEAD.value, "", ""))
            elif group.is_in(GroupState.STABLE):
                members = tuple(m.DescribedMember(mem.member_id, mem.group_instance_id, mem.client_id,
                                                  mem.client_host, mem.metadata(group.protocol_name),
                                                  mem.assignment) for mem in group.members.values())
                out.append(m.DescribedGroup(group_id, ErrorCode.none, group.state.value,
                                            group.protocol_type or "", group.protocol_name or "", members))
            else:  # metadata and assignments only mean something once the group is Stable
                members = tuple(m.DescribedMember(mem.member_id, mem.group_instance_id, mem.client_id,
                                                  mem.client_host, b"", b"") for mem in group.members.values())
                out.append(m.DescribedGroup(group_id, ErrorCode.none, group.state.value,
                                            group.protocol_type or "", "", members))
        return out

    def describe_consumer_groups(
        self, group_ids: Iterable[str]
    ) -> list[tuple[str, ErrorCode, str | None, ConsumerGroup | None]]:
        """ConsumerGroupDescribe (KIP-848): (group id, error, message, group). As Kafka, a group that does
        not exist or is a classic group answers GROUP_ID_NOT_FOUND."""
        out: list[tuple[str, ErrorCode, str | None, ConsumerGroup | None]] = []
        for group_id in group_ids:
            cg = self.consumer.groups.get(group_id)
            if not self.ctx.active:
                out.append((group_id, ErrorCode.coordinator_load_in_progress, None, None))
            elif cg is not None:
                out.append((group_id, ErrorCode.none, None, cg))
            elif group_id in self.groups and not self.groups[group_id].is_in(GroupState.DEAD):
                out.append((group_id, ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group.",
                            None))
            else:
                out.append((group_id, ErrorCode.group_id_not_found, f"Group {group_id} not found.", None))
        return out

    def list_groups(self, states: Iterable[str] = ()) -> list[m.ListedGroup]:
        wanted = {s.lower() for s in states}
        # one group per id (Kafka's groups map): a consumer group wins over a classic group of the same id
        listed = [m.ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
                  for g in self.groups.values()
                  if not g.is_in(GroupState.DEAD) and g.group_id not in self.consumer.groups
                  and (not wanted or g.state.value.lower() in wanted)]
        listed += [m.ListedGroup(g.group_id, "consumer", g.state, "consumer") for g in self.consumer.groups.values()
                   if not wanted or g.state.lower() in wanted]
        return listed


    def delete_group(self, group_id: str) -> ErrorCode | None:
        """Validate DeleteGroups for one group (None: it may go; its tombstones are the shard's to write,
        and applying them is what removes it: nothing changes here)."""
        if not self.ctx.active:
            return ErrorCode.coordinator_not_available
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None:  # Kafka's ConsumerGroup.validateDeleteGroup: only an empty one goes
            return ErrorCode.non_empty_group if consumer_group.members else None
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found
        return group.validate_delete()


def _topics(protocols: tuple[m.Protocol, ...]) -> list[str] | None:
    """The topics of a consumer member's subscription (its first protocol's metadata), sorted; None when
    it is not a consumer subscription."""
    topics = subscription_topics(protocols[0].metadata) if protocols else None
    return None if topics is None else sorted(topics)


def _classic_owners(group: ClassicGroup) -> dict[tuple[str, int], str] | None:
    """Who owns which partition in a classic group (None unless its assignments are consumer-protocol ones)."""
    if group.protocol_type != "consumer":
        return None if group.members else {}
    out: dict[tuple[str, int], str] = {}
    for mid, mem in group.members.items():
        partitions = assignment_partitions(mem.assignment)
        if partitions is None:
            return None
        for topic, ps in partitions.items():
            for p in ps:
                out[(topic, p)] = mid
    return out


def _assignment_bytes(assigned: Mapping[str, Iterable[int]]) -> bytes:
    """A version-0 consumer-protocol Assignment of a KIP-848 member's partitions (for classic tools)."""
    tps = [TopicPartition(t, p) for t, ps in assigned.items() for p in sorted(ps)]
    return encode_assignment(ConsumerAssignment(tps), version=0)


def _inconsistent(given: str | None, current: str | None) -> bool:
    return given is not None and current is not None and given != current


def _replace(req: m.JoinGroupRequest, **changes: Any) -> m.JoinGroupRequest:
    return dataclasses.replace(req, **changes)
