"""What `kaflite cluster status` and `kaflite cluster up`'s live table show: brokers, the controller, and the
partitions that are offline (no leader) or under-replicated (fewer in-sync replicas than replicas).

Rules:
- everything comes over the wire from a Metadata answer (confluent-kafka's `list_topics`), so it works
  against any Kafka cluster; `summarize` is pure (it reads the metadata objects' fields only) and is
  tested without sockets;
- a partition is offline when its leader is -1 (Kafka's OfflinePartitionsCount), under-replicated when its
  ISR is smaller than its replica list (Kafka's UnderReplicatedPartitions); an offline partition is
  counted once, as offline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ClusterStatus", "PartitionProblem", "summarize", "status_lines"]


@dataclass(frozen=True)
class PartitionProblem:
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    def line(self) -> str:
        """kafka-topics.sh --describe's partition line."""
        return (
            f"\tTopic: {self.topic}\tPartition: {self.partition}\tLeader: {self.leader if self.leader >= 0 else 'none'}"
            f"\tReplicas: {','.join(map(str, self.replicas))}\tIsr: {','.join(map(str, self.isr))}"
        )


@dataclass(frozen=True)
class ClusterStatus:
    cluster_id: str | None
    controller: int | None
    brokers: dict[int, str]  # id -> host:port, as the Metadata answer lists them (the live ones)
    topics: int
    partitions: int
    offline: list[PartitionProblem] = field(default_factory=list)
    under_replicated: list[PartitionProblem] = field(default_factory=list)


def summarize(metadata: Any) -> ClusterStatus:
    """A ClusterStatus from a confluent-kafka ClusterMetadata (`AdminClient.list_topics()`)."""
    brokers = {int(b.id): f"{b.host}:{b.port}" for b in metadata.brokers.values()}
    offline: list[PartitionProblem] = []
    under: list[PartitionProblem] = []
    partitions = 0
    for name in sorted(metadata.topics):
        t = metadata.topics[name]
        for pid in sorted(t.partitions):
            p = t.partitions[pid]
            partitions += 1
            problem = PartitionProblem(name, int(pid), int(p.leader), tuple(p.replicas), tuple(p.isrs))
            if p.leader < 0:
                offline.append(problem)
            elif len(p.isrs) < len(p.replicas):
                under.append(problem)
    controller = getattr(metadata, "controller_id", -1)
    return ClusterStatus(
        cluster_id=getattr(metadata, "cluster_id", None) or None,
        controller=controller if controller is not None and controller >= 0 else None,
        brokers=brokers,
        topics=len(metadata.topics),
        partitions=partitions,
        offline=offline,
        under_replicated=under,
    )


def status_lines(status: ClusterStatus, details: bool = True) -> list[str]:
    """`kaflite cluster status`'s text (also the plain lines of `cluster up` when stdout is not a TTY)."""
    lines = [
        f"Cluster: {status.cluster_id or '(none)'}",
        f"Controller: {status.controller if status.controller is not None else 'none'}",
        f"Brokers: {len(status.brokers)} "
        + "(" + ", ".join(f"{b} {addr}" for b, addr in sorted(status.brokers.items())) + ")",
        f"Topics: {status.topics}  Partitions: {status.partitions}",
        f"Offline partitions: {len(status.offline)}",
        f"Under-replicated partitions: {len(status.under_replicated)}",
    ]
    if details:
        if status.offline:
            lines.append("Offline:")
            lines += [p.line() for p in status.offline]
        if status.under_replicated:
            lines.append("Under-replicated:")
            lines += [p.line() for p in status.under_replicated]
    return lines
