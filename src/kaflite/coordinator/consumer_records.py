"""The KIP-848 consumer-group records of `__consumer_offsets`, byte for byte as Kafka 3.9 encodes them
(group-coordinator/src/main/resources/common/message/ConsumerGroup*.json).

Rules: the key version says what a record is, keys are non-flexible (int16-length strings), values are
version 0 of a flexible schema (an int16 version, then compact strings and arrays, uuids as 16 bytes, an
empty tagged-field section after every struct):

    key 3  ConsumerGroupMetadataKey                {group}          value {epoch int32}
    key 4  ConsumerGroupPartitionMetadataKey       {group}          value {topics [{id, name, partitions,
                                                                            partition racks []}]}
    key 5  ConsumerGroupMemberMetadataKey          {group, member}  value {instance id?, rack id?, client id,
                                                                            client host, subscribed names [],
                                                                            regex?, rebalance timeout,
                                                                            server assignor?}
    key 6  ConsumerGroupTargetAssignmentMetadataKey {group}         value {assignment epoch int32}
    key 7  ConsumerGroupTargetAssignmentMemberKey  {group, member}  value {partitions [{topic id, [int32]}]}
    key 8  ConsumerGroupCurrentMemberAssignmentKey {group, member}  value {member epoch, previous epoch,
                                                                            state int8, assigned [...],
                                                                            pending revocation [...]}

A null value is a tombstone. Key 5's value carries tag 0, ClassicMemberMetadata {session timeout int32,
supported protocols [{name, metadata bytes}]}, for a member that still uses the classic protocol (a
classic group upgraded online, KIP-848); other unknown tagged fields are skipped when read.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from kaflite.protocol.varint import uvarint

TopicPartitions = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]  # (topic id, partitions), by topic id
PartitionMetadataTopics = tuple[tuple[uuid.UUID, str, int], ...]  # (topic id, name, partition count)

# Kafka's MemberState byte values
MEMBER_STATES = {"STABLE": 0, "UNREVOKED_PARTITIONS": 1, "UNRELEASED_PARTITIONS": 2}
MEMBER_STATE_NAMES = {v: k for k, v in MEMBER_STATES.items()}


class ConsumerRecordFormatError(ValueError):
    """A consumer-group record that cannot be decoded."""


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    epoch: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataValue:
    topics: PartitionMetadataTopics


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey:
    group: str
    member: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    # tag 0: (session timeout ms, ((protocol name, metadata), ...)) of a classic-protocol member
    classic_member_metadata: tuple[int, tuple[tuple[str, bytes], ...]] | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group: str
    member: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    partitions: TopicPartitions


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group: str
    member: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: TopicPartitions
    pending_revocation: TopicPartitions


ConsumerRecordKey = (ConsumerGroupMetadataKey | ConsumerGroupPartitionMetadataKey | ConsumerGroupMemberMetadataKey
                     | ConsumerGroupTargetAssignmentMetadataKey | ConsumerGroupTargetAssignmentMemberKey
                     | ConsumerGroupCurrentMemberAssignmentKey)
ConsumerRecordValue = (ConsumerGroupMetadataValue | ConsumerGroupPartitionMetadataValue
                       | ConsumerGroupMemberMetadataValue | ConsumerGroupTargetAssignmentMetadataValue
                       | ConsumerGroupTargetAssignmentMemberValue | ConsumerGroupCurrentMemberAssignmentValue)

KEY_VERSIONS: dict[type, int] = {
    ConsumerGroupMetadataKey: 3,
    ConsumerGroupPartitionMetadataKey: 4,
    ConsumerGroupMemberMetadataKey: 5,
    ConsumerGroupTargetAssignmentMetadataKey: 6,
    ConsumerGroupTargetAssignmentMemberKey: 7,
    ConsumerGroupCurrentMemberAssignmentKey: 8,
}
_GROUP_KEYS: dict[int, type[ConsumerGroupMetadataKey | ConsumerGroupPartitionMetadataKey
                            | ConsumerGroupTargetAssignmentMetadataKey]] = {3: ConsumerGroupMetadataKey, 4: ConsumerGroupPartitionMetadataKey,
               6: ConsumerGroupTargetAssignmentMetadataKey}
_MEMBER_KEYS: dict[int, type[ConsumerGroupMemberMetadataKey | ConsumerGroupTargetAssignmentMemberKey
                             | ConsumerGroupCurrentMemberAssignmentKey]] = {5: ConsumerGroupMemberMetadataKey, 7: ConsumerGroupTargetAssignmentMemberKey,
                8: ConsumerGroupCurrentMemberAssignmentKey}
CONSUMER_KEY_VERSIONS = frozenset(KEY_VERSIONS.values())


# --- encoding -------------------------------------------------------------------------------------



def _legacy_string(s: str) -> bytes:
    data = s.encode("utf-8")
    return struct.pack(">h", len(data)) + data


def _compact_string(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    data = s.encode("utf-8")
    return uvarint(len(data) + 1) + data


def _topic_partitions(tps: TopicPartitions) -> bytes:
    out = bytearray(uvarint(len(tps) + 1))
    for topic_id, partitions in tps:
        out += topic_id.bytes + uvarint(len(partitions) + 1)
        for p in partitions:
            out += struct.pack(">i", p)
        out += b"\x00"
    return bytes(out)


def _partition_metadata(topics: PartitionMetadataTopics) -> bytes:
    """The topics array of a PartitionMetadata value, the same in the consumer-group (key 4) and share-group
    (key 9) records: per topic its id, name, partition count and partition racks, none recorded (kaflite's
    assignors do not use racks)."""
    out = bytearray(uvarint(len(topics) + 1))
    for topic_id, name, count in topics:
        out += topic_id.bytes + _compact_string(name) + struct.pack(">i", count)
        out += uvarint(1) + b"\x00"  # no partition racks; the topic's tagged fields
    return bytes(out)


def encode_consumer_key(key: ConsumerRecordKey) -> bytes:
    out = struct.pack(">h", KEY_VERSIONS[type(key)]) + _legacy_string(key.group)
    member = getattr(key, "member", None)
    if member is not None:
        out += _legacy_string(member)
    return out


def encode_consumer_value(value: ConsumerRecordValue) -> bytes:
    out = bytearray(struct.pack(">h", 0))
    if isinstance(value, ConsumerGroupMetadataValue):
        out += struct.pack(">i", value.epoch)
    elif isinstance(value, ConsumerGroupPartitionMetadataValue):
        out += _partition_metadata(value.topics)
    elif isinstance(value, ConsumerGroupMemberMetadataValue):
        out += _compact_string(value.instance_id) + _compact_string(value.rack_id)
        out += _compact_string(value.client_id) + _compact_string(value.client_host)
        out += uvarint(len(value.subscribed_topic_names) + 1)
        for name in value.subscribed_topic_names:
            out += _compact_string(name)
        out += _compact_string(value.subscribed_topic_regex)
        out += struct.pack(">i", value.rebalance_timeout_ms)
        out += _compact_string(value.server_assignor)
        if value.classic_member_metadata is not None:
            session, protocols = value.classic_member_metadata
            field = bytearray(struct.pack(">i", session) + uvarint(len(protocols) + 1))
            for name, metadata in protocols:
                field += _compact_string(name) + uvarint(len(metadata) + 1) + metadata + b"\x00"
            field += b"\x00"
            out += uvarint(1) + uvarint(0) + uvarint(len(field)) + field  # one tagged field: tag 0
            return bytes(out)
    elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        out += struct.pack(">i", value.assignment_epoch)
    elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        out += _topic_partitions(value.partitions)
    else:
        out += struct.pack(">iib", value.member_epoch, value.previous_member_epoch, value.state)
        out += _topic_partitions(value.assigned) + _topic_partitions(value.pending_revocation)
    out += b"\x00"  # the value's tagged fields
    return bytes(out)


# --- decoding -------------------------------------------------------------------------------------

class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise ConsumerRecordFormatError(f"record truncated: need {n} bytes at position {self.pos}")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str) -> tuple[int, ...]:
        s = struct.Struct(fmt)
        return tuple(int(x) for x in s.unpack(self.take(s.size)))

    def uvarint(self) -> int:
        shift = value = 0
        for _ in range(5):
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
        raise ConsumerRecordFormatError("varint too long")

    def legacy_string(self) -> str:
        (n,) = self.unpack(">h")
        return bytes(self.take(n)).decode("utf-8")

    def compact_string(self) -> str | None:
        n = self.uvarint() - 1
        return None if n < 0 else bytes(self.take(n)).decode("utf-8")

    def string(self) -> str:
        s = self.compact_string()
        if s is None:
            raise ConsumerRecordFormatError("null where a string was expected")
        return s

    def array(self) -> int:
        return max(self.uvarint() - 1, 0)

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self.take(16)))

    def tagged_fields(self) -> dict[int, bytes]:
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = bytes(self.take(self.uvarint()))
        return out

    def partition_metadata(self) -> PartitionMetadataTopics:
        """A PartitionMetadata value's topics (see `_partition_metadata`); partition racks are read past."""
        topics = []
        for _ in range(self.array()):
            topic_id, name, count = self.uuid(), self.string(), self.unpack(">i")[0]
            for _ in range(self.array()):  # partition racks: not used by kaflite's assignors
                self.unpack(">i")
                for _ in range(self.array()):
                    self.string()
                self.tagged_fields()
            self.tagged_fields()
            topics.append((topic_id, name, count))
        return tuple(topics)

    def topic_partitions(self) -> TopicPartitions:
        out = []
        for _ in range(self.array()):
            topic_id = self.uuid()
            partitions = tuple(self.unpack(">i")[0] for _ in range(self.array()))
            self.tagged_fields()
            out.append((topic_id, partitions))
        return tuple(out)


def decode_consumer_key(version: int, data: bytes) -> ConsumerRecordKey:
    """The key of `data` (whose first two bytes are `version`, one of 3-8)."""
    r = _Reader(data)
    r.take(2)
    group = r.legacy_string()
    if version in _GROUP_KEYS:
        return _GROUP_KEYS[version](group)
    if version in _MEMBER_KEYS:
        return _MEMBER_KEYS[version](group, r.legacy_string())
    raise ConsumerRecordFormatError(f"unsupported consumer-group key version {version}")


def decode_consumer_value(key: ConsumerRecordKey, data: bytes | None) -> ConsumerRecordValue | None:
    if data is None:
        return None
    r = _Reader(data)
    (version,) = r.unpack(">h")
    if version != 0:
        raise ConsumerRecordFormatError(f"unsupported value version {version} for {type(key).__name__}")
    value: ConsumerRecordValue
    if isinstance(key, ConsumerGroupMetadataKey):
        value = ConsumerGroupMetadataValue(r.unpack(">i")[0])
    elif isinstance(key, ConsumerGroupPartitionMetadataKey):
        value = ConsumerGroupPartitionMetadataValue(r.partition_metadata())
    elif isinstance(key, ConsumerGroupMemberMetadataKey):
        instance_id, rack_id = r.compact_string(), r.compact_string()
        client_id, client_host = r.string(), r.string()
        names = tuple(r.string() for _ in range(r.array()))
        regex = r.compact_string()
        (rebalance,) = r.unpack(">i")
        assignor = r.compact_string()
        classic = None
        tagged = r.tagged_fields()
        if 0 in tagged:
            t = _Reader(tagged[0])
            (session,) = t.unpack(">i")
            protocols = []
            for _ in range(t.array()):
                name = t.string()
                protocols.append((name, bytes(t.take(t.array()))))
                t.tagged_fields()
            classic = (session, tuple(protocols))
        return ConsumerGroupMemberMetadataValue(instance_id, rack_id, client_id, client_host, names, regex,
                                                rebalance, assignor, classic)
    elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
        value = ConsumerGroupTargetAssignmentMetadataValue(r.unpack(">i")[0])
    elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
        value = ConsumerGroupTargetAssignmentMemberValue(r.topic_partitions())
    else:
        epoch, previous, state = r.unpack(">iib")
        value = ConsumerGroupCurrentMemberAssignmentValue(epoch, previous, state, r.topic_partitions(),
                                                          r.topic_partitions())
    r.tagged_fields()
    return value
