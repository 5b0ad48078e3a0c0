"""`TransactionService`, the transaction coordinator of one broker: the pure transaction coordinator
shards (kaflite.coordinator.transaction) on the coordinator runtime over `__transaction_state`, the
markers they ask for, and the periodic task. The transaction APIs (kaflite.server.handlers.transactions)
parse and answer requests through it.

Rules of the service:
- one TransactionService per broker (`broker.services`, slot `TRANSACTION_SERVICE`), created at start-up
  when `__transaction_state` exists, else on the first transactional request: it creates the compacted
  topic (transaction.state.log.num.partitions, .replication.factor - in a cluster, refused while fewer
  brokers are alive; 1 on a single node -, .min.isr, .segment.bytes: internal_topic.TRANSACTION_STATE) and
  loads a shard per partition this broker leads; leadership changes load / unload shards
  (kaflite.coordinator.leadership);
- a request runs as a step on the shard of `partition_for(transactional.id)`; its `__transaction_state`
  records are appended as one batch and the answer leaves once they are committed (the runtime's rule);
- markers: when a step moves a transaction to PrepareCommit / PrepareAbort, its answer carries the markers
  to write; the service writes them to each partition's leader through the marker channel
  (server/txn_marker_channel.py: on this node `write_markers`, the function WriteTxnMarkers runs; on other
  brokers WriteTxnMarkers requests, retried until written or this broker stops coordinating the id), then
  runs the shard's `complete` step (CompleteCommit / CompleteAbort). The periodic task re-sends the
  markers of every transaction found in Prepare* after a load (a crash between PrepareCommit and the markers completes the commit), aborts transactions past
  their timeout (transaction.abort.timed.out.transaction.cleanup.interval.ms) and removes transactional
  ids idle past transactional.id.expiration.ms (transaction.remove.expired.transaction.cleanup.interval.ms);
- transactional offsets end in the group coordinator: a marker written to a `__consumer_offsets`
  partition is handed to its group shard (COMMIT: the producer's pending offsets become committed, ABORT:
  dropped), as Kafka's completeTransaction.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from kaflite.coordinator import OFFSETS_TOPIC
from kaflite.coordinator.leadership import leadership_changes
from kaflite.coordinator.runtime import CoordinatorRuntime
from kaflite.coordinator.transaction import (
    TRANSACTION_STATE_TOPIC,
    MarkerJob,
    TransactionCoordinatorShard,
    TxnConfig,
    partition_for,
)
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.coordinators.broker_api import CoordinatorBroker
from kaflite.server.coordinators.groups import GroupService
from kaflite.server.coordinators.internal_topic import TRANSACTION_STATE, ensure_async
from kaflite.server.coordinators.writer import InternalTopicWriter
from kaflite.server.services import Slot
from kaflite.server.txn_marker_channel import TransactionMarkerChannelManager

__all__ = ["TRANSACTION_SERVICE", "TransactionService", "load_at_start"]

log = logging.getLogger("kaflite.coordinator")

TRANSACTION_SERVICE: Slot[TransactionService] = Slot("transaction_coordinator")


class TransactionService:
    def __init__(self, broker: CoordinatorBroker) -> None:
        self.broker = broker
        setting = broker.setting
        self.config = TxnConfig(
            max_timeout_ms=int(setting("transaction.max.timeout.ms")),
            id_expiration_ms=int(setting("transactional.id.expiration.ms")),
            num_partitions=int(setting("transaction.state.log.num.partitions")),
        )
        self.commit_timeout_ms = int(setting("offsets.commit.timeout.ms"))
        self.abort_interval_ms = int(setting("transaction.abort.timed.out.transaction.cleanup.interval.ms"))
        self.expire_interval_ms = int(setting("transaction.remove.expired.transaction.cleanup.interval.ms"))
        self.load_buffer_size = int(setting("transaction.state.log.load.buffer.size"))
        # offsets.commit.timeout.ms: Kafka's transaction state log uses the request timeout
        self.writer = InternalTopicWriter(broker, TRANSACTION_STATE_TOPIC, self.commit_timeout_ms,
                                          self.load_buffer_size)
        self.runtime: CoordinatorRuntime[TransactionCoordinatorShard] = CoordinatorRuntime(
            self._new_shard, self.writer, broker.now_ms, "transaction coordinator")
        self._in_flight: set[str] = set()  # transactional ids whose markers are being written
        self.channel = TransactionMarkerChannelManager(
            broker.node_id, lambda: broker.metadata, self.write_markers,
            listener=broker.config.inter_broker_listener_name, connector=broker.inter_broker_connector,
            request_timeout_ms=int(setting("replica.socket.timeout.ms")))  # the inter-broker network timeout

    def _new_shard(self, partition: int) -> TransactionCoordinatorShard:
        return TransactionCoordinatorShard(self.config, self.broker.producer_ids.next_id)

    # --- lifecycle ------------------------------------------------------------------------------

    @classmethod
    def of(cls, broker: CoordinatorBroker) -> TransactionService:
        """The broker's TransactionService, started on first use."""
        return broker.services.start(TRANSACTION_SERVICE, lambda: cls(broker), TransactionService.start)

    @classmethod
    async def of_async(cls, broker: CoordinatorBroker) -> TransactionService:
        """`of`, with `__transaction_state` created first in a worker thread when missing on a single node
        (`ensure_async`), so that the service finds it when it starts."""
        await ensure_async(broker, TRANSACTION_STATE)
        return cls.of(broker)

    def start(self) -> None:
        self.ensure_topic()
        loads = []
        if getattr(self.broker, "log_manager", None) is not None:
            for partition in range(self.config.num_partitions):
                reg = self.broker.metadata.partition(TRANSACTION_STATE_TOPIC, partition)
                if reg is not None and reg.leader == self.broker.node_id:
                    loads.append(self.runtime.load(partition, reg.leader_epoch))
            self.broker.metadata_writer.subscribe(self._on_image)
        self.loaded: asyncio.Future[Any] = asyncio.gather(*loads)
        self.loaded.add_done_callback(lambda _f: self._resend_pending())
        self.broker.add_task(asyncio.ensure_future(self.runtime.run_timers()))
        self.broker.add_task(asyncio.ensure_future(self._housekeeping()))

    def ensure_topic(self) -> Any:
        """`__transaction_state`, created first when missing (replication factor
        transaction.state.log.replication.factor in a cluster, 1 on a single node). None in a cluster while it
        is not in the metadata image yet (being created off the event loop, just created, or refused while
        fewer brokers are alive)."""
        topic = TRANSACTION_STATE.ensure(self.broker, self.config.num_partitions)
        if topic is not None:
            self._adopt(topic)
        return topic

    def _adopt(self, topic: Any) -> None:
        if topic.num_partitions != self.config.num_partitions:
            log.warning("%s has %d partitions; transaction.state.log.num.partitions=%d is ignored",
                        TRANSACTION_STATE_TOPIC, topic.num_partitions, self.config.num_partitions)
            self.config = dataclasses.replace(self.config, num_partitions=topic.num_partitions)

    def _on_image(self, old: Any, new: Any) -> None:
        """Leadership of `__transaction_state` partitions moved: load / unload their shards with the new
        image's leader epoch (kaflite.coordinator.leadership's rules); a loaded shard's transactions left in
        Prepare* get their markers sent again."""
        changes = leadership_changes(old, new, TRANSACTION_STATE_TOPIC, self.broker.node_id)
        if changes.appeared is not None:  # created (by any broker) since we started: its partition count decides
            self._adopt(changes.appeared)
        for partition, epoch in changes.unloads:
            self.runtime.unload(partition, epoch)
        for partition, epoch in changes.loads:
            self.runtime.load(partition, epoch).add_done_callback(lambda _f: self._resend_pending())

    # --- routing --------------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def coordinator_epoch(self, transactional_id: str) -> int:
        return max(0, self.runtime.leader_epoch(self.partition_for(transactional_id)) or 0)

    async def call(self, transactional_id: str, op: Callable[[TransactionCoordinatorShard, int], Any]) -> Any:
        """Run a step on the id's shard; its answer once committed. Raises KafkaError (NOT_COORDINATOR...)."""
        return await self.runtime.write(self.partition_for(transactional_id), op)

    def shard_or_none(self, transactional_id: str) -> TransactionCoordinatorShard | None:
        try:
            return self.runtime.shard(self.partition_for(transactional_id))
        except KafkaError:
            return None

    # --- markers --------------------------------------------------------------------------------

    def spawn_markers(self, job: MarkerJob) -> None:
        if job.transactional_id in self._in_flight:
            return
        self._in_flight.add(job.transactional_id)
        # held by the broker's services until done, cancelled at its stop (server/services.py)
        self.broker.services.spawn(self._complete(job), name=f"txn-markers-{job.transactional_id}")

    async def _complete(self, job: MarkerJob) -> None:
        try:
            partition = self.partition_for(job.transactional_id)
            leader_epoch = self.runtime.leader_epoch(partition)

            def still_coordinator() -> bool:
                return self.shard_or_none(job.transactional_id) is not None and \
                    self.runtime.leader_epoch(partition) == leader_epoch

            written = await self.channel.send(job, self.coordinator_epoch(job.transactional_id), still_coordinator)
            if not written:
                log.info("transaction %r: no longer its coordinator; the new one completes it", job.transactional_id)
                return
            await self.call(job.transactional_id,
                            lambda s, now: s.complete(job.transactional_id, job.producer_id, job.producer_epoch, now))
        except KafkaError as e:
            log.warning("transaction %r: completing failed (%s); retried by the periodic task",
                        job.transactional_id, e)
        except Exception:  # noqa: BLE001 - a marker task must never die silently
            log.exception("transaction %r: writing markers failed", job.transactional_id)
        finally:
            self._in_flight.discard(job.transactional_id)

    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                            partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """WriteTxnMarkers on this broker, the leader of each partition (else NOT_LEADER_OR_FOLLOWER): a marker
        per partition, answered once replicated (acks=-1, as Kafka appends markers); on a `__consumer_offsets`
        partition the group shard then ends the producer's pending offsets (an error there is answered, so
        the coordinator sends the marker again). The error per partition."""
        out: dict[tuple[str, int], ErrorCode] = {}
        replicas = self.broker.replica_manager
        appended = []
        for topic, partition in partitions:
            try:
                part, result = replicas.append_txn_marker(topic, partition, producer_id, producer_epoch, commit,
                                                          coordinator_epoch)
                appended.append(((topic, partition), part, int(result.last_offset) + 1))
            except KafkaError as e:
                out[(topic, partition)] = e.code
        if appended:
            deadline = self.broker.now_ms() + self.commit_timeout_ms
            codes = await asyncio.gather(*(replicas.wait_committed(part, end, deadline) for _tp, part, end in appended))
            for (tp, _part, _end), code in zip(appended, codes, strict=True):
                out[tp] = code
                if tp[0] == OFFSETS_TOPIC and code is ErrorCode.none:
                    out[tp] = await self._end_offsets_transaction(tp[1], producer_id, commit)
        return out

    async def _end_offsets_transaction(self, offsets_partition: int, producer_id: int, commit: bool) -> ErrorCode:
        """The marker is in the `__consumer_offsets` partition: the group shard commits or drops the
        producer's pending offsets (Kafka's completeTransaction)."""
        try:
            groups = GroupService.of(self.broker)
            await groups.runtime.write(offsets_partition, _end_transaction(producer_id, commit))
        except KafkaError as e:
            return e.code
        return ErrorCode.none

    def _resend_pending(self) -> None:
        for _p, shard in self.runtime.active_shards():
            for job in shard.pending_markers():
                self.spawn_markers(job)

    async def _housekeeping(self) -> None:
        next_expiry = self.broker.now_ms() + self.expire_interval_ms
        while True:
            await asyncio.sleep(self.abort_interval_ms / 1000.0)
            try:
                now = self.broker.now_ms()
                self._resend_pending()
                for partition, shard in self.runtime.active_shards():
                    for tid in shard.timed_out(now):
                        log.info("transaction %r timed out: aborting it", tid)
                        job = await self.runtime.write(partition, _abort_timed_out(tid))
                        if isinstance(job, MarkerJob):
                            self.spawn_markers(job)
                    if now >= next_expiry:
                        doomed = shard.expired(now)
                        if doomed:
                            removed = await self.runtime.write(partition, _expire(doomed))
                            log.info("removed %d expired transactional id(s): %s", len(removed or ()), removed)
                if now >= next_expiry:
                    next_expiry = now + self.expire_interval_ms
            except KafkaError as e:
                log.warning("transaction coordinator housekeeping: %s", e)
            except Exception:  # noqa: BLE001 - keep the periodic task alive
                log.exception("transaction coordinator housekeeping failed")


def _end_transaction(producer_id: int, commit: bool) -> Callable[[Any, int], Any]:
    return lambda shard, now: shard.handle_end_transaction(producer_id, commit, now)


def _abort_timed_out(tid: str) -> Callable[[TransactionCoordinatorShard, int], Any]:
    return lambda shard, now: shard.abort_timed_out(tid, now)


def _expire(tids: list[str]) -> Callable[[TransactionCoordinatorShard, int], Any]:
    return lambda shard, now: shard.expire(tids, now)


def load_at_start(broker: CoordinatorBroker) -> Awaitable[Any] | None:
    """At start-up: when `__transaction_state` exists, load it now and complete the transactions a crash
    left in PrepareCommit / PrepareAbort."""
    if TRANSACTION_STATE_TOPIC in broker.metadata.topics:
        return TransactionService.of(broker).loaded
    return None
