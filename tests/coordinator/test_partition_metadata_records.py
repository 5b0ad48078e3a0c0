"""The PartitionMetadata value that the consumer-group (key 4) and share-group (key 9) records of
`__consumer_offsets` share (kaflite.coordinator.consumer_records' `_partition_metadata` and
`_Reader.partition_metadata`, used by both): the same bytes from both record kinds, and a value carrying
partition racks, as a Kafka whose brokers have racks writes it, read past the racks by both."""

from __future__ import annotations

import struct
import uuid

import pytest

from kaflite.coordinator.consumer_records import (
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
)
from kaflite.coordinator.records import decode_record, encode_key, encode_value
from kaflite.coordinator.share import membership_records as mr

T, U = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = ((T, "t", 2), (U, "u", 1))


def _compact(s: str) -> bytes:
    return bytes((len(s) + 1,)) + s.encode()


def _with_racks() -> bytes:
    """A PartitionMetadata value as Kafka writes it with racks: topic t's partitions 0 and 1 on racks."""
    t = T.bytes + _compact("t") + struct.pack(">i", 2)
    t += b"\x03"  # two partitions' racks
    t += struct.pack(">i", 0) + b"\x03" + _compact("r1") + _compact("r2") + b"\x00"
    t += struct.pack(">i", 1) + b"\x02" + _compact("r3") + b"\x00"
    t += b"\x00"  # the topic's tagged fields
    u = U.bytes + _compact("u") + struct.pack(">i", 1) + b"\x01" + b"\x00"  # no racks
    return b"\x00\x00" + b"\x03" + t + u + b"\x00"


def test_consumer_and_share_partition_metadata_are_the_same_bytes() -> None:
    consumer = encode_value(ConsumerGroupPartitionMetadataValue(TOPICS))
    share = encode_value(mr.ShareGroupPartitionMetadataValue(TOPICS))
    assert consumer == share
    # version 0; compact array of 2; per topic: id, compact name, int32 count, an empty rack array, no tags
    assert consumer == (
        b"\x00\x00"
        + b"\x03"
        + T.bytes
        + b"\x02t"
        + struct.pack(">i", 2)
        + b"\x01"
        + b"\x00"
        + U.bytes
        + b"\x02u"
        + struct.pack(">i", 1)
        + b"\x01"
        + b"\x00"
        + b"\x00"
    )


@pytest.mark.parametrize(
    "key", [ConsumerGroupPartitionMetadataKey("g"), mr.ShareGroupPartitionMetadataKey("g")]
)
def test_partition_racks_are_read_past(key: object) -> None:
    _k, value = decode_record(encode_key(key), _with_racks())  # type: ignore[arg-type]
    assert value is not None and value.topics == TOPICS  # type: ignore[union-attr]
