"""A classic group and its members: the data and the rules that only look at one group.

Rules kept here (Kafka's ClassicGroup):
- the first member added to a group without a leader becomes leader; when the leader is removed the
  first remaining member (our map order: insertion order) takes over;
- protocol vote: candidates are the protocols every member supports; each member votes for its first
  candidate; most votes wins (a tie goes to the first protocol in Java HashMap order, as in Kafka);
- a new member is accepted when the group is Empty (any non-empty protocol type and protocol list) or
  when its protocol type matches and at least one of its protocols is supported by every member;
- the join phase is complete when every member awaits a JoinGroup answer and no member id is pending;
- commits are validated against member id, group.instance.id and generation (fencing).
Nothing here reads a clock: the coordinator passes `now_ms` in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field

from kaflite.protocol.errors import ErrorCode

from .messages import JoinGroupMember, Protocol
from .offsets_topic import java_string_hashcode
from .state import GroupState, IllegalStateError, check_transition

CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass(slots=True)
class ClassicGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    assignment: bytes = b""
    join_token: Hashable | None = None  # a parked JoinGroup (None: not awaiting join)
    sync_token: Hashable | None = None  # a parked SyncGroup
    awaiting_join: bool = False
    awaiting_sync: bool = False
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> list[str]:
        return [p.name for p in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for p in self.protocols:
            if p.name == protocol:
                return p.metadata
        return b""

    def matches(self, protocols: tuple[Protocol, ...]) -> bool:
        """Same protocols, same order, same metadata: rejoining with this changes nothing."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        for name in self.protocol_names():
            if name in candidates:
                return name
        raise IllegalStateError(f"member {self.member_id} does not support any of the candidates {candidates}")

    def has_satisfied_heartbeat(self) -> bool:
        # A new member expires even while parked in JoinGroup (it cannot heartbeat without an id);
        # an old member parked in a rebalance counts as alive.
        if self.is_new:
            return False
        return self.awaiting_join or self.awaiting_sync


def _java_hashmap_order(keys: list[str]) -> list[str]:
    """Iteration order of a java.util.HashMap<String, _> filled with `keys` in this order."""
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(k: str) -> int:
        h = java_string_hashcode(k) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(keys, key=bucket)  # sorted() is stable: insertion order inside a bucket


@dataclass(slots=True)
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    previous_state: GroupState | None = None
    state_timestamp_ms: int = -1
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, ClassicGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_join_members: set[str] = field(default_factory=set)  # ids handed out with MEMBER_ID_REQUIRED
    pending_sync_members: set[str] = field(default_factory=set)
    supported_protocols: Counter[str] = field(default_factory=Counter)
    num_awaiting_join: int = 0
    new_member_added: bool = False  # lets the initial rebalance delay extend itself

    # --- state ------------------------------------------------------------------------------------

    def is_in(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        check_transition(self.state, state, self.group_id)
        self.previous_state = self.state
        self.state = state
        self.state_timestamp_ms = now_ms

    # --- membership -------------------------------------------------------------------------------

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def member(self, member_id: str) -> ClassicGroupMember:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def has_static_member(self, instance_id: str | None) -> bool:
        return instance_id is not None and instance_id in self.static_members

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def size(self) -> int:
        return len(self.members)

    def add(self, member: ClassicGroupMember, join_token: Hashable | None = None, awaiting: bool = True) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names())
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        if awaiting:
            member.awaiting_join = True
            member.join_token = join_token
            self.num_awaiting_join += 1
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> ClassicGroupMember | None:
        removed = self.members.pop(member_id, None)
        if removed is not None:
            self.supported_protocols.subtract(removed.protocol_names())
            self.supported_protocols += Counter()  # drop zero counts
            if removed.awaiting_join:
                self.num_awaiting_join -= 1
            if removed.group_instance_id is not None and \
                    self.static_members.get(removed.group_instance_id) == member_id:
                del self.static_members[removed.group_instance_id]
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return removed

    def update_member(self, member: ClassicGroupMember, protocols: tuple[Protocol, ...],
                      rebalance_timeout_ms: int, session_timeout_ms: int,
                      join_token: Hashable | None, awaiting: bool) -> None:
        self.supported_protocols.subtract(member.protocol_names())
        self.supported_protocols += Counter()
        member.protocols = protocols
        self.supported_protocols.update(member.protocol_names())
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if awaiting and not member.awaiting_join:
            self.num_awaiting_join += 1
        elif not awaiting and member.awaiting_join:
            self.num_awaiting_join -= 1
        member.awaiting_join = awaiting
        member.join_token = join_token if awaiting else None

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> ClassicGroupMember:
        """Give a static member's slot (assignment included) to a new member id.

        The caller fences the old id's parked JoinGroup/SyncGroup before calling this."""
        old = self.members.pop(old_member_id, None)
        if old is None:
            raise IllegalStateError(f"cannot replace non-existing member id {old_member_id}")
        if old.awaiting_join:
            self.num_awaiting_join -= 1
        new = ClassicGroupMember(new_member_id, old.group_instance_id, old.client_id, old.client_host,
                                 old.rebalance_timeout_ms, old.session_timeout_ms, old.protocol_type,
                                 old.protocols, old.assignment)
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        self.pending_sync_members.discard(old_member_id)
        return new

    def validate_member(self, member_id: str, instance_id: str | None) -> ErrorCode | None:
        """UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID, or None when (member id, instance id) is current."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                return ErrorCode.unknown_member_id
            if existing != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in self.members:
            return ErrorCode.unknown_member_id
        return None

    # --- rebalance rules --------------------------------------------------------------------------

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_join_members

    def not_yet_rejoined_members(self) -> list[ClassicGroupMember]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        """At join completion the leader must be a member that rejoined; False when nobody rejoined."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n}

    def supports_protocols(self, protocol_type: str, protocols: list[str]) -> bool:
        if self.is_in(GroupState.EMPTY):
            return bool(protocol_type) and bool(protocols)
        n = len(self.members)
        return self.protocol_type == protocol_type and \
            any(self.supported_protocols.get(name, 0) == n for name in protocols)

    def select_protocol(self) -> str:
        if not self.members:
            raise IllegalStateError(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        best: str | None = None
        for name in _java_hashmap_order(list(votes)):
            if best is None or votes[name] > votes[best]:
                best = name
        assert best is not None
        return best

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def current_members_for_leader(self) -> tuple[JoinGroupMember, ...]:
        if self.is_in(GroupState.DEAD) or self.is_in(GroupState.PREPARING_REBALANCE):
            raise IllegalStateError(f"group {self.group_id} has no current members in state {self.state}")
        return tuple(JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                     for m in self.members.values())

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation_id: int,
                               transactional: bool = False) -> ErrorCode | None:
        if self.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if generation_id < 0 and self.is_in(GroupState.EMPTY):
            return None  # admin client or a consumer that assigns partitions itself
        if generation_id >= 0 or member_id or instance_id is not None:
            error = self.validate_member(member_id, instance_id)
            if error is not None:
                return error
            if generation_id != self.generation_id:
                return ErrorCode.illegal_generation
        elif not transactional and not self.is_in(GroupState.EMPTY):
            # no member id and no generation (v0-style) is only accepted while nobody owns partitions
            return ErrorCode.unknown_member_id
        if not transactional and self.is_in(GroupState.COMPLETING_REBALANCE):
            # the member is valid but has not got its assignment yet: let it finish the rebalance first
            return ErrorCode.rebalance_in_progress
        return None

    def validate_delete(self) -> ErrorCode | None:
        if self.is_in(GroupState.DEAD):
            return ErrorCode.group_id_not_found
        if self.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE):
            return ErrorCode.non_empty_group
        return None

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE
