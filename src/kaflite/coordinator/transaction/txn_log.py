"""The records of `__transaction_state` (Kafka's TransactionLog / TransactionLogKey / TransactionLogValue).

Key   (version 0): version int16 | transactional_id string (int16 length + UTF-8)
Value (version 0): version int16 | producer_id int64 | producer_epoch int16 | transaction_timeout_ms int32
                   | transaction_status int8 | transaction_partitions array (int32 count, -1 = null) of
                   (topic string, partition_ids array of int32) | last_update_timestamp_ms int64
                   | start_timestamp_ms int64
Value (version 1): the same fields in the flexible encoding (compact strings / arrays, unsigned-varint
                   lengths + 1, an empty tagged-field section after each struct). kaflite writes version 0
                   (as Kafka 3.x does) and reads both.
A null value is a tombstone: the transactional id expired. The transaction partition is
`Utils.abs(transactionalId.hashCode()) % transaction.state.log.num.partitions` (Java's String.hashCode).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kaflite.assign import java_string_hashcode, utils_abs
from kaflite.protocol.varint import read_uvarint, skip_tags

__all__ = ["TRANSACTION_STATE_TOPIC", "TxnLogValue", "decode_key", "decode_value", "encode_key", "encode_value",
           "partition_for"]

TRANSACTION_STATE_TOPIC = "__transaction_state"
DEFAULT_TXN_TOPIC_PARTITIONS = 50


def partition_for(transactional_id: str, num_partitions: int = DEFAULT_TXN_TOPIC_PARTITIONS) -> int:
    return utils_abs(java_string_hashcode(transactional_id)) % num_partitions


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int  # TxnState's byte
    partitions: tuple[tuple[str, int], ...]
    last_update_ms: int
    start_ms: int


def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def encode_key(transactional_id: str) -> bytes:
    return struct.pack(">h", 0) + _str(transactional_id)


def decode_key(raw: bytes) -> str:
    if len(raw) < 4:
        raise ValueError("transaction log key too short")
    version, n = struct.unpack_from(">hh", raw, 0)
    if version != 0:
        raise ValueError(f"unknown transaction log key version {version}")
    return raw[4:4 + n].decode()


def encode_value(v: TxnLogValue) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in v.partitions:
        by_topic.setdefault(topic, []).append(partition)
    out = bytearray(struct.pack(">hqhib", 0, v.producer_id, v.producer_epoch, v.timeout_ms, v.status))
    out += struct.pack(">i", len(by_topic))
    for topic in sorted(by_topic):
        out += _str(topic)
        ps = sorted(by_topic[topic])
        out += struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps)
    out += struct.pack(">qq", v.last_update_ms, v.start_ms)
    return bytes(out)






def decode_value(raw: bytes) -> TxnLogValue:
    try:
        version, pid, epoch, timeout, status = struct.unpack_from(">hqhib", raw, 0)
        pos = 17
        flexible = version >= 1
        parts: list[tuple[str, int]] = []
        if flexible:
            count, pos = read_uvarint(raw, pos)
            count -= 1
        else:
            (count,) = struct.unpack_from(">i", raw, pos)
            pos += 4
        for _ in range(max(count, 0)):
            if flexible:
                n, pos = read_uvarint(raw, pos)
                n -= 1
            else:
                (n,) = struct.unpack_from(">h", raw, pos)
                pos += 2
            topic = raw[pos:pos + n].decode()
            pos += n
            if flexible:
                k, pos = read_uvarint(raw, pos)
                k -= 1
            else:
                (k,) = struct.unpack_from(">i", raw, pos)
                pos += 4
            for _ in range(max(k, 0)):
                parts.append((topic, struct.unpack_from(">i", raw, pos)[0]))
                pos += 4
            if flexible:
                pos = skip_tags(raw, pos)
        last_update, start = struct.unpack_from(">qq", raw, pos)
    except (struct.error, IndexError, UnicodeDecodeError) as e:
        raise ValueError(f"unreadable transaction log value: {e}") from e
    return TxnLogValue(pid, epoch, timeout, status, tuple(parts), last_update, start)
