"""The records of `__share_group_state` (Kafka's share coordinator: ShareSnapshotKey / ShareUpdateKey and
their values), as read in the apache/kafka share-coordinator module (Kafka 4.2 layout).

Key  : record type int16 (0 ShareSnapshot, 1 ShareUpdate; Kafka's coordinator records put the type where
       other keys put a version) | GroupId string (int16 length + UTF-8) | TopicId uuid (16 bytes)
       | Partition int32. Not flexible.
ShareSnapshotValue (version 0, flexible): version int16 | SnapshotEpoch int32 | StateEpoch int32
       | LeaderEpoch int32 | StartOffset int64 | CreateTimestamp int64 | WriteTimestamp int64
       | StateBatches compact array of (FirstOffset int64, LastOffset int64, DeliveryState int8,
         DeliveryCount int16, tagged fields) | tagged fields
ShareUpdateValue (version 0, flexible): version int16 | SnapshotEpoch int32 | LeaderEpoch int32
       | StartOffset int64 (-1: not moved) | StateBatches (as above) | tagged fields
A null value is a tombstone (the share partition's state was deleted). Tagged fields written: none; read:
skipped (Kafka 4.2's DeliveryCompleteCount is one). The partition of a share partition's state is
`Utils.abs(("<group>:<topic id>:<partition>").hashCode()) % share.coordinator.state.topic.num.partitions`
(Kafka's SharePartitionKey.asCoordinatorKey, the topic id in Kafka's base64 form).
"""

from __future__ import annotations

import base64
import struct
import uuid
from dataclasses import dataclass

from kaflite.assign import java_string_hashcode, utils_abs
from kaflite.coordinator.share.partition import StateBatch
from kaflite.protocol.varint import read_uvarint, skip_tags, uvarint

__all__ = [
    "SHARE_GROUP_STATE_TOPIC",
    "SNAPSHOT",
    "UPDATE",
    "ShareStateKey",
    "SnapshotValue",
    "UpdateValue",
    "decode_key",
    "decode_snapshot",
    "decode_update",
    "encode_key",
    "encode_snapshot",
    "encode_update",
    "parse_coordinator_key",
    "partition_for",
]

SHARE_GROUP_STATE_TOPIC = "__share_group_state"
DEFAULT_NUM_PARTITIONS = 50
SNAPSHOT, UPDATE = 0, 1


@dataclass(frozen=True, slots=True, order=True)
class ShareStateKey:
    """One share partition's state: (group, topic id, partition)."""

    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        return f"{self.group_id}:{kafka_uuid(self.topic_id)}:{self.partition}"


@dataclass(frozen=True, slots=True)
class SnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    batches: tuple[StateBatch, ...]


@dataclass(frozen=True, slots=True)
class UpdateValue:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int  # -1: unchanged
    batches: tuple[StateBatch, ...]


def kafka_uuid(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def parse_coordinator_key(text: str) -> ShareStateKey:
    """`<group>:<topic id>:<partition>` (FindCoordinator key type SHARE); ValueError when it is not one."""
    group, topic, partition = text.rsplit(":", 2)
    raw = base64.urlsafe_b64decode(topic + "=" * (-len(topic) % 4))
    if len(raw) != 16 or not group:
        raise ValueError(f"not a share coordinator key: {text!r}")
    return ShareStateKey(group, uuid.UUID(bytes=raw), int(partition))


def partition_for(key: ShareStateKey, num_partitions: int = DEFAULT_NUM_PARTITIONS) -> int:
    return utils_abs(java_string_hashcode(key.coordinator_key())) % num_partitions


def encode_key(record_type: int, key: ShareStateKey) -> bytes:
    group = key.group_id.encode()
    return struct.pack(">hh", record_type, len(group)) + group + key.topic_id.bytes + struct.pack(">i", key.partition)


def decode_key(raw: bytes) -> tuple[int, ShareStateKey]:
    """(record type, key); ValueError for anything else."""
    try:
        record_type, n = struct.unpack_from(">hh", raw, 0)
        if record_type not in (SNAPSHOT, UPDATE):
            raise ValueError(f"unknown {SHARE_GROUP_STATE_TOPIC} record type {record_type}")
        group = raw[4:4 + n].decode()
        topic_id = uuid.UUID(bytes=bytes(raw[4 + n:20 + n]))
        (partition,) = struct.unpack_from(">i", raw, 20 + n)
    except (struct.error, UnicodeDecodeError) as e:
        raise ValueError(f"bad {SHARE_GROUP_STATE_TOPIC} key: {e}") from None
    if len(raw) != 24 + n:
        raise ValueError(f"bad {SHARE_GROUP_STATE_TOPIC} key length {len(raw)}")
    return record_type, ShareStateKey(group, topic_id, partition)








def _batches(batches: tuple[StateBatch, ...]) -> bytes:
    out = bytearray(uvarint(len(batches) + 1))
    for b in batches:
        out += struct.pack(">qqbh", b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) + b"\x00"
    return bytes(out)


def _read_batches(raw: bytes, pos: int) -> tuple[tuple[StateBatch, ...], int]:
    n, pos = read_uvarint(raw, pos)
    out = []
    for _ in range(max(0, n - 1)):
        first, last, state, count = struct.unpack_from(">qqbh", raw, pos)
        pos = skip_tags(raw, pos + 19)
        out.append(StateBatch(first, last, state, count))
    return tuple(out), pos


def encode_snapshot(v: SnapshotValue) -> bytes:
    return (struct.pack(">hiiiqqq", 0, v.snapshot_epoch, v.state_epoch, v.leader_epoch, v.start_offset,
                        v.create_timestamp, v.write_timestamp) + _batches(v.batches) + b"\x00")


def decode_snapshot(raw: bytes) -> SnapshotValue:
    try:
        version, snap, state, leader, start, created, written = struct.unpack_from(">hiiiqqq", raw, 0)
        if version != 0:
            raise ValueError(f"unknown ShareSnapshotValue version {version}")
        batches, pos = _read_batches(raw, struct.calcsize(">hiiiqqq"))
        skip_tags(raw, pos)
    except (struct.error, IndexError) as e:
        raise ValueError(f"bad ShareSnapshotValue: {e}") from None
    return SnapshotValue(snap, state, leader, start, created, written, batches)


def encode_update(v: UpdateValue) -> bytes:
    return struct.pack(">hiiq", 0, v.snapshot_epoch, v.leader_epoch, v.start_offset) + _batches(v.batches) + b"\x00"


def decode_update(raw: bytes) -> UpdateValue:
    try:
        version, snap, leader, start = struct.unpack_from(">hiiq", raw, 0)
        if version != 0:
            raise ValueError(f"unknown ShareUpdateValue version {version}")
        batches, pos = _read_batches(raw, struct.calcsize(">hiiq"))
        skip_tags(raw, pos)
    except (struct.error, IndexError) as e:
        raise ValueError(f"bad ShareUpdateValue: {e}") from None
    return UpdateValue(snap, leader, start, batches)
