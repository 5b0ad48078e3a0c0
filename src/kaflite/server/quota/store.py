"""Where client quotas live: `quotas.json` in the (first) data directory on a single node, Kafka's
`/config/users|clients` znodes in a ZooKeeper cluster.

Rules (tests/quota/test_quota_apis.py, tests/cluster/test_quota_zk_store.py):
- an entity is written as Kafka's ZooKeeper path (`/config/users/<user>/clients/<client-id>`, names
  sanitized as Kafka's Sanitizer (Java's URLEncoder, `*` and space as %2A / %20), so a user literally
  named `<default>` is `%3Cdefault%3E` and never the default), and its values as Kafka's config strings;
  `parse_path` is `QuotaEntity.zk_path`'s inverse;
- every method but `parse_path` blocks (file I/O and fsync, ZooKeeper calls): the broker runs them in a
  worker thread, never on the event loop;
- a store hands every quota table it reads or writes to its `publish(configs, whole)` callback (whole:
  the whole table, else only the named entities, each with all its quota values, none: it has no quota
  left), in the order it read or wrote them (one lock): the broker applies them in that order, so an older
  read never overwrites a newer one; `alter` publishes before it returns;
- `alter` applies each entity's changes to its values as stored, durably, before publishing, and answers
  the new values of each entity and why each entity that could not be stored was not: the file by
  an atomic replace (storage.checkpoint.atomic_write); a znode by compare-and-set on its version
  (KafkaZkClient.update_entity_config), only the quota keys changed, so a user's SCRAM credentials in
  the same znode (server/security/zk_credentials.py) are kept, and a `/config/changes/config_change_<seq>`
  notification (`{"version":2,"entity_path":"users/<user>/clients/<client>"}`) for every broker;
- ZooKeeper: `start` arms the /config/changes watch (KafkaZkClient.watch_config_changes, the one dynamic
  configs and SCRAM credentials use) before it reads every entity, so no change falls between; each
  notification of a users or clients entity re-reads that znode and publishes its quota values; a key that
  is not a quota key (a SCRAM credential) is never published, a value that is not a number is logged and
  left out;
- the file: `start` of a missing file is no quotas; a file that cannot be read raises (a broker must not
  start forgetting its quotas).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote_plus

from kaflite.server.quota.manager import DEFAULT, QUOTA_KEYS, Name, QuotaEntity
from kaflite.storage.checkpoint import atomic_write

if TYPE_CHECKING:
    from kaflite.cluster.zk import KafkaZkClient

__all__ = ["FILE_NAME", "Changes", "Configs", "Publish", "QuotaFile", "QuotaStore", "ZkQuotaStore", "parse_path"]

log = logging.getLogger("kaflite.quota")

FILE_NAME = "quotas.json"
Configs = dict[QuotaEntity, dict[str, float]]
Changes = list[tuple[QuotaEntity, dict[str, float | None]]]  # per entity, key -> new value (None: removed)
Publish = Callable[[Configs, bool], None]


class QuotaStore(Protocol):
    def start(self) -> None: ...

    def load(self) -> Configs: ...

    def alter(self, changes: Changes) -> tuple[Configs, dict[QuotaEntity, str]]: ...


def _name(part: str) -> Name:
    return DEFAULT if part == "<default>" else unquote_plus(part)


def parse_path(path: str) -> QuotaEntity:
    parts = path.strip("/").split("/")
    if len(parts) == 5 and parts[:2] == ["config", "users"] and parts[3] == "clients":
        return QuotaEntity(_name(parts[2]), _name(parts[4]))
    if len(parts) == 3 and parts[:2] == ["config", "users"]:
        return QuotaEntity(_name(parts[2]), None)
    if len(parts) == 3 and parts[:2] == ["config", "clients"]:
        return QuotaEntity(None, _name(parts[2]))
    raise ValueError(f"not a quota entity path: {path}")


def _text(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


def _changed(values: dict[str, float], ops: dict[str, float | None]) -> dict[str, float]:
    out = dict(values)
    for key, value in ops.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = float(value)
    return out


class QuotaFile:
    """The single node's quotas: one JSON file, rewritten atomically on each change."""

    def __init__(self, path: Path | None, publish: Publish | None = None) -> None:
        self.path = path  # None: no data directory, quotas are not kept across restarts
        self._publish = publish
        self._lock = threading.Lock()
        self._table: Configs = {}

    def load(self) -> Configs:
        if self.path is None or not self.path.exists():
            return {}
        doc = json.loads(self.path.read_text())
        return {parse_path(p): {k: float(v) for k, v in values.items()} for p, values in doc["entities"].items()}

    def start(self) -> None:
        with self._lock:
            self._table = self.load()
            if self._publish is not None:
                self._publish({e: dict(v) for e, v in self._table.items()}, True)

    def save(self, configs: Configs) -> None:
        if self.path is None:
            return
        doc = {"version": 1, "entities": {
            e.zk_path(): {k: _text(v) for k, v in sorted(values.items())}
            for e, values in sorted(configs.items(), key=lambda ev: ev[0].zk_path()) if values}}
        atomic_write(self.path, json.dumps(doc, indent=1, sort_keys=True).encode())

    def alter(self, changes: Changes) -> tuple[Configs, dict[QuotaEntity, str]]:
        with self._lock:
            table = {e: dict(v) for e, v in self._table.items()}
            out: Configs = {}
            for entity, ops in changes:
                values = _changed(table.get(entity, {}), ops)
                table[entity] = values
                out[entity] = values
            self.save(table)  # durable first (fsync), then in force
            self._table = {e: v for e, v in table.items() if v}
            if self._publish is not None:
                self._publish({e: dict(v) for e, v in out.items()}, False)
            return out, {}


def quota_values(config: dict[str, str], where: str) -> dict[str, float]:
    """The quota keys of a znode's config (a user's znode also holds its SCRAM credentials)."""
    out = {}
    for key in QUOTA_KEYS:
        if key in config:
            try:
                out[key] = float(config[key])
            except ValueError:
                log.warning("%s: quota %s=%r is not a number and is ignored", where, key, config[key])
    return out


def _znode(entity: QuotaEntity) -> tuple[str, str]:
    """(entity type, name) of KafkaZkClient's config calls: `users`, `alice/clients/app`."""
    kind, _, name = entity.zk_path()[len("/config/"):].partition("/")
    return kind, name


class ZkQuotaStore:
    """A cluster's quotas in Kafka's znodes, through the broker's ZooKeeper session (cluster.zk)."""

    def __init__(self, zk: KafkaZkClient, publish: Publish | None = None) -> None:
        self.zk = zk
        self._publish = publish
        self._lock = threading.Lock()

    def _read(self, kind: str, name: str) -> dict[str, float]:
        return quota_values(self.zk.get_entity_config(kind, name), f"/config/{kind}/{name}")

    def load(self) -> Configs:
        """Every entity with a quota, as stored now (DescribeClientQuotas reads this, as Kafka's
        ZkAdminManager reads ZooKeeper)."""
        table: Configs = {}
        for user in self.zk.get_children("/config/users"):
            values = self._read("users", user)
            if values:
                table[QuotaEntity(_name(user), None)] = values
            for client in self.zk.get_children(f"/config/users/{user}/clients"):
                values = self._read("users", f"{user}/clients/{client}")
                if values:
                    table[QuotaEntity(_name(user), _name(client))] = values
        for client in self.zk.get_children("/config/clients"):
            values = self._read("clients", client)
            if values:
                table[QuotaEntity(None, _name(client))] = values
        return table

    def start(self) -> None:
        self.zk.watch_config_changes(self._on_change)
        with self._lock:
            table = self.load()
            if self._publish is not None:
                self._publish(table, True)

    def _on_change(self, event: Any) -> None:
        from kaflite.cluster.zk import ConfigChanged

        if not isinstance(event, ConfigChanged) or event.entity_type not in ("users", "clients"):
            return
        try:
            entity = parse_path(f"/config/{event.entity_type}/{event.name}")
        except ValueError:
            return
        with self._lock:
            values = self._read(event.entity_type, event.name)
            if self._publish is not None:
                self._publish({entity: values}, False)

    def alter(self, changes: Changes) -> tuple[Configs, dict[QuotaEntity, str]]:
        out: Configs = {}
        failed: dict[QuotaEntity, str] = {}
        with self._lock:
            for entity, ops in changes:
                def change(config: dict[str, str], ops: dict[str, float | None] = ops) -> dict[str, str]:
                    for key, value in ops.items():
                        if value is None:
                            config.pop(key, None)
                        else:
                            config[key] = _text(value)
                    return config

                kind, name = _znode(entity)
                try:
                    config = self.zk.update_entity_config(kind, name, change)
                except Exception as e:  # ZooKeeper unreachable: this entity's entry fails, the others go on
                    log.warning("could not store the quotas of %s: %s", entity.zk_path(), e)
                    failed[entity] = f"{type(e).__name__}: {e}"
                    continue
                out[entity] = quota_values(config, entity.zk_path())
            if self._publish is not None:
                self._publish({e: dict(v) for e, v in out.items()}, False)
        return out, failed
