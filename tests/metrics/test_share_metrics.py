"""Share-group metrics: a real confluent-kafka ShareConsumer's acknowledgements move the per-group counters
scraped from /metrics (kafka_server_sharegroupmetrics_recordacknowledgements, kaflite_sharegroup_records_*),
and the state machine counts each transition once (kaflite.coordinator.share.partition's rules)."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest

pytest.importorskip("prometheus_client")

import confluent_kafka as ck  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from helpers import acknowledge_by_value, wait_share_partition_open  # noqa: E402
from kaflite.coordinator.share.partition import AckType, ShareConfig, SharePartition  # noqa: E402
from kaflite.server.embedded import EmbeddedBroker  # noqa: E402

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def test_the_state_machine_counts_every_transition_once() -> None:
    sp = SharePartition.initial(ShareConfig(record_lock_duration_ms=100, delivery_count_limit=2), 0, 0)
    assert sp.acquire("a", [(0, 5)], high_watermark=6, max_records=10, now=0) != []
    sp.acknowledge("a", [(0, 0, AckType.ACCEPT), (1, 1, AckType.RELEASE), (2, 2, AckType.REJECT),
                         (3, 3, AckType.GAP)], now=1)
    sp.release_member("a")  # 4 and 5 back to AVAILABLE
    c = sp.counts
    assert (c.acquired, c.accepted, c.released_acks, c.rejected, c.released, c.archived) == (6, 1, 1, 1, 3, 2)
    sp.acquire("b", [(1, 5)], high_watermark=6, max_records=10, now=2)  # 1, 4, 5: second delivery
    sp.expire(now=200)  # their locks end at the delivery limit: archived, not released
    assert (c.acquired, c.released, c.archived) == (9, 3, 5)
    sp.acquire("b", [(6, 9)], high_watermark=10, max_records=10, now=300)
    sp.expire(now=400)
    sp.move_log_start(10)  # the 4 AVAILABLE records the log start passed are archived
    assert (c.acquired, c.released, c.archived) == (13, 7, 9)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("kaflite"),
                        # heartbeats every 0.5 s: partitions are assigned at the heartbeat after their
                        # share state is initialized (the join only starts that)
                        overrides={"metrics.listener": "http://127.0.0.1:0",
                                   "group.share.heartbeat.interval.ms": "500"}) as b:
        yield b


def scrape(broker: EmbeddedBroker) -> Samples:
    endpoint = broker.server.metrics_endpoint
    assert endpoint is not None
    with urllib.request.urlopen(f"http://127.0.0.1:{endpoint.port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_a_share_consumers_acknowledgements_move_the_counters(broker: EmbeddedBroker) -> None:
    topic, group = "sm-acks", "smg-acks"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    c = ck.ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                          "share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    wait_share_partition_open(broker, [c], group, topic)
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for v in (b"reject", b"release", b"accept", b"accept2"):
        producer.produce(topic, v)
    assert producer.flush(10) == 0
    seen = acknowledge_by_value(c, 5)
    assert sorted(seen) == [b"accept", b"accept2", b"reject", b"release", b"release"]
    c.commit_sync()
    c.close()
    s = scrape(broker)
    name = "kafka_server_sharegroupmetrics_recordacknowledgements_total"
    assert s[(name, frozenset({("group", group), ("ackType", "Accept")}))] == 3  # accept, accept2, release
    assert s[(name, frozenset({("group", group), ("ackType", "Release")}))] == 1
    assert s[(name, frozenset({("group", group), ("ackType", "Reject")}))] == 1
    assert s[(name, frozenset({("ackType", "Accept")}))] >= 3  # the broker-wide sample
    assert s[("kaflite_sharegroup_records_acquired_total", frozenset({("group", group)}))] == 5
    assert s[("kaflite_sharegroup_records_released_total", frozenset({("group", group)}))] == 1
    assert s[("kaflite_sharegroup_records_archived_total", frozenset({("group", group)}))] == 1  # the reject
