"""Fetch (key 1), v4-18: stored record batches, long-polled until enough bytes or `max_wait`.

Rules (Kafka's `ReplicaManager.fetchMessages` / `DelayedFetch`):
- the response budget is `max_bytes` over all partitions and `partition_max_bytes` per partition; the first
  partition that has data returns at least one whole batch even when it is larger (min_one_message), so a
  consumer never gets stuck behind a big batch;
- consumers read up to the high watermark, read_committed ones up to the last stable offset, with the
  aborted transactions (producer id, first offset) that overlap the range read, from the segments'
  transaction indexes (the upper bound is the last stable offset: a superset, which clients filter by
  the batches they get); every partition answer carries the high watermark, the last
  stable offset and the log start offset, all from the `Partition`; which partition may be read here
  (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for the
  request's current leader epoch) is `ReplicaManager.get_partition`'s decision;
- a fetch below the log start offset or beyond the log end gets OFFSET_OUT_OF_RANGE (so a reset is visible);
- the request is answered at once when the data reaches `min_bytes`, a partition has an error, or
  `max_wait` is 0; otherwise it parks (Kafka's DelayedFetch, `kaflite.server.delayed_fetch`): woken by an
  append to one of its partitions (or a moved high watermark, a stopped partition), it compares offsets
  and segment positions — the bytes between its fetch offset and the end offset it may read to, a roll, a
  truncation, a leader change, an error — without reading the logs; it reads every partition once more,
  and answers with what that read finds, only when that check says complete or `max_wait` elapses. So a
  parked fetch reads its partitions twice (first pass, answer) however many appends it sees
  (tests/server/test_fetch_purgatory.py);
- v13+ names topics by id (KIP-516): an id is resolved to its topic through the metadata image, an id no
  topic has (or the zero id) gets UNKNOWN_TOPIC_ID for each of its partitions, and the answer names topics
  by id; v15's `replica_state` (a consumer's replica id -1) and v17's directory id concern followers only,
  from v16 a partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH carries `current_leader`
  (the leader and its epoch in the metadata image) and the answer `node_endpoints` (those leaders'
  endpoints on the request's listener), KIP-951, so a client moves without a Metadata round trip; other
  partitions omit them, as Kafka does;
- a partition of a topic whose `compression.type` is zstd is UNSUPPORTED_COMPRESSION_TYPE below v10 (a
  client that old cannot decode zstd; Kafka's `maybeConvertFetchedData` judges by the topic config);
- a fetch from a follower (`replica_id` >= 0, Kafka's ReplicaFetcherThread) reads the leader's log up to its
  log end offset (beyond the high watermark: only replicas may); a broker that is not one of the
  partition's replicas gets NOT_LEADER_OR_FOLLOWER before anything is read. Only once a partition's read
  succeeded (Kafka's `Partition.fetchRecords`: on the first pass, not when a long poll reads again) is the
  follower's fetch offset reported as its log end offset to the `Partition`: that may advance the high
  watermark (waking acks=all produces) or let the follower rejoin the ISR (`ReplicaManager.
  record_follower_fetch`), and the answer then carries the high watermark as it is after the report, so the
  follower learns it at once (Kafka answers with the one read before the report). A fetch offset beyond
  the leader's log end (or below its log start) is OFFSET_OUT_OF_RANGE and reports nothing;
- v12+ `last_fetched_epoch` (KIP-595, >= 0 when sent): checked against the leader-epoch cache before the
  read (`Partition.diverging_epoch`); a diverging log gets `diverging_epoch` (epoch, end offset: where to
  truncate to), no records, nothing reported, and the answer goes out at once; an epoch the cache cannot
  place is OFFSET_OUT_OF_RANGE (Kafka's `Partition.readRecords`);
- v18's per-partition `high_watermark` (KIP-1166) is the high watermark the fetching follower knows (-1:
  none; consumers send Long.MAX_VALUE, "not supported"): a follower's fetch is answered at once, without
  waiting for `min_bytes`, when a partition's high watermark here is above the one the follower knows, so
  a follower learns a new high watermark without waiting out `max_wait` (checked on the first pass and,
  parked, on every wake-up); it changes nothing for consumers;
- a follower's fetch naming more than FOLLOWER_READ_SLICE partitions is read that many per loop turn, the
  event loop serving other requests in between (`read_follower_slices`): each slice's non-replica check,
  read and report happen in one turn, the byte budget and min_one_message are the whole pass's, and the
  parked fetch's first check runs after the pass (Kafka's tryCompleteElseWatch), on the positions as they
  are then, so an append to a partition read in an earlier slice ends its wait at once (its own reports
  move no log end). Kafka's request threads likewise let other requests interleave between two
  partitions' reads;
- fetch sessions (KIP-227, v7+): `kaflite.server.fetch_session` decides what a request reads (the whole
  session) and which partitions an incremental answer carries (only those with news).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from kaflite.protocol.compression import CODECS
from kaflite.protocol.encoders import encode_fetch_response
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.acl import rules
from kaflite.server.broker import Broker
from kaflite.server.context import RequestContext, build
from kaflite.server.delayed_fetch import DelayedFetch
from kaflite.server.fetch_session import FetchSessionCache, FetchTarget, SessionContext
from kaflite.server.handlers import ApiTable, EncodedBody
from kaflite.server.handlers.metadata import leader_hints
from kaflite.server.quota import CONSUMER_BYTE_RATE
from kaflite.server.replica import fetch_key
from kaflite.server.services import Slot
from kaflite.storage.file_slice import FileSlice

API_KEY = 1
log = logging.getLogger("kaflite.server")
_ZERO = datetime.timedelta(0)
READ_COMMITTED = 1
TOPIC_IDS_VERSION = 13  # KIP-516: topics named by id from this version on
REPLICA_HIGH_WATERMARK_VERSION = 18  # KIP-1166: a follower says which high watermark it knows
ZSTD_VERSION = 10  # the first Fetch version whose clients can decode zstd (KIP-110)
# a follower's fetch naming more partitions than this is read this many per loop turn (see the rules)
FOLLOWER_READ_SLICE = 100
_ZSTD = CODECS["zstd"]
_NO_ID = uuid.UUID(int=0)


@dataclass(slots=True)
class PartitionRead:
    partition: int
    error: ErrorCode = ErrorCode.none
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: list[Any] = field(default_factory=list)
    size: int = 0
    aborted: list[tuple[int, int]] = field(default_factory=list)
    diverging: tuple[int, int] | None = None  # v12+: (epoch, end offset) where the fetcher's log diverges


def read_partitions(
    broker: Broker, max_bytes: int, targets: list[tuple[tuple[str, int], FetchTarget]],
    leader_epochs: dict[tuple[str, int], int] | None = None, read_committed: bool = False,
    denied: frozenset[str] = frozenset(),
    zstd_ok: bool = True, replica_id: int = -1,
    not_replica: frozenset[tuple[str, int]] = frozenset(),
    last_fetched: dict[tuple[str, int], int] | None = None, read_before: int = 0,
) -> tuple[list[tuple[str, list[PartitionRead]]], int, bool]:
    """One pass over every partition to read: (results by topic, bytes read, any partition error or
    diverging epoch). `leader_epochs`: the current leader epoch the request carried per partition (-1 or
    absent: unchecked); `last_fetched`: the last fetched epoch per partition (v12+, absent: unchecked).
    A consumer reads up to the high watermark, or up to the last stable offset when `read_committed`.
    `read_before`: bytes the earlier slices of the same pass read (`max_bytes` is then what is left of the
    budget): only the pass's first data is read whatever its size (min_one_message)."""
    replicas = broker.replica_manager
    # the response budget: the request's max_bytes, capped by the broker's fetch.max.bytes
    remaining = max(0, min(int(max_bytes), int(broker.setting("fetch.max.bytes"))))
    total = read_before
    any_error = False
    out: list[tuple[str, list[PartitionRead]]] = []
    for (topic, partition), target in targets:
        r = PartitionRead(partition)
        try:
            if topic in denied:  # READ on the topic refused by the authorizer
                raise KafkaError(ErrorCode.topic_authorization_failed)
            if not_replica and (topic, partition) in not_replica:  # a broker that is not a replica
                raise KafkaError(ErrorCode.not_leader_or_follower)
            if leader_epochs:
                part = replicas.get_partition(topic, partition,
                                              current_leader_epoch=leader_epochs.get((topic, partition), -1))
            else:
                part = replicas.get_partition(topic, partition)
            plog = part.log
            assert plog is not None  # get_partition checked it
            if not zstd_ok and broker.compression_codec(topic) == _ZSTD:
                raise KafkaError(ErrorCode.unsupported_compression_type)
            r.high_watermark, r.last_stable_offset = part.fetch_offsets()
            r.log_start_offset = plog.log_start_offset
            if last_fetched and (epoch := last_fetched.get((topic, partition), -1)) >= 0:
                r.diverging = part.diverging_epoch(epoch, int(target.fetch_offset))
                if r.diverging is not None:  # nothing read: the fetcher truncates first
                    any_error = True
                    if out and out[-1][0] == topic:
                        out[-1][1].append(r)
                    else:
                        out.append((topic, [r]))
                    continue
            if replica_id >= 0:  # a follower copies everything the leader has
                fetchable = plog.log_end_offset
            else:
                fetchable = r.last_stable_offset if read_committed else r.high_watermark
            limit = min(int(target.max_bytes), remaining)
            if target.fetch_offset == fetchable and target.fetch_offset <= plog.log_end_offset:
                pass  # caught up: nothing to read, not an error
            elif limit > 0 or total == 0:
                info = plog.read(target.fetch_offset, limit, max_offset=fetchable, min_one_message=total == 0,
                                 lazy=True)  # FileSlices: sent from the file as the client drains
                r.records = list(info.records)
                r.size = int(info.size)
                if read_committed and r.size:
                    r.aborted = plog.collect_aborted_transactions(target.fetch_offset, fetchable)
        except KafkaError as e:
            r.error = e.code
            any_error = True
        except OSError as e:  # an unreadable segment: Kafka's KAFKA_STORAGE_ERROR
            log.error("read of %s-%d failed: %s", topic, partition, e)
            r.error = ErrorCode.kafka_storage_error
            r.records, r.size = [], 0
            any_error = True
        total += r.size
        remaining = max(0, remaining - r.size)
        if out and out[-1][0] == topic:
            out[-1][1].append(r)
        else:
            out.append((topic, [r]))
    return out, total - read_before, any_error


async def read_follower_slices(
    broker: Broker, max_bytes: int, targets: list[tuple[tuple[str, int], FetchTarget]], replica_id: int,
    leader_epochs: dict[tuple[str, int], int] | None, read_committed: bool, denied: frozenset[str],
    zstd_ok: bool, last_fetched: dict[tuple[str, int], int] | None, report: bool,
) -> tuple[list[tuple[str, list[PartitionRead]]], int, bool]:
    """`read_partitions` of a follower's fetch, FOLLOWER_READ_SLICE partitions per loop turn (the loop
    serves other requests between two slices): each slice checked for non-replicas, read and, on the
    request's first pass (`report`), reported (`_record_follower_fetch`) in one turn, as Kafka reads a
    partition then updates the follower's state; one byte budget and min_one_message for the whole pass.
    An append made meanwhile to a partition of an earlier slice is seen by the DelayedFetch check that
    follows the pass (it compares positions as they are then)."""
    budget = max(0, min(int(max_bytes), int(broker.setting("fetch.max.bytes"))))
    out: list[tuple[str, list[PartitionRead]]] = []
    total = 0
    any_error = False
    for start in range(0, len(targets), FOLLOWER_READ_SLICE):
        if start:
            await asyncio.sleep(0)
        chunk = targets[start:start + FOLLOWER_READ_SLICE]
        not_replica = _not_replica(broker, replica_id, chunk, leader_epochs)
        results, size, error = read_partitions(broker, budget - total, chunk, leader_epochs, read_committed,
                                               denied, zstd_ok=zstd_ok, replica_id=replica_id,
                                               not_replica=not_replica, last_fetched=last_fetched,
                                               read_before=total)
        if report:
            _record_follower_fetch(broker, replica_id, chunk, results)
        total += size
        any_error = any_error or error
        for name, reads in results:
            if out and out[-1][0] == name:
                out[-1][1].extend(reads)
            else:
                out.append((name, reads))
    return out, total, any_error


def _response(ctx: RequestContext, request: Any, results: list[tuple[str, list[PartitionRead]]],
              session: SessionContext, ids: dict[str, uuid.UUID] | None = None,
              unknown_ids: list[tuple[uuid.UUID, list[int]]] | None = None, throttled: bool = False) -> EncodedBody:
    if throttled:  # Kafka's FetchContext.getThrottledResponse: no partitions; a full fetch's session is void
        for _name, reads in results:
            for r in reads:
                _close_reads(r.records)
        return EncodedBody(encode_fetch_response(ctx.api_version, ctx.throttle_time_ms, 0,
                                                 session.session_id if session.incremental else 0, [], None, []))
    committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    topics: list[tuple[str | uuid.UUID, list[Any]]] = []
    diverging: dict[tuple[str | uuid.UUID, int], tuple[int, int]] = {}
    metrics = ctx.broker.metrics
    for name, reads in results:
        parts = []
        for r in reads:
            if not session.include((name, r.partition), r.size > 0 or r.diverging is not None, r.error,
                                   r.high_watermark, r.last_stable_offset, r.log_start_offset):
                continue
            session.sent((name, r.partition), r.high_watermark, r.last_stable_offset, r.log_start_offset)
            if metrics is not None:
                metrics.fetched(name, r.size, r.error is not ErrorCode.none)
            parts.append((r.partition, r.error.value, r.high_watermark, r.last_stable_offset, r.log_start_offset,
                          r.aborted if committed else None, -1, r.records, r.size))
            if r.diverging is not None:
                diverging[(name if ids is None else _topic_id(ctx.broker, name, ids), r.partition)] = r.diverging
        if parts:
            topics.append((name if ids is None else _topic_id(ctx.broker, name, ids), parts))
    for topic_id, partitions in unknown_ids or ():  # v13+: ids no topic has
        topics.append((topic_id, [(p, ErrorCode.unknown_topic_id.value, -1, -1, -1, None, -1, [], 0)
                                  for p in partitions]))
    leaders: dict[tuple[str | uuid.UUID, int], tuple[int, int]] | None = None
    endpoints: list[tuple[int, str, int, str | None]] = []
    if ctx.api_version >= 16:
        moved = [(name, r.partition) for name, reads in results for r in reads if r.error in _LEADER_MOVED]
        if moved:
            by_name, endpoints = leader_hints(ctx, moved)
            key = (lambda n: n) if ids is None else (lambda n: _topic_id(ctx.broker, n, ids))
            leaders = {(key(n), p): hint for (n, p), hint in by_name.items()}
    return EncodedBody(encode_fetch_response(ctx.api_version, ctx.throttle_time_ms, 0, session.session_id, topics, leaders, endpoints,
                                             diverging))


def _close_reads(records: list[Any]) -> None:
    for part in records:
        if isinstance(part, FileSlice):
            part.close()


# KIP-951: the errors that tell a client the partition's leader is elsewhere (or newer)
_LEADER_MOVED = (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch)


def _topic_id(broker: Broker, name: str, ids: dict[str, uuid.UUID]) -> uuid.UUID:
    """The id a v13+ answer names a topic by: the request's, else the image's (a session partition the
    request did not name), else zero (the topic is gone: its partitions carry the error)."""
    known = ids.get(name)
    if known is not None:
        return known
    topic = broker.metadata.topics.get(name)
    return topic.topic_id if topic is not None else _NO_ID


def _resolve_ids(broker: Broker, request: Any) -> tuple[dict[uuid.UUID, str], list[tuple[uuid.UUID, list[int]]]]:
    """v13+: topic id -> name for the ids the image knows, and the unknown ids with their partitions."""
    image = broker.metadata
    names: dict[uuid.UUID, str] = {}
    unknown: list[tuple[uuid.UUID, list[int]]] = []
    for t in request.topics:
        topic_id = t.topic_id or _NO_ID
        found = image.topic_by_id(topic_id) if topic_id != _NO_ID else None
        if found is None:
            unknown.append((topic_id, [int(p.partition) for p in t.partitions]))
        else:
            names[topic_id] = found.name
    for f in getattr(request, "forgotten_topics_data", ()):
        topic_id = f.topic_id or _NO_ID
        found = image.topic_by_id(topic_id) if topic_id != _NO_ID else None
        if found is not None:
            names[topic_id] = found.name
    return names, unknown


# the incremental fetch sessions of this broker (Kafka's FetchSessionCache), made at the first Fetch
FETCH_SESSIONS: Slot[FetchSessionCache] = Slot("fetch_sessions")


def _sessions(broker: Broker) -> FetchSessionCache:
    return broker.services.get_or_make(FETCH_SESSIONS, lambda: FetchSessionCache(
        int(broker.setting("max.incremental.fetch.session.cache.slots"))))


async def handle_fetch(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    by_id = ctx.api_version >= TOPIC_IDS_VERSION
    ids: dict[str, uuid.UUID] | None = None
    unknown_ids: list[tuple[uuid.UUID, list[int]]] = []
    if by_id:
        names, unknown_ids = _resolve_ids(broker, request)
        ids = {name: topic_id for topic_id, name in names.items()}

        def topic_of(t: Any) -> str | None:
            return names.get(t.topic_id or _NO_ID)
    else:
        def topic_of(t: Any) -> str | None:
            return t.topic  # type: ignore[no-any-return]
    known = [(name, t) for t in request.topics if (name := topic_of(t)) is not None]
    requested = [((name, int(p.partition)), int(p.fetch_offset), int(p.partition_max_bytes))
                 for name, t in known for p in t.partitions]
    # current_leader_epoch (v9+, KIP-320): checked for the partitions this request names; a session's
    # other partitions are read unchecked (kaflite's sessions do not keep it)
    epochs = None
    if ctx.api_version >= 9:
        epochs = {(name, int(p.partition)): int(p.current_leader_epoch) for name, t in known
                  for p in t.partitions if p.current_leader_epoch >= 0} or None
    if ctx.api_version >= 7:
        forgotten = [(name, int(p)) for f in getattr(request, "forgotten_topics_data", ())
                     if (name := topic_of(f)) is not None for p in f.partitions]
        session = _sessions(broker).context(int(request.session_id), int(request.session_epoch), requested, forgotten)
    else:  # no sessions before v7: every fetch is full
        session = FetchSessionCache(0).context(0, -1, requested)
    if session.error is not ErrorCode.none:
        R = ctx.response
        return build(R.FetchResponse, throttle_time=_ZERO, error_code=session.error, session_id=0, responses=())
    read_committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    max_wait_ms = request.max_wait.total_seconds() * 1000.0
    deadline = broker.now_ms() + max_wait_ms
    keys = [fetch_key(topic, partition) for (topic, partition), _t in session.targets]
    # the follower's id: `replica_id` up to v14, `replica_state.replica_id` from v15 (KIP-903)
    rstate = getattr(request, "replica_state", None)
    replica_id = int(rstate.replica_id if rstate is not None else getattr(request, "replica_id", -1))
    # a follower needs CLUSTER_ACTION (refused: every partition is TOPIC_AUTHORIZATION_FAILED), a consumer
    # READ on each topic (Kafka's handleFetchRequest)
    session_topics = {topic for (topic, _p), _t in session.targets}
    if replica_id >= 0:
        denied = frozenset() if ctx.allowed(rules.FETCH_FOLLOWER) else frozenset(session_topics)
    else:
        denied = frozenset(t for t in session_topics if not ctx.allowed(rules.FETCH_TOPIC, t))
    # last_fetched_epoch (v12+, KIP-595): checked for the partitions this request names that carry one
    last_fetched = None
    if ctx.api_version >= 12:
        last_fetched = {(name, int(p.partition)): int(p.last_fetched_epoch) for name, t in known
                        for p in t.partitions if p.last_fetched_epoch >= 0} or None
    not_replica = _not_replica(broker, replica_id, session.targets, epochs) \
        if 0 <= replica_id and len(session.targets) <= FOLLOWER_READ_SLICE else frozenset()  # sliced: per slice
    # v18 (KIP-1166): the high watermark the follower knows of each partition this request names
    known_hw = {(name, int(p.partition)): int(p.high_watermark) for name, t in known for p in t.partitions} \
        if replica_id >= 0 and ctx.api_version >= REPLICA_HIGH_WATERMARK_VERSION else {}
    max_bytes = int(request.max_bytes)
    if replica_id < 0:  # a consumer's fetch is capped at what its quota allows now (server/quota/manager.py)
        allowed = broker.quotas.fetch_allowance(CONSUMER_BYTE_RATE, ctx.session.principal, ctx.client_id,
                                                broker.now_ms())
        if allowed is not None:
            max_bytes = max(1, min(max_bytes, int(allowed)))
    # a follower's fetch of many partitions is read in slices, the loop free between two (1,000 partitions
    # held it 100-200 ms on a loaded machine)
    sliced = replica_id >= 0 and len(session.targets) > FOLLOWER_READ_SLICE
    zstd_ok = ctx.api_version >= ZSTD_VERSION

    async def read(first: bool) -> tuple[list[tuple[str, list[PartitionRead]]], int, bool]:
        if sliced:
            return await read_follower_slices(broker, max_bytes, session.targets, replica_id, epochs,
                                              read_committed, denied, zstd_ok, last_fetched, first)
        out = read_partitions(broker, max_bytes, session.targets, epochs, read_committed, denied,
                              zstd_ok=zstd_ok, replica_id=replica_id, not_replica=not_replica,
                              last_fetched=last_fetched)
        if first and replica_id >= 0:
            _record_follower_fetch(broker, replica_id, session.targets, out[0])
        return out

    results, total, any_error = await read(True)
    if replica_id >= 0:
        # the follower's log start offsets: DeleteRecords' low watermark (Kafka's updateFetchState)
        # (v5+: older versions do not carry it, and tell nothing)
        starts = {(name, int(p.partition)): int(p.log_start_offset) for name, t in known
                  for p in t.partitions if getattr(p, "log_start_offset", -1) >= 0}
        if starts:
            broker.replica_manager.record_follower_log_starts(replica_id, starts)
    if not (total >= request.min_bytes or any_error or unknown_ids or deadline - broker.now_ms() <= 0
            or not keys or (known_hw and _high_watermark_news(results, known_hw))):
        # parked (Kafka's DelayedFetch): woken by its partitions' appends, it compares offsets and positions
        # (delayed_fetch.py) and reads the logs once more only when that says complete or max_wait elapsed
        delayed = DelayedFetch.park(broker.replica_manager, session.targets, int(request.min_bytes), replica_id,
                                    read_committed, epochs, last_fetched, known_hw)
        while delayed is not None and not delayed.try_complete():
            remaining = deadline - broker.now_ms()
            if remaining <= 0:
                break
            await broker.purgatory.wait(keys, remaining)
        results, total, any_error = await read(False)
    if replica_id >= 0:
        ctx.request_time_recorded = True  # a follower is exempt from the request quota, as in Kafka
        throttled = False
    else:  # Kafka: a fetch throttled by either quota answers no data
        throttled = _consumer_quota(ctx, total, request_throttled=ctx.record_request_time() > 0)
    return _response(ctx, request, results, session, ids, unknown_ids, throttled)


def _consumer_quota(ctx: RequestContext, total: int, request_throttled: bool = False) -> bool:
    """Record a consumer's fetched bytes against its quota; True when throttled by it or by the request
    quota (Kafka then answers no data and takes the bytes back: the client fetches them again after its
    throttle)."""
    if not ctx.broker.quotas.enabled(CONSUMER_BYTE_RATE):
        return request_throttled
    if ctx.record_quota(CONSUMER_BYTE_RATE, total) <= 0 and not request_throttled:
        return False
    ctx.broker.quotas.unrecord(CONSUMER_BYTE_RATE, ctx.session.principal, ctx.client_id, total,
                               ctx.broker.now_ms())
    return True


def _high_watermark_news(results: list[tuple[str, list[PartitionRead]]],
                         known: dict[tuple[str, int], int]) -> bool:
    """Whether a partition's high watermark here is above the one the fetching follower knows (KIP-1166)."""
    return any(r.high_watermark > known.get((name, r.partition), r.high_watermark)
               for name, reads in results for r in reads)


def _not_replica(broker: Broker, replica_id: int, targets: list[tuple[tuple[str, int], FetchTarget]],
                 epochs: dict[tuple[str, int], int] | None) -> frozenset[tuple[str, int]]:
    """The partitions this leader serves of which `replica_id` is no replica (NOT_LEADER_OR_FOLLOWER before
    the read, Kafka's `followerReplicaOrThrow`); the read answers the other partitions' errors."""
    replicas = broker.replica_manager
    refused: set[tuple[str, int]] = set()
    for (topic, partition), _target in targets:
        try:
            part = replicas.get_partition(topic, partition, current_leader_epoch=epochs.get(
                (topic, partition), -1) if epochs else -1)
        except KafkaError:
            continue  # answered by the read
        try:
            part.check_follower(replica_id)
        except KafkaError:
            refused.add((topic, partition))
    return frozenset(refused)


def _record_follower_fetch(broker: Broker, replica_id: int, targets: list[tuple[tuple[str, int], FetchTarget]],
                           results: list[tuple[str, list[PartitionRead]]]) -> None:
    """Report a follower's fetch offsets to the leader's partitions read without error nor diverging epoch
    (Kafka's updateFollowerFetchState after the read), then answer with the high watermark as it is now."""
    replicas = broker.replica_manager
    reads = [r for _name, rs in results for r in rs]  # one per target, in order (read_partitions)
    for ((topic, partition), target), r in zip(targets, reads, strict=True):
        if r.error is not ErrorCode.none or r.diverging is not None:
            continue
        part = replicas.partition_or_none(topic, partition)
        if part is None:
            continue
        try:
            replicas.record_follower_fetch(part, replica_id, int(target.fetch_offset))
        except KafkaError as e:  # the leader moved meanwhile, or an offset outside the log: nothing recorded
            r.error = e.code
            r.records, r.size = [], 0
            continue
        r.high_watermark, r.last_stable_offset = part.fetch_offsets()


APIS: ApiTable = {API_KEY: (4, 18, handle_fetch)}
