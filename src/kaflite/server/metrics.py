"""Prometheus metrics of the broker, named as the Prometheus JMX exporter names Kafka's MBeans.

Served at `metrics.listener` (e.g. `http://127.0.0.1:9404/metrics`; off when unset) by a small HTTP
endpoint on the broker's own event loop, so a scrape reads broker state on the thread that owns it.

Rules:
- the hot path only adds to plain ints: one call per request in the dispatcher (count and latency of
  each API), one per partition in the produce and fetch handlers (records, bytes, failures); nothing
  per record, no prometheus_client object touched while serving;
- everything else (log sizes and offsets, purgatory sizes, connections, groups and their lag,
  partition health) is read from the broker when Prometheus scrapes, by `KafliteCollector`;
- names follow the JMX exporter's usual rules for Kafka (`kafka_<domain>_<type>_<name>`, lower case,
  `PerSec` meters as `_total` counters with their MBean keys as labels); request latency is a
  histogram (`kafka_network_requestmetrics_totaltimems`), the one deliberate difference from Kafka's
  percentile gauges; consumer lag follows kafka_exporter (`kafka_consumergroup_lag`), since Kafka has
  no MBean for it;
- a broker-wide series (no `topic` label) stands beside the per-topic ones, as Kafka's MBean without
  `topic=` does.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import re
import socket
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from kaflite.server.loop_watchdog import LoopWatchdog

__all__ = ["BrokerMetrics", "KafliteCollector", "MetricsEndpoint", "parse_metrics_listener", "LATENCY_BUCKETS_MS"]

log = logging.getLogger("kaflite.server")

#: upper bounds (ms) of the request latency histogram buckets; +Inf is implied
LATENCY_BUCKETS_MS: tuple[float, ...] = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)


class _RequestStats:
    __slots__ = ("count", "total_ms", "buckets")

    def __init__(self) -> None:
        self.count = 0
        self.total_ms = 0.0
        self.buckets = [0] * (len(LATENCY_BUCKETS_MS) + 1)


class _TopicStats:
    __slots__ = ("messages_in", "bytes_in", "bytes_out", "failed_produce", "failed_fetch", "produce_requests",
                 "fetch_requests")

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.failed_produce = 0
        self.failed_fetch = 0
        self.produce_requests = 0
        self.fetch_requests = 0


class BrokerMetrics:
    """The counters the hot path adds to (plain ints, one event loop: no locks)."""

    def __init__(self) -> None:
        self.requests: dict[int, _RequestStats] = {}
        self.topics: dict[str, _TopicStats] = {}

    def request(self, api_key: int, seconds: float) -> None:
        stats = self.requests.get(api_key)
        if stats is None:
            stats = self.requests[api_key] = _RequestStats()
        ms = seconds * 1000.0
        stats.count += 1
        stats.total_ms += ms
        stats.buckets[bisect.bisect_left(LATENCY_BUCKETS_MS, ms)] += 1

    def _topic(self, topic: str) -> _TopicStats:
        stats = self.topics.get(topic)
        if stats is None:
            stats = self.topics[topic] = _TopicStats()
        return stats

    def produced(self, topic: str, records: int, nbytes: int) -> None:
        """One partition of a produce request appended (a duplicate idempotent batch counts 0 records)."""
        stats = self._topic(topic)
        stats.produce_requests += 1
        stats.messages_in += records
        stats.bytes_in += nbytes

    def produce_failed(self, topic: str) -> None:
        stats = self._topic(topic)
        stats.produce_requests += 1
        stats.failed_produce += 1

    def fetched(self, topic: str, nbytes: int, failed: bool) -> None:
        """One partition of a fetch response: the record bytes sent, or a partition error."""
        stats = self._topic(topic)
        stats.fetch_requests += 1
        stats.bytes_out += nbytes
        if failed:
            stats.failed_fetch += 1


def parse_metrics_listener(value: str) -> tuple[str, int]:
    """`http://HOST:PORT` -> (host, port); a ValueError names the key and the form allowed."""
    parts = urlsplit(value.strip())
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or not parts.hostname or port is None or parts.path not in ("", "/", "/metrics"):
        raise ValueError(f"metrics.listener: expected http://HOST:PORT (e.g. http://127.0.0.1:9404), got {value!r}")
    return parts.hostname, port


# -- names ------------------------------------------------------------------------------------------

_API_NAMES: dict[int, str] = {}


def api_name(api_key: int) -> str:
    """Kafka's request name (ApiKeys): Produce, Fetch, Metadata, ..."""
    name = _API_NAMES.get(api_key)
    if name is None:
        name = f"Api{api_key}"
        try:
            from kio.index import load_request_schema

            for version in range(0, 20):
                try:
                    name = load_request_schema(api_key, version).__name__.removesuffix("Request")
                    break
                except Exception:
                    continue
        except ImportError:  # pragma: no cover - kio is a dependency
            pass
        _API_NAMES[api_key] = name
    return name


def _purgatory_name(kind: str) -> str:
    # Kafka's purgatories: Produce, Fetch, Rebalance (JoinGroup), Heartbeat, DeleteRecords, ...
    return {"fetch": "Fetch", "produce": "Produce", "join": "Rebalance", "sync": "Rebalance",
            "heartbeat": "Heartbeat"}.get(kind, kind[:1].upper() + kind[1:])


# -- the collector ----------------------------------------------------------------------------------

class KafliteCollector:
    """Reads the counters and the broker's state when Prometheus scrapes (on the broker's loop)."""

    def __init__(self, broker: Any, metrics: BrokerMetrics, connections: Callable[[], dict[str, int]],
                 watchdog: LoopWatchdog | None = None, *, group_service: Callable[[], Any] = lambda: None,
                 share_coordinator: Callable[[], Any] = lambda: None) -> None:
        self.broker = broker
        # the broker's GroupService and share-group coordinator, None until made: given by the server, as this
        # module cannot import the services (server/config imports it, and the services import the config)
        self.group_service = group_service
        self.share_coordinator = share_coordinator
        self.metrics = metrics
        self.connections = connections  # open connections by listener name
        self.watchdog = watchdog  # the event loop's lag (server/loop_watchdog.py)

    def describe(self) -> list[Any]:
        return []  # no fixed list: the families depend on the topics and groups present

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        m = self.metrics
        # -- BrokerTopicMetrics ------------------------------------------------------------------------
        meters = (("messagesin", "messages_in", "Records appended (MessagesInPerSec)."),
                  ("bytesin", "bytes_in", "Record batch bytes appended by produce requests (BytesInPerSec)."),
                  ("bytesout", "bytes_out", "Record batch bytes sent in fetch responses (BytesOutPerSec)."),
                  ("failedproducerequests", "failed_produce", "Produce partitions refused (FailedProduceRequestsPerSec)."),
                  ("failedfetchrequests", "failed_fetch", "Fetch partitions answered with an error (FailedFetchRequestsPerSec)."),
                  ("totalproducerequests", "produce_requests", "Produce partitions handled (TotalProduceRequestsPerSec)."),
                  ("totalfetchrequests", "fetch_requests", "Fetch partitions answered (TotalFetchRequestsPerSec)."))
        topics = sorted(m.topics.items())
        for name, attr, doc in meters:
            fam = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", doc, labels=["topic"])
            total = 0
            for topic, stats in topics:
                v = getattr(stats, attr)
                total += v
                fam.add_metric([topic], v)
            # the broker-wide MBean (no topic=): a sample without the label, in the same family
            fam.add_sample(f"kafka_server_brokertopicmetrics_{name}_total", {}, float(total))
            yield fam
        # -- RequestMetrics ------------------------------------------------------------------------------
        reqs = CounterMetricFamily("kafka_network_requestmetrics_requests", "Requests handled (RequestsPerSec).",
                                   labels=["request"])
        hist = HistogramMetricFamily("kafka_network_requestmetrics_totaltimems",
                                     "Request time from decode to response, in ms, including time parked in a "
                                     "purgatory (TotalTimeMs).", labels=["request"])
        for key, rstats in sorted(m.requests.items()):
            request = api_name(key)
            reqs.add_metric([request], rstats.count)
            cumulative, buckets = 0, []
            for bound, n in zip((*LATENCY_BUCKETS_MS, float("inf")), rstats.buckets, strict=True):
                cumulative += n
                buckets.append(("+Inf" if bound == float("inf") else _fmt_bound(bound), cumulative))
            hist.add_metric([request], buckets, rstats.total_ms)
        yield reqs
        yield hist
        # -- purgatories, connections ---------------------------------------------------------------------
        purg = GaugeMetricFamily("kafka_server_delayedoperationpurgatory_purgatorysize",
                                 "Requests waiting in a purgatory (PurgatorySize).", labels=["delayedOperation"])
        sizes = dict.fromkeys(("Fetch", "Produce", "Rebalance"), 0)
        for kind, n in self.broker.purgatory.sizes().items():
            name = _purgatory_name(kind)
            sizes[name] = sizes.get(name, 0) + n
        for kind, n in sorted(sizes.items()):
            purg.add_metric([kind], n)
        yield purg
        yield _gauge1("kafka_server_socket_server_metrics_connection_count",
                      "Open client connections (connection-count).", ["listener"],
                      [([name], n) for name, n in sorted(self.connections().items())])
        # -- logs and replication --------------------------------------------------------------------------
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of the partition's log segments (Log Size).",
                                 labels=["topic", "partition"])
        leo = GaugeMetricFamily("kafka_log_log_logendoffset", "The partition's log end offset (LogEndOffset).",
                                labels=["topic", "partition"])
        lso = GaugeMetricFamily("kafka_log_log_logstartoffset", "The partition's log start offset (LogStartOffset).",
                                labels=["topic", "partition"])
        segs = GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments of the partition's log (NumLogSegments).",
                                 labels=["topic", "partition"])
        logs = self.broker.log_manager.logs() if self.broker.log_manager is not None else {}
        ends: dict[tuple[str, int], int] = {}
        for (topic, partition), plog in sorted(logs.items()):
            labels = [topic, str(partition)]
            size.add_metric(labels, plog.size)
            leo.add_metric(labels, plog.log_end_offset)
            lso.add_metric(labels, plog.log_start_offset)
            segs.add_metric(labels, len(plog.segments))
            ends[(topic, partition)] = plog.high_watermark
        yield from (size, leo, lso, segs)
        # leadership and ISR from the ReplicaManager's partitions, the controller from the metadata image
        hosted = list(self.broker.replica_manager.partitions.values())
        image = self.broker.metadata
        yield _gauge1("kafka_server_replicamanager_partitioncount", "Partitions on this broker (PartitionCount).",
                      [], [([], len(hosted))])
        yield _gauge1("kafka_server_replicamanager_leadercount", "Partitions this broker leads (LeaderCount).",
                      [], [([], sum(1 for p in hosted if p.is_leader))])
        yield _gauge1("kafka_server_replicamanager_underreplicatedpartitions",
                      "Partitions whose ISR is smaller than their replicas (UnderReplicatedPartitions).", [],
                      [([], sum(1 for p in hosted if p.is_leader and len(p.isr) < len(p.state.replicas)))])
        active = image.controller_id == self.broker.node_id
        offline = sum(1 for t in image.topics.values() for r in t.partitions if r.leader not in image.brokers)
        yield _gauge1("kafka_controller_kafkacontroller_offlinepartitionscount",
                      "Partitions without a leader (OfflinePartitionsCount).", [], [([], offline if active else 0)])
        yield _gauge1("kafka_controller_kafkacontroller_activecontrollercount",
                      "1 on the active controller (ActiveControllerCount).", [], [([], 1 if active else 0)])
        yield from self._groups(ends)
        yield from self._share_groups()
        yield from self._event_loop()
        faults = self.broker.faults
        if faults is not None:  # kaflite.faults.enable (server/faults.py)
            fam = CounterMetricFamily("kaflite_faults_injected", "Faults injected (kaflite-only, server/faults.py).",
                                      labels=["kind", "request", "error"])
            for (kind, request, error), n in sorted(faults.counts.items()):
                fam.add_metric([kind, request, error], n)
            yield fam

    def _event_loop(self) -> Iterator[Any]:
        """kaflite-only (Kafka has no event loop): the loop's timer lateness over the last one or two
        windows, and the stalls counted since start."""
        from prometheus_client.core import CounterMetricFamily

        if self.watchdog is None:
            return
        lag_max, lag_p99 = self.watchdog.stats()
        yield _gauge1("kaflite_eventloop_lag_max_ms", "Largest lateness of the event loop's timer (ms) over the "
                      "last 60 to 120 s: how long the loop was kept from running.", [], [([], lag_max)])
        yield _gauge1("kaflite_eventloop_lag_p99_ms", "99th percentile of the event loop's timer lateness (ms) "
                      "over the same window.", [], [([], lag_p99)])
        stalls = CounterMetricFamily("kaflite_eventloop_stalls", "Times the event loop was blocked for more "
                                     "than 100 ms (each logged with a stack sample of the loop thread).")
        stalls.add_metric([], self.watchdog.stalls)
        yield stalls

    def _share_groups(self) -> Iterator[Any]:
        """Share groups' records (KIP-932), from the counts the share coordinator keeps per group. Kafka's
        ShareGroupMetrics RecordAcknowledgementsPerSec has the ackType key only: kaflite adds `group`,
        with a broker-wide sample without it, as for the topics; Kafka has no MBean for the rest."""
        from prometheus_client.core import CounterMetricFamily

        coord = self.share_coordinator()
        counts = sorted(coord.counts.items()) if coord is not None else []
        acks = CounterMetricFamily("kafka_server_sharegroupmetrics_recordacknowledgements",
                                   "Records acknowledged, by acknowledgement type (RecordAcknowledgementsPerSec).",
                                   labels=["group", "ackType"])
        for ack_type, attr in (("Accept", "accepted"), ("Release", "released_acks"), ("Reject", "rejected")):
            total = 0
            for group_id, c in counts:
                total += getattr(c, attr)
                acks.add_metric([group_id, ack_type], getattr(c, attr))
            acks.add_sample("kafka_server_sharegroupmetrics_recordacknowledgements_total", {"ackType": ack_type},
                            float(total))
        yield acks
        for name, attr, doc in (
                ("acquired", "acquired", "Records acquired by a share group's members (each delivery)."),
                ("released", "released", "Records made available again: a RELEASE, a lock ending, a member "
                                         "leaving (kaflite-only)."),
                ("archived", "archived", "Records archived without being accepted: REJECT, the delivery limit, "
                                         "the log start passing them, aborted transactions (kaflite-only).")):
            fam = CounterMetricFamily(f"kaflite_sharegroup_records_{name}", doc, labels=["group"])
            for group_id, c in counts:
                fam.add_metric([group_id], getattr(c, attr))
            yield fam

    def _groups(self, ends: dict[tuple[str, int], int]) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        lag = GaugeMetricFamily("kafka_consumergroup_lag", "Log end offset minus committed offset, per partition.",
                                labels=["consumergroup", "topic", "partition"])
        current = GaugeMetricFamily("kafka_consumergroup_current_offset", "Committed offset, per partition.",
                                    labels=["consumergroup", "topic", "partition"])
        lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum", "Total lag of the group.", labels=["consumergroup"])
        state = GaugeMetricFamily("kafka_consumergroup_state", "1 for the group's current state and protocol type.",
                                  labels=["consumergroup", "state", "type"])
        by_state = GaugeMetricFamily("kafka_coordinator_group_groupmetadatamanager_numgroups",
                                     "Groups by state (NumGroupsStable, NumGroupsEmpty, ...).", labels=["state"])
        counts: dict[str, int] = {}
        service = self.group_service()
        shards = service.runtime.active_shards() if service is not None else []
        for _partition, shard in shards:
            for g in shard.list_groups():
                st = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", str(g.state)).lower()  # PreparingRebalance
                state.add_metric([g.group_id, st, getattr(g, "group_type", "") or "classic"], 1)
                counts[st] = counts.get(st, 0) + 1
            for group_id, committed in sorted(shard.offsets.items()):
                total = 0
                for (topic, partition), value in sorted(committed.items()):
                    labels = [group_id, topic, str(partition)]
                    current.add_metric(labels, value.offset)
                    end = ends.get((topic, partition))
                    if end is not None:
                        n = max(0, end - value.offset)
                        total += n
                        lag.add_metric(labels, n)
                lag_sum.add_metric([group_id], total)
        for st in ("stable", "empty", "preparing_rebalance", "completing_rebalance", "dead"):
            counts.setdefault(st, 0)
        for st, n in sorted(counts.items()):
            by_state.add_metric([st], n)
        yield from (lag, current, lag_sum, state, by_state)


def _fmt_bound(b: float) -> str:
    return str(int(b)) if b == int(b) else str(b)


def _gauge1(name: str, doc: str, labels: list[str], values: list[tuple[list[str], float]]) -> Any:
    from prometheus_client.core import GaugeMetricFamily

    fam = GaugeMetricFamily(name, doc, labels=labels)
    for lv, v in values:
        fam.add_metric(lv, v)
    return fam


# -- the endpoint -----------------------------------------------------------------------------------

class MetricsEndpoint:
    """GET /metrics over HTTP/1.1 on the broker's event loop (one response per connection)."""

    def __init__(self, collector: KafliteCollector) -> None:
        from prometheus_client import CollectorRegistry

        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)  # type: ignore[arg-type]
        self._servers: list[asyncio.base_events.Server] = []
        self.host = ""
        self.port = 0

    async def start_on(self, socks: list[socket.socket]) -> None:
        """Serve on sockets already bound (the broker binds them before it opens its data directories)."""
        try:
            for sock in socks:
                self._servers.append(await asyncio.start_server(self._serve, sock=sock))
        except BaseException:
            await self.stop()
            raise
        self.host, self.port = socks[0].getsockname()[:2]
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        self._servers.clear()

    def render(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            method, _, rest = head.split(b"\r\n", 1)[0].partition(b" ")
            path = rest.split(b" ", 1)[0].split(b"?", 1)[0]
            if method not in (b"GET", b"HEAD"):
                status, body, ctype = b"405 Method Not Allowed", b"GET /metrics\n", b"text/plain"
            elif path in (b"/metrics", b"/"):
                from prometheus_client import CONTENT_TYPE_LATEST

                status, body, ctype = b"200 OK", self.render(), CONTENT_TYPE_LATEST.encode()
            else:
                status, body, ctype = b"404 Not Found", b"metrics are at /metrics\n", b"text/plain"
            writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: " + ctype + b"\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n"
                         + (body if method != b"HEAD" else b""))
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            pass
        except Exception:  # a scrape must never take the broker down
            log.exception("metrics scrape failed")
        finally:
            writer.close()
