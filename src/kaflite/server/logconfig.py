"""From broker + topic configuration to the storage engine's `LogConfig` of one partition.

Topic-level keys fall back to their broker synonyms (`retention.ms` -> `log.retention.ms/minutes/hours`,
...), which `BrokerConfig.topic_config` resolves; the storage engine only reads topic-level names, and
producer.id.expiration.ms, a broker key without a topic synonym.
"""

from __future__ import annotations

from collections.abc import Mapping

from kaflite.server.config import BrokerConfig, format_value
from kaflite.storage.config import LogConfig

__all__ = ["log_config_for"]


def log_config_for(config: BrokerConfig, topic_configs: Mapping[str, str]) -> LogConfig:
    """The LogConfig of a topic with these overrides; a bad key or value raises ConfigError. The one
    broker-only storage key, producer.id.expiration.ms (no topic synonym), is the base."""
    effective = config.topic_config(topic_configs)
    base = LogConfig(producer_id_expiration_ms=int(config["producer.id.expiration.ms"]))
    return LogConfig.from_topic_configs({k: format_value(v) for k, v in effective.items()}, base)
