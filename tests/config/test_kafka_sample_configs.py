"""Apache Kafka 3.9's own sample configurations load unchanged: config/server.properties (ZooKeeper mode)
and config/kraft/server.properties (KRaft combined mode), their key=value lines in tests/data/. Every key
is a kaflite key, read from the file with the value written there; the KRaft-only keys are accepted
without effect; the keys the samples leave commented out load too with their example values."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import REPO
from kaflite.server.config import BROKER_CONFIGS, BrokerConfig, Listener, parse_properties

DATA = REPO / "tests" / "data"
ZK = "kafka-3.9-server.properties"
KRAFT = "kafka-3.9-kraft-server.properties"

# what the samples carry as comments (#key=value), uncommented by someone adapting them
COMMENTED_OUT = {
    ZK: {
        "listeners": "PLAINTEXT://:9092",
        "advertised.listeners": "PLAINTEXT://your.host.name:9092",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "log.flush.interval.messages": "10000",
        "log.flush.interval.ms": "1000",
        "log.retention.bytes": "1073741824",
        "log.segment.bytes": "1073741824",
    },
    KRAFT: {
        "log.flush.interval.messages": "10000",
        "log.flush.interval.ms": "1000",
        "log.retention.bytes": "1073741824",
    },
}
KRAFT_ONLY = {"process.roles", "controller.quorum.voters"}


def _lines(name: str) -> list[tuple[str, str]]:
    return [(k, v) for k, v, _ in parse_properties((DATA / name).read_text())]


@pytest.mark.parametrize("name", [ZK, KRAFT])
def test_every_key_of_kafkas_sample_is_read_from_the_file(name: str) -> None:
    lines = _lines(name)
    assert len(lines) >= 15  # the file is there and parsed, not an empty list that proves nothing
    unknown = [k for k, _ in lines if k not in BROKER_CONFIGS]
    assert not unknown, f"keys of Kafka's {name} that kaflite does not know: {unknown}"
    cfg = BrokerConfig.load(DATA / name)  # raises ConfigError naming the first key or value refused
    for key, value in lines:
        assert cfg.source(key) == "file", key
        assert cfg[key] == BROKER_CONFIGS[key].parse(value), key
    for key in KRAFT_ONLY & {k for k, _ in lines}:
        assert not BROKER_CONFIGS[key].applies, key


@pytest.mark.parametrize("name", [ZK, KRAFT])
def test_kafkas_sample_with_its_commented_out_keys_set(name: str) -> None:
    cfg = BrokerConfig.load(DATA / name, overrides=COMMENTED_OUT[name])
    for key, value in COMMENTED_OUT[name].items():
        assert cfg[key] == BROKER_CONFIGS[key].parse(value), key


def test_the_zookeeper_sample_is_a_cluster_member_on_localhost_2181() -> None:
    cfg = BrokerConfig.load(DATA / ZK)
    assert cfg.broker_id == 0
    assert cfg.log_dir == Path("/tmp/kafka-logs")
    assert cfg["zookeeper.connect"] == "localhost:2181"
    assert cfg["zookeeper.connection.timeout.ms"] == 18000
    assert cfg["group.initial.rebalance.delay.ms"] == 0
    assert cfg.retention_ms == 168 * 3_600_000
    assert not BROKER_CONFIGS["num.network.threads"].applies  # thread counts: accepted, no effect


def test_the_kraft_sample_binds_and_advertises_its_client_listener_only() -> None:
    # Kafka 3.9 advertises the controller listener too (KIP-853): accepted, never given to clients
    cfg = BrokerConfig.load(DATA / KRAFT)
    assert cfg.broker_id == 1
    assert cfg.client_listeners == [Listener("PLAINTEXT", "", 9092)]
    assert cfg.advertised_listeners == [Listener("PLAINTEXT", "localhost", 9092)]
    assert cfg.controller_listener_names == {"CONTROLLER"}
    assert cfg["process.roles"] == ["broker", "controller"]
