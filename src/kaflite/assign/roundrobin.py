"""Kafka's client-side RoundRobinAssignor (SPEC S-15, E-2, E-3).

Rules: members sorted (static by instance id first, then dynamic by member id); all partitions of all
subscribed topics sorted by (topic, partition); dealt one by one around the circle of members, skipping
a member not subscribed to the partition's topic.
"""

from __future__ import annotations

from collections.abc import Mapping

from kaflite.assign.types import Assignment, PartitionRacks, Subscription, TopicPartition, member_sort_key


class RoundRobinAssignor:
    name = "roundrobin"

    def assign(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]) -> Assignment:
        assignment: Assignment = {m: [] for m in subscriptions}
        members = sorted(subscriptions, key=lambda m: member_sort_key(m, subscriptions[m].group_instance_id))
        if not members:
            return assignment
        topic_sets = {m: set(subscriptions[m].topics) for m in members}
        all_topics = sorted({t for s in subscriptions.values() for t in s.topics})
        i = 0
        n = len(members)
        for topic in all_topics:
            count = partitions_per_topic.get(topic)
            if count is None:
                continue
            if not any(topic in topic_sets[m] for m in members):
                continue
            for p in range(count):
                while topic not in topic_sets[members[i % n]]:
                    i += 1
                assignment[members[i % n]].append(TopicPartition(topic, p))
                i += 1
        return assignment

    def assign_partitions(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription],
                          partition_racks: PartitionRacks | None = None) -> Assignment:
        return self.assign(partitions_per_topic, subscriptions)
