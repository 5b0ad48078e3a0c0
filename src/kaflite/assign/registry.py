"""One registry of assignors by Kafka's names (`partition.assignment.strategy` / `group.remote.assignor`).

Every call returns a NEW instance: assignors keep no state between groups, so the broker and several
clients can use them side by side.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

_FACTORIES: dict[str, Callable[[], Any]] = {}


def register_assignor(name: str, factory: Callable[[], Any]) -> None:
    """Add a custom assignor (S-20: assignment is pluggable)."""
    _FACTORIES[name] = factory


def _builtin() -> None:
    from kaflite.assign.range import RangeAssignor
    from kaflite.assign.roundrobin import RoundRobinAssignor

    _FACTORIES.setdefault("range", RangeAssignor)
    _FACTORIES.setdefault("roundrobin", RoundRobinAssignor)
    try:
        from kaflite.assign.sticky import CooperativeStickyAssignor, StickyAssignor

        _FACTORIES.setdefault("sticky", StickyAssignor)
        _FACTORIES.setdefault("cooperative-sticky", CooperativeStickyAssignor)
    except ImportError:  # pragma: no cover - during bootstrap only
        pass
    try:
        from kaflite.assign.server import ServerRangeAssignor, UniformAssignor

        _FACTORIES.setdefault("uniform", UniformAssignor)
        _FACTORIES.setdefault("server-range", ServerRangeAssignor)
    except ImportError:  # pragma: no cover
        pass
    try:
        from kaflite.assign.zookeeper import ZooKeeperRangeAssignor

        _FACTORIES.setdefault("zookeeper", ZooKeeperRangeAssignor)
    except ImportError:  # pragma: no cover
        pass


def assignor_names() -> list[str]:
    _builtin()
    return list(_FACTORIES)


def get_assignor(name: str) -> Any:
    """A fresh assignor for Kafka's strategy name ("range", "roundrobin", "sticky", "cooperative-sticky",
    "uniform", "server-range", "zookeeper") or a fully qualified Java class name of one of them."""
    _builtin()
    key = _JAVA_CLASS_NAMES.get(name, name)
    try:
        return _FACTORIES[key]()
    except KeyError:
        raise ValueError(f"unknown assignor {name!r}; allowed: {', '.join(_FACTORIES)}") from None


_JAVA_CLASS_NAMES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "server-range",
}


def get_server_assignor(name: str) -> Any:
    """A fresh KIP-848 broker-side assignor by `group.remote.assignor` name ("uniform" or "range")."""
    from kaflite.assign.server import ServerRangeAssignor, UniformAssignor

    factories: dict[str, Callable[[], Any]] = {"uniform": UniformAssignor, "range": ServerRangeAssignor,
                                               "server-range": ServerRangeAssignor}
    key = _JAVA_CLASS_NAMES.get(name, name)
    try:
        return factories[key]()
    except KeyError:
        raise ValueError(f"unknown server-side assignor {name!r}; allowed: uniform, range") from None


def assign_group(assignor: Any, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Any],
                 partition_racks: Any = None) -> dict[str, list[Any]]:
    """Run a client assignor the way a Java group leader does, Java's iteration orders included.

    `subscriptions` is in join order (the JoinGroup response's member order). As Kafka's leader:
    ConsumerCoordinator puts them into a HashMap by member id; AbstractPartitionAssignor.assign(Cluster,
    ...) adds every member's topics (members in that map's order, topics in subscription order) to a
    HashSet, then puts the topics that exist with >= 1 partition into a HashMap in that set's order; the
    assignor iterates those maps. The result maps member ids (join order) to their lists."""
    from kaflite.assign.javautil import JavaHashMap, JavaHashSet
    from kaflite.assign.types import string_hash

    members: JavaHashMap[str, Any] = JavaHashMap(string_hash)
    for member, sub in subscriptions.items():
        members[member] = sub
    ordered_subs = members.as_dict()
    all_topics: JavaHashSet[str] = JavaHashSet(string_hash)
    for sub in ordered_subs.values():
        for topic in sub.topics:
            all_topics.add(topic)
    ordered: JavaHashMap[str, int] = JavaHashMap(string_hash)
    for topic in all_topics:
        n = partitions_per_topic.get(topic)
        if n:
            ordered[topic] = n
    out = assignor.assign_partitions(ordered.as_dict(), ordered_subs, partition_racks)
    return {m: out[m] for m in subscriptions if m in out}
