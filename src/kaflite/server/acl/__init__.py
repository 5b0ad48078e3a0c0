"""Kafka's ACL authorizer: the model (acl.model), the decision (acl.authorizer), where ACLs are stored
(acl.store) and `AclManager`, which the broker and the ACL APIs use.

Rules:
- `authorizer_for(config)` is None without `authorizer.class.name` (every request allowed, the ACL APIs
  answer SECURITY_DISABLED); with AclAuthorizer / SimpleAclAuthorizer it is an `AclAuthorizer` with
  `super.users` (semicolon separated) and `allow.everyone.if.no.acl.found`;
- a change (CreateAcls, DeleteAcls) is written to the store in a worker thread, then applied to the
  authorizer's table on the event loop; changes are made one at a time (a lock), as Kafka's
  AclAuthorizer does under its lock; in a cluster, changes written by other brokers arrive through the
  store's watch and are applied on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from typing import Any

from kaflite.server.acl.authorizer import AclAuthorizer
from kaflite.server.acl.model import AccessControlEntry, AclBinding, AclBindingFilter, ResourcePattern
from kaflite.server.acl.store import AclStore

__all__ = ["AclAuthorizer", "AclManager", "authorizer_for"]

log = logging.getLogger("kaflite.acl")


def authorizer_for(config: Any) -> AclAuthorizer | None:
    if not config["authorizer.class.name"]:
        return None
    supers = [p.strip() for p in (config["super.users"] or "").split(";") if p.strip()]
    return AclAuthorizer(supers, bool(config["allow.everyone.if.no.acl.found"]))


class AclManager:
    def __init__(self, authorizer: AclAuthorizer, store: AclStore) -> None:
        self.authorizer = authorizer
        self.store = store
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        table = await asyncio.to_thread(self.store.load)
        self.authorizer.reset(table)
        watch = getattr(self.store, "watch", None)
        if watch is not None:
            loop = asyncio.get_running_loop()

            def changed(pattern: ResourcePattern, entries: frozenset[AccessControlEntry]) -> None:
                loop.call_soon_threadsafe(self.authorizer.replace, {pattern: entries})

            await asyncio.to_thread(watch, changed)
        log.info("ACL authorizer: %d ACLs on %d resource patterns, super users %s",
                 sum(len(e) for e in table.values()), len(table), sorted(self.authorizer.super_users) or "none")

    async def create(self, bindings: list[AclBinding]) -> list[str | None]:
        """Store the (valid) bindings; per binding, None or why storing failed."""
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = defaultdict(set)
        for b in bindings:
            by_pattern[b.pattern].add(b.entry)
        failed: dict[ResourcePattern, str] = {}
        async with self._lock:
            for pattern, added in by_pattern.items():
                def add(cur: frozenset[AccessControlEntry], a: frozenset[AccessControlEntry] = frozenset(added)
                        ) -> frozenset[AccessControlEntry]:
                    return cur | a

                try:
                    new = await asyncio.to_thread(self.store.update, pattern, add)
                except Exception as e:  # ZooKeeper unreachable, a full disk: this pattern's bindings fail
                    log.warning("could not store the ACLs of %s: %s", pattern, e)
                    failed[pattern] = f"{type(e).__name__}: {e}"
                    continue
                self.authorizer.replace({pattern: new})
        return [failed.get(b.pattern) for b in bindings]

    async def delete(self, filters: list[AclBindingFilter]) -> list[list[tuple[AclBinding, str | None]]]:
        """Delete what the filters match; per filter, the bindings it deleted (each with None or why the
        deletion failed)."""
        out: list[list[tuple[AclBinding, str | None]]] = [[] for _ in filters]
        async with self._lock:
            patterns = set(self.authorizer.table)
            for f in filters:
                patterns.update(f.exact_patterns())
            claimed: set[AclBinding] = set()
            for pattern in sorted(patterns):
                matching = [(i, f) for i, f in enumerate(filters) if f.matches_pattern(pattern)]
                if not matching:
                    continue
                removed: dict[AclBinding, int] = {}

                def change(cur: frozenset[AccessControlEntry], pattern: ResourcePattern = pattern,
                           matching: list[tuple[int, AclBindingFilter]] = matching,
                           removed: dict[AclBinding, int] = removed) -> frozenset[AccessControlEntry]:
                    removed.clear()  # a retried compare-and-set starts again from what is stored
                    keep = set()
                    for e in cur:
                        hit = next((i for i, f in matching if f.matches_entry(e)), None)
                        if hit is None:
                            keep.add(e)
                        else:
                            removed[AclBinding(pattern, e)] = hit
                    return frozenset(keep)

                error = None
                try:
                    new = await asyncio.to_thread(self.store.update, pattern, change)
                    self.authorizer.replace({pattern: new})
                except Exception as e:
                    log.warning("could not delete ACLs of %s: %s", pattern, e)
                    error = f"{type(e).__name__}: {e}"
                for binding, index in sorted(removed.items()):
                    if binding not in claimed:
                        claimed.add(binding)
                        out[index].append((binding, error))
        return out
