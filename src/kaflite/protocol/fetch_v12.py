"""The client half of Fetch v12 by hand, for the replica fetcher and the Spark source's fast path
(kaflite.spark.fetch): the request encoded with `struct` and the response decoded into plain slotted
objects, each partition's records a memoryview of the answer frame (no copy; the follower's log appends
from it, the Spark source decodes it into Arrow).

A follower of thousands of partitions sends one Fetch for all of them each round and reads one answer:
kio built and walked a dataclass per partition both ways, which grew to the largest per-round cost of
replication. v12 (Kafka 2.7, KIP-595's last fetched epoch and diverging epoch) is the one version the
fetcher speaks.

Rules:
- the request is Kafka's FetchRequest v12 (flexible, KIP-482): replica id, max wait, min bytes, max bytes,
  isolation level, session id and epoch, topics [name, partitions [partition, current leader epoch,
  fetch offset, last fetched epoch, log start offset, partition max bytes]], no forgotten topics, an
  empty rack id, and no tagged fields (no cluster id); compact arrays and strings (length + 1 as an
  unsigned varint), a zero tag count after every partition, topic and the body;
- the response is FetchResponse v12: throttle time, error code, session id, topics [name, partitions
  [partition index, error code, high watermark, last stable offset, log start offset, aborted
  transactions (nullable) [producer id, first offset], preferred read replica, records (nullable)]] with
  the tagged fields diverging epoch (tag 0), current leader (tag 1) and snapshot id (tag 2) read, and any
  other tag skipped; a missing diverging epoch or current leader reads as Kafka's defaults (-1, -1);
- anything short, a length or count past the frame, a varint longer than 5 bytes or a topic name that
  is not UTF-8 raises ProtocolError (the caller drops the connection, as for any answer that does not
  decode).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from kaflite.protocol.errors import ProtocolError
from kaflite.protocol.varint import read_uvarint, skip_tags, uvarint

__all__ = ["FetchAnswer", "PartitionAnswer", "TopicAnswer", "VERSION", "decode_response", "encode_request"]

VERSION = 12
API_KEY = 1

_HEAD = struct.Struct(">iiiibii")  # replica id, max wait, min bytes, max bytes, isolation, session id, epoch
_PARTITION = struct.Struct(">iiqiqi")  # partition, current leader epoch, fetch offset, last fetched epoch,
#                                        log start offset, partition max bytes
_ANSWER_HEAD = struct.Struct(">ihi")  # throttle time, error code, session id
_PART_HEAD = struct.Struct(">ihqqq")  # partition, error code, high watermark, last stable, log start
_ABORTED = struct.Struct(">qq")
_I32 = struct.Struct(">i")
_EPOCH_END = struct.Struct(">iq")  # diverging epoch: epoch, end offset
_LEADER = struct.Struct(">ii")  # current leader: id, epoch

# (partition, current leader epoch, fetch offset, last fetched epoch, log start offset, partition max bytes)
FetchPartition = tuple[int, int, int, int, int, int]


def encode_request(replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int, isolation_level: int,
                   session_id: int, session_epoch: int,
                   topics: Sequence[tuple[str, Sequence[FetchPartition]]]) -> bytes:
    """The body of a FetchRequest v12 (module rules)."""
    out = bytearray(_HEAD.pack(replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, session_id,
                               session_epoch))
    out += uvarint(len(topics) + 1)
    pack = _PARTITION.pack
    for name, partitions in topics:
        raw = name.encode()
        out += uvarint(len(raw) + 1)
        out += raw
        out += uvarint(len(partitions) + 1)
        for p in partitions:
            out += pack(*p)
            out.append(0)  # the partition's tagged fields
        out.append(0)  # the topic's
    out += b"\x01\x01\x00"  # no forgotten topics, rack id "", no tagged fields
    return bytes(out)


class PartitionAnswer:
    __slots__ = ("partition_index", "error_code", "high_watermark", "last_stable_offset", "log_start_offset",
                 "aborted_transactions", "preferred_read_replica", "records", "diverging_epoch",
                 "current_leader")

    def __init__(self, partition_index: int, error_code: int, high_watermark: int, last_stable_offset: int,
                 log_start_offset: int) -> None:
        self.partition_index = partition_index
        self.error_code = error_code
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        self.aborted_transactions: list[tuple[int, int]] | None = None  # (producer id, first offset)
        self.preferred_read_replica = -1
        self.records: memoryview | None = None
        self.diverging_epoch = (-1, -1)  # (epoch, end offset)
        self.current_leader = (-1, -1)  # (leader id, leader epoch)


class TopicAnswer:
    __slots__ = ("topic", "partitions")

    def __init__(self, topic: str, partitions: list[PartitionAnswer]) -> None:
        self.topic = topic
        self.partitions = partitions


class FetchAnswer:
    __slots__ = ("throttle_time_ms", "error_code", "session_id", "responses")

    def __init__(self, throttle_time_ms: int, error_code: int, session_id: int,
                 responses: list[TopicAnswer]) -> None:
        self.throttle_time_ms = throttle_time_ms
        self.error_code = error_code
        self.session_id = session_id
        self.responses = responses


def decode_response(frame: bytes | memoryview, offset: int) -> FetchAnswer:
    """A FetchResponse v12 body starting at `offset` (module rules)."""
    try:
        return _Reader(memoryview(frame), offset).answer()
    except (struct.error, UnicodeDecodeError, ValueError) as e:
        raise ProtocolError(f"Fetch v12 answer: {e}") from None


class _Reader:
    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: memoryview, pos: int) -> None:
        self.buf, self.pos, self.end = buf, pos, len(buf)

    def answer(self) -> FetchAnswer:
        throttle, error, session = _ANSWER_HEAD.unpack_from(self.buf, self.pos)
        self.pos += _ANSWER_HEAD.size
        topics = []
        for _ in range(self.count()):
            n = self.length()
            if n < 0:
                raise ProtocolError("Fetch v12 answer: a null topic name")
            name = str(self.buf[self.pos:self.pos + n], "utf-8")
            self.pos += n
            parts = []
            for _ in range(self.count()):
                parts.append(self.partition())
            self.skip_tags()
            topics.append(TopicAnswer(name, parts))
        self.skip_tags()
        return FetchAnswer(throttle, error, session, topics)

    def partition(self) -> PartitionAnswer:
        buf = self.buf
        p = PartitionAnswer(*_PART_HEAD.unpack_from(buf, self.pos))
        self.pos += _PART_HEAD.size
        aborted = self.uvarint() - 1
        if aborted >= 0:
            if aborted * _ABORTED.size > self.end - self.pos:
                raise ProtocolError(f"Fetch v12 answer: {aborted} aborted transactions beyond the frame")
            txns = []
            for _ in range(aborted):
                txns.append(_ABORTED.unpack_from(buf, self.pos))
                self.pos += _ABORTED.size
                self.skip_tags()
            p.aborted_transactions = txns
        (p.preferred_read_replica,) = _I32.unpack_from(buf, self.pos)
        self.pos += 4
        n = self.length()
        if n >= 0:
            p.records = buf[self.pos:self.pos + n]
            self.pos += n
        for _ in range(self.uvarint()):  # tagged fields
            tag = self.uvarint()
            size = self.uvarint()
            if size > self.end - self.pos:
                raise ProtocolError("Fetch v12 answer: a tagged field runs past the frame")
            if tag == 0:
                p.diverging_epoch = _EPOCH_END.unpack_from(buf, self.pos)
            elif tag == 1:
                p.current_leader = _LEADER.unpack_from(buf, self.pos)
            self.pos += size  # tag 2 (snapshot id, KRaft's) and unknown ones: skipped
        return p

    def uvarint(self) -> int:
        value, self.pos = read_uvarint(self.buf, self.pos)  # ValueError: short, or longer than 5 bytes
        return value

    def length(self) -> int:
        n = self.uvarint() - 1
        if n > self.end - self.pos:
            raise ProtocolError(f"Fetch v12 answer: a length of {n} with {self.end - self.pos} bytes left")
        return n

    def count(self) -> int:
        n = self.uvarint() - 1
        if n < 0 or n > self.end - self.pos:
            raise ProtocolError(f"Fetch v12 answer: a count of {n} null or beyond the frame")
        return n

    def skip_tags(self) -> None:
        self.pos = skip_tags(self.buf, self.pos)  # ValueError past the frame
