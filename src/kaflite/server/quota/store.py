"""Where client quotas live on a single node: `quotas.json` in the (first) data directory.

Rules (tests/quota/test_store.py):
- an entity is written as Kafka's ZooKeeper path (`/config/users/<user>/clients/<client-id>`, names
  sanitized as Kafka's Sanitizer (Java's URLEncoder, `*` and space as %2A / %20), so a user literally named `<default>` is `%3Cdefault%3E` and
  never the default), and its values as Kafka's config strings; `parse_path` is `QuotaEntity.zk_path`'s
  inverse;
- `save` blocks (it replaces the file atomically and fsyncs it): callers run it in a worker thread;
- `load` of a missing file is no quotas; a file that cannot be read raises (a broker must not start
  forgetting its quotas).
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote_plus

from kaflite.server.quota.manager import DEFAULT, Name, QuotaEntity
from kaflite.storage.checkpoint import atomic_write

__all__ = ["FILE_NAME", "QuotaFile", "parse_path"]

FILE_NAME = "quotas.json"


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


class QuotaFile:
    def __init__(self, path: Path | None) -> None:
        self.path = path  # None: no data directory, quotas are not kept across restarts

    def load(self) -> dict[QuotaEntity, dict[str, float]]:
        if self.path is None or not self.path.exists():
            return {}
        doc = json.loads(self.path.read_text())
        return {parse_path(p): {k: float(v) for k, v in values.items()} for p, values in doc["entities"].items()}

    def save(self, configs: dict[QuotaEntity, dict[str, float]]) -> None:
        if self.path is None:
            return
        doc = {"version": 1, "entities": {
            e.zk_path(): {k: _text(v) for k, v in sorted(values.items())}
            for e, values in sorted(configs.items(), key=lambda ev: ev[0].zk_path())}}
        atomic_write(self.path, json.dumps(doc, indent=1, sort_keys=True).encode())
