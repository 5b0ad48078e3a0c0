"""The broker's configuration: Kafka's `server.properties` keys, types, defaults and validation.

Each subsystem owns its table of keys (`keys_server`, `keys_network`, `keys_security`, `keys_storage`,
`keys_groups`, `keys_replication`, `keys_transactions`, `keys_zookeeper`, `keys_kraft`), with Kafka's name,
type and default, the allowed values and a line of documentation; `broker_config` assembles them into
`BROKER_CONFIGS` the way Kafka assembles KafkaConfig from its subsystems' ConfigDefs, and holds
`BrokerConfig`, the one typed configuration the broker runs with. `topic_keys.TOPIC_CONFIGS` is the one
table of topic-level keys and the broker keys each falls back to (Kafka's "synonyms"). The machinery
(types, validators, parsing, errors) is in `definitions`, the .properties syntax in `properties`.

Keys Kafka has but that change nothing in a single-process asyncio broker (thread counts, KRaft
controller settings, ...) are accepted and validated so that Kafka's own `config/server.properties` loads
unchanged; `ConfigKey.applies` is False for them and the docs say so. A new key goes in its subsystem's
table (ZooKeeper keys: `keys_zookeeper`).
"""

from __future__ import annotations

from kaflite.server.config.broker_config import (
    BROKER_CONFIGS,
    DEV_PROFILE,
    DEV_PROFILE_WARNING,
    SUBSYSTEMS,
    BrokerConfig,
)
from kaflite.server.config.definitions import (
    SECURITY_PROTOCOLS,
    SOURCE_DEFAULT_CONFIG,
    SOURCE_DYNAMIC_TOPIC_CONFIG,
    SOURCE_STATIC_BROKER_CONFIG,
    ConfigEntry,
    ConfigError,
    ConfigErrors,
    ConfigKey,
    Listener,
    Source,
    UnknownConfigKey,
    format_value,
    parse_listeners,
)
from kaflite.server.config.properties import parse_properties
from kaflite.server.config.topic_keys import (
    TOPIC_CONFIGS,
    TOPIC_NOT_READ,
    TopicConfigKey,
    validate_topic_config,
    validate_topic_configs,
)

__all__ = [
    "BROKER_CONFIGS",
    "DEV_PROFILE",
    "DEV_PROFILE_WARNING",
    "SECURITY_PROTOCOLS",
    "SOURCE_DEFAULT_CONFIG",
    "SOURCE_DYNAMIC_TOPIC_CONFIG",
    "SOURCE_STATIC_BROKER_CONFIG",
    "SUBSYSTEMS",
    "TOPIC_CONFIGS",
    "TOPIC_NOT_READ",
    "BrokerConfig",
    "ConfigEntry",
    "ConfigError",
    "ConfigErrors",
    "ConfigKey",
    "Listener",
    "Source",
    "TopicConfigKey",
    "UnknownConfigKey",
    "format_value",
    "parse_listeners",
    "parse_properties",
    "validate_topic_config",
    "validate_topic_configs",
]
