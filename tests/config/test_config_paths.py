"""One typed configuration path: every code path that reads a key reads it from the BrokerConfig, so a
misspelled key fails with the "did you mean" error instead of silently becoming Kafka's default."""

from __future__ import annotations

from pathlib import Path

import pytest

from kaflite.coordinator.config import CoordinatorConfig
from kaflite.server.broker import Broker
from kaflite.server.config import BROKER_CONFIGS, BrokerConfig, UnknownConfigKey
from kaflite.server.logconfig import log_config_for


def test_a_misspelled_broker_key_read_by_the_broker_names_the_right_one(tmp_path: Path) -> None:
    broker = Broker(BrokerConfig.load(overrides={"log.dirs": str(tmp_path)}))
    with pytest.raises(UnknownConfigKey, match=r"log.retention.hour: unknown broker configuration key; did you mean log.retention.hours"):
        broker.setting("log.retention.hour")
    with pytest.raises(UnknownConfigKey, match="did you mean"):
        broker.config["offsets.topic.segment.byte"]


def test_a_misspelled_topic_key_names_the_right_one() -> None:
    config = BrokerConfig.load()
    with pytest.raises(UnknownConfigKey, match="retention.mss: unknown topic configuration key; did you mean retention.ms"):
        log_config_for(config, {"retention.mss": "1000"})


def test_every_key_the_group_coordinator_reads_is_a_broker_key() -> None:
    # CoordinatorConfig.from_properties skips keys the config lacks: a misspelling there would be silent
    assert set(CoordinatorConfig.KEYS) <= set(BROKER_CONFIGS)


def test_the_table_is_assembled_from_the_subsystems_tables() -> None:
    from types import SimpleNamespace

    from kaflite.server.config import SUBSYSTEMS, keys_groups, keys_storage, keys_zookeeper
    from kaflite.server.config.broker_config import _assemble

    assert [k for m in SUBSYSTEMS for k in (key.name for key in m.KEYS)] == list(BROKER_CONFIGS)
    assert {k.name for k in keys_zookeeper.KEYS} == {k for k in BROKER_CONFIGS if k.startswith("zookeeper.")}
    assert all(k.name.startswith(("group.", "offset", "share.coordinator.")) for k in keys_groups.KEYS)
    assert "log.retention.hours" in {k.name for k in keys_storage.KEYS}
    twice = SimpleNamespace(__name__="twice", KEYS=keys_storage.KEYS[:1], NOT_READ={})
    with pytest.raises(ValueError, match="defined twice"):
        _assemble([keys_storage, twice])  # type: ignore[list-item]


def test_one_table_of_topic_keys_and_their_broker_synonyms() -> None:
    from kaflite.server.config import TOPIC_CONFIGS
    from kaflite.storage.config import TOPIC_CONFIG_SYNONYMS

    assert list(TOPIC_CONFIGS) == list(TOPIC_CONFIG_SYNONYMS)
    for name, definition in TOPIC_CONFIGS.items():
        assert definition.broker_keys is TOPIC_CONFIG_SYNONYMS[name]
        assert all(key in BROKER_CONFIGS for key in definition.broker_keys), name


def test_get_with_a_misspelled_key_raises_instead_of_returning_the_default() -> None:
    config = BrokerConfig.load(overrides={"num.partitions": "3"})
    assert config.get("num.partitions", 1) == 3
    assert config.get("zookeeper.connect", "none") == "none"  # a known key left unset
    with pytest.raises(UnknownConfigKey, match="did you mean num.partitions"):
        config.get("num.partition", 1)
    assert "num.partition" not in config


def test_producer_id_expiration_reaches_every_log_config() -> None:
    # a broker key with no topic synonym: the logs got LogConfig's default (1 day) whatever it said
    config = BrokerConfig.load(overrides={"producer.id.expiration.ms": "5000"})
    assert log_config_for(config, {}).producer_id_expiration_ms == 5000
    assert log_config_for(config, {"retention.ms": "1000"}).producer_id_expiration_ms == 5000
    assert log_config_for(BrokerConfig.load(), {}).producer_id_expiration_ms == 86400000
