"""User data bytes of the sticky assignors (inside ConsumerProtocol Subscription.user_data).

StickyAssignor (Kafka schema STICKY_ASSIGNOR_USER_DATA_V0/V1):
  previous_assignment: ARRAY[ {topic: STRING (int16 length), partitions: ARRAY[INT32]} ]
  generation: INT32                          (V1 only; V0 has no generation)
CooperativeStickyAssignor (COOPERATIVE_STICKY_ASSIGNOR_USER_DATA_V0):
  generation: INT32
Rules of decoding (as Kafka): try V1, then V0 (no generation), else "no member data"; trailing bytes are
ignored. Arrays are int32-counted, strings int16-length UTF-8 — the classic (non-flexible) encoding.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from kaflite.assign.javautil import JavaHashMap
from kaflite.assign.types import TopicPartition, string_hash

DEFAULT_GENERATION = -1


@dataclass(frozen=True, slots=True)
class MemberData:
    """What a sticky assignor knows of a member's previous assignment."""

    partitions: list[TopicPartition]
    generation: int | None


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def int32(self) -> int:
        if self.pos + 4 > len(self.buf):
            raise ValueError("buffer underflow")
        (v,) = struct.unpack_from(">i", self.buf, self.pos)
        self.pos += 4
        return int(v)

    def string(self) -> str:
        if self.pos + 2 > len(self.buf):
            raise ValueError("buffer underflow")
        (n,) = struct.unpack_from(">h", self.buf, self.pos)
        self.pos += 2
        if n < 0 or self.pos + n > len(self.buf):
            raise ValueError("bad string")
        s = self.buf[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return s


def _read_partitions(r: _Reader) -> list[TopicPartition]:
    out: list[TopicPartition] = []
    n_topics = r.int32()
    if n_topics < 0:
        raise ValueError("negative array length")
    for _ in range(n_topics):
        topic = r.string()
        n = r.int32()
        if n < 0:
            raise ValueError("negative array length")
        for _ in range(n):
            out.append(TopicPartition(topic, r.int32()))
    return out


def decode_sticky_user_data(data: bytes | None) -> MemberData:
    """StickyAssignor.memberData: partitions in their encoded order, generation if V1."""
    if not data:
        return MemberData([], None)
    try:
        r = _Reader(data)
        parts = _read_partitions(r)
        return MemberData(parts, r.int32())
    except (ValueError, UnicodeDecodeError):
        pass
    try:
        return MemberData(_read_partitions(_Reader(data)), None)
    except (ValueError, UnicodeDecodeError):
        return MemberData([], None)


def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: int | None) -> bytes:
    """V1 user data: partitions grouped by topic, then the generation.

    Kafka groups with CollectionUtils.groupPartitionsByTopic: `computeIfAbsent` on a `new HashMap<>()`
    in list order, so topics come out in Java HashMap order — topics sharing a bucket in reverse order
    of first appearance (kaflite.assign.javautil) — each topic's partitions in list order. The order
    matters: the sticky assignor's general path keeps owned partitions in this order."""
    by_topic: JavaHashMap[str, list[int]] = JavaHashMap(string_hash)
    grouped: dict[str, list[int]] = {}  # the same lists, for the common case of a topic already seen
    full = False  # whether Java's next computeIfAbsent call, of any key, grows the table
    for tp in partitions:
        ps = grouped.get(tp.topic)
        if ps is None or full:
            ps = grouped[tp.topic] = by_topic.compute_if_absent(tp.topic, list)
            full = by_topic.needs_resize()
        ps.append(tp.partition)
    out = [struct.pack(">i", len(by_topic))]
    for topic, ps in by_topic.items():
        t = topic.encode("utf-8")
        out.append(struct.pack(">h", len(t)) + t + struct.pack(">i", len(ps)))
        out.append(struct.pack(f">{len(ps)}i", *ps))
    out.append(struct.pack(">i", DEFAULT_GENERATION if generation is None else generation))
    return b"".join(out)


def decode_cooperative_user_data(data: bytes | None) -> int | None:
    """CooperativeStickyAssignor: the generation int32; None without user data; -1 if unreadable."""
    if data is None:
        return None
    if len(data) < 4:
        return DEFAULT_GENERATION
    return int(struct.unpack_from(">i", data, 0)[0])


def encode_cooperative_user_data(generation: int = DEFAULT_GENERATION) -> bytes:
    return struct.pack(">i", generation)
