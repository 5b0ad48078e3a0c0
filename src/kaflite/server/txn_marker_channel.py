"""The transaction markers a coordinator sends to the partition leaders (Kafka's
TransactionMarkerChannelManager and TransactionMarkerRequestCompletionHandler).

Rules:
- `send(job, ...)` writes every marker of one transaction (a `MarkerJob`: producer id, epoch, COMMIT or
  ABORT, its partitions) to each partition's leader as the metadata image says when the marker is (re)sent:
  on this broker through the local WriteTxnMarkers path, elsewhere through the queue of the destination
  broker; a destination's sender drains every marker queued for it (of any number of transactions) into
  one WriteTxnMarkers v1 request per round, as Kafka's channel sends one request per broker per poll;
- each partition's answer: NONE is written; the errors in `DONE` mean nothing more is needed there (a newer
  coordinator or producer epoch wrote past it); a partition the image no longer knows (a deleted topic) is
  skipped, as Kafka's channel drops it; every other answer (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION
  from a broker whose image lags, NOT_ENOUGH_REPLICAS*, REQUEST_TIMED_OUT, no leader, a failed connection)
  is retried after a backoff (doubling, at most `max_backoff_ms`) at the leader the image then names;
- `send` returns True once every marker is written, False when `still_coordinator()` turned false first
  (the transaction's `__transaction_state` partition moved: the new coordinator re-sends the markers of
  every transaction it finds in Prepare*, as Kafka drops the pending markers of an unloaded partition);
  the caller writes CompleteCommit / CompleteAbort only after True;
- a connection that fails is closed and its pending requests answered NETWORK_EXCEPTION (retried); it
  is opened again on the next round;
- any other failure of a request (an answer kio cannot decode, a bug) is logged, its connection closed
  and every marker it carried answered UNKNOWN_SERVER_ERROR (retried); the destination's sender carries
  on with what was queued meanwhile, and a sender that ends for any other reason answers everything it
  held or had queued (Kafka's channel answers every pending request of a failed send), so no `send`
  waits on a marker nobody will answer: its transaction completes once the markers are written.
Everything runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from kio.schema.types import ProducerId, TopicName
from kio.schema.write_txn_markers.v1.request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from kio.schema.write_txn_markers.v1.response import WriteTxnMarkersResponse
from kio.static.primitive import i16, i32

from kaflite.cluster.metadata import MetadataImage
from kaflite.coordinator.transaction import MarkerJob
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.broker_connection import BrokerConnection, address_of
from kaflite.server.security.client import BrokerConnector
from kaflite.server.stopping import cancel_until_done

__all__ = ["DONE", "TransactionMarkerChannelManager"]

log = logging.getLogger("kaflite.coordinator")

TopicPartition = tuple[str, int]
# the marker is not needed any more there: written, or a newer coordinator / producer epoch wrote past it
DONE = frozenset({ErrorCode.none, ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced})
# writes markers on this broker: (producer id, epoch, commit, coordinator epoch, partitions) -> code per partition
LocalWriter = Callable[[int, int, bool, int, Iterable[TopicPartition]], Awaitable[dict[TopicPartition, ErrorCode]]]


@dataclass(slots=True)
class _Queued:
    job: MarkerJob
    coordinator_epoch: int
    partitions: list[TopicPartition]
    answer: asyncio.Future[dict[TopicPartition, ErrorCode]]


@dataclass(slots=True)
class _Destination:
    broker: int
    queue: list[_Queued] = field(default_factory=list)
    conn: BrokerConnection | None = None
    task: asyncio.Task[None] | None = None


class TransactionMarkerChannelManager:
    def __init__(self, broker_id: int, image: Callable[[], MetadataImage], write_local: LocalWriter, *,
                 listener: str | None = None, connector: BrokerConnector | None = None, request_timeout_ms: int = 30_000, backoff_ms: int = 50,
                 max_backoff_ms: int = 1000) -> None:
        self.broker_id = broker_id
        self.image = image
        self.write_local = write_local
        self.listener = listener
        self.connector = connector  # the broker's inter-broker TLS / SASL (None: PLAINTEXT)
        self.request_timeout_ms = request_timeout_ms
        self.backoff_ms = backoff_ms
        self.max_backoff_ms = max_backoff_ms
        self.destinations: dict[int, _Destination] = {}
        self.requests_sent = 0  # WriteTxnMarkers requests sent to other brokers (tests, metrics)

    # --- one transaction -------------------------------------------------------------------------
    async def send(self, job: MarkerJob, coordinator_epoch: int, still_coordinator: Callable[[], bool]) -> bool:
        remaining = set(job.partitions)
        backoff = self.backoff_ms
        warned = False
        while remaining:
            if not still_coordinator():
                return False
            image = self.image()
            by_leader: dict[int, list[TopicPartition]] = {}
            codes: dict[TopicPartition, ErrorCode] = {}
            for tp in sorted(remaining):
                reg = image.partition(*tp)
                if reg is None:  # deleted: nothing to mark (Kafka's channel drops it too)
                    codes[tp] = ErrorCode.none
                elif reg.leader < 0:
                    codes[tp] = ErrorCode.leader_not_available
                else:
                    by_leader.setdefault(reg.leader, []).append(tp)
            waits = [self._write_at(leader, job, coordinator_epoch, tps) for leader, tps in by_leader.items()]
            for answer in await asyncio.gather(*waits):
                codes.update(answer)
            remaining = {tp for tp, code in codes.items() if code not in DONE}
            if remaining:
                (log.debug if warned else log.info)(
                    "transaction %r: markers not written yet for %s; retrying", job.transactional_id,
                    {f"{t}-{p}": codes[(t, p)].name for t, p in sorted(remaining)})
                warned = True
                await asyncio.sleep(backoff / 1000)
                backoff = min(self.max_backoff_ms, backoff * 2)
        return True

    def _write_at(self, leader: int, job: MarkerJob, coordinator_epoch: int,
                  partitions: list[TopicPartition]) -> Awaitable[dict[TopicPartition, ErrorCode]]:
        if leader == self.broker_id:
            return self.write_local(job.producer_id, job.producer_epoch, job.commit, coordinator_epoch, partitions)
        dest = self.destinations.get(leader)
        if dest is None:
            dest = self.destinations[leader] = _Destination(leader)
        answer: asyncio.Future[dict[TopicPartition, ErrorCode]] = asyncio.get_running_loop().create_future()
        dest.queue.append(_Queued(job, coordinator_epoch, partitions, answer))
        if dest.task is None or dest.task.done():
            dest.task = asyncio.ensure_future(self._drain(dest))
        return answer

    # --- the sender of one destination -----------------------------------------------------------
    async def _drain(self, dest: _Destination) -> None:
        batch: list[_Queued] = []
        try:
            while dest.queue:
                batch, dest.queue = dest.queue, []
                try:
                    answers = await self._request(dest, batch)
                except (TimeoutError, OSError, EOFError, ConnectionError, KafkaError, ValueError) as e:
                    log.debug("WriteTxnMarkers to broker %d failed: %s", dest.broker, e or type(e).__name__)
                    answers = self._failed(dest, batch, ErrorCode.network_exception)
                except asyncio.CancelledError:
                    raise
                except Exception:  # noqa: BLE001 - a decode error, a bug: answered below, the sender goes on
                    log.exception("WriteTxnMarkers to broker %d failed unexpectedly; its markers are retried",
                                  dest.broker)
                    answers = self._failed(dest, batch, ErrorCode.unknown_server_error)
                for q, answer in zip(batch, answers, strict=True):
                    if not q.answer.done():
                        q.answer.set_result(answer)
                batch = []
        except asyncio.CancelledError:
            for q in batch + dest.queue:
                if not q.answer.done():
                    q.answer.cancel()
            dest.queue = []
            raise
        except BaseException:
            # whatever ended this sender: every marker it held or that was queued behind is answered (an
            # error `send` retries), so no transaction waits on a future nobody will resolve
            log.exception("the WriteTxnMarkers sender of broker %d failed", dest.broker)
            for q in batch + dest.queue:
                if not q.answer.done():
                    q.answer.set_result(dict.fromkeys(q.partitions, ErrorCode.unknown_server_error))
            dest.queue = []
            raise

    @staticmethod
    def _failed(dest: _Destination, batch: list[_Queued], code: ErrorCode) -> list[dict[TopicPartition, ErrorCode]]:
        """The request failed: its connection is closed (opened again next round), every marker answered."""
        if dest.conn is not None:
            dest.conn.close()
            dest.conn = None
        return [dict.fromkeys(q.partitions, code) for q in batch]

    async def _request(self, dest: _Destination, batch: list[_Queued]) -> list[dict[TopicPartition, ErrorCode]]:
        timeout_s = self.request_timeout_ms / 1000
        if dest.conn is None:
            host, port = address_of(self.image(), dest.broker, self.listener)
            dest.conn = await BrokerConnection.open(host, port, f"broker-{self.broker_id}-txn-markers", timeout_s,
                                                    self.connector)
        markers = []
        for q in batch:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in q.partitions:
                by_topic.setdefault(topic, []).append(partition)
            markers.append(WritableTxnMarker(
                producer_id=ProducerId(q.job.producer_id), producer_epoch=i16(q.job.producer_epoch),
                transaction_result=q.job.commit, coordinator_epoch=i32(q.coordinator_epoch),
                topics=tuple(WritableTxnMarkerTopic(name=TopicName(t), partition_indexes=tuple(i32(p) for p in ps))
                             for t, ps in by_topic.items())))
        self.requests_sent += 1
        resp = await dest.conn.request(WriteTxnMarkersRequest(markers=tuple(markers)), WriteTxnMarkersResponse,
                                       timeout_s)
        out: list[dict[TopicPartition, ErrorCode]] = []
        for i, q in enumerate(batch):
            got: dict[TopicPartition, ErrorCode] = {}
            # the answer's markers come in the request's order (one per marker, as Kafka's handler builds them)
            result = resp.markers[i] if i < len(resp.markers) else None
            if result is not None and int(result.producer_id) == q.job.producer_id:
                for t in result.topics:
                    for p in t.partitions:
                        got[(str(t.name), int(p.partition_index))] = ErrorCode(
                            int(getattr(p.error_code, "value", p.error_code)))
            out.append({tp: got.get(tp, ErrorCode.unknown_server_error) for tp in q.partitions})
        return out

    async def close(self) -> None:
        for dest in self.destinations.values():
            if dest.task is not None:  # a sender's request is a wait_for, which can swallow a cancellation
                await cancel_until_done(dest.task)
            if dest.conn is not None:
                dest.conn.close()
        self.destinations.clear()
