"""From broker + topic configuration to the storage engine's `LogConfig` of one partition.

Topic-level keys fall back to their broker synonyms (`retention.ms` -> `log.retention.ms/minutes/hours`,
...), which `BrokerConfig.topic_config` resolves; the storage engine only reads topic-level names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kaflite.server.broker import Broker


def log_config_for(broker: Broker, topic_configs: Mapping[str, str]) -> Any:
    from kaflite.storage.config import LogConfig

    config = broker.config
    if not hasattr(config, "topic_config"):  # a plain dict (tests of the shell alone): storage defaults
        return LogConfig.from_topic_configs(dict(topic_configs))
    from kaflite.server.config import format_value

    effective = config.topic_config(topic_configs)
    return LogConfig.from_topic_configs({k: format_value(v) for k, v in effective.items()})
