"""Each broker key's dynamic update mode (ConfigKey.mode) equals Apache Kafka 3.8's, read from
tests/data/kafka-dynamic-broker-keys.txt (Kafka's DynamicBrokerConfig): a key Kafka can update dynamically
has Kafka's mode here, every other key is read-only."""

from __future__ import annotations

from helpers import REPO
from kaflite.server.config import BROKER_CONFIGS


def _kafka_modes() -> dict[str, str]:
    out: dict[str, str] = {}
    for line in (REPO / "tests" / "data" / "kafka-dynamic-broker-keys.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, mode = line.split()
            out[key] = mode
    return out


def test_the_test_data_lists_kafkas_families() -> None:
    modes = _kafka_modes()
    assert len(modes) == 88
    assert set(modes.values()) == {"per-broker", "cluster-wide"}
    assert modes["log.retention.ms"] == "cluster-wide" and modes["ssl.keystore.location"] == "per-broker"


def test_every_key_has_kafkas_mode() -> None:
    kafka = _kafka_modes()
    wrong = {
        key: (definition.mode, kafka.get(key, "read-only"))
        for key, definition in BROKER_CONFIGS.items()
        if definition.mode != kafka.get(key, "read-only")
    }
    assert wrong == {}


def test_every_log_topic_default_key_is_cluster_wide_but_the_format_version_and_unit_synonyms() -> None:
    # Kafka's DynamicLogConfig: every broker synonym of a topic key; the hours/minutes forms, the flush
    # scheduler's interval (flush.ms's last fallback) and log.message.format.version stay read-only.
    from kaflite.server.config import TOPIC_CONFIGS

    for topic_key in TOPIC_CONFIGS.values():
        for broker_key in topic_key.broker_keys:
            expected = (
                "read-only"
                if broker_key.endswith((".hours", ".minutes"))
                or broker_key in ("log.message.format.version", "log.flush.scheduler.interval.ms")
                else "cluster-wide"
            )
            assert BROKER_CONFIGS[broker_key].mode == expected, broker_key


def test_docs_table_shows_each_keys_mode() -> None:
    from kaflite.server.dynamic_config import LIVE_KEYS

    doc = (REPO / "docs" / "configuration.md").read_text()
    section = doc.split("\n## Broker keys", 1)[1].split("## Topic keys", 1)[0]
    for key, definition in BROKER_CONFIGS.items():
        row = next(line for line in section.splitlines() if line.startswith(f"| `{key}` |"))
        mode = definition.mode if definition.mode == "read-only" or key in LIVE_KEYS else (
            f"{definition.mode} (kaflite: restart)"
        )
        assert row.split(" | ")[2] == mode, row
