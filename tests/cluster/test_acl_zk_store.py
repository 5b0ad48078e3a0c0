"""The ZooKeeper ACL store (server/acl/store.py's ZkAclStore) on a real ZooKeeper: Kafka's paths, a change
seen by another broker's watch, concurrent writers of one resource both kept (compare-and-set retried)."""

from __future__ import annotations

import threading
import time

from kaflite.cluster.zk import KafkaZkClient
from kaflite.server.acl.model import AccessControlEntry, Op, PatternType, Permission, ResourcePattern
from kaflite.server.acl.store import ZkAclStore
from kaflite.server.authorizer import ResourceType


def _entry(user: str, op: Op = Op.READ) -> AccessControlEntry:
    return AccessControlEntry(f"User:{user}", "*", op, Permission.ALLOW)


def test_paths_watch_and_concurrent_writers(zk: KafkaZkClient, zk_connect: str) -> None:
    other_client = KafkaZkClient(zk_connect, session_timeout_ms=10000)
    other_client.start()
    try:
        mine, other = ZkAclStore(zk), ZkAclStore(other_client)
        assert mine.load() == {}
        for path in ("/kafka-acl/Topic", "/kafka-acl/TransactionalId", "/kafka-acl-extended/prefixed/Group",
                     "/kafka-acl-changes", "/kafka-acl-extended-changes"):
            assert zk._zk.exists(path) is not None, path  # noqa: SLF001 (Kafka's createAclPaths)
        seen: list[tuple[ResourcePattern, frozenset[AccessControlEntry]]] = []
        other.watch(lambda p, e: seen.append((p, e)))
        lit = ResourcePattern(ResourceType.TOPIC, "orders")
        pre = ResourcePattern(ResourceType.GROUP, "billing-", PatternType.PREFIXED)
        start = time.monotonic()
        mine.update(lit, lambda cur: cur | {_entry("alice")})
        mine.update(pre, lambda cur: cur | {_entry("bob")})
        while len(seen) < 2 and time.monotonic() - start < 5:
            time.sleep(0.01)
        assert (lit, frozenset({_entry("alice")})) in seen and (pre, frozenset({_entry("bob")})) in seen
        assert time.monotonic() - start < 1.0
        assert other.load() == {lit: {_entry("alice")}, pre: {_entry("bob")}}
        # two brokers adding to one resource at once: both entries survive
        barrier = threading.Barrier(2)

        def add(store: ZkAclStore, user: str) -> None:
            def change(cur: frozenset[AccessControlEntry]) -> frozenset[AccessControlEntry]:
                try:
                    barrier.wait(timeout=2)  # both read the same version the first time
                except threading.BrokenBarrierError:
                    pass
                return cur | {_entry(user, Op.WRITE)}

            store.update(lit, change)

        threads = [threading.Thread(target=add, args=(s, u)) for s, u in ((mine, "carol"), (other, "dave"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(15)
        assert mine.read(lit)[0] == {_entry("alice"), _entry("carol", Op.WRITE), _entry("dave", Op.WRITE)}
        # emptied: the znode goes
        mine.update(pre, lambda cur: frozenset())
        assert zk._zk.exists("/kafka-acl-extended/prefixed/Group/billing-") is None  # noqa: SLF001
    finally:
        other_client.close()
