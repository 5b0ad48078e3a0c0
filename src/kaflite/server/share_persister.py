"""The persister (Kafka's DefaultStatePersister / PersisterStateManager): reads, initializes, writes,
summarizes and deletes a share partition's durable state at the share coordinator of another broker,
through ReadShareGroupState (84), InitializeShareGroupState (83), WriteShareGroupState (85),
ReadShareGroupStateSummary (87) and DeleteShareGroupState (86), v0 each. Used by handlers/share.py for a
share partition this broker leads, and by handlers/share_admin.py (the group coordinator's
Describe / Alter / DeleteShareGroupOffsets), whose `__share_group_state` partition another broker leads
(the state of the others is on this broker's own shards).

Rules:
- the share coordinator of a key (group, topic id, partition) is the leader of its `__share_group_state`
  partition (`partition_for(key)`) in this broker's metadata image, as FindCoordinator key type SHARE
  answers it; it is looked up again before every attempt;
- NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, no leader in the image, and a
  failed connection are retried after a backoff (doubling from `backoff_ms`, at most 1 s) at the
  coordinator the image then names, until `timeout_ms` has passed since the call; then (and at once for
  any other error, e.g. FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH) the call raises KafkaError with the last
  error (a failed connection or no leader counts as COORDINATOR_NOT_AVAILABLE);
- a `write` returns only once the share coordinator answered NONE, that is once the state is committed
  there (the coordinator answers a write after its records are committed), so an acknowledgement answered
  after it is durable, as on a single node;
- the writes of one key are sent one at a time in the order `write` was called (a lock per key, FIFO):
  a later state never lands before an earlier one; a connection carries one request at a time (a lock per
  destination broker) and is closed after a failure, opened again at the next request;
- everything runs on the broker's event loop: no call blocks it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from kio.static.primitive import i8, i16, i32, i64

from kaflite.cluster.metadata import MetadataImage
from kaflite.coordinator.share.partition import ShareSnapshot, StateBatch
from kaflite.coordinator.share.state_records import SHARE_GROUP_STATE_TOPIC, ShareStateKey
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.broker_connection import BrokerConnection, address_of
from kaflite.server.security.client import BrokerConnector
from kaflite.server.services import Slot

__all__ = ["PersistedRead", "PersistedSummary", "RETRIABLE", "SHARE_PERSISTER", "SharePersister"]

log = logging.getLogger("kaflite.share")
# the broker's persister (handlers/share.py's `persister` makes it on first use; the broker closes it at stop)
SHARE_PERSISTER: Slot[SharePersister] = Slot("share_persister")

RETRIABLE = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
                       ErrorCode.coordinator_load_in_progress})
_MAX_BACKOFF_MS = 1000


@dataclass(frozen=True, slots=True)
class PersistedRead:
    """ReadShareGroupState's answer: start offset -1 and state epoch 0 for a share partition without state."""

    state_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]

    def snapshot(self) -> ShareSnapshot | None:
        return None if self.start_offset < 0 else ShareSnapshot(self.start_offset, self.batches)


@dataclass(frozen=True, slots=True)
class PersistedSummary:
    """ReadShareGroupStateSummary's answer: start offset -1, state epoch 0 for a share partition without state."""

    state_epoch: int
    start_offset: int
    leader_epoch: int


@dataclass(slots=True)
class _Destination:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    conn: BrokerConnection | None = None


class SharePersister:
    def __init__(self, broker_id: int, image: Callable[[], MetadataImage], partition_for: Callable[[ShareStateKey], int],
                 *, listener: str | None = None, connector: BrokerConnector | None = None,
                 timeout_ms: int = 30_000, backoff_ms: int = 50,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> None:
        self.broker_id = broker_id
        self.image = image
        self.partition_for = partition_for
        self.listener = listener
        self.connector = connector
        self.timeout_ms = timeout_ms
        self.backoff_ms = backoff_ms
        self.sleep = sleep
        self._destinations: dict[int, _Destination] = {}
        self._key_locks: dict[ShareStateKey, asyncio.Lock] = {}
        self.requests_sent = 0

    # --- the three calls --------------------------------------------------------------------------
    # (the kio schemas are imported where used: the handler registry loads no protocol schema before the
    # broker listens, tests/server/test_start_up_work.py)
    async def read(self, key: ShareStateKey, leader_epoch: int) -> PersistedRead:
        from kio.schema.read_share_group_state.v0 import request as read_req
        from kio.schema.read_share_group_state.v0.response import ReadShareGroupStateResponse

        req = read_req.ReadShareGroupStateRequest(group_id=key.group_id, topics=(read_req.ReadStateData(
            topic_id=key.topic_id, partitions=(read_req.PartitionData(
                partition=i32(key.partition), leader_epoch=i32(leader_epoch)),)),))
        p = await self._call(key, req, ReadShareGroupStateResponse)
        return PersistedRead(int(p.state_epoch), int(p.start_offset), tuple(
            StateBatch(int(b.first_offset), int(b.last_offset), int(b.delivery_state), int(b.delivery_count))
            for b in p.state_batches))

    async def initialize(self, key: ShareStateKey, state_epoch: int, start_offset: int) -> None:
        from kio.schema.initialize_share_group_state.v0 import request as init_req
        from kio.schema.initialize_share_group_state.v0.response import InitializeShareGroupStateResponse

        req = init_req.InitializeShareGroupStateRequest(group_id=key.group_id, topics=(init_req.InitializeStateData(
            topic_id=key.topic_id, partitions=(init_req.PartitionData(
                partition=i32(key.partition), state_epoch=i32(state_epoch), start_offset=i64(start_offset)),)),))
        await self._call(key, req, InitializeShareGroupStateResponse)

    async def write(self, key: ShareStateKey, state_epoch: int, leader_epoch: int, snapshot: ShareSnapshot) -> None:
        """The whole state (its start offset and every batch from it): WriteShareGroupState merges batches
        over the held state, so a state covering every offset from its start replaces it."""
        from kio.schema.write_share_group_state.v0 import request as write_req
        from kio.schema.write_share_group_state.v0.response import WriteShareGroupStateResponse

        req = write_req.WriteShareGroupStateRequest(group_id=key.group_id, topics=(write_req.WriteStateData(
            topic_id=key.topic_id, partitions=(write_req.PartitionData(
                partition=i32(key.partition), state_epoch=i32(state_epoch), leader_epoch=i32(leader_epoch),
                start_offset=i64(snapshot.start_offset), state_batches=tuple(
                    write_req.StateBatch(first_offset=i64(b.first_offset), last_offset=i64(b.last_offset),
                                         delivery_state=i8(b.delivery_state), delivery_count=i16(b.delivery_count))
                    for b in snapshot.batches)),)),))
        lock = self._key_locks.setdefault(key, asyncio.Lock())
        try:
            async with lock:  # one key's writes in call order
                await self._call(key, req, WriteShareGroupStateResponse)
        finally:
            if not lock.locked() and self._key_locks.get(key) is lock:
                del self._key_locks[key]

    async def summary(self, key: ShareStateKey) -> PersistedSummary:
        """ReadShareGroupStateSummary (87), for the group coordinator's DescribeShareGroupOffsets and
        AlterShareGroupOffsets: sent with leader epoch -1, which the share coordinator fences nothing with
        (an admin read, not a leader's)."""
        from kio.schema.read_share_group_state_summary.v0 import request as summary_req
        from kio.schema.read_share_group_state_summary.v0.response import ReadShareGroupStateSummaryResponse

        req = summary_req.ReadShareGroupStateSummaryRequest(group_id=key.group_id, topics=(
            summary_req.ReadStateSummaryData(topic_id=key.topic_id, partitions=(summary_req.PartitionData(
                partition=i32(key.partition), leader_epoch=i32(-1)),)),))
        p = await self._call(key, req, ReadShareGroupStateSummaryResponse)
        return PersistedSummary(int(p.state_epoch), int(p.start_offset), int(p.leader_epoch))

    async def delete(self, key: ShareStateKey) -> None:
        """DeleteShareGroupState (86): the key's state gets tombstones there, committed before the answer."""
        from kio.schema.delete_share_group_state.v0 import request as delete_req
        from kio.schema.delete_share_group_state.v0.response import DeleteShareGroupStateResponse

        req = delete_req.DeleteShareGroupStateRequest(group_id=key.group_id, topics=(delete_req.DeleteStateData(
            topic_id=key.topic_id, partitions=(delete_req.PartitionData(partition=i32(key.partition)),)),))
        await self._call(key, req, DeleteShareGroupStateResponse)

    def close(self) -> None:
        for dest in self._destinations.values():
            if dest.conn is not None:
                dest.conn.close()
                dest.conn = None

    # --- retries ----------------------------------------------------------------------------------
    def coordinator_of(self, key: ShareStateKey) -> int:
        """The broker leading the key's `__share_group_state` partition; -1 when the image names none."""
        reg = self.image().partition(SHARE_GROUP_STATE_TOPIC, self.partition_for(key))
        return -1 if reg is None else int(reg.leader)

    async def _call(self, key: ShareStateKey, req: Any, schema: Any) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_ms / 1000
        backoff = self.backoff_ms
        while True:
            dest = self.coordinator_of(key)
            code = ErrorCode.coordinator_not_available
            if dest >= 0:
                try:
                    p = await self._send(dest, req, schema, max(0.1, deadline - loop.time()))
                    code = ErrorCode(int(getattr(p.error_code, "value", p.error_code)))
                    if code is ErrorCode.none:
                        return p
                except (TimeoutError, OSError, ConnectionError, EOFError) as e:
                    log.debug("share state of %s at broker %d: %s", key, dest, e)
                    code = ErrorCode.coordinator_not_available  # the connection failed: asked again
            if code not in RETRIABLE or loop.time() + backoff / 1000 > deadline:
                raise KafkaError(code, f"share state of {key.group_id}:{key.topic_id}:{key.partition} at broker "
                                       f"{dest}: {code.name.upper()}")
            await self.sleep(backoff / 1000)
            backoff = min(backoff * 2, _MAX_BACKOFF_MS)

    async def _send(self, broker: int, req: Any, schema: Any, timeout_s: float) -> Any:
        """The one partition answer of `req` at `broker` (one request at a time per connection)."""
        dest = self._destinations.setdefault(broker, _Destination())
        async with dest.lock:
            try:
                if dest.conn is None:
                    host, port = address_of(self.image(), broker, self.listener)
                    dest.conn = await BrokerConnection.open(host, port, f"broker-{self.broker_id}-share-persister",
                                                            timeout_s, self.connector)
                self.requests_sent += 1
                resp = await dest.conn.request(req, schema, timeout_s)
            except BaseException:
                if dest.conn is not None:
                    dest.conn.close()
                    dest.conn = None
                raise
        return resp.results[0].partitions[0]
