"""A KIP-848 group as `__consumer_offsets` records, and back (Kafka's GroupCoordinatorRecordHelpers and
GroupMetadataManager.replay for consumer groups).

Rules:
- a group is the records of its state: group epoch (key 3), the partition counts its target was computed
  from (key 4, with topic ids), per member its metadata (key 5), the target assignment epoch (key 6), per
  member its target (key 7) and its current assignment, epochs and reconciliation state (key 8);
- a step writes only what changed since the group's last written records (`diff`): changed values, and
  tombstones for keys that are gone (newest kinds first, the group epoch last, as Kafka deletes a group),
  so compaction keeps exactly the live state;
- loading replays them into the same objects (`GroupLoader`), in log order, whichever record of a member
  comes first; assignments travel by topic id and are turned back into names with the ids of key 4.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from .consumer_group_state import Assignment, ClassicMemberMetadata, ConsumerGroup, ConsumerMember
from .consumer_records import (
    MEMBER_STATE_NAMES,
    MEMBER_STATES,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerRecordKey,
    ConsumerRecordValue,
    TopicPartitions,
)

GroupRecords = dict[ConsumerRecordKey, ConsumerRecordValue]


def _by_id(a: Mapping[str, frozenset[int]], ids: Mapping[str, uuid.UUID]) -> TopicPartitions:
    return tuple((ids[t], tuple(sorted(ps))) for t, ps in sorted(a.items()) if ps and t in ids)


def _by_name(tps: TopicPartitions, names: Mapping[uuid.UUID, str]) -> Assignment:
    return {names[i]: frozenset(ps) for i, ps in tps if i in names and ps}


def _member_value(mb: ConsumerMember) -> ConsumerGroupMemberMetadataValue:
    classic = None if mb.classic is None else (mb.classic.session_timeout_ms, mb.classic.protocols)
    return ConsumerGroupMemberMetadataValue(mb.instance_id, mb.rack_id, mb.client_id, mb.client_host, mb.subscribed,
                                            mb.subscribed_regex, mb.rebalance_timeout_ms, mb.server_assignor, classic)


def group_records(group: ConsumerGroup, ids: Mapping[str, uuid.UUID]) -> GroupRecords:
    """Every record of a group's current state, in the order Kafka writes a new group's."""
    g = group.group_id
    out: GroupRecords = {ConsumerGroupMetadataKey(g): ConsumerGroupMetadataValue(group.group_epoch)}
    out[ConsumerGroupPartitionMetadataKey(g)] = ConsumerGroupPartitionMetadataValue(
        tuple((ids[t], t, n) for t, n in sorted(group.topic_snapshot.items()) if t in ids))
    for mid, mb in group.members.items():
        out[ConsumerGroupMemberMetadataKey(g, mid)] = _member_value(mb)
    out[ConsumerGroupTargetAssignmentMetadataKey(g)] = ConsumerGroupTargetAssignmentMetadataValue(
        group.assignment_epoch)
    for mid in group.members:
        out[ConsumerGroupTargetAssignmentMemberKey(g, mid)] = ConsumerGroupTargetAssignmentMemberValue(
            _by_id(group.target.get(mid, {}), ids))
    for mid, mb in group.members.items():
        out[ConsumerGroupCurrentMemberAssignmentKey(g, mid)] = ConsumerGroupCurrentMemberAssignmentValue(
            mb.member_epoch, mb.previous_epoch, MEMBER_STATES[mb.state], _by_id(mb.assigned, ids),
            _by_id(mb.pending_revocation, ids))
    return out


def _group_level(group: ConsumerGroup, ids: Mapping[str, uuid.UUID]) -> GroupRecords:
    g = group.group_id
    return {
        ConsumerGroupMetadataKey(g): ConsumerGroupMetadataValue(group.group_epoch),
        ConsumerGroupPartitionMetadataKey(g): ConsumerGroupPartitionMetadataValue(
            tuple((ids[t], t, n) for t, n in sorted(group.topic_snapshot.items()) if t in ids)),
        ConsumerGroupTargetAssignmentMetadataKey(g): ConsumerGroupTargetAssignmentMetadataValue(
            group.assignment_epoch),
    }


def member_delta(group: ConsumerGroup, members: set[str], ids: Mapping[str, uuid.UUID]
                 ) -> tuple[GroupRecords, list[ConsumerRecordKey]]:
    """The group's own records and the records of `members` (present ones), and the keys of `members`
    that left (current assignment first, metadata last, as Kafka removes a member)."""
    g = group.group_id
    records = _group_level(group, ids)
    removed: list[ConsumerRecordKey] = []
    for mid in sorted(members):
        mb = group.members.get(mid)
        if mb is None:
            removed += [ConsumerGroupCurrentMemberAssignmentKey(g, mid), ConsumerGroupTargetAssignmentMemberKey(g, mid),
                        ConsumerGroupMemberMetadataKey(g, mid)]
            continue
        records[ConsumerGroupMemberMetadataKey(g, mid)] = _member_value(mb)
        records[ConsumerGroupTargetAssignmentMemberKey(g, mid)] = ConsumerGroupTargetAssignmentMemberValue(
            _by_id(group.target.get(mid, {}), ids))
        records[ConsumerGroupCurrentMemberAssignmentKey(g, mid)] = ConsumerGroupCurrentMemberAssignmentValue(
            mb.member_epoch, mb.previous_epoch, MEMBER_STATES[mb.state], _by_id(mb.assigned, ids),
            _by_id(mb.pending_revocation, ids))
    return records, removed


def diff(old: GroupRecords, new: GroupRecords) -> list[tuple[ConsumerRecordKey, ConsumerRecordValue | None]]:
    """The records that turn `old` into `new`: tombstones first (newest kinds first), then changes."""
    out: list[tuple[ConsumerRecordKey, ConsumerRecordValue | None]] = [
        (k, None) for k in reversed(list(old)) if k not in new]
    out += [(k, v) for k, v in new.items() if old.get(k) != v]
    return out


class GroupLoader:
    """Replays consumer-group records into `groups` (the manager's map) and learns topic ids."""

    def __init__(self, groups: dict[str, ConsumerGroup], ids: dict[str, uuid.UUID]) -> None:
        self.groups = groups
        self.ids = ids

    def _group(self, group_id: str) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ConsumerGroup(group_id)
        return group

    @staticmethod
    def _member(group: ConsumerGroup, member_id: str) -> ConsumerMember:
        member = group.members.get(member_id)
        if member is None:
            member = group.members[member_id] = ConsumerMember(member_id, None, "", "", -1)
        return member

    def replay(self, key: ConsumerRecordKey, value: ConsumerRecordValue | None) -> None:
        names = {i: t for t, i in self.ids.items()}
        if isinstance(key, ConsumerGroupMetadataKey):
            if value is None:
                self.groups.pop(key.group, None)
            elif isinstance(value, ConsumerGroupMetadataValue):
                self._group(key.group).group_epoch = value.epoch
            return
        if value is None:
            group_or_none = self.groups.get(key.group)
            if group_or_none is None:
                return
            if isinstance(key, ConsumerGroupMemberMetadataKey):
                group_or_none.members.pop(key.member, None)
            elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
                group_or_none.target.pop(key.member, None)
            return
        group = self._group(key.group)
        if isinstance(value, ConsumerGroupPartitionMetadataValue):
            group.topic_snapshot = {name: count for _i, name, count in value.topics}
            self.ids.update({name: topic_id for topic_id, name, _c in value.topics})
        elif isinstance(key, ConsumerGroupMemberMetadataKey) and isinstance(value, ConsumerGroupMemberMetadataValue):
            mb = self._member(group, key.member)
            mb.instance_id, mb.rack_id = value.instance_id, value.rack_id
            mb.client_id, mb.client_host = value.client_id, value.client_host
            mb.subscribed = value.subscribed_topic_names
            mb.subscribed_regex = value.subscribed_topic_regex
            mb.rebalance_timeout_ms = value.rebalance_timeout_ms
            mb.server_assignor = value.server_assignor
            classic = value.classic_member_metadata
            mb.classic = None if classic is None else ClassicMemberMetadata(classic[0], classic[1])
            if value.server_assignor:
                group.assignor = value.server_assignor
        elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
            group.assignment_epoch = value.assignment_epoch
        elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey) and isinstance(
                value, ConsumerGroupTargetAssignmentMemberValue):
            group.target[key.member] = _by_name(value.partitions, names)
        elif isinstance(key, ConsumerGroupCurrentMemberAssignmentKey) and isinstance(
                value, ConsumerGroupCurrentMemberAssignmentValue):
            mb = self._member(group, key.member)
            mb.member_epoch, mb.previous_epoch = value.member_epoch, value.previous_member_epoch
            mb.state = MEMBER_STATE_NAMES.get(value.state, "STABLE")
            mb.assigned = _by_name(value.assigned, names)
            mb.pending_revocation = _by_name(value.pending_revocation, names)
