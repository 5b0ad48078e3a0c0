"""Prometheus metrics (`metrics.listener`): after producing and consuming known counts, the scraped values
(parsed with prometheus_client's own text parser) equal them; lag = log end - committed per partition."""

from __future__ import annotations

import datetime
import json
import re
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("prometheus_client")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from kio.schema.api_versions.v3.request import ApiVersionsRequest  # noqa: E402
from kio.schema.errors import ErrorCode  # noqa: E402
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic  # noqa: E402
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData  # noqa: E402
from kwire import WireClient, decode_response  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from helpers import REPO  # noqa: E402
from kaflite.protocol.record_batch import build_record_batch  # noqa: E402
from kaflite.server.config import ConfigError  # noqa: E402
from kaflite.server.embedded import EmbeddedBroker  # noqa: E402

SECOND = datetime.timedelta(seconds=1)
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("kaflite"),
                        overrides={"metrics.listener": "http://127.0.0.1:0"}) as b:
        yield b


def scrape(broker: EmbeddedBroker) -> tuple[Samples, set[str]]:
    endpoint = broker.server.metrics_endpoint
    assert endpoint is not None
    with urllib.request.urlopen(f"http://127.0.0.1:{endpoint.port}/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    samples: Samples = {}
    names = set()
    for fam in text_string_to_metric_families(text):
        names.add(fam.name)
        for s in fam.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples, names


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def _produce(topic: str, records: bytes, partition: int = 0) -> ProduceRequest:
    return ProduceRequest(transactional_id=None, acks=-1, timeout=5 * SECOND, topic_data=(
        TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=partition, records=records),)),))


def _fetch(topic: str, offset: int, max_wait_ms: int = 0) -> FetchRequest:
    return FetchRequest(
        max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1, max_bytes=1 << 24, isolation_level=0,
        session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
        topics=(FetchTopic(topic=topic, partitions=(
            FetchPartition(partition=0, fetch_offset=offset, log_start_offset=-1, partition_max_bytes=1 << 24),)),))


def test_single_node_gauges_connections_and_purgatory(broker: EmbeddedBroker) -> None:
    broker.call(broker.server.broker.create_topic, "mt-wait", 1, None)
    s, _ = scrape(broker)
    assert value(s, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(s, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(s, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(s, "kafka_server_replicamanager_partitioncount") == value(s, "kafka_server_replicamanager_leadercount")
    # the module's first test: no other client is connected
    assert value(s, "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT") == 0
    with WireClient(broker.bootstrap) as a, WireClient(broker.bootstrap) as b:
        a.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        b.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        s, _ = scrape(broker)
        assert value(s, "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT") == 2
        # a fetch parked at the log end is in the Fetch purgatory until its max wait
        assert value(s, "kafka_server_delayedoperationpurgatory_purgatorysize", delayedOperation="Fetch") == 0
        corr = a.send(_fetch("mt-wait", 0, max_wait_ms=3000))
        deadline = time.monotonic() + 5
        parked = 0.0
        while time.monotonic() < deadline and parked < 1:
            s, _ = scrape(broker)
            parked = value(s, "kafka_server_delayedoperationpurgatory_purgatorysize", delayedOperation="Fetch")
            time.sleep(0.05)
        assert parked == 1
        assert decode_response(1, 12, a.read_frame(), corr).responses[0].partitions[0].records in (b"", None)
    s, _ = scrape(broker)
    assert value(s, "kafka_server_delayedoperationpurgatory_purgatorysize", delayedOperation="Fetch") == 0
    deadline = time.monotonic() + 5  # the broker sees the two connections close
    while time.monotonic() < deadline and value(
            scrape(broker)[0], "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT"):
        time.sleep(0.05)
    assert value(scrape(broker)[0], "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT") == 0


def test_produce_and_fetch_counts_equal_what_was_sent(broker: EmbeddedBroker) -> None:
    broker.call(broker.server.broker.create_topic, "mt-known", 1, None)
    batches = [build_record_batch([(f"k{i}".encode(), b"v" * (10 + i), []) for i in range(n)]) for n in (4, 5, 6)]
    with WireClient(broker.bootstrap) as wire:
        for b in batches:
            assert wire.request(_produce("mt-known", b)).responses[0].partition_responses[0].error_code == ErrorCode.none
        fetched = wire.request(_fetch("mt-known", 0)).responses[0].partitions[0]
        oor = wire.request(_fetch("mt-known", 999)).responses[0].partitions[0]
        refused = wire.request(_produce("__consumer_offsets", batches[0])).responses[0].partition_responses[0]
    assert oor.error_code == ErrorCode.offset_out_of_range and refused.error_code != ErrorCode.none
    sent = sum(len(b) for b in batches)
    assert len(fetched.records) == sent
    s, _ = scrape(broker)
    assert value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic="mt-known") == 15
    assert value(s, "kafka_server_brokertopicmetrics_bytesin_total", topic="mt-known") == sent
    assert value(s, "kafka_server_brokertopicmetrics_totalproducerequests_total", topic="mt-known") == 3
    assert value(s, "kafka_server_brokertopicmetrics_bytesout_total", topic="mt-known") == sent
    assert value(s, "kafka_server_brokertopicmetrics_totalfetchrequests_total", topic="mt-known") == 2
    assert value(s, "kafka_server_brokertopicmetrics_failedfetchrequests_total", topic="mt-known") == 1
    assert value(s, "kafka_server_brokertopicmetrics_failedproducerequests_total", topic="__consumer_offsets") == 1
    assert value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic="__consumer_offsets") == 0
    # the broker-wide series is the sum over topics
    per_topic = sum(v for (n, labels), v in s.items()
                    if n == "kafka_server_brokertopicmetrics_messagesin_total" and labels)
    assert value(s, "kafka_server_brokertopicmetrics_messagesin_total") == per_topic
    # the log gauges, and the bytes on disk
    assert value(s, "kafka_log_log_size", topic="mt-known", partition="0") == sent
    assert value(s, "kafka_log_log_logendoffset", topic="mt-known", partition="0") == 15
    on_disk = sum(p.stat().st_size for p in (broker.data_dir / "mt-known-0").glob("*.log"))
    assert on_disk == sent


def test_request_rate_and_latency_histogram(broker: EmbeddedBroker) -> None:
    before, _ = scrape(broker)
    with WireClient(broker.bootstrap) as wire:
        for _ in range(3):
            assert wire.request(ApiVersionsRequest(client_software_name="t", client_software_version="1")).error_code \
                == ErrorCode.none
    after, _ = scrape(broker)
    name = "kafka_network_requestmetrics_requests_total"
    assert value(after, name, request="ApiVersions") - value(before, name, request="ApiVersions") == 3
    count = "kafka_network_requestmetrics_totaltimems_count"
    assert value(after, count, request="ApiVersions") - value(before, count, request="ApiVersions") == 3
    inf = value(after, "kafka_network_requestmetrics_totaltimems_bucket", request="ApiVersions", le="+Inf")
    assert inf == value(after, count, request="ApiVersions")
    buckets = sorted(((float(dict(labels)["le"]), v) for (n, labels), v in after.items()
                      if n == "kafka_network_requestmetrics_totaltimems_bucket" and ("request", "ApiVersions") in labels))
    assert [v for _, v in buckets] == sorted(v for _, v in buckets)  # cumulative
    assert value(after, "kafka_network_requestmetrics_totaltimems_sum", request="ApiVersions") > 0


def test_consumer_group_lag_is_log_end_minus_committed(broker: EmbeddedBroker) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CTP

    broker.call(broker.server.broker.create_topic, "mt-lag", 3, None)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})
    ends = {0: 0, 1: 0, 2: 0}

    def delivered(err: Any, msg: Any) -> None:
        assert err is None
        ends[msg.partition()] = max(ends[msg.partition()], msg.offset() + 1)

    for i in range(90):
        producer.produce("mt-lag", key=f"key-{i}".encode(), value=b"x", on_delivery=delivered)
    assert producer.flush(10) == 0
    committed = {p: min(ends[p], 3 + p) for p in ends}
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "mt-billing", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["mt-lag"])
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    consumer.commit(offsets=[CTP("mt-lag", p, o) for p, o in committed.items()], asynchronous=False)
    try:
        s, _ = scrape(broker)
        for p in ends:
            labels = {"consumergroup": "mt-billing", "topic": "mt-lag", "partition": str(p)}
            end = value(s, "kafka_log_log_logendoffset", topic="mt-lag", partition=str(p))
            assert end == ends[p]
            assert value(s, "kafka_consumergroup_current_offset", **labels) == committed[p]
            assert value(s, "kafka_consumergroup_lag", **labels) == end - committed[p]
        assert value(s, "kafka_consumergroup_lag_sum", consumergroup="mt-billing") == \
            sum(ends.values()) - sum(committed.values())
        assert value(s, "kafka_consumergroup_state", consumergroup="mt-billing", state="stable", type="classic") == 1
        assert value(s, "kafka_coordinator_group_groupmetadatamanager_numgroups", state="stable") >= 1
    finally:
        consumer.close()
    s, _ = scrape(broker)
    assert value(s, "kafka_consumergroup_state", consumergroup="mt-billing", state="empty", type="classic") == 1


def test_off_by_default_and_bad_values_name_the_key(tmp_path: Path) -> None:
    with EmbeddedBroker(data_dir=tmp_path / "d") as b:
        assert b.server.metrics_endpoint is None and b.server.broker.metrics is None
    with pytest.raises(ConfigError, match="metrics.listener: expected http://HOST:PORT"):
        EmbeddedBroker(data_dir=tmp_path / "e", overrides={"metrics.listener": "127.0.0.1:9404"}).start()


def test_docs_list_every_metric_and_the_dashboard_uses_them(broker: EmbeddedBroker) -> None:
    _, names = scrape(broker)
    doc = (REPO / "docs" / "metrics.md").read_text()
    documented = set(re.findall(r"`((?:kafka|kaflite)_[a-z0-9_]+)`", doc))
    served = {n for n in names if n.startswith(("kafka_", "kaflite_"))}
    # prometheus_client reports counters without _total; the doc writes the sample names
    served_doc = {n + "_total" if (n + "_total") in documented else n for n in served}
    assert served_doc <= documented, sorted(served_doc - documented)
    dashboard = json.loads((REPO / "docs" / "grafana" / "kaflite.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 8
    used = {m for e in exprs for m in re.findall(r"\b(kafka_[a-z_]+)", e)}
    known = served | {n + s for n in served for s in ("_total", "_bucket", "_sum", "_count")}
    assert used <= known, sorted(used - known)


def test_histogram_buckets_are_upper_inclusive_and_listener_parsing() -> None:
    from kaflite.server.metrics import LATENCY_BUCKETS_MS, BrokerMetrics, parse_metrics_listener

    m = BrokerMetrics()
    for seconds in (0.0, 0.001, 0.0011, 100.0):  # 0 ms, exactly 1 ms, 1.1 ms, 100 s
        m.request(3, seconds)
    buckets = m.requests[3].buckets
    assert buckets[0] == 1  # le=0.5
    assert buckets[LATENCY_BUCKETS_MS.index(1)] == 1  # le=1 holds exactly 1 ms
    assert buckets[LATENCY_BUCKETS_MS.index(2.5)] == 1
    assert buckets[-1] == 1  # +Inf only
    assert m.requests[3].count == 4 and m.requests[3].total_ms == pytest.approx(100002.1)
    assert parse_metrics_listener("http://127.0.0.1:9404") == ("127.0.0.1", 9404)
    assert parse_metrics_listener("http://[::1]:9404/metrics") == ("::1", 9404)
    for bad in ("127.0.0.1:9404", "https://127.0.0.1:9404", "http://127.0.0.1", "http://h:99999"):
        with pytest.raises(ValueError, match="metrics.listener"):
            parse_metrics_listener(bad)
