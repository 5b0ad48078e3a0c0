"""The ZooKeeper-era consumer rebalance of seed 002 (SPEC S-29), kept as a baseline for the tools.

Rules: per topic, partitions and consumers sorted; N = ceil(|partitions| / |consumers|); consumer i takes
the N consecutive partitions starting at i * N (the last ones may get fewer, or none). In the old
high-level consumer every consumer computed this on its own from ZooKeeper state — the herd effect and
split brain that the group coordinator was introduced to end.
"""

from __future__ import annotations

from collections.abc import Mapping

from kaflite.assign.types import Assignment, PartitionRacks, Subscription, TopicPartition


class ZooKeeperRangeAssignor:
    name = "zookeeper"

    def assign(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]) -> Assignment:
        out: Assignment = {m: [] for m in subscriptions}
        for topic in sorted(partitions_per_topic):
            consumers = sorted(m for m, s in subscriptions.items() if topic in s.topics)
            p = partitions_per_topic[topic]
            if not consumers or p <= 0:
                continue
            n = -(-p // len(consumers))
            for i, c in enumerate(consumers):
                out[c].extend(TopicPartition(topic, q) for q in range(i * n, min((i + 1) * n, p)))
        return out

    def assign_partitions(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription],
                          partition_racks: PartitionRacks | None = None) -> Assignment:
        return self.assign(partitions_per_topic, subscriptions)
