"""A share group's membership as `__consumer_offsets` records, and back (Kafka's share-group records of the
group-coordinator module, as read in apache/kafka's ShareGroup*.json: keys non-flexible with int16-length
strings, values version 0 of a flexible schema, assignments by topic id).

Rules (tests/coordinator/share/test_membership_records.py):
- the key version says what a record is:

      key 9   ShareGroupPartitionMetadataKey          {group}          value {topics [{id, name, partitions,
                                                                               partition racks []}]}
      key 10  ShareGroupMemberMetadataKey             {group, member}  value {rack id?, client id,
                                                                               client host, subscribed names []}
      key 11  ShareGroupMetadataKey                   {group}          value {epoch int32}
      key 12  ShareGroupTargetAssignmentMetadataKey   {group}          value {assignment epoch int32}
      key 13  ShareGroupTargetAssignmentMemberKey     {group, member}  value {partitions [{topic id, [int32]}]}
      key 14  ShareGroupCurrentMemberAssignmentKey    {group, member}  value {member epoch, previous epoch,
                                                                               state int8, assigned [...]}
      key 15  ShareGroupStatePartitionMetadataKey     {group}          value {initializing [{id, name,
                                                                               [int32]}], initialized [same],
                                                                               deleting [{id, name}]}

  (key 15 in Kafka 4.1+'s layout: the share partitions whose state the share coordinator is initializing
  or has initialized; kaflite writes no deleting topics, a topic's state being deleted in one step)

  a null value is a tombstone; unknown tagged fields are skipped when read;
- `group_records(group, ids)` is every record of a group's state (none for a missing group; key 15 only
  while some partition is initializing or initialized, topics without an id in `ids` left out);
  `group_records(group, ids, members)` only the group's own records (keys 9, 11, 12, 15) and those of
  `members` (keys 10, 13, 14; a member not in the group has none), which are exactly the records with a
  key in `record_keys(group id, members)`: a write of a heartbeat that changed one member's records
  builds O(topics + 1) records, not O(members);
  `diff(old, new)` the records that turn the written records `old` into `new`: tombstones for keys that are
  gone (member keys before the group's own, the group epoch last, as Kafka deletes a group), then the changed
  values, so compaction keeps exactly the live state; `diff(old, new, covered)` does so for the keys in
  `covered` only (`new` holding the records of those keys: a partial `group_records`), every other
  record of `old` kept as written;
- `apply(store, key, value)` replays one record into `store` (group id -> its records), a tombstone
  dropping the key and a group without records dropping out, so replaying `diff`s in order gives `new`;
- `group_from_records(records, names, deadline_ms)` rebuilds the ShareGroup: epochs, members with their
  subscriptions, client ids, racks, targets and assignments (topic ids turned back into names with `names`,
  an id not in it dropped), every member's session deadline `deadline_ms` (Kafka restarts session timers
  at load); `group_from_records(group_records(g, ids), names-of-ids, d)` equals `g` with deadlines `d`.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from kaflite.coordinator.consumer_records import (
    ConsumerRecordFormatError,
    PartitionMetadataTopics,
    TopicPartitions,
    _compact_string,
    _legacy_string,
    _partition_metadata,
    _Reader,
    _topic_partitions,
)
from kaflite.coordinator.share.group import ShareGroup, ShareMember
from kaflite.protocol.varint import uvarint

__all__ = ["KEY_TYPES", "SHARE_KEY_VERSIONS", "VALUE_TYPES", "ShareRecordKey", "ShareRecordValue", "ShareRecords", "apply", "decode_share_key",
           "decode_share_value", "diff", "encode_share_key", "encode_share_value", "group_from_records",
           "group_records", "record_keys"]


@dataclass(frozen=True, slots=True)
class ShareGroupPartitionMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ShareGroupPartitionMetadataValue:
    topics: PartitionMetadataTopics  # (topic id, name, partition count)


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataKey:
    group: str
    member: str


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataValue:
    epoch: int


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberKey:
    group: str
    member: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberValue:
    partitions: TopicPartitions


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentKey:
    group: str
    member: str


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # Kafka's MemberState byte: share members are always STABLE (0), nothing is revoked
    assigned: TopicPartitions


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataKey:
    group: str


TopicPartitionsInfo = tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]  # (topic id, name, partitions)


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataValue:
    initializing: TopicPartitionsInfo
    initialized: TopicPartitionsInfo
    deleting: tuple[tuple[uuid.UUID, str], ...] = ()


ShareRecordKey = (ShareGroupPartitionMetadataKey | ShareGroupMemberMetadataKey | ShareGroupMetadataKey
                  | ShareGroupTargetAssignmentMetadataKey | ShareGroupTargetAssignmentMemberKey
                  | ShareGroupCurrentMemberAssignmentKey | ShareGroupStatePartitionMetadataKey)
ShareRecordValue = (ShareGroupPartitionMetadataValue | ShareGroupMemberMetadataValue | ShareGroupMetadataValue
                    | ShareGroupTargetAssignmentMetadataValue | ShareGroupTargetAssignmentMemberValue
                    | ShareGroupCurrentMemberAssignmentValue | ShareGroupStatePartitionMetadataValue)
ShareRecords = dict[ShareRecordKey, ShareRecordValue]

KEY_TYPES: dict[type, int] = {
    ShareGroupPartitionMetadataKey: 9,
    ShareGroupMemberMetadataKey: 10,
    ShareGroupMetadataKey: 11,
    ShareGroupTargetAssignmentMetadataKey: 12,
    ShareGroupTargetAssignmentMemberKey: 13,
    ShareGroupCurrentMemberAssignmentKey: 14,
    ShareGroupStatePartitionMetadataKey: 15,
}
SHARE_KEY_VERSIONS = frozenset(KEY_TYPES.values())
VALUE_TYPES = (ShareGroupPartitionMetadataValue, ShareGroupMemberMetadataValue, ShareGroupMetadataValue,
               ShareGroupTargetAssignmentMetadataValue, ShareGroupTargetAssignmentMemberValue,
               ShareGroupCurrentMemberAssignmentValue, ShareGroupStatePartitionMetadataValue)
_BY_VERSION = {v: t for t, v in KEY_TYPES.items()}
_NO_ID = uuid.UUID(int=0)
_MEMBER_KEYS = (ShareGroupMemberMetadataKey, ShareGroupTargetAssignmentMemberKey,
                ShareGroupCurrentMemberAssignmentKey)


# --- bytes ----------------------------------------------------------------------------------------

def encode_share_key(key: ShareRecordKey) -> bytes:
    out = struct.pack(">h", KEY_TYPES[type(key)]) + _legacy_string(key.group)
    if isinstance(key, _MEMBER_KEYS):
        out += _legacy_string(key.member)
    return out


def encode_share_value(value: ShareRecordValue) -> bytes:
    out = bytearray(struct.pack(">h", 0))
    if isinstance(value, (ShareGroupMetadataValue, ShareGroupTargetAssignmentMetadataValue)):
        out += struct.pack(">i", value.epoch if isinstance(value, ShareGroupMetadataValue)
                           else value.assignment_epoch)
    elif isinstance(value, ShareGroupPartitionMetadataValue):
        out += _partition_metadata(value.topics)
    elif isinstance(value, ShareGroupMemberMetadataValue):
        out += _compact_string(value.rack_id) + _compact_string(value.client_id)
        out += _compact_string(value.client_host) + uvarint(len(value.subscribed_topic_names) + 1)
        for name in value.subscribed_topic_names:
            out += _compact_string(name)
    elif isinstance(value, ShareGroupTargetAssignmentMemberValue):
        out += _topic_partitions(value.partitions)
    elif isinstance(value, ShareGroupStatePartitionMetadataValue):
        for infos in (value.initializing, value.initialized):
            out += uvarint(len(infos) + 1)
            for topic_id, name, partitions in infos:
                out += topic_id.bytes + _compact_string(name) + uvarint(len(partitions) + 1)
                out += b"".join(struct.pack(">i", p) for p in partitions) + b"\x00"
        out += uvarint(len(value.deleting) + 1)
        for topic_id, name in value.deleting:
            out += topic_id.bytes + _compact_string(name) + b"\x00"
    else:
        out += struct.pack(">iib", value.member_epoch, value.previous_member_epoch, value.state)
        out += _topic_partitions(value.assigned)
    out += b"\x00"  # the value's tagged fields
    return bytes(out)


def decode_share_key(version: int, data: bytes) -> ShareRecordKey:
    """The key of `data` (whose first two bytes are `version`, one of 9-14)."""
    kind = _BY_VERSION.get(version)
    if kind is None:
        raise ConsumerRecordFormatError(f"unsupported share-group key version {version}")
    r = _Reader(data)
    r.take(2)
    group = r.legacy_string()
    if kind in _MEMBER_KEYS:
        return kind(group, r.legacy_string())  # type: ignore[no-any-return]
    return kind(group)  # type: ignore[no-any-return]


def decode_share_value(key: ShareRecordKey, data: bytes | None) -> ShareRecordValue | None:
    if data is None:
        return None
    r = _Reader(data)
    (version,) = r.unpack(">h")
    if version != 0:
        raise ConsumerRecordFormatError(f"unsupported value version {version} for {type(key).__name__}")
    value: ShareRecordValue
    if isinstance(key, ShareGroupMetadataKey):
        value = ShareGroupMetadataValue(r.unpack(">i")[0])
    elif isinstance(key, ShareGroupTargetAssignmentMetadataKey):
        value = ShareGroupTargetAssignmentMetadataValue(r.unpack(">i")[0])
    elif isinstance(key, ShareGroupPartitionMetadataKey):
        value = ShareGroupPartitionMetadataValue(r.partition_metadata())
    elif isinstance(key, ShareGroupMemberMetadataKey):
        rack_id, client_id, client_host = r.compact_string(), r.string(), r.string()
        value = ShareGroupMemberMetadataValue(rack_id, client_id, client_host,
                                              tuple(r.string() for _ in range(r.array())))
    elif isinstance(key, ShareGroupTargetAssignmentMemberKey):
        value = ShareGroupTargetAssignmentMemberValue(r.topic_partitions())
    elif isinstance(key, ShareGroupStatePartitionMetadataKey):
        lists: list[TopicPartitionsInfo] = []
        for _ in range(2):
            infos = []
            for _ in range(r.array()):
                topic_id, name = r.uuid(), r.string()
                infos.append((topic_id, name, tuple(r.unpack(">i")[0] for _ in range(r.array()))))
                r.tagged_fields()
            lists.append(tuple(infos))
        deleting = []
        for _ in range(r.array()):
            deleting.append((r.uuid(), r.string()))
            r.tagged_fields()
        value = ShareGroupStatePartitionMetadataValue(lists[0], lists[1], tuple(deleting))
    else:
        epoch, previous, state = r.unpack(">iib")
        value = ShareGroupCurrentMemberAssignmentValue(epoch, previous, state, r.topic_partitions())
    r.tagged_fields()
    return value


# --- state <-> records ----------------------------------------------------------------------------

def _by_id(a: Mapping[str, frozenset[int]], ids: Mapping[str, uuid.UUID]) -> TopicPartitions:
    return tuple(sorted(((ids[t], tuple(sorted(ps))) for t, ps in a.items() if ps and t in ids),
                        key=lambda x: x[0].bytes))


def _by_name(tps: TopicPartitions, names: Mapping[uuid.UUID, str]) -> dict[str, frozenset[int]]:
    return {names[i]: frozenset(ps) for i, ps in tps if i in names and ps}


def group_records(group: ShareGroup | None, ids: Mapping[str, uuid.UUID],
                  members: Collection[str] | None = None) -> ShareRecords:
    """Every record of the group's state, in the order Kafka writes a new group's; none for None.
    `members`: only the group's own records and those members' (see the rules)."""
    if group is None:
        return {}
    g = group.group_id
    out: ShareRecords = {}
    if members is None:
        listed = sorted(group.members.items())
    else:
        listed = sorted((m, group.members[m]) for m in members if m in group.members)
    for mid, mb in listed:
        out[ShareGroupMemberMetadataKey(g, mid)] = ShareGroupMemberMetadataValue(
            mb.rack_id, mb.client_id, mb.client_host, tuple(sorted(mb.subscribed)))
    out[ShareGroupPartitionMetadataKey(g)] = ShareGroupPartitionMetadataValue(
        # a subscribed topic that does not exist (count 0) has no id: the nil id keeps its name and count
        tuple((ids.get(t, _NO_ID), t, n) for t, n in sorted(group.topics_seen.items())))
    out[ShareGroupMetadataKey(g)] = ShareGroupMetadataValue(group.group_epoch)
    for mid, _mb in listed:
        out[ShareGroupTargetAssignmentMemberKey(g, mid)] = ShareGroupTargetAssignmentMemberValue(
            _by_id(group.target.get(mid, {}), ids))
    out[ShareGroupTargetAssignmentMetadataKey(g)] = ShareGroupTargetAssignmentMetadataValue(group.assignment_epoch)
    initializing, initialized = _infos(group.initializing, ids), _infos(group.initialized, ids)
    if initializing or initialized:
        out[ShareGroupStatePartitionMetadataKey(g)] = ShareGroupStatePartitionMetadataValue(initializing,
                                                                                            initialized)
    for mid, mb in listed:
        # kaflite keeps no previous epoch for share members (nothing is revoked): the current one is written
        out[ShareGroupCurrentMemberAssignmentKey(g, mid)] = ShareGroupCurrentMemberAssignmentValue(
            mb.member_epoch, mb.member_epoch, 0, _by_id(mb.assigned, ids))
    return out


def _infos(parts: Mapping[str, frozenset[int]], ids: Mapping[str, uuid.UUID]) -> TopicPartitionsInfo:
    return tuple((ids[t], t, tuple(sorted(ps))) for t, ps in sorted(parts.items()) if ps and t in ids)


_GROUP_KEY_ORDER = (ShareGroupStatePartitionMetadataKey, ShareGroupTargetAssignmentMetadataKey,
                    ShareGroupPartitionMetadataKey, ShareGroupMetadataKey)


def record_keys(group_id: str, members: Iterable[str]) -> list[ShareRecordKey]:
    """The keys a `group_records(group, ids, members)` covers: the group's own and those of `members`."""
    keys: list[ShareRecordKey] = [kind(group_id) for kind in _GROUP_KEY_ORDER]
    for member in members:
        keys += [kind(group_id, member) for kind in _MEMBER_KEYS]
    return keys


def diff(old: Mapping[ShareRecordKey, ShareRecordValue], new: Mapping[ShareRecordKey, ShareRecordValue],
         covered: Iterable[ShareRecordKey] | None = None) -> list[tuple[ShareRecordKey, ShareRecordValue | None]]:
    """The records that turn `old` into `new`, over the keys in `covered` only when given (see the rules)."""
    gone = [k for k in (old if covered is None else covered) if k in old and k not in new]
    members = sorted((k for k in gone if isinstance(k, _MEMBER_KEYS)),
                     key=lambda k: (k.member, -KEY_TYPES[type(k)]))  # current assignment first, metadata last
    own = sorted((k for k in gone if not isinstance(k, _MEMBER_KEYS)),
                 key=lambda k: _GROUP_KEY_ORDER.index(type(k)))
    out: list[tuple[ShareRecordKey, ShareRecordValue | None]] = [(k, None) for k in members + own]
    out += [(k, v) for k, v in new.items() if old.get(k) != v]
    return out


def apply(store: dict[str, ShareRecords], key: ShareRecordKey, value: ShareRecordValue | None) -> None:
    """Replay one record into `store` (group id -> its live records)."""
    if value is None:
        records = store.get(key.group)
        if records is not None:
            records.pop(key, None)
            if not records:
                del store[key.group]
        return
    store.setdefault(key.group, {})[key] = value


def group_from_records(group_id: str, records: Mapping[ShareRecordKey, ShareRecordValue],
                       names: Mapping[uuid.UUID, str], deadline_ms: int) -> ShareGroup | None:
    """The group these records describe (None without its ShareGroupMetadata), members' deadlines
    `deadline_ms`."""
    meta = records.get(ShareGroupMetadataKey(group_id))
    if not isinstance(meta, ShareGroupMetadataValue):
        return None
    group = ShareGroup(group_id, group_epoch=meta.epoch)
    live_names = names  # key 15 by these only: a deleted topic's state is gone with it
    names = dict(names)
    for value in records.values():
        if isinstance(value, ShareGroupPartitionMetadataValue):
            group.topics_seen = {name: count for _i, name, count in value.topics}
            for topic_id, name, _c in value.topics:
                if topic_id != _NO_ID:
                    names.setdefault(topic_id, name)
        elif isinstance(value, ShareGroupTargetAssignmentMetadataValue):
            group.assignment_epoch = value.assignment_epoch
        elif isinstance(value, ShareGroupStatePartitionMetadataValue):
            # by the names of now: a topic deleted (its id gone) is dropped, as from the assignments
            group.initializing = {live_names[i]: frozenset(ps) for i, _n, ps in value.initializing
                                  if i in live_names and ps}
            group.initialized = {live_names[i]: frozenset(ps) for i, _n, ps in value.initialized
                                 if i in live_names and ps}
    for key, value in records.items():
        if isinstance(key, ShareGroupMemberMetadataKey) and isinstance(value, ShareGroupMemberMetadataValue):
            mb = group.members.setdefault(key.member, ShareMember(key.member, 0, frozenset(), deadline_ms))
            mb.rack_id, mb.client_id, mb.client_host = value.rack_id, value.client_id, value.client_host
            mb.subscribed = frozenset(value.subscribed_topic_names)
        elif isinstance(key, ShareGroupTargetAssignmentMemberKey) and isinstance(
                value, ShareGroupTargetAssignmentMemberValue):
            group.target[key.member] = _by_name(value.partitions, names)
        elif isinstance(key, ShareGroupCurrentMemberAssignmentKey) and isinstance(
                value, ShareGroupCurrentMemberAssignmentValue):
            mb = group.members.setdefault(key.member, ShareMember(key.member, 0, frozenset(), deadline_ms))
            mb.member_epoch = value.member_epoch
            mb.assigned = _by_name(value.assigned, names)
    # a member whose metadata record is gone (a tombstone replayed before its assignment's) is not a member
    live = {k.member for k in records if isinstance(k, ShareGroupMemberMetadataKey)}
    group.members = {m: mb for m, mb in sorted(group.members.items()) if m in live}
    group.target = {m: a for m, a in group.target.items() if m in live}
    return group
