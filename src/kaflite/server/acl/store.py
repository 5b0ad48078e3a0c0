"""Where ACLs live: a file in the data directory on a single node, Kafka's znodes in a cluster.

Rules (tests/acl/test_store.py, tests/cluster/test_acl_cluster.py):
- every method here blocks (file I/O and fsync, ZooKeeper calls): callers run it in a worker thread,
  never on the event loop;
- `update(pattern, change)` applies `change` to the pattern's entries as stored (not as cached) and
  writes the result durably before returning it: the file by an atomic replace (storage.checkpoint's
  atomic_write), a znode by compare-and-set on its version (retried on a concurrent writer, as Kafka's
  updateResourceAcls), a pattern left without entries is removed;
- ZooKeeper layout is Kafka's ZooKeeper mode: LITERAL patterns at /kafka-acl/<Type>/<name>, PREFIXED at
  /kafka-acl-extended/prefixed/<Type>/<name>, each `{"version":1,"acls":[{"principal","permissionType",
  "operation","host"}]}`; each change adds a sequential /kafka-acl-changes/acl_changes_<seq> (data
  `<TYPE>:<name>`) or /kafka-acl-extended-changes/acl_changes_<seq> (data `{"version":1,"resourceType",
  "name","patternType"}`); every broker watches both and re-reads the named resource; notifications older
  than 15 minutes are deleted (Kafka's ZkNodeChangeNotificationListener).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from kaflite.server.acl.model import (
    AccessControlEntry,
    Op,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    parse_operation,
    parse_permission,
    parse_resource_type,
    pascal,
)
from kaflite.storage.checkpoint import atomic_write

__all__ = [
    "FILE_NAME",
    "AclStore",
    "LocalAclStore",
    "ZkAclStore",
    "decode_entries",
    "encode_entries",
    "znode_path",
]

log = logging.getLogger("kaflite.acl")

FILE_NAME = "acls.json"
Table = dict[ResourcePattern, frozenset[AccessControlEntry]]
Change = Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]]

LITERAL_ROOT = "/kafka-acl"
EXTENDED_ROOT = "/kafka-acl-extended"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
CHANGE_EXPIRATION_S = 15 * 60


class AclStore(Protocol):
    def load(self) -> Table: ...

    def update(self, pattern: ResourcePattern, change: Change) -> frozenset[AccessControlEntry]: ...


def encode_entries(entries: frozenset[AccessControlEntry]) -> bytes:
    """Kafka's ResourceZNode JSON."""
    return json.dumps({"version": 1, "acls": [
        {"principal": e.principal, "permissionType": pascal(Permission(e.permission).name),
         "operation": pascal(Op(e.operation).name), "host": e.host} for e in sorted(entries)
    ]}, separators=(",", ":")).encode()


def decode_entries(data: bytes | None) -> frozenset[AccessControlEntry]:
    if not data:
        return frozenset()
    doc = json.loads(data)
    if doc.get("version") != 1:
        raise ValueError(f"unsupported ACL znode version {doc.get('version')}")
    return frozenset(AccessControlEntry(a["principal"], a["host"], parse_operation(a["operation"]),
                                        parse_permission(a["permissionType"])) for a in doc.get("acls", ()))


def _type_name(resource_type: int) -> str:
    return pascal(ResourceType(resource_type).name)


def znode_path(pattern: ResourcePattern) -> str:
    root = LITERAL_ROOT if pattern.pattern_type == PatternType.LITERAL else \
        f"{EXTENDED_ROOT}/{PatternType(pattern.pattern_type).name.lower()}"
    return f"{root}/{_type_name(pattern.resource_type)}/{pattern.name}"


def change_notification(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(the parent of the sequential znode, its data) announcing a change of `pattern`."""
    if pattern.pattern_type == PatternType.LITERAL:
        # Kafka writes ResourceType.toString (the enum name, TOPIC) and reads it case-insensitively
        return LITERAL_CHANGES, f"{ResourceType(pattern.resource_type).name}:{pattern.name}".encode()
    return EXTENDED_CHANGES, json.dumps({
        "version": 1, "resourceType": ResourceType(pattern.resource_type).name, "name": pattern.name,
        "patternType": PatternType(pattern.pattern_type).name}, separators=(",", ":")).encode()


def decode_change(parent: str, data: bytes) -> ResourcePattern:
    text = data.decode()
    if parent == LITERAL_CHANGES:
        kind, sep, name = text.partition(":")
        if not sep:
            raise ValueError(f"expected ResourceType:ResourceName, got {text!r}")
        return ResourcePattern(parse_resource_type(kind), name, PatternType.LITERAL)
    doc = json.loads(text)
    if doc.get("version", 0) > 1:
        raise ValueError(f"unsupported ACL change event version {doc.get('version')}")
    return ResourcePattern(parse_resource_type(doc["resourceType"]), doc["name"],
                           PatternType[str(doc["patternType"]).upper()])


class LocalAclStore:
    """The single node's ACLs: one JSON file in the data directory, rewritten atomically on each change."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._table: Table = {}

    def load(self) -> Table:
        if self.path is None or not self.path.exists():
            self._table = {}
            return {}
        doc = json.loads(self.path.read_bytes())
        table: Table = {}
        for r in doc.get("resources", ()):
            pattern = ResourcePattern(parse_resource_type(r["resourceType"]), r["name"],
                                      PatternType[r["patternType"]])
            table[pattern] = decode_entries(json.dumps({"version": 1, "acls": r["acls"]}).encode())
        self._table = table
        return dict(table)

    def update(self, pattern: ResourcePattern, change: Change) -> frozenset[AccessControlEntry]:
        new = frozenset(change(self._table.get(pattern, frozenset())))
        table = dict(self._table)
        if new:
            table[pattern] = new
        else:
            table.pop(pattern, None)
        if self.path is not None:
            resources = [{"resourceType": _type_name(p.resource_type), "name": p.name,
                          "patternType": PatternType(p.pattern_type).name,
                          "acls": json.loads(encode_entries(e))["acls"]} for p, e in sorted(table.items())]
            atomic_write(self.path, json.dumps({"version": 1, "resources": resources}, indent=1).encode())
        self._table = table
        return new


class ZkAclStore:
    """Kafka's ZooKeeper-mode ACL znodes, through the broker's ZooKeeper session (cluster.zk)."""

    def __init__(self, zk: Any, clock: Callable[[], float] = time.time) -> None:
        self.zk = zk  # a KafkaZkClient (its kazoo client and retry policy; every call here blocks)
        self._kazoo = zk._zk
        self._clock = clock
        self._last_seen: dict[str, int] = {LITERAL_CHANGES: -1, EXTENDED_CHANGES: -1}

    def _retry(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return self.zk.retry_policy.copy()(fn, *args, **kwargs)

    def _roots(self) -> list[tuple[str, int]]:
        return [(LITERAL_ROOT, PatternType.LITERAL), (f"{EXTENDED_ROOT}/prefixed", PatternType.PREFIXED)]

    def create_paths(self) -> None:
        """Kafka's createAclPaths: the roots, one child per resource type, the change paths."""
        for root, _ in self._roots():
            for rt in ResourceType:
                self._retry(self._kazoo.ensure_path, f"{root}/{_type_name(rt)}")
        for path in (LITERAL_CHANGES, EXTENDED_CHANGES):
            self._retry(self._kazoo.ensure_path, path)

    def read(self, pattern: ResourcePattern) -> tuple[frozenset[AccessControlEntry], int]:
        from kazoo.exceptions import NoNodeError
        try:
            data, stat = self._retry(self._kazoo.get, znode_path(pattern))
        except NoNodeError:
            return frozenset(), -1
        return decode_entries(data), stat.version

    def load(self) -> Table:
        from kazoo.exceptions import NoNodeError
        self.create_paths()
        table: Table = {}
        for root, pattern_type in self._roots():
            for rt in ResourceType:
                try:
                    names = self._retry(self._kazoo.get_children, f"{root}/{_type_name(rt)}")
                except NoNodeError:
                    continue
                for name in names:
                    pattern = ResourcePattern(rt, name, pattern_type)
                    entries, _ = self.read(pattern)
                    if entries:
                        table[pattern] = entries
        return table

    def update(self, pattern: ResourcePattern, change: Change) -> frozenset[AccessControlEntry]:
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
        path = znode_path(pattern)
        for _ in range(100):
            current, version = self.read(pattern)
            new = frozenset(change(current))
            if new == current:
                return new
            try:
                if not new:
                    self._retry(self._kazoo.delete, path, version)
                elif version < 0:
                    self._retry(self._kazoo.create, path, encode_entries(new), makepath=True)
                else:
                    self._retry(self._kazoo.set, path, encode_entries(new), version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # another broker changed it meanwhile: apply the change to what it wrote
            parent, data = change_notification(pattern)
            self._retry(self._kazoo.create, f"{parent}/{CHANGE_PREFIX}", data, sequence=True, makepath=True)
            return new
        raise RuntimeError(f"could not update the ACLs of {pattern} after 100 tries")

    def watch(self, apply: Callable[[ResourcePattern, frozenset[AccessControlEntry]], None]) -> None:
        """Call `apply(pattern, entries as stored)` (on the zk-watch thread) for every change notified
        under either change path, oldest first; purge notifications older than 15 minutes."""
        from kazoo.recipe.watchers import ChildrenWatch

        for parent in (LITERAL_CHANGES, EXTENDED_CHANGES):
            def on_children(children: list[str], parent: str = parent) -> None:
                self._process(parent, children, apply)

            self.zk._watches.append(ChildrenWatch(self._kazoo, parent, self.zk._safe(on_children)))

    def _process(self, parent: str, children: list[str],
                 apply: Callable[[ResourcePattern, frozenset[AccessControlEntry]], None]) -> None:
        from kazoo.exceptions import NoNodeError
        for child in sorted(c for c in children if c.startswith(CHANGE_PREFIX)):
            seq = int(child[len(CHANGE_PREFIX):])
            path = f"{parent}/{child}"
            if seq > self._last_seen[parent]:
                try:
                    data, stat = self._retry(self._kazoo.get, path)
                except NoNodeError:
                    continue
                self._last_seen[parent] = seq
                try:
                    pattern = decode_change(parent, data)
                except (ValueError, KeyError) as e:
                    log.error("unreadable ACL change notification %s: %s", path, e)
                    continue
                apply(pattern, self.read(pattern)[0])
            else:
                try:
                    _, stat = self._retry(self._kazoo.get, path)
                except NoNodeError:
                    continue
            if stat.ctime / 1000 < self._clock() - CHANGE_EXPIRATION_S:
                try:
                    self._retry(self._kazoo.delete, path)
                except NoNodeError:
                    pass
