"""Kafka's client-side RangeAssignor, rack-aware since KIP-881 (SPEC S-14, S-18, E-1, E-6).

Rules:
- per topic: partitions in numeric order, subscribed members sorted (static members by instance id first,
  then dynamic members by member id); n = P div C, the first P mod C members get n + 1;
- topics are processed in the order of `partitions_per_topic` (Java iterates its HashMap; `assign()`
  reorders plain counts into that HashMap order as Kafka's `assign(Map<String,Integer>)` does);
- rack-aware (members and replicas have racks, and some partition lacks a replica on some rack):
  first give each member partitions on its rack within the same per-topic quotas (co-partitioned topics —
  same members, same partition count — move together), then fill the rest as above, and sort every
  member's list by (topic, partition).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from kaflite.assign.javautil import JavaHashMap
from kaflite.assign.types import (
    Assignment,
    PartitionRacks,
    Subscription,
    TopicPartition,
    member_sort_key,
    string_hash,
    use_rack_aware_assignment,
)


class _TopicState:
    __slots__ = ("topic", "consumers", "consumer_racks", "partition_racks", "unassigned", "num_assigned",
                 "per_consumer", "remaining_extra", "needs_rack_aware")

    def __init__(self, topic: str, num_partitions: int, members: list[tuple[str, str | None]],
                 consumer_racks: Mapping[str, str], racks: PartitionRacks, prefer: bool) -> None:
        self.topic = topic
        ordered = sorted(dict.fromkeys(members), key=lambda m: member_sort_key(m[0], m[1]))
        self.consumers: list[str] = list(dict.fromkeys(m[0] for m in ordered))
        self.consumer_racks = {c: consumer_racks[c] for c in self.consumers if c in consumer_racks}
        self.unassigned: dict[TopicPartition, None] = {TopicPartition(topic, p): None for p in range(num_partitions)}
        self.num_assigned = dict.fromkeys(self.consumers, 0)
        n = len(self.consumers)
        self.per_consumer = num_partitions // n if n else 0
        self.remaining_extra = num_partitions % n if n else 0
        all_consumer_racks = set(self.consumer_racks.values())
        all_partition_racks: set[str] = set()
        self.partition_racks: dict[TopicPartition, set[str]] = {}
        if all_consumer_racks:
            for tp in self.unassigned:
                rs = {r for r in racks.get(tp, ()) if r is not None}
                self.partition_racks[tp] = rs
                all_partition_racks |= rs
        self.needs_rack_aware = use_rack_aware_assignment(
            all_consumer_racks, all_partition_racks, self.partition_racks, prefer)

    def racks_match(self, consumer: str, tp: TopicPartition) -> bool:
        rack = self.consumer_racks.get(consumer)
        if rack is None:
            return True
        replica_racks = self.partition_racks.get(tp)
        return replica_racks is not None and rack in replica_racks

    def max_assignable(self, consumer: str) -> int:
        extra = 1 if self.remaining_extra > 0 else 0
        return max(0, self.per_consumer + extra - self.num_assigned[consumer])

    def on_assigned(self, consumer: str, tps: Sequence[TopicPartition]) -> None:
        self.num_assigned[consumer] += len(tps)
        if self.num_assigned[consumer] > self.per_consumer:
            self.remaining_extra -= 1
        for tp in tps:
            self.unassigned.pop(tp, None)


class RangeAssignor:
    name = "range"

    def __init__(self, prefer_rack_aware_logic: bool = False) -> None:
        # Kafka keeps this switch for its tests only; production behaviour is False.
        self.prefer_rack_aware_logic = prefer_rack_aware_logic

    def assign(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]) -> Assignment:
        """Kafka's `assign(Map<String,Integer>, ...)`: topics iterated in Java HashMap order, no racks."""
        ordered: JavaHashMap[str, int] = JavaHashMap(string_hash)
        for topic, n in partitions_per_topic.items():
            ordered[topic] = n
        return self.assign_partitions(ordered.as_dict(), subscriptions, None)

    def assign_partitions(self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription],
                          partition_racks: PartitionRacks | None = None) -> Assignment:
        racks: PartitionRacks = partition_racks or {}
        consumers_per_topic: dict[str, list[tuple[str, str | None]]] = {}
        for member, sub in subscriptions.items():
            for topic in sub.topics:
                consumers_per_topic.setdefault(topic, []).append((member, sub.group_instance_id))
        consumer_racks = {m: s.rack_id for m, s in subscriptions.items() if s.rack_id}
        states = [
            _TopicState(topic, n, consumers_per_topic.get(topic, []), consumer_racks, racks,
                        self.prefer_rack_aware_logic)
            for topic, n in partitions_per_topic.items() if n > 0
        ]
        assignment: Assignment = {m: [] for m in subscriptions}
        use_rack_aware = any(s.needs_rack_aware for s in states)
        if use_rack_aware:
            self._assign_with_rack_matching(states, assignment)
        for s in states:
            self._assign_ranges(s, lambda _c, _tp: True, assignment)
        if use_rack_aware:
            for lst in assignment.values():
                lst.sort()
        return assignment

    @staticmethod
    def _assign(consumer: str, tps: list[TopicPartition], state: _TopicState, assignment: Assignment) -> None:
        assignment[consumer].extend(tps)
        state.on_assigned(consumer, tps)

    def _assign_ranges(self, state: _TopicState, may_assign: Callable[[str, TopicPartition], bool],
                       assignment: Assignment) -> None:
        for consumer in state.consumers:
            if not state.unassigned:
                break
            limit = state.max_assignable(consumer)
            chosen: list[TopicPartition] = []
            if limit > 0:
                for tp in state.unassigned:
                    if may_assign(consumer, tp):
                        chosen.append(tp)
                        if len(chosen) >= limit:
                            break
            if chosen:
                self._assign(consumer, chosen, state, assignment)

    def _assign_with_rack_matching(self, states: list[_TopicState], assignment: Assignment) -> None:
        # Topics with the same members and the same partition count are co-partitioned: they move together.
        # (Groups are disjoint in topics, so the order Java visits them in does not change the result.)
        groups: dict[tuple[tuple[str, str | None], ...], dict[int, list[_TopicState]]] = {}
        for s in states:
            key = tuple((c, s.consumer_racks.get(c)) for c in s.consumers)
            groups.setdefault(key, {}).setdefault(len(s.partition_racks), []).append(s)
        for by_count in groups.values():
            for num_partitions, co in by_count.items():
                if len(co) > 1:
                    self._assign_co_partitioned(co[0].consumers, num_partitions, co, assignment)
                elif co[0].needs_rack_aware:
                    self._assign_ranges(co[0], co[0].racks_match, assignment)

    def _assign_co_partitioned(self, consumers: list[str], num_partitions: int, states: list[_TopicState],
                               assignment: Assignment) -> None:
        remaining = list(consumers)
        for p in range(num_partitions):
            match = next((c for c in remaining
                          if all(t.racks_match(c, TopicPartition(t.topic, p)) and t.max_assignable(c) > 0
                                 for t in states)), None)
            if match is None:
                continue
            for t in states:
                self._assign(match, [TopicPartition(t.topic, p)], t, assignment)
            if not any(t.max_assignable(match) > 0 for t in states):
                remaining.remove(match)
                if not remaining:
                    break
