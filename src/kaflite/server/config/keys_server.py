"""Identity and general keys of the broker process (Kafka's ServerConfigs).

This subsystem owns these keys; `kaflite.server.config.broker_config` assembles every subsystem's table
into `BROKER_CONFIGS`, as Kafka assembles KafkaConfig from the ConfigDefs of its subsystems.
"""

from __future__ import annotations

import re

from kaflite.server.config.definitions import (
    CLUSTER_WIDE,
    KAFKA_RELEASE,
    AtLeast,
    ConfigKey,
    Custom,
    _k,
    _metrics_listener,
)

__all__ = ["KEYS", "NOT_READ"]

_SCHEMA_REGISTRY_LISTENER = re.compile(r"http://[^\s:/]+:\d{1,5}/?")

KEYS: list[ConfigKey] = [
    _k(
        "broker.id",
        "int",
        0,
        "The id of this broker (used as node.id when node.id is not set).",
        AtLeast(-1),
        kafka_default=-1,
        differs="Kafka defaults to -1 (generate an id); kaflite is one broker and uses 0.",
    ),
    _k(
        "node.id",
        "int",
        None,
        "KRaft name of the broker id; when set it must equal broker.id if both are set, and wins.",
        AtLeast(0),
        kafka_default=-1,
    ),
    _k(
        "cluster.id",
        "string",
        None,
        "The cluster id reported in Metadata and DescribeCluster; when unset "
        "the broker generates one and keeps it in the data directory's meta.properties.",
        differs="kaflite-only key: Kafka keeps the cluster id only in meta.properties.",
    ),
    _k("broker.rack", "string", None, "Rack of this broker, reported in Metadata (rack-aware assignors)."),
    _k(
        "metrics.listener",
        "string",
        None,
        "http://HOST:PORT where the broker serves Prometheus metrics at /metrics (Kafka's MBean names as the "
        "JMX exporter writes them, docs/metrics.md); unset: no metrics endpoint and no counting.",
        Custom(lambda v: bool(_metrics_listener(v)), "http://HOST:PORT such as http://127.0.0.1:9404"),
        differs="kaflite-only key: Kafka exposes JMX MBeans and needs the Prometheus JMX exporter agent.",
    ),
    _k(
        "schema.registry.listener",
        "string",
        None,
        "http://HOST:PORT where `kaflite serve` also serves a schema registry (Confluent's REST API, stored in "
        "the _schemas topic through the broker's first listener of the registry client's protocol: PLAINTEXT, "
        "or schema.registry.kafkastore.security.protocol with the other schema.registry.kafkastore.* client "
        "properties, docs/schema-registry.md); unset: none.",
        Custom(lambda v: bool(_SCHEMA_REGISTRY_LISTENER.fullmatch(str(v))), "http://HOST:PORT such as "
               "http://127.0.0.1:8081"),
        differs="kaflite-only key: Kafka has no schema registry; Confluent's runs as its own JVM service.",
    ),
    _k(
        "kaflite.faults.enable",
        "boolean",
        False,
        "Fault injection for tests (docs/testing.md): when true, errors, delays, throttle times, dropped and "
        "half-closed connections can be injected into this broker's answers (EmbeddedBroker.faults, `kaflite faults`). Never in production.",
        differs="kaflite-only key: Kafka has no fault injection.",
    ),
    _k(
        "kaflite.group.rebalance.history.size",
        "int",
        100,
        "Events of each group's rebalance timeline kept and persisted in __consumer_offsets (who joined or "
        "left and why, each rebalance's start, end, duration and moved partitions; `kaflite groups describe "
        "--history`, docs/consumer-groups.md); a share group's are kept in memory only, as its membership.",
        AtLeast(1),
        differs="kaflite-only key: Kafka keeps no rebalance history.",
    ),
    _k("fetch.max.bytes", "int", 57671680, "Largest Fetch response the broker builds.", AtLeast(1024)),
    _k(
        "max.incremental.fetch.session.cache.slots",
        "int",
        1000,
        "Incremental fetch sessions cached.",
        AtLeast(0),
    ),
    _k(
        "inter.broker.protocol.version",
        "string",
        "3.8-IV0",
        "The protocol version brokers speak to each other (Kafka's rolling-upgrade switch).",
        KAFKA_RELEASE,
        applies=False,
        differs="kaflite brokers always speak their newest versions to each other; the key is accepted "
        "(in every spelling Kafka accepts, such as 3.7, 2.8.1 or 0.10.0.0) for Kafka's server.properties.",
    ),
    _k("num.io.threads", "int", 8, "Request handler threads.", AtLeast(1), applies=False, mode=CLUSTER_WIDE),
    _k("background.threads", "int", 10, "Background task threads.", AtLeast(1), applies=False,
       mode=CLUSTER_WIDE),
]

# Keys validated but not read (yet), and why (marked applies=False; tests/config/test_keys_read.py).
NOT_READ: dict[str, str] = {}
