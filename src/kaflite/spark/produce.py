"""The sink's fast path: record batches (kaflite.spark.encode) produced over kaflite's own client half of
the Produce protocol, idempotent, acks=all, instead of a librdkafka `produce()` call per row.

Rules:
- used only when the settings ask for nothing this client does not do (`supported`): `security.protocol`
  absent or PLAINTEXT, `acks` absent or all/-1, no `transactional.id`, and a broker whose ApiVersions
  answer covers Metadata v12, InitProducerId v4 and Produce v9 (Kafka 2.4+); otherwise `start` raises
  `Unsupported` before anything is written and the caller produces through librdkafka;
- one producer id per producer (InitProducerId without transactional id, from the first bootstrap broker
  that answers): every batch carries it with epoch and a base sequence that starts at 0 for each partition
  and grows by the batch's record count, so the broker drops a resent batch it already has (answering
  with the original offset, or DUPLICATE_SEQUENCE_NUMBER, both taken as acknowledged) and refuses a gap
  (OUT_OF_ORDER_SEQUENCE_NUMBER);
- acks=-1 (all in-sync replicas); at most one batch per partition in a Produce request (Kafka's rule for
  v3+), at most `MAX_IN_FLIGHT` requests in flight per broker connection and at most 5 batches per
  partition (Kafka's limit for idempotent producers), answers read in order;
- a leadership error, a timeout, NOT_ENOUGH_REPLICAS(_AFTER_APPEND), a lost connection: the answers in
  flight are all read, the metadata is fetched again, and every unacknowledged batch of the partitions
  concerned is sent again in sequence order after `RETRY_BACKOFF_S`; OUT_OF_ORDER_SEQUENCE_NUMBER for a
  partition with an earlier batch being retried is part of that retry; any other error code fails the
  task with its name; no progress for `delivery_timeout_s` fails it too (TimeoutError);
- a topic missing from the metadata (or being created: UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE)
  is asked for again (with auto-creation allowed, as Kafka's producers do) every `RETRY_BACKOFF_S` for up
  to `max_block_s` (the Java producer's max.block.ms, 60 s), then the task fails naming it;
- the transactional variant (exactlyOnce, kaflite.spark.transaction) sets `transactional_id`: its batches
  carry the transactional bit and its Produce requests the id; the rest above holds unchanged.
This runs in an executor task with blocking sockets: never on an event loop.
"""

from __future__ import annotations

import datetime
import random
import struct
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.init_producer_id.v4.response import InitProducerIdResponse
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.produce.v9.response import ProduceResponse
from kio.schema.types import ProducerId, TopicName
from kio.serial import entity_reader
from kio.static.primitive import i16, i32Timedelta

from kaflite.protocol.errors import ErrorCode
from kaflite.protocol.varint import uvarint
from kaflite.spark.encode import DEFAULT_MAX_BATCH_BYTES, EncodedBatch, seal
from kaflite.spark.fetch import FetchConnection

__all__ = ["ArrowProducer", "ProduceError", "Unsupported", "supported"]

PRODUCE_VERSION = 9
METADATA_VERSION = 12
INIT_PRODUCER_ID_VERSION = 4
MAX_IN_FLIGHT = 5
MAX_IN_FLIGHT_PER_PARTITION = 5
RETRY_BACKOFF_S = 0.1
REQUEST_TIMEOUT_MS = 30_000
_read_init = entity_reader(InitProducerIdResponse)
_read_metadata = entity_reader(MetadataResponse)
_read_produce = entity_reader(ProduceResponse)
_RETRIABLE = frozenset({
    ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch,
    ErrorCode.unknown_topic_or_partition, ErrorCode.leader_not_available, ErrorCode.kafka_storage_error,
    ErrorCode.request_timed_out, ErrorCode.not_enough_replicas, ErrorCode.not_enough_replicas_after_append,
    ErrorCode.network_exception, ErrorCode.coordinator_load_in_progress, ErrorCode.concurrent_transactions,
})
_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


class Unsupported(Exception):
    """The settings or the broker need something this client does not do: use librdkafka."""


class ProduceError(RuntimeError):
    """The broker refused a batch with an error that is not retried."""


def _code(value: Any) -> ErrorCode:
    return ErrorCode(int(getattr(value, "value", value)))


def codec_of(conf: dict[str, Any]) -> int:
    """The codec of `compression.type` (Java) or `compression.codec` (librdkafka); none by default."""
    name = str(conf.get("compression.type", conf.get("compression.codec", "none"))).strip().lower()
    if name not in _CODECS:
        raise Unsupported(f"compression {name!r}")
    return _CODECS[name]


def supported(conf: dict[str, Any]) -> bool:
    """True when the client settings ask for nothing but what this client does (module rules)."""
    if str(conf.get("security.protocol", "plaintext")).strip().lower() != "plaintext":
        return False
    if str(conf.get("acks", conf.get("request.required.acks", "all"))).strip().lower() not in ("all", "-1"):
        return False
    if conf.get("transactional.id"):
        return False
    try:
        codec_of(conf)
    except Unsupported:
        return False
    return True




def _compact_string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return uvarint(len(raw) + 1) + raw


class ProducerConnection(FetchConnection):
    """One blocking connection to a broker: ApiVersions, Metadata, InitProducerId (kio, FetchConnection's
    `request`) and Produce v9, whose request is written by hand so the record batches go out without being
    copied into one buffer."""

    def send_produce(self, parts: Sequence[tuple[str, int, list[bytes | memoryview]]], timeout_ms: int,
                     transactional_id: str | None = None) -> int:
        """Produce v9, acks=-1, with the batches of `parts` = [(topic, partition, [header, payload])]."""
        head = bytearray(self._next_header(0, PRODUCE_VERSION))
        # transactional_id: a compact nullable string (0: null)
        head += b"\x00" if transactional_id is None else _compact_string(transactional_id)
        head += struct.pack(">hi", -1, timeout_ms)
        by_topic: dict[str, list[tuple[int, list[bytes | memoryview]]]] = {}
        for topic, partition, chunks in parts:
            by_topic.setdefault(topic, []).append((partition, chunks))
        head += uvarint(len(by_topic) + 1)
        out: list[bytes | memoryview] = []
        cur = head
        for topic, plist in by_topic.items():
            cur += _compact_string(topic)
            cur += uvarint(len(plist) + 1)
            for partition, chunks in plist:
                size = sum(len(c) for c in chunks)
                cur += struct.pack(">i", partition)
                cur += uvarint(size + 1)
                out.append(bytes(cur))
                out.extend(chunks)
                cur = bytearray(b"\x00")  # partition tagged fields
            cur += b"\x00"  # topic tagged fields
        cur += b"\x00"  # request tagged fields
        out.append(bytes(cur))
        total = sum(len(c) for c in out)
        self.sock.sendall(struct.pack(">i", total))
        for chunk in out:
            self.sock.sendall(chunk)
        return self.correlation

    def receive_produce(self, correlation: int) -> ProduceResponse:
        frame, offset = self._receive(correlation, flexible=True)
        resp, _ = _read_produce(frame, offset)
        return resp


@dataclass
class _Partition:
    next_sequence: int = 0
    unsent: deque[tuple[int, EncodedBatch]] = field(default_factory=deque)  # (base sequence, batch)
    in_flight: int = 0
    retrying: bool = False


@dataclass
class _InFlight:
    correlation: int
    batches: list[tuple[tuple[str, int], int, EncodedBatch]]  # (topic-partition, base sequence, batch)


class ArrowProducer:
    """An idempotent producer of pre-encoded record batches (module rules)."""

    def __init__(self, conf: dict[str, Any], delivery_timeout_s: float = 120.0, max_block_s: float = 60.0) -> None:
        if not supported(conf):
            raise Unsupported("settings")
        self.bootstrap = [s.strip() for s in str(conf.get("bootstrap.servers", "")).split(",") if s.strip()]
        if not self.bootstrap:
            raise ValueError("kafka.bootstrap.servers is empty")
        self.client_id = str(conf.get("client.id", "kaflite-spark-sink"))
        self.codec = codec_of(conf)
        # `batch.size` (Java and librdkafka): the most bytes of records in one batch
        self.max_batch_bytes = int(conf.get("batch.size", DEFAULT_MAX_BATCH_BYTES))
        self.delivery_timeout_s = delivery_timeout_s
        self.max_block_s = max_block_s
        self.producer_id = -1
        self.producer_epoch = -1
        self.brokers: dict[int, tuple[str, int]] = {}
        self.leaders: dict[tuple[str, int], int] = {}
        self.partition_counts: dict[str, int] = {}
        self.conns: dict[int, ProducerConnection] = {}
        self.pending: dict[int, deque[_InFlight]] = {}
        self.parts: dict[tuple[str, int], _Partition] = {}
        self.sticky_next: dict[str, int] = {}
        self.acked = 0
        self._meta_conn: ProducerConnection | None = None
        # set by the transactional producer (kaflite.spark.transaction): batches carry the transactional
        # bit and Produce requests the id
        self.transactional_id: str | None = None

    # --- setup --------------------------------------------------------------------------------------
    def _connect(self, host: str, port: int) -> ProducerConnection:
        return ProducerConnection(host, port, self.client_id, REQUEST_TIMEOUT_MS / 1000 + 5)

    def _required_apis(self) -> dict[int, int]:
        """{api key: version} the bootstrap broker must accept for this client to be used."""
        return {0: PRODUCE_VERSION, 3: METADATA_VERSION, 22: INIT_PRODUCER_ID_VERSION}

    def start(self) -> ArrowProducer:
        """Connect to a bootstrap broker, check its API versions and get a producer id."""
        last: Exception | None = None
        for server in self.bootstrap:
            host, _, port = server.rpartition(":")
            try:
                conn = self._connect(host.strip("[]") or "localhost", int(port or 9092))
            except OSError as e:
                last = e
                continue
            versions = conn.api_versions()
            for api, version in self._required_apis().items():
                lo, hi = versions.get(api, (1, 0))
                if not lo <= version <= hi:
                    conn.close()
                    raise Unsupported(f"the broker at {server} lacks API {api} v{version}")
            self._meta_conn = conn
            break
        if self._meta_conn is None:
            raise ConnectionError(f"no bootstrap broker of {self.bootstrap} answers: {last}")
        self._init_producer_id()
        return self

    def _init_producer_id(self) -> None:
        assert self._meta_conn is not None
        deadline = time.monotonic() + self.max_block_s
        while True:
            resp = self._meta_conn.request(InitProducerIdRequest(
                transactional_id=None, transaction_timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
                producer_id=ProducerId(-1), producer_epoch=i16(-1)), _read_init)
            code = _code(resp.error_code)
            if code is ErrorCode.none:
                self.producer_id, self.producer_epoch = int(resp.producer_id), int(resp.producer_epoch)
                return
            if code not in _RETRIABLE or time.monotonic() > deadline:
                raise ProduceError(f"InitProducerId refused: {code.name.upper()}")
            time.sleep(RETRY_BACKOFF_S)

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()
        self.conns.clear()
        if self._meta_conn is not None:
            self._meta_conn.close()
            self._meta_conn = None

    # --- metadata -----------------------------------------------------------------------------------
    def _refresh(self, topics: Sequence[str]) -> list[str]:
        """Fetch the metadata of `topics`; return those still without a leader for every partition."""
        if self._meta_conn is None:
            host, port = next(iter(self.brokers.values()))
            self._meta_conn = self._connect(host, port)
        resp = self._meta_conn.request(MetadataRequest(
            topics=tuple(MetadataRequestTopic(topic_id=None, name=TopicName(t)) for t in topics),
            allow_auto_topic_creation=True, include_topic_authorized_operations=False), _read_metadata)
        self.brokers.update({int(b.node_id): (str(b.host), int(b.port)) for b in resp.brokers})
        missing: list[str] = []
        for t in resp.topics:
            name = str(t.name)
            code = _code(t.error_code)
            if code in (ErrorCode.unknown_topic_or_partition, ErrorCode.leader_not_available) or not t.partitions:
                missing.append(name)
                continue
            if code is not ErrorCode.none:
                raise ProduceError(f"the metadata of topic {name} answered {code.name.upper()}")
            self.partition_counts[name] = len(t.partitions)
            for p in t.partitions:
                leader = int(p.leader_id)
                if leader < 0:
                    missing.append(name)
                self.leaders[(name, int(p.partition_index))] = leader
        return missing

    def partition_count(self, topic: str) -> int:
        """The topic's partition count, waiting up to `max_block_s` for its metadata (auto-creation)."""
        if topic in self.partition_counts:
            return self.partition_counts[topic]
        deadline = time.monotonic() + self.max_block_s
        while True:
            missing = self._refresh([topic])
            if topic in self.partition_counts and topic not in missing:
                return self.partition_counts[topic]
            if time.monotonic() > deadline:
                raise TimeoutError(f"Topic {topic} not present in metadata after {int(self.max_block_s * 1000)} ms.")
            time.sleep(RETRY_BACKOFF_S)

    def sticky_partition(self, topic: str) -> int:
        """Where this call's null-key rows of `topic` go; the next call moves on (round-robin from a random
        start)."""
        n = self.partition_count(topic)
        current = self.sticky_next.get(topic)
        if current is None:
            current = random.randrange(n)
        self.sticky_next[topic] = (current + 1) % n
        return current % n

    # --- sending ------------------------------------------------------------------------------------
    def send(self, batches: Sequence[EncodedBatch]) -> None:
        """Queue the batches (sequence numbers given now, in order per partition) and send what can go."""
        for b in batches:
            tp = (b.topic, b.partition)
            state = self.parts.get(tp)
            if state is None:
                state = self.parts[tp] = _Partition()
            state.unsent.append((state.next_sequence, b))
            state.next_sequence = (state.next_sequence + b.count) & 0x7FFFFFFF
        self._pump(wait=False)

    def flush(self) -> int:
        """Send everything and wait for every acknowledgement; return the records acknowledged."""
        self._pump(wait=True)
        return self.acked

    def _conn(self, broker: int) -> ProducerConnection:
        conn = self.conns.get(broker)
        if conn is None:
            if broker not in self.brokers:
                raise ConnectionError(f"broker {broker} is not in the metadata")
            conn = self.conns[broker] = self._connect(*self.brokers[broker])
            self.pending[broker] = deque()
        return conn

    def _pump(self, wait: bool) -> None:
        """Send what can go; without `wait` return once nothing is left unsent (answers still in flight:
        the broker works while the caller encodes the next rows), with `wait` once every batch is
        acknowledged."""
        deadline = time.monotonic() + self.delivery_timeout_s
        while True:
            while self._send_ready():  # fill every connection's pipeline before waiting for an answer
                pass
            unsent = any(s.unsent for s in self.parts.values())
            busy = [b for b, q in self.pending.items() if q]
            if not unsent and (not wait or not busy):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"Kafka sink: records unacknowledged after {self.delivery_timeout_s:g} s")
            if not busy:  # leaders unknown or connections failing: look again after a pause
                time.sleep(RETRY_BACKOFF_S)
                self._after_failure()
                continue
            acked = self.acked
            if self._receive_one(busy[0]):
                self._drain()
                time.sleep(RETRY_BACKOFF_S)
                self._after_failure()
            if self.acked > acked:
                deadline = time.monotonic() + self.delivery_timeout_s

    def _send_ready(self) -> bool:
        """Send one request per broker that has room, with the next batch of each of its partitions."""
        sent = False
        by_broker: dict[int, list[tuple[tuple[str, int], _Partition]]] = {}
        for tp, state in self.parts.items():
            if state.unsent and state.in_flight < MAX_IN_FLIGHT_PER_PARTITION:
                leader = self.leaders.get(tp, -1)
                if leader >= 0:
                    by_broker.setdefault(leader, []).append((tp, state))
        for broker, items in by_broker.items():
            if len(self.pending.get(broker, ())) >= MAX_IN_FLIGHT:
                continue
            try:
                conn = self._conn(broker)
            except OSError:
                self._lost(broker)
                continue
            taken: list[tuple[tuple[str, int], int, EncodedBatch]] = []
            parts: list[tuple[str, int, list[bytes | memoryview]]] = []
            for tp, state in items:
                seq, batch = state.unsent.popleft()
                state.in_flight += 1
                taken.append((tp, seq, batch))
                parts.append((tp[0], tp[1], seal(batch, self.codec, self.producer_id, self.producer_epoch, seq,
                                                 transactional=self.transactional_id is not None)))
            try:
                corr = conn.send_produce(parts, REQUEST_TIMEOUT_MS, self.transactional_id)
            except OSError:
                for tp, seq, batch in reversed(taken):
                    self.parts[tp].unsent.appendleft((seq, batch))
                    self.parts[tp].in_flight -= 1
                self._lost(broker)
                continue
            self.pending[broker].append(_InFlight(corr, taken))
            sent = True
        return sent

    def _receive_one(self, broker: int) -> bool:
        """Read the oldest answer of `broker`; True when some batch must be retried."""
        req = self.pending[broker][0]
        try:
            resp = self.conns[broker].receive_produce(req.correlation)
        except (OSError, ConnectionError):
            self._lost(broker)
            return True
        self.pending[broker].popleft()
        codes: dict[tuple[str, int], ErrorCode] = {}
        for t in resp.responses:
            for p in t.partition_responses:
                codes[(str(t.name), int(p.index))] = _code(p.error_code)
        retry = False
        for tp, seq, batch in req.batches:
            state = self.parts[tp]
            state.in_flight -= 1
            code = codes.get(tp, ErrorCode.network_exception)
            # DUPLICATE_SEQUENCE_NUMBER: brokers before 1.0 said so for a batch they already had
            if code in (ErrorCode.none, ErrorCode.duplicate_sequence_number):
                self.acked += batch.count
                state.retrying = False  # in sequence again
                continue
            if code in _RETRIABLE or (code is ErrorCode.out_of_order_sequence_number and state.retrying):
                state.retrying = True
                self._requeue(tp, seq, batch)
                retry = True
                continue
            self._refused(tp, code)
        return retry

    def _refused(self, tp: tuple[str, int], code: ErrorCode) -> NoReturn:
        """A batch of `tp` refused with an error that is not retried: the task fails naming it."""
        raise ProduceError(f"Kafka sink: producing to {tp[0]}-{tp[1]} failed: {code.name.upper()}")

    def _requeue(self, tp: tuple[str, int], seq: int, batch: EncodedBatch) -> None:
        """Put a batch back among the unsent ones of its partition, in sequence order."""
        state = self.parts[tp]
        items = list(state.unsent)
        items.append((seq, batch))
        items.sort(key=lambda x: x[0])  # sequences of one task stay far below the int32 wrap
        state.unsent = deque(items)

    def _lost(self, broker: int) -> None:
        """The connection to `broker` failed: everything in flight on it is sent again."""
        conn = self.conns.pop(broker, None)
        if conn is not None:
            conn.close()
        for req in self.pending.pop(broker, deque()):
            for tp, seq, batch in req.batches:
                state = self.parts[tp]
                state.in_flight -= 1
                state.retrying = True
                self._requeue(tp, seq, batch)

    def _drain(self) -> None:
        """Read every answer still in flight (a retry resends in sequence order from a quiet state)."""
        for broker in list(self.pending):
            while self.pending.get(broker):
                self._receive_one(broker)

    def _after_failure(self) -> None:
        try:
            self._refresh(sorted({tp[0] for tp in self.parts}))
        except (OSError, ConnectionError):
            if self._meta_conn is not None:
                self._meta_conn.close()
            self._meta_conn = None

    def __enter__(self) -> ArrowProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
