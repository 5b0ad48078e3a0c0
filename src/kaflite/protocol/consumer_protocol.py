"""The consumer protocol bytes inside JoinGroup / SyncGroup (protocol type "consumer").

Subscription (JoinGroup member metadata) and Assignment (SyncGroup member assignment) are Kafka's
ConsumerProtocolSubscription v0-v3 / ConsumerProtocolAssignment v0-v3, prefixed by an int16 version,
in the classic (non-flexible) encoding:

  Subscription v0: topics ARRAY[STRING], user_data NULLABLE BYTES
               v1: + owned_partitions ARRAY[{topic STRING, partitions ARRAY[INT32]}]
               v2: + generation_id INT32 (-1 when unknown)
               v3: + rack_id NULLABLE STRING
  Assignment  v0..v3: assigned_partitions ARRAY[{topic, partitions}], user_data NULLABLE BYTES

Rules (as Kafka's ConsumerProtocol): a version above the newest known is read with the newest schema
(newer fields are appended, so old readers ignore them); a negative version or truncated bytes is an
error naming what is wrong. The sticky assignors' own user data lives in `kaflite.assign.userdata`.
The lenient readers `subscription_topics` / `assignment_partitions` answer None instead of raising: the
group coordinator uses them on whatever bytes a member sent (not every group is a consumer group), and
they read only the leading fields every version shares.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from kaflite.assign.types import Subscription as AssignorSubscription
from kaflite.assign.types import TopicPartition
from kaflite.assign.userdata import (  # re-exported: the sticky user data bytes
    decode_cooperative_user_data,
    decode_sticky_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
)

__all__ = [  # noqa: RUF022 - grouped by purpose
    "PROTOCOL_TYPE",
    "SUBSCRIPTION_VERSIONS",
    "ConsumerSubscription",
    "ConsumerAssignment",
    "ConsumerProtocolError",
    "encode_subscription",
    "decode_subscription",
    "encode_assignment",
    "decode_assignment",
    "decode_sticky_user_data",
    "encode_sticky_user_data",
    "decode_cooperative_user_data",
    "encode_cooperative_user_data",
    "subscription_topics",
    "assignment_partitions",
]

PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSIONS = (0, 3)
ASSIGNMENT_VERSIONS = (0, 3)


class ConsumerProtocolError(ValueError):
    """Malformed consumer protocol bytes."""


@dataclass(slots=True)
class ConsumerSubscription:
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = -1
    rack_id: str | None = None
    version: int = 3

    def for_assignor(self, group_instance_id: str | None = None) -> AssignorSubscription:
        """The view an assignor works on (generation -1 means "not sent")."""
        return AssignorSubscription(
            topics=list(self.topics), owned_partitions=list(self.owned_partitions),
            generation_id=None if self.generation_id < 0 or self.version < 2 else self.generation_id,
            group_instance_id=group_instance_id, rack_id=self.rack_id, user_data=self.user_data)


@dataclass(slots=True)
class ConsumerAssignment:
    partitions: list[TopicPartition]
    user_data: bytes | None = None
    version: int = 3


# -- writing ---------------------------------------------------------------------------------------

def _string(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack(">h", len(b)) + b


def _nullable_string(s: str | None) -> bytes:
    return struct.pack(">h", -1) if s is None else _string(s)


def _bytes(b: bytes | None) -> bytes:
    return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + bytes(b)


def _topic_partitions(tps: Iterable[TopicPartition]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = [struct.pack(">i", len(by_topic))]
    for topic, parts in by_topic.items():
        out.append(_string(topic) + struct.pack(f">i{len(parts)}i", len(parts), *parts))
    return b"".join(out)


def encode_subscription(sub: ConsumerSubscription, version: int | None = None) -> bytes:
    v = sub.version if version is None else version
    if not SUBSCRIPTION_VERSIONS[0] <= v <= SUBSCRIPTION_VERSIONS[1]:
        raise ConsumerProtocolError(f"subscription version must be 0..3, got {v}")
    out = [struct.pack(">h", v), struct.pack(">i", len(sub.topics))]
    out += [_string(t) for t in sub.topics]
    out.append(_bytes(sub.user_data))
    if v >= 1:
        out.append(_topic_partitions(sub.owned_partitions))
    if v >= 2:
        out.append(struct.pack(">i", sub.generation_id))
    if v >= 3:
        out.append(_nullable_string(sub.rack_id))
    return b"".join(out)


def encode_assignment(assignment: ConsumerAssignment, version: int | None = None) -> bytes:
    v = assignment.version if version is None else version
    if not ASSIGNMENT_VERSIONS[0] <= v <= ASSIGNMENT_VERSIONS[1]:
        raise ConsumerProtocolError(f"assignment version must be 0..3, got {v}")
    return struct.pack(">h", v) + _topic_partitions(assignment.partitions) + _bytes(assignment.user_data)


# -- reading ---------------------------------------------------------------------------------------

class _Reader:
    __slots__ = ("buf", "pos", "what")

    def __init__(self, buf: bytes, what: str) -> None:
        self.buf = memoryview(buf)
        self.pos = 0
        self.what = what

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise ConsumerProtocolError(f"{self.what}: truncated at byte {self.pos} (need {n} more)")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        return int(struct.unpack(">h", self._take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise ConsumerProtocolError(f"{self.what}: null where a string is required at byte {self.pos}")
        return bytes(self._take(n)).decode("utf-8")

    def nullable_string(self) -> str | None:
        n = self.int16()
        return None if n < 0 else bytes(self._take(n)).decode("utf-8")

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        return None if n < 0 else bytes(self._take(n))

    def array_len(self) -> int:
        n = self.int32()
        if n < 0:
            raise ConsumerProtocolError(f"{self.what}: null array at byte {self.pos}")
        return n

    def topic_partitions(self) -> list[TopicPartition]:
        out: list[TopicPartition] = []
        for _ in range(self.array_len()):
            topic = self.string()
            for _ in range(self.array_len()):
                out.append(TopicPartition(topic, self.int32()))
        return out


def decode_subscription(data: bytes) -> ConsumerSubscription:
    r = _Reader(data, "consumer subscription")
    version = r.int16()
    if version < 0:
        raise ConsumerProtocolError(f"consumer subscription: unsupported version {version}")
    v = min(version, SUBSCRIPTION_VERSIONS[1])
    topics = [r.string() for _ in range(r.array_len())]
    user_data = r.nullable_bytes()
    owned = r.topic_partitions() if v >= 1 else []
    generation = r.int32() if v >= 2 else -1
    rack = r.nullable_string() if v >= 3 else None
    return ConsumerSubscription(topics, user_data, owned, generation, rack, version)


def decode_assignment(data: bytes) -> ConsumerAssignment:
    r = _Reader(data, "consumer assignment")
    version = r.int16()
    if version < 0:
        raise ConsumerProtocolError(f"consumer assignment: unsupported version {version}")
    partitions = r.topic_partitions()
    return ConsumerAssignment(partitions, r.nullable_bytes(), version)


# -- lenient readers (the coordinator's view of a member's bytes) ----------------------------------

def subscription_topics(data: bytes) -> list[str] | None:
    """The topics of a consumer Subscription (its leading fields only), or None when the bytes are not one."""
    try:
        r = _Reader(data, "consumer subscription")
        if r.int16() < 0:
            return None
        return [r.string() for _ in range(r.array_len())]
    except (ConsumerProtocolError, UnicodeDecodeError, struct.error):
        return None


def assignment_partitions(data: bytes) -> dict[str, list[int]] | None:
    """The partitions of a consumer Assignment by topic ({} for empty bytes), or None when malformed."""
    if not data:
        return {}
    try:
        r = _Reader(data, "consumer assignment")
        if r.int16() < 0:
            return None
        out: dict[str, list[int]] = {}
        for tp in r.topic_partitions():
            out.setdefault(tp.topic, []).append(tp.partition)
        return out
    except (ConsumerProtocolError, UnicodeDecodeError, struct.error):
        return None
