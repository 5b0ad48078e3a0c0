"""Topic-level configs: validation, broker fallbacks."""

from __future__ import annotations

import pytest

from kaflite.server.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigError,
    validate_topic_config,
    validate_topic_configs,
)


def test_every_topic_key_falls_back_to_a_known_broker_key() -> None:
    for definition in TOPIC_CONFIGS.values():
        for broker_key in definition.broker_keys:
            assert broker_key in BROKER_CONFIGS, (definition.name, broker_key)


def test_required_topic_keys_exist() -> None:
    for key in [
        "cleanup.policy",
        "retention.ms",
        "retention.bytes",
        "segment.bytes",
        "segment.ms",
        "max.message.bytes",
        "message.timestamp.type",
        "delete.retention.ms",
        "min.insync.replicas",
        "flush.messages",
        "flush.ms",
        "compression.type",
    ]:
        assert key in TOPIC_CONFIGS


@pytest.mark.parametrize(
    ("key", "raw", "expected"),
    [
        ("cleanup.policy", "compact", ["compact"]),
        ("cleanup.policy", "compact, delete", ["compact", "delete"]),
        ("retention.ms", "-1", -1),
        ("retention.ms", " 1000 ", 1000),
        ("segment.bytes", "1048576", 1048576),
        ("message.timestamp.type", "LogAppendTime", "LogAppendTime"),
        ("preallocate", "TRUE", True),
        ("min.cleanable.dirty.ratio", "0.25", 0.25),
    ],
)
def test_valid_topic_values(key: str, raw: str, expected: object) -> None:
    assert validate_topic_config(key, raw) == expected


@pytest.mark.parametrize(
    ("key", "raw", "message"),
    [
        (
            "cleanup.policy",
            "forever",
            "cleanup.policy: expected a comma-separated list of delete, compact, got 'forever'",
        ),
        ("retention.ms", "soon", "retention.ms: expected a long >= -1, got 'soon'"),
        ("segment.bytes", "10", "segment.bytes: expected an int >= 14, got '10'"),
        ("min.insync.replicas", "0", "min.insync.replicas: expected an int >= 1, got '0'"),
        ("retention.mss", "1", "retention.mss: unknown topic configuration key; did you mean retention.ms"),
    ],
)
def test_invalid_topic_values(key: str, raw: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        validate_topic_config(key, raw)
    assert str(err.value).startswith(message)
    assert err.value.key == key


def test_validate_many_and_effective_topic_config() -> None:
    assert validate_topic_configs({"retention.ms": "5", "cleanup.policy": "compact"}) == {
        "retention.ms": 5,
        "cleanup.policy": ["compact"],
    }
    cfg = BrokerConfig.load(overrides={"log.segment.bytes": "4096", "log.roll.hours": "1"})
    effective = cfg.topic_config({"retention.ms": "5"})
    assert effective["retention.ms"] == 5
    assert effective["segment.bytes"] == 4096
    assert effective["segment.ms"] == 3_600_000
    assert effective["max.message.bytes"] == 1048588
    assert cfg.topic_default("retention.ms") == 7 * 24 * 3_600_000


def test_key_of_the_other_level_is_explained() -> None:
    with pytest.raises(ConfigError) as err:
        BrokerConfig.load(overrides={"retention.ms": "1000"})
    assert str(err.value) == (
        "retention.ms: unknown broker configuration key; retention.ms is a topic-level key, "
        "its broker-wide default is log.retention.ms"
    )
    with pytest.raises(ConfigError) as err2:
        validate_topic_config("log.segment.bytes", "1024")
    assert str(err2.value) == (
        "log.segment.bytes: unknown topic configuration key; log.segment.bytes is a broker key, "
        "the topic-level key is segment.bytes"
    )
    # compression.type and min.insync.replicas exist at both levels under the same name: no confusion
    assert BrokerConfig.load(overrides={"compression.type": "gzip"})["compression.type"] == "gzip"
    assert validate_topic_config("compression.type", "gzip") == "gzip"
