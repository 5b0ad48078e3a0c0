"""The records of `__consumer_offsets`, byte for byte as Kafka encodes them.

Every record's key and value start with an int16 schema version; the key version says what the record
is (Kafka's group-coordinator message schemas):

    key v0/v1  OffsetCommitKey    {group string, topic string, partition int32}
    key v2     GroupMetadataKey   {group string}
    key v3-v8  KIP-848 consumer-group records (kaflite.coordinator.consumer_records)
    key v9-v14 KIP-932 share-group membership records (kaflite.coordinator.share.membership_records)
    key v32000 kaflite's rebalance timeline (kaflite.coordinator.timeline): a version Kafka does not
               use, which Kafka's loaders and formatters skip as an unknown record type

    OffsetCommitValue  v0 {offset int64, metadata string, commitTimestamp int64}
                       v1 + expireTimestamp int64 (v1 only)         <- written when an expiry is asked
                       v2 = v0 layout
                       v3 {offset, leaderEpoch int32, metadata, commitTimestamp}   <- what we write
                       v4 = v3 as a flexible version (compact strings, tagged fields)
    GroupMetadataValue v0 {protocolType string, generation int32, protocol string?, leader string?,
                           members [MemberMetadata]}
                       v2+ adds currentStateTimestamp int64 after leader; v3 is what we write;
                       v4 = v3 as a flexible version
    MemberMetadata     {memberId string, groupInstanceId string? (v3+), clientId string, clientHost string,
                        rebalanceTimeout int32 (v1+), sessionTimeout int32, subscription bytes,
                        assignment bytes}

A null value is a tombstone: the offset (or the whole group) is deleted; compaction keeps the latest.
We write the versions Kafka 3.x writes (key 1 / value 3, key 2 / value 3) so that Kafka's own tools
(`kafka-console-consumer --formatter ...OffsetsMessageFormatter`) could read our log, and we read 0-4.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .consumer_records import (
    CONSUMER_KEY_VERSIONS,
    KEY_VERSIONS,
    ConsumerRecordFormatError,
    ConsumerRecordKey,
    ConsumerRecordValue,
    decode_consumer_key,
    decode_consumer_value,
    encode_consumer_key,
    encode_consumer_value,
)
from .share.membership_records import KEY_TYPES as SHARE_KEY_TYPES
from .share.membership_records import (
    SHARE_KEY_VERSIONS,
    ShareRecordKey,
    ShareRecordValue,
    decode_share_key,
    decode_share_value,
    encode_share_key,
    encode_share_value,
)
from .share.membership_records import VALUE_TYPES as SHARE_VALUE_TYPES
from .timeline import KEY_VERSION as TIMELINE_KEY_VERSION
from .timeline import RebalanceEventKey, RebalanceEventValue
from .timeline import decode_key as decode_timeline_key
from .timeline import decode_value as decode_timeline_value
from .timeline import encode_key as encode_timeline_key
from .timeline import encode_value as encode_timeline_value

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3


class RecordFormatError(ValueError):
    """A `__consumer_offsets` record we cannot decode (unknown version or truncated bytes)."""


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberMetadata, ...] = field(default_factory=tuple)


RecordKey = OffsetCommitKey | GroupMetadataKey | ConsumerRecordKey | ShareRecordKey | RebalanceEventKey
RecordValue = OffsetCommitValue | GroupMetadataValue | ConsumerRecordValue | ShareRecordValue | RebalanceEventValue


# --- writer ---------------------------------------------------------------------------------------

class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def i16(self, v: int) -> None:
        self.parts.append(struct.pack(">h", v))

    def i32(self, v: int) -> None:
        self.parts.append(struct.pack(">i", v))

    def i64(self, v: int) -> None:
        self.parts.append(struct.pack(">q", v))

    def string(self, v: str | None) -> None:
        if v is None:
            self.i16(-1)
            return
        data = v.encode("utf-8")
        self.i16(len(data))
        self.parts.append(data)

    def bytes_(self, v: bytes) -> None:
        self.i32(len(v))
        self.parts.append(bytes(v))

    def done(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, data: bytes, flexible: bool = False) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.flexible = flexible

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError(f"record truncated: need {n} bytes at position {self.pos}")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return int(struct.unpack(">h", self._take(2))[0])

    def i32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def i64(self) -> int:
        return int(struct.unpack(">q", self._take(8))[0])

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise RecordFormatError("varint too long")

    def nullable_string(self) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.i16()
        if n < 0:
            return None
        return bytes(self._take(n)).decode("utf-8")

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise RecordFormatError("null where a non-nullable string was expected")
        return s

    def bytes_(self) -> bytes:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            return b""
        return bytes(self._take(n))

    def array_len(self) -> int:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        return max(n, 0)

    def tagged_fields(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())  # unknown tagged fields are skipped, as Kafka does


# --- encoding -------------------------------------------------------------------------------------

def encode_key(key: RecordKey) -> bytes:
    if type(key) in KEY_VERSIONS:
        return encode_consumer_key(key)  # type: ignore[arg-type]
    if type(key) in SHARE_KEY_TYPES:
        return encode_share_key(key)  # type: ignore[arg-type]
    if isinstance(key, RebalanceEventKey):
        return encode_timeline_key(key)
    w = _Writer()
    if isinstance(key, OffsetCommitKey):
        w.i16(OFFSET_COMMIT_KEY_VERSION)
        w.string(key.group)
        w.string(key.topic)
        w.i32(key.partition)
    else:
        w.i16(GROUP_METADATA_KEY_VERSION)
        w.string(key.group)
    return w.done()


def encode_value(value: RecordValue) -> bytes:
    if isinstance(value, RebalanceEventValue):
        return encode_timeline_value(value)
    if isinstance(value, SHARE_VALUE_TYPES):
        return encode_share_value(value)
    w = _Writer()
    if isinstance(value, OffsetCommitValue):
        if value.expire_timestamp >= 0:  # only v1 can carry an explicit expiry (OffsetCommit v2-v4)
            w.i16(1)
            w.i64(value.offset)
            w.string(value.metadata)
            w.i64(value.commit_timestamp)
            w.i64(value.expire_timestamp)
        else:
            w.i16(OFFSET_COMMIT_VALUE_VERSION)
            w.i64(value.offset)
            w.i32(value.leader_epoch)
            w.string(value.metadata)
            w.i64(value.commit_timestamp)
        return w.done()
    if not isinstance(value, GroupMetadataValue):
        return encode_consumer_value(value)
    w.i16(GROUP_METADATA_VALUE_VERSION)
    w.string(value.protocol_type)
    w.i32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    w.i64(value.current_state_timestamp)
    w.i32(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.i32(m.rebalance_timeout)
        w.i32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return w.done()


# --- decoding -------------------------------------------------------------------------------------

def decode_key(data: bytes) -> RecordKey:
    r = _Reader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetCommitKey(r.string(), r.string(), r.i32())
    if version == 2:
        return GroupMetadataKey(r.string())
    if version in CONSUMER_KEY_VERSIONS:  # KIP-848 consumer-group records (kaflite.coordinator.consumer_records)
        try:
            return decode_consumer_key(version, data)
        except ConsumerRecordFormatError as e:
            raise RecordFormatError(str(e)) from e
    if version == TIMELINE_KEY_VERSION:
        try:
            return decode_timeline_key(data[2:])
        except (ValueError, UnicodeDecodeError) as e:
            raise RecordFormatError(str(e)) from e
    if version in SHARE_KEY_VERSIONS:  # share groups (kaflite.coordinator.share.membership_records)
        try:
            return decode_share_key(version, data)
        except ConsumerRecordFormatError as e:
            raise RecordFormatError(str(e)) from e
    # Versions 16+ (Kafka's streams-group records and later): not records kaflite knows.
    raise RecordFormatError(f"unsupported __consumer_offsets key version {version}")


def decode_value(key: RecordKey, data: bytes | None) -> RecordValue | None:
    if data is None:
        return None
    if type(key) in KEY_VERSIONS:
        try:
            return decode_consumer_value(key, data)  # type: ignore[arg-type]
        except ConsumerRecordFormatError as e:
            raise RecordFormatError(str(e)) from e
    if type(key) in SHARE_KEY_TYPES:
        try:
            return decode_share_value(key, data)  # type: ignore[arg-type]
        except ConsumerRecordFormatError as e:
            raise RecordFormatError(str(e)) from e
    if isinstance(key, RebalanceEventKey):
        try:
            return decode_timeline_value(data)
        except (ValueError, UnicodeDecodeError, struct.error) as e:
            raise RecordFormatError(str(e)) from e
    head = _Reader(data)
    version = head.i16()
    r = _Reader(data[2:], flexible=version >= 4)
    if isinstance(key, OffsetCommitKey):
        if version > 4:
            raise RecordFormatError(f"unsupported OffsetCommitValue version {version}")
        offset = r.i64()
        leader_epoch = r.i32() if version >= 3 else -1
        metadata = r.string()
        commit_ts = r.i64()
        expire_ts = r.i64() if version == 1 else -1
        r.tagged_fields()
        return OffsetCommitValue(offset, metadata, commit_ts, leader_epoch, expire_ts)
    if version > 4:
        raise RecordFormatError(f"unsupported GroupMetadataValue version {version}")
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.array_len()):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.tagged_fields()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout  # v0 had none: Kafka uses the session timeout
        members.append(MemberMetadata(member_id, instance_id, client_id, client_host, rebalance_timeout,
                                      session_timeout, subscription, assignment))
    r.tagged_fields()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))


def decode_record(key: bytes, value: bytes | None) -> tuple[RecordKey, RecordValue | None]:
    k = decode_key(key)
    return k, decode_value(k, value)
