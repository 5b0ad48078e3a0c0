"""The writer of a coordinator's internal topic (`__consumer_offsets`, `__transaction_state`,
`__share_group_state`): a coordinator runtime's batches appended to the partition it leads, answered once
committed (flushed first where the topic's flush settings ask for it), and its partitions replayed on load.
One module for the three coordinator services (groups.py, transactions.py, share_state.py beside it), so
none of them imports another for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable, Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from kaflite.coordinator import OFFSETS_TOPIC
from kaflite.coordinator.runtime import (
    EndTransactionMarker,
    LoadedRecord,
    Producer,
    Record,
    TransactionalRecord,
)
from kaflite.protocol.control_record import parse_marker
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.record_batch import build_record_batch, decode_records, iter_batches
from kaflite.server.coordinators.broker_api import CoordinatorBroker

__all__ = ["InternalTopicWriter", "OffsetsTopicWriter", "WriterService", "committed_end", "flushed_then", "log_position"]

log = logging.getLogger("kaflite.coordinator")


class WriterService(Protocol):
    """What the writer reads of the coordinator shell that owns it (GroupService)."""

    broker: CoordinatorBroker
    codec: int  # offsets.topic.compression.codec
    commit_timeout_ms: int  # offsets.commit.timeout.ms
    load_buffer_size: int  # offsets.load.buffer.size


_LOAD_CHUNK = 1 << 20
T = TypeVar("T")


def flushed_then(part: Any, last_offset: int, then: Awaitable[None] | None) -> Awaitable[None] | None:
    """The coordinator writers' durability under `flush.messages` (as a produce's): when the log asks for
    a flush before acknowledging (`Log.flush_up_to`, e.g. flush.messages=1), the write is fsync'd in a
    worker thread (group commit with every other append) before `then` (the wait for the high watermark);
    a failed fsync answers KAFKA_STORAGE_ERROR. Otherwise `then` unchanged."""
    lg = part.log
    end = last_offset + 1
    if lg is None or not lg.flush_needed(end):
        return then

    async def flush_then_wait() -> None:
        try:
            await asyncio.to_thread(lg.flush_up_to, end)
        except OSError as e:
            raise KafkaError(ErrorCode.kafka_storage_error, f"flush of {lg.dir.name} failed: {e}") from e
        if then is not None:
            await then

    return flush_then_wait()


def committed_end(broker: CoordinatorBroker, topic: str, partition: int,
                  committed: Callable[[Any, int], Awaitable[None]]) -> Awaitable[None] | None:
    """The coordinator writers' `committed_end`: refused (NOT_LEADER_OR_FOLLOWER) unless this broker leads
    the partition; None when its high watermark is at its log end; else `committed(part, last offset)`."""
    part = broker.replica_manager.get_partition(topic, partition)  # raises unless this broker leads it
    lg = part.log
    if lg is None:  # its log not open (yet): not served, as get_partition answers while it opens
        raise KafkaError(ErrorCode.not_leader_or_follower, f"{topic}-{partition}: its log is not open")
    end = lg.log_end_offset
    if lg.high_watermark >= end:
        return None
    return committed(part, end - 1)


def log_position(lg: Any) -> Hashable:
    """A coordinator partition's position (see PartitionWriter.position): the Log object (a replica dropped
    and fetched again is another one), its log end offset, and the leader epoch of its last record (the
    last epoch entry starting below the log end). Only one leader writes in an epoch, so an equal position
    means equal content. A new leader's epoch entry at the log end (recorded at the election, before any
    batch) changes nothing the shard holds, so it does not move the position."""
    end = lg.log_end_offset
    last = next((e for e, start in reversed(lg.leader_epoch_cache.entries) if start < end), -1)
    return (lg, end, last)


class OffsetsTopicWriter:
    """The runtime's PartitionWriter over this broker's `__consumer_offsets` logs.

    `append` writes one batch as leader through the ReplicaManager (acks=-1) and returns an awaitable that
    resolves once the partition's high watermark has passed the batch (single node: at once; with
    replicas, when the ISR has it), within offsets.commit.timeout.ms (else REQUEST_TIMED_OUT, which
    clients see as COORDINATOR_NOT_AVAILABLE). An error of the write itself raises at once (a disk
    error as KAFKA_STORAGE_ERROR).
    """

    def __init__(self, service: WriterService) -> None:
        self.service = service
        self.broker = service.broker

    def append(self, partition: int, records: Sequence[Record], producer: Producer | None = None
               ) -> Awaitable[None] | None:
        entries: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [(k, v, []) for k, v in records]
        if producer is None:
            batch = build_record_batch(entries, timestamp_ms=self.broker.now_ms(), compression=self.service.codec)
        else:  # a transactional offset commit: a batch of the producer's transaction
            pid, epoch = producer
            batch = build_record_batch(entries, timestamp_ms=self.broker.now_ms(), compression=self.service.codec,
                                       producer_id=pid, producer_epoch=epoch, is_transactional=True,
                                       base_sequence=self._next_sequence(partition, pid, epoch))
        # written now, as leader, with acks=-1 (the write happens before this returns, so a reload that
        # follows reads it); committed when the partition's high watermark passes it
        replicas = self.broker.replica_manager
        part, result = replicas.append_records(OFFSETS_TOPIC, partition, batch, -1, internal_topics_allowed=True)
        if part.high_watermark > result.last_offset:  # committed already (a single replica): no wait
            return flushed_then(part, int(result.last_offset), None)
        return flushed_then(part, int(result.last_offset), self._committed(part, int(result.last_offset)))

    def _next_sequence(self, partition: int, producer_id: int, epoch: int) -> int:
        """The sequence the partition's producer state expects next from this producer: the coordinator
        writes its transactional batches in sequence (Kafka appends them as origin COORDINATOR, which skips
        the sequence check; the same effect with the checks kaflite's log makes)."""
        entry = self.log(partition).producer_state.producers.get(producer_id)
        if entry is None or entry.producer_epoch != epoch or not entry.batches:
            return 0
        return (entry.last_seq + 1) & 0x7FFFFFFF

    def log(self, partition: int) -> Any:
        """The partition's local log (storage.Log)."""
        return self.broker.get_log(OFFSETS_TOPIC, partition)

    def committed_end(self, partition: int) -> Awaitable[None] | None:
        """After a load: None when the high watermark is at the log end (always, on one node), else the
        wait for the records written but not yet committed. Raises NOT_LEADER_OR_FOLLOWER when this broker
        does not lead the partition (a reload after a failed write must not make a follower's shard
        active: its high watermark may well be at its log end)."""
        return committed_end(self.broker, OFFSETS_TOPIC, partition, self._committed)

    def position(self, partition: int) -> Hashable | None:
        """The log, its end offset and its latest leader epoch: anything another leader wrote (a later
        epoch) or a truncation changes it (the coordinator runtime's proof that a shard holds the log)."""
        return log_position(self.log(partition))

    async def _committed(self, part: Any, last_offset: int) -> None:
        timeout_ms = self.service.commit_timeout_ms
        code = await self.broker.replica_manager.wait_committed(part, last_offset + 1,
                                                                self.broker.now_ms() + timeout_ms)
        if code is not ErrorCode.none:
            raise KafkaError(code, f"{OFFSETS_TOPIC}-{part.partition} did not commit offset {last_offset}")

    # A partition holding more than this is read and decoded in a worker thread; a smaller one at once
    # (the hop to a thread costs more than replaying a few KiB, and the shard is usable sooner).
    THREAD_MIN_BYTES = _LOAD_CHUNK

    def read(self, partition: int) -> Iterable[LoadedRecord] | Awaitable[list[LoadedRecord]]:
        """Every keyed record of the partition, in offset order: those of transactional batches as
        TransactionalRecord, the COMMIT / ABORT markers as EndTransactionMarker. A big
        partition is read and decoded in a worker thread (the Log's lock makes that safe), so a long
        replay does not stall the event loop; the shard answers COORDINATOR_LOAD_IN_PROGRESS meanwhile."""
        lg = self.log(partition)
        size = self.service.load_buffer_size  # offsets.load.buffer.size: bytes per read of the replay
        if lg.size <= self.THREAD_MIN_BYTES:
            return list(self.loaded_records(lg, size))
        return asyncio.to_thread(lambda: list(self.loaded_records(lg, size)))

    def records(self, partition: int) -> Iterator[Record]:
        """The (key, value) of every keyed record, read now on the caller's thread (tools and tests)."""
        for item in self.loaded_records(self.log(partition)):
            if isinstance(item, TransactionalRecord):
                yield item.key, item.value
            elif not isinstance(item, EndTransactionMarker):
                yield item

    @staticmethod
    def loaded_records(lg: Any, read_bytes: int = _LOAD_CHUNK) -> Iterator[LoadedRecord]:
        """The log replayed `read_bytes` at a time (a soft limit: a larger batch is read whole)."""
        offset = lg.log_start_offset
        end = lg.log_end_offset
        for _ in range(1_000_000):
            if offset >= end:
                break
            info = lg.read(offset, read_bytes)
            data = b"".join(bytes(part) for part in info.records)
            if not data:
                break
            last = offset
            for batch in iter_batches(data):
                if batch.is_control:
                    marker = parse_marker(batch)
                    if marker is not None and batch.base_offset >= offset:
                        yield EndTransactionMarker(batch.producer_id, marker.is_commit)
                elif batch.is_transactional:
                    for record in decode_records(batch):
                        if record.offset >= offset and record.key is not None:
                            yield TransactionalRecord(batch.producer_id, record.key, record.value)
                else:
                    for record in decode_records(batch):
                        if record.offset >= offset and record.key is not None:
                            yield record.key, record.value
                last = batch.last_offset + 1
            if last <= offset:
                break
            offset = last


class InternalTopicWriter:
    """The runtime's PartitionWriter over an internal topic never written transactionally
    (`__transaction_state`, `__share_group_state`): one batch per append as leader through the
    ReplicaManager (acks=-1), answered once the partition's high watermark passed it (at once with one
    replica), flushed first where the topic's flush settings ask, within `timeout_ms` (else the
    replica manager's code, REQUEST_TIMED_OUT); replayed `load_buffer_size` bytes per read, in a worker
    thread past `OffsetsTopicWriter.THREAD_MIN_BYTES`."""

    def __init__(self, broker: CoordinatorBroker, topic: str, timeout_ms: int, load_buffer_size: int) -> None:
        self.broker = broker
        self.topic = topic
        self.timeout_ms = timeout_ms
        self.load_buffer_size = load_buffer_size

    def log(self, partition: int) -> Any:
        return self.broker.get_log(self.topic, partition)

    def append(self, partition: int, records: Sequence[Record], producer: Producer | None = None
               ) -> Awaitable[None] | None:
        assert producer is None, f"{self.topic} is never written transactionally"
        batch = build_record_batch([(k, v, []) for k, v in records], timestamp_ms=self.broker.now_ms())
        part, result = self.broker.replica_manager.append_records(self.topic, partition, batch, -1,
                                                                  internal_topics_allowed=True)
        last = int(result.last_offset)
        if part.high_watermark > last:  # one replica: committed by the append
            return flushed_then(part, last, None)
        return flushed_then(part, last, self._committed(part, last))

    def committed_end(self, partition: int) -> Awaitable[None] | None:
        """As the offsets topic's: refused unless this broker leads the partition."""
        return committed_end(self.broker, self.topic, partition, self._committed)

    def position(self, partition: int) -> Hashable | None:
        return log_position(self.log(partition))

    async def _committed(self, part: Any, last_offset: int) -> None:
        code = await self.broker.replica_manager.wait_committed(
            part, last_offset + 1, self.broker.now_ms() + self.timeout_ms)
        if code is not ErrorCode.none:
            raise KafkaError(code, f"{self.topic}-{part.partition} did not commit offset {last_offset}")

    def read(self, partition: int) -> Iterable[LoadedRecord] | Awaitable[list[LoadedRecord]]:
        lg = self.log(partition)
        size = self.load_buffer_size
        if lg.size <= OffsetsTopicWriter.THREAD_MIN_BYTES:
            return list(OffsetsTopicWriter.loaded_records(lg, size))
        return asyncio.to_thread(lambda: list(OffsetsTopicWriter.loaded_records(lg, size)))
