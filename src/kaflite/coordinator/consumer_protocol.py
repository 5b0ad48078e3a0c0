"""Just enough of the consumer protocol's bytes (ConsumerProtocolSubscription / Assignment) for the
coordinator to know which topics a group subscribes to, and for tools to show who owns what.

Both start with an int16 version; every version begins with the same fields:
    Subscription: topics [string], userData bytes?, (v1+) ownedPartitions, (v2+) generationId, (v3+) rackId
    Assignment:   assignedPartitions [{topic string, partitions [int32]}], userData bytes?
The coordinator never needs more (the assignment itself is computed by the group's leader).
"""

from __future__ import annotations

import struct


def _string(data: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">h", data, pos)
    pos += 2
    if n < 0:
        raise ValueError("null string")
    return data[pos : pos + n].decode("utf-8"), pos + n


def subscription_topics(data: bytes) -> list[str] | None:
    """The topics of a consumer Subscription, or None when the bytes are not one."""
    try:
        pos = 2
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        topics = []
        for _ in range(max(count, 0)):
            topic, pos = _string(data, pos)
            topics.append(topic)
        return topics
    except (struct.error, ValueError, UnicodeDecodeError):
        return None


def assignment_partitions(data: bytes) -> dict[str, list[int]] | None:
    """The partitions of a consumer Assignment by topic ({} for empty bytes), or None when malformed."""
    if not data:
        return {}
    try:
        pos = 2
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out: dict[str, list[int]] = {}
        for _ in range(max(count, 0)):
            topic, pos = _string(data, pos)
            (n,) = struct.unpack_from(">i", data, pos)
            pos += 4
            parts = list(struct.unpack_from(f">{max(n, 0)}i", data, pos))
            pos += 4 * max(n, 0)
            out.setdefault(topic, []).extend(parts)
        return out
    except (struct.error, ValueError, UnicodeDecodeError):
        return None


def encode_subscription(topics: list[str], user_data: bytes | None = None) -> bytes:
    """A version-0 Subscription (used by tests and tools that act as a member)."""
    out = [struct.pack(">hi", 0, len(topics))]
    for t in topics:
        b = t.encode()
        out.append(struct.pack(">h", len(b)) + b)
    out.append(struct.pack(">i", -1) if user_data is None else struct.pack(">i", len(user_data)) + user_data)
    return b"".join(out)


def encode_assignment(partitions: dict[str, list[int]]) -> bytes:
    """A version-0 Assignment."""
    out = [struct.pack(">hi", 0, len(partitions))]
    for t, ps in partitions.items():
        b = t.encode()
        out.append(struct.pack(">h", len(b)) + b + struct.pack(f">i{len(ps)}i", len(ps), *ps))
    out.append(struct.pack(">i", -1))
    return b"".join(out)
