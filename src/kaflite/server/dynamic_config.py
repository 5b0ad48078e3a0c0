"""Dynamic broker configuration (Kafka's KIP-226 DynamicBrokerConfig) on the single-node broker: what an
AlterConfigs of a BROKER resource may change, how it is validated, and where it is kept.

Rules (checkable facts):
- Two entities: this broker's id and the cluster default (Kafka's empty resource name, stored as
  "<default>"); a key set on the broker's id wins over the default, which wins over server.properties
  (BrokerConfig.with_dynamic).
- A read-only key (ConfigKey.mode) is refused with Kafka's "Cannot update these configs dynamically: Set(..)";
  a per-broker key on the default entity with Kafka's "Cannot update these configs at default cluster level,
  broker id must be specified: Set(..)"; a bad value with the key's own message; all INVALID_REQUEST, as
  Kafka's ZkAdminManager answers a ConfigException, and nothing is stored.
- A dynamic key kaflite reads only at start-up (LIVE_KEYS does not hold it) is refused naming the restart it
  needs, never accepted without effect.
- The store is one JSON file in the data directory, replaced atomically (temporary file, fsync, rename,
  fsync of the directory), written in a worker thread, never on the event loop.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from kaflite.server.config import BROKER_CONFIGS, TOPIC_CONFIGS
from kaflite.server.config.definitions import ConfigError

__all__ = ["DEFAULT_ENTITY", "LIVE_KEYS", "DynamicConfigStore", "validate_dynamic"]

DEFAULT_ENTITY = "<default>"  # Kafka's ZooKeeper name of the cluster default entity
FILE_NAME = "dynamic-broker-configs.json"


def _live_keys() -> frozenset[str]:
    """The dynamic keys the broker reads at use time, so a change takes effect at once: every broker synonym
    of a topic key (each log's LogConfig is recomputed, Broker.apply_dynamic_config), message.max.bytes
    among them, producer.id.expiration.ms (part of every LogConfig), log.cleaner.backoff.ms (read by each
    housekeeping pass), transaction.partition.verification.enable (read per request)."""
    topic_defaults = {
        broker_key
        for topic_key in TOPIC_CONFIGS.values()
        for broker_key in topic_key.broker_keys
        if BROKER_CONFIGS[broker_key].mode != "read-only"
    }
    extra = {"producer.id.expiration.ms", "log.cleaner.backoff.ms", "transaction.partition.verification.enable"}
    # unclean.leader.election.enable is a topic default, but the single node has no elections and a
    # cluster's controller reads its own start-up value: not live
    return frozenset((topic_defaults | extra) - {"unclean.leader.election.enable"})


LIVE_KEYS = _live_keys()


def _kafka_set(names: list[str]) -> str:
    # Kafka formats the refused names as a Scala Set
    return "Set(" + ", ".join(sorted(names)) + ")"


def validate_dynamic(changes: Mapping[str, str | None], per_broker: bool) -> None:
    """Check the new dynamic configs of one entity (`per_broker`: a broker id, else the default entity);
    None deletes a key. Raises ConfigError with Kafka's message."""
    unknown = [k for k in changes if k not in BROKER_CONFIGS]
    if unknown:
        raise ConfigError(f"Unknown broker configs: {_kafka_set(unknown)}", unknown[0])
    read_only = [k for k in changes if BROKER_CONFIGS[k].mode == "read-only"]
    if read_only:
        raise ConfigError(f"Cannot update these configs dynamically: {_kafka_set(read_only)}", read_only[0])
    for key, raw in changes.items():
        if raw is not None:
            BROKER_CONFIGS[key].parse(raw)  # a bad value raises, naming the key
    if not per_broker:
        only_broker = [k for k in changes if BROKER_CONFIGS[k].mode == "per-broker"]
        if only_broker:
            raise ConfigError(
                "Cannot update these configs at default cluster level, broker id must be specified: "
                + _kafka_set(only_broker),
                only_broker[0],
            )
    not_live = [k for k, raw in changes.items() if raw is not None and k not in LIVE_KEYS]
    if not_live:
        raise ConfigError(
            f"kaflite does not apply these configs while running: set them in server.properties and "
            f"restart the broker: {_kafka_set(not_live)}",
            not_live[0],
        )


class DynamicConfigStore:
    """The single node's dynamic configs: {entity: {key: value}} in `<data dir>/dynamic-broker-configs.json`."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / FILE_NAME

    def load(self) -> dict[str, dict[str, str]]:
        """Read at start-up (before the event loop serves); a missing file is no dynamic config."""
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        entities = data.get("entities", {})
        return {str(e): {str(k): str(v) for k, v in c.items()} for e, c in entities.items()}

    def save(self, entities: Mapping[str, Mapping[str, str]]) -> None:
        """Replace the file atomically (call in a worker thread: it fsyncs)."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        body = json.dumps({"version": 1, "entities": {e: dict(c) for e, c in entities.items() if c}},
                          sort_keys=True, indent=1)
        with open(tmp, "w") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
