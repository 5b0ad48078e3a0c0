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
- The single node's store is one JSON file in the data directory, replaced atomically (temporary file,
  fsync, rename, fsync of the directory), written in a worker thread, never on the event loop.
- A cluster's store is ZooKeeper in Kafka's layout: /config/brokers/<id> and /config/brokers/<default>
  ({"version":1,"config":{..}}), each write followed by a /config/changes/config_change_<seq> notification
  ({"version":2,"entity_path":"brokers/<id>"}); every broker applies the changes of its own id and of
  <default>, read in the watch thread and handed to the event loop (no ZooKeeper call on the loop).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kaflite.server.config import BROKER_CONFIGS, TOPIC_CONFIGS
from kaflite.server.config.definitions import ConfigError
from kaflite.storage.checkpoint import atomic_write

__all__ = ["DEFAULT_ENTITY", "LIVE_KEYS", "DynamicConfigStore", "ZkDynamicConfigStore", "validate_dynamic"]

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
    extra = {
        "producer.id.expiration.ms",
        "log.cleaner.backoff.ms",
        "transaction.partition.verification.enable",
    }
    # GSSAPI's keys: no mechanism reads them here (GSSAPI is not served), as on a Kafka broker without a
    # GSSAPI listener, where a dynamic change is stored and described and has nothing to apply to either
    # (librdkafka's suite, 0081, alters sasl.kerberos.min.time.before.relogin as its valid broker config)
    kerberos = {k for k in BROKER_CONFIGS if k.startswith("sasl.kerberos.")}
    # unclean.leader.election.enable is a topic default, but the single node has no elections and a
    # cluster's controller reads its own start-up value: not live
    return frozenset((topic_defaults | extra | kerberos) - {"unclean.leader.election.enable"})


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
    """The single node's dynamic configs: {entity: {key: value}} in
    `<data dir>/dynamic-broker-configs.json`."""

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

    def save(self, entities: Mapping[str, Mapping[str, str]], _entity: str) -> None:
        """Replace the file atomically (call in a worker thread: it fsyncs)."""
        body = json.dumps({"version": 1, "entities": {e: dict(c) for e, c in entities.items() if c}},
                          sort_keys=True, indent=1)
        atomic_write(self.path, body.encode())


class ZkDynamicConfigStore:
    """A cluster member's dynamic configs in ZooKeeper (Kafka's ZooKeeper mode). Every method blocks: call
    it at start-up or in a worker thread."""

    ENTITY_TYPE = "brokers"

    def __init__(self, zk: Any, node_id: int) -> None:  # zk: cluster.zk.KafkaZkClient
        self.zk = zk
        self.mine = (DEFAULT_ENTITY, str(node_id))

    def load(self) -> dict[str, dict[str, str]]:
        return {entity: self.zk.get_entity_config(self.ENTITY_TYPE, entity) for entity in self.mine}

    def read(self, entity: str) -> dict[str, str]:
        """The znode as stored now (an alteration starts from it, as Kafka's AdminManager: another broker
        may have changed the default entity since this broker's last notification)."""
        return dict(self.zk.get_entity_config(self.ENTITY_TYPE, entity))

    def save(self, entities: Mapping[str, Mapping[str, str]], entity: str) -> None:
        """Write `entity`'s znode and notify every broker (only that entity: another broker's change of
        another entity is not overwritten)."""
        self.zk.set_entity_config(self.ENTITY_TYPE, entity, dict(entities.get(entity, {})))

    def watch(self, on_entity: Callable[[str, dict[str, str]], None]) -> None:
        """Call `on_entity(entity, config)` (in ZooKeeper's watch thread) for each notification of this
        broker's id or of <default>, with the znode as read then."""
        from kaflite.cluster.zk import ConfigChanged

        def on_change(event: Any) -> None:
            ours = isinstance(event, ConfigChanged) and event.entity_type == self.ENTITY_TYPE
            if ours and event.name in self.mine:
                on_entity(event.name, self.zk.get_entity_config(self.ENTITY_TYPE, event.name))

        self.zk.watch_config_changes(on_change)
