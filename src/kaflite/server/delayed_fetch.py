"""DelayedFetch: whether a parked Fetch may complete, decided from offsets and positions, never by reading.

Why: a long-polled fetch used to read every partition of its session again on every append to any of them;
a consumer with fetch.min.bytes of 100 KB on a partition receiving 100-byte batches made the broker read
the log a thousand times to answer once. Kafka's DelayedFetch compares offsets instead, and reads once.

Rules (Kafka's `DelayedFetch.tryComplete`):
- a Fetch its first read did not answer parks (`DelayedFetch.park`): per partition the fetch offset, the
  position of that offset (`Log.position_of`: segment base, byte position; no record read), its
  partition_max_bytes, and the state it was read against: the `Partition` and `Log` objects, the leader
  epoch, the log's truncation count;
- woken (an append, a moved high watermark, a stopped partition complete its fetch key), `try_complete`
  takes per partition the end offset the fetch may read to — the log end offset for a follower, the last
  stable offset for read_committed, the high watermark otherwise — and its position, and decides without
  reading a record:
  * complete at once when the partition errs now (gone, not led here, the request's current leader epoch
    fenced or unknown, the follower no longer one of its replicas), the `Partition`, its `Log` or its
    leader epoch is not the one parked with (a leader change), the log was truncated, the log start offset
    passed the fetch offset, the end offset lies on an older segment than the fetch offset (truncated under
    it) or the fetch offset on an older segment than the end offset (behind, or the segment rolled), a
    follower's last fetched epoch now diverges or is unknown (Kafka's case H), or (KIP-1166, v18) the high
    watermark here is above the one the follower knows;
  * else, an end offset above the fetch offset on the same segment counts (end position - fetch position)
    bytes, at most the partition's max bytes (`available_bytes`); the fetch completes once the sum over
    its partitions reaches min_bytes (`enough`);
- nothing here reads the log: the handler (fetch.py) reads every partition once more when it completes or
  max_wait elapses, never per wake-up;
- one check costs O(partitions of the fetch) dictionary look-ups and comparisons; `Log.position_of` of an
  end offset other than the log end reads at most one index interval of headers, once per offset and log
  (remembered), so parked fetches on a partition share it.
Differences from Kafka: a truncation or a log start offset moved past the fetch offset completes at once
(Kafka completes only when the end offset left the fetch offset's segment, and otherwise answers the
OFFSET_OUT_OF_RANGE at max_wait); a compaction that rewrote the fetch offset's segment while the fetch
waited leaves its position stale (the estimate may be early or late; what is sent is read at completion).
All of it runs on the broker's event loop thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kaflite.protocol.errors import KafkaError
from kaflite.server.replica.partition import Partition
from kaflite.storage.log import Log

__all__ = ["DelayedFetch", "ParkedPartition", "available_bytes", "enough"]

Position = tuple[int, int]  # (segment base offset, byte position in that segment)


def available_bytes(fetch_offset: int, start: Position, end_offset: int, end: Position,
                    max_bytes: int) -> int | None:
    """Bytes a fetch from `fetch_offset` (at `start`) could read up to `end_offset` (at `end`), capped at
    `max_bytes`; None when the two lie on different segments (a roll, a truncation, a fetch behind): the
    fetch completes at once. 0 when the end offset is not above the fetch offset."""
    if end_offset == fetch_offset:  # checked first: a roll at the end leaves the offset, not its segment
        return 0
    if end[0] != start[0]:
        return None
    if fetch_offset < end_offset:
        return max(0, min(end[1] - start[1], max_bytes))
    return 0


def enough(available: Iterable[int | None], min_bytes: int) -> bool:
    """A fetch completes when a partition says so (None) or the bytes available reach `min_bytes`."""
    total = 0
    for got in available:
        if got is None:
            return True
        total += got
        if total >= min_bytes:
            return True
    return total >= min_bytes


@dataclass(slots=True)
class ParkedPartition:
    key: tuple[str, int]
    fetch_offset: int
    max_bytes: int  # the partition's partition_max_bytes
    part: Partition
    log: Log
    leader_epoch: int
    truncations: int
    start: Position  # where the fetch offset lies
    state: Any  # the PartitionState last checked (frozen, replaced on every change: identity says "unchanged")
    current_leader_epoch: int = -1  # the request's, -1: unchecked
    last_fetched_epoch: int = -1  # v12+, -1: unchecked
    known_high_watermark: int | None = None  # v18 followers: the high watermark the follower knows


class DelayedFetch:
    """A parked fetch's partitions and what it needs (see the rules)."""

    __slots__ = ("_replicas", "parts", "min_bytes", "replica_id", "read_committed", "checks")

    def __init__(self, replicas: Any, parts: list[ParkedPartition], min_bytes: int, replica_id: int,
                 read_committed: bool) -> None:
        self._replicas = replicas
        self.parts = parts
        self.min_bytes = min_bytes
        self.replica_id = replica_id
        self.read_committed = read_committed
        self.checks = 0  # how many times try_complete ran (tests, the bench)

    @classmethod
    def park(cls, replicas: Any, targets: list[tuple[tuple[str, int], Any]], min_bytes: int, replica_id: int,
             read_committed: bool, leader_epochs: dict[tuple[str, int], int] | None = None,
             last_fetched: dict[tuple[str, int], int] | None = None,
             known_high_watermarks: dict[tuple[str, int], int] | None = None) -> DelayedFetch | None:
        """The parked state of a fetch of `targets` ((topic, partition), FetchTarget), or None when a
        partition is not readable here now (the fetch then completes at once)."""
        parts: list[ParkedPartition] = []
        for key, target in targets:
            part = replicas.partition_or_none(*key)
            log = None if part is None else part.log
            if part is None or log is None:
                return None
            offset = int(target.fetch_offset)
            if offset < log.log_start_offset or offset > log.log_end_offset:
                return None
            parked = ParkedPartition(
                key, offset, int(target.max_bytes), part, log, part.state.leader_epoch, log.truncations,
                log.position_of(offset), None, leader_epochs.get(key, -1) if leader_epochs else -1,
                last_fetched.get(key, -1) if last_fetched else -1,
                known_high_watermarks.get(key) if known_high_watermarks else None)
            if not _still_served(replicas, parked, replica_id):
                return None
            parts.append(parked)
        return cls(replicas, parts, min_bytes, replica_id, read_committed)

    def try_complete(self) -> bool:
        """Whether the fetch may complete now (see the rules); reads no record."""
        self.checks += 1
        return enough(self._available(), self.min_bytes)

    def _available(self) -> Iterator[int | None]:
        """Per partition: the bytes it could add, or None for "complete now" (after which nothing more)."""
        replicas = self._replicas
        partitions = replicas.partitions
        replica_id = self.replica_id
        follower = replica_id >= 0
        committed = self.read_committed
        for p in self.parts:
            part = partitions.get(p.key)
            log = p.log
            fetch_offset = p.fetch_offset
            # the same Partition, Log and PartitionState objects: nothing about leadership moved (the fast
            # path, no call); a new state is checked in full once (an ISR change alone keeps the fetch)
            if part is not p.part or part.log is not log or log.truncations != p.truncations \
                    or (part.state is not p.state and not _still_served(replicas, p, replica_id)) \
                    or fetch_offset < log.log_start_offset \
                    or (p.known_high_watermark is not None and log.high_watermark > p.known_high_watermark):
                yield None
                return
            if p.last_fetched_epoch >= 0:
                try:
                    diverging = part.diverging_epoch(p.last_fetched_epoch, fetch_offset)
                except KafkaError:
                    diverging = (-1, -1)
                if diverging is not None:
                    yield None
                    return
            if follower:
                end_offset = log.log_end_offset
            elif committed:
                end_offset = log.last_stable_offset
            else:
                end_offset = log.high_watermark
            if end_offset == fetch_offset:
                yield 0
            else:
                yield available_bytes(fetch_offset, p.start, end_offset, log.position_of(end_offset), p.max_bytes)


def _still_served(replicas: Any, p: ParkedPartition, replica_id: int) -> bool:
    """The partition's access checks as the first read made them (`ReplicaManager.get_partition`: led here,
    the request's current leader epoch; a follower still a replica) and the leader epoch parked with; on
    success the state checked is remembered (`ParkedPartition.state`)."""
    try:
        part = replicas.get_partition(p.key[0], p.key[1], current_leader_epoch=p.current_leader_epoch)
        if replica_id >= 0:
            part.check_follower(replica_id)
    except KafkaError:
        return False
    if part is not p.part or part.state.leader_epoch != p.leader_epoch:
        return False
    p.state = part.state
    return True
