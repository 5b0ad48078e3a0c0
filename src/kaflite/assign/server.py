"""The broker-side assignors of the new consumer protocol (KIP-848): `uniform` and `range` (SPEC S-19).

Input: the group's members (subscribed topic names, current target assignment, rack, instance id), the
topics' partition counts and, optionally, the topics' ids (Kafka's base64 Uuid strings). Kafka keys
everything by topic id; where Java's iteration order over topic ids matters (uniform, all members
subscribed alike), we reproduce it from the ids (`java.util.HashSet<Uuid>` order); without ids the
topic names stand in for them.

Rules:
- uniform, homogeneous subscriptions: quota = P div M, the first P mod M members (member order) get one
  more; every member keeps its current partitions up to its quota (topics and partitions in Java's
  iteration order), the rest plus the unassigned ones fill the members below quota in order.
- uniform, heterogeneous subscriptions: keep every still-subscribed partition; give unassigned partitions
  topic by topic (most partitions per subscriber first) to the least-loaded subscriber; then, topic by
  topic, move partitions from the most- to the least-loaded subscribers until each topic's subscribers
  differ by at most one (at most 16 passes).
- range: members sorted (static members by instance id, then dynamic by member id); per topic the
  quota is P div N, the first P mod N members get one more, ranges handed out in member order.
- a member subscribed to a topic missing from the metadata fails the whole assignment.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from kaflite.assign.javautil import JavaHashSet, to_int32
from kaflite.assign.types import PartitionAssignorError, TopicPartition, member_sort_key, string_hash

SubscriptionType = Literal["homogeneous", "heterogeneous"]
ServerAssignment = dict[str, list[TopicPartition]]
MAX_ITERATION_COUNT = 16


@dataclass(slots=True)
class MemberSpec:
    """One member as the group coordinator sees it when it computes a target assignment."""

    subscribed_topics: list[str]
    current_assignment: list[TopicPartition] = field(default_factory=list)
    rack_id: str | None = None
    instance_id: str | None = None


class _TopicKey:
    """A topic's identity for ordering: Kafka's Uuid (hashCode, compareTo) or, without ids, the name."""

    __slots__ = ("name", "hash", "order")

    def __init__(self, name: str, topic_id: str | None) -> None:
        self.name = name
        if topic_id is None:
            self.hash = string_hash(name)
            self.order: tuple[int, int] | tuple[str] = (name,)
        else:
            raw = base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4))
            if len(raw) != 16:
                raise ValueError(f"not a Kafka topic id (22 base64 characters): {topic_id!r}")
            msb = int.from_bytes(raw[:8], "big", signed=True)
            lsb = int.from_bytes(raw[8:], "big", signed=True)
            h = msb ^ lsb
            self.hash = to_int32((h >> 32) ^ h)
            self.order = (msb, lsb)


def _int_hash(x: int) -> int:
    return x


def _keys(names: Iterable[str], topic_ids: Mapping[str, str] | None) -> dict[str, _TopicKey]:
    return {n: _TopicKey(n, (topic_ids or {}).get(n)) for n in names}


def _check_topics(members: Mapping[str, MemberSpec], topics: Mapping[str, int]) -> None:
    for member, spec in members.items():
        for t in spec.subscribed_topics:
            if t not in topics or topics[t] < 0:
                raise PartitionAssignorError(
                    f"Members are subscribed to topic {t} which doesn't exist in the topic metadata."
                    f" (member {member})")


def _subscription_type(members: Mapping[str, MemberSpec]) -> SubscriptionType:
    sets = {frozenset(m.subscribed_topics) for m in members.values()}
    return "homogeneous" if len(sets) <= 1 else "heterogeneous"


def _java_int_set_order(values: Iterable[int]) -> list[int]:
    """Iteration order of `new HashSet<>(partitions)` — how both Kafka's tests and its coordinator (loading
    a target assignment from its record, Assignment.fromRecord) build a member's partitions of a topic:
    the Collection constructor sizes the table max(n / 0.75 + 1, 16), then adds in list order."""
    vs = list(values)
    s: JavaHashSet[int] = JavaHashSet(_int_hash, max(int(len(vs) / 0.75) + 1, 16))
    for v in vs:
        s.add(v)
    return list(s)


def _sorted_result(result: dict[str, dict[str, set[int]]]) -> ServerAssignment:
    return {m: sorted(TopicPartition(t, p) for t, ps in a.items() for p in ps) for m, a in result.items()}


class UniformAssignor:
    """KIP-848 `uniform` assignor (org.apache.kafka.coordinator.group.assignor.UniformAssignor)."""

    name = "uniform"

    def assign(self, members: Mapping[str, MemberSpec], topics: Mapping[str, int],
               subscription_type: SubscriptionType | None = None,
               topic_ids: Mapping[str, str] | None = None) -> ServerAssignment:
        if not members:
            return {}
        kind = subscription_type or _subscription_type(members)
        if kind == "homogeneous":
            return self._homogeneous(members, topics, topic_ids)
        return self._heterogeneous(members, topics, topic_ids)

    # -- all members subscribe to the same topics ---------------------------------------------------
    def _homogeneous(self, members: Mapping[str, MemberSpec], topics: Mapping[str, int],
                     topic_ids: Mapping[str, str] | None) -> ServerAssignment:
        first = next(iter(members.values()))
        if not first.subscribed_topics:
            return {}
        keys = _keys(set(first.subscribed_topics) | {tp.topic for m in members.values() for tp in m.current_assignment},
                     topic_ids)
        # new HashSet<>(memberSubscription(first).subscribedTopicIds())
        sub_set: JavaHashSet[_TopicKey] = JavaHashSet(lambda k: k.hash, max(int(len(first.subscribed_topics) / 0.75) + 1, 16))
        for t in first.subscribed_topics:
            sub_set.add(keys[t])
        subscribed = [k.name for k in sub_set]
        for t in subscribed:
            if t not in topics or topics[t] < 0:
                raise PartitionAssignorError(
                    f"Members are subscribed to topic {t} which doesn't exist in the topic metadata.")
        owned = {(tp.topic, tp.partition) for m in members.values() for tp in m.current_assignment}
        unassigned: list[tuple[str, int]] = []
        total = 0
        for t in subscribed:
            n = topics[t]
            unassigned.extend((t, p) for p in range(n) if (t, p) not in owned)
            total += n
        n_members = len(members)
        min_quota = total // n_members
        extra = total % n_members
        subscribed_set = set(subscribed)
        target: dict[str, dict[str, set[int]]] = {}
        unfilled: list[tuple[str, int]] = []
        for member, spec in members.items():
            quota = min_quota
            if extra > 0:
                quota += 1
                extra -= 1
            by_topic: dict[str, list[int]] = {}
            for tp in spec.current_assignment:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            new: dict[str, set[int]] = {}
            # A member's current assignment is walked topic by topic in the order it lists them (Kafka's
            # tests build it in that order), partitions in java.util.HashSet<Integer> order.
            for t in by_topic:
                parts = _java_int_set_order(by_topic[t])
                if t not in subscribed_set:
                    continue  # the whole topic is revoked
                if len(parts) <= quota:
                    quota -= len(parts)
                    new[t] = set(parts)
                    continue
                kept: set[int] = set()
                for p in parts:
                    if quota > 0:
                        quota -= 1
                        kept.add(p)
                    else:
                        unassigned.append((t, p))
                if kept:
                    new[t] = kept
            if quota > 0:
                unfilled.append((member, quota))
            target[member] = new
        i = 0
        for member, quota in unfilled:
            for _ in range(quota):
                if i >= len(unassigned):
                    break
                t, p = unassigned[i]
                i += 1
                target[member].setdefault(t, set()).add(p)
        if i < len(unassigned):
            raise PartitionAssignorError("Partitions were left unassigned")
        return _sorted_result(target)

    # -- members subscribe to different topics ------------------------------------------------------
    def _heterogeneous(self, members: Mapping[str, MemberSpec], topics: Mapping[str, int],
                       topic_ids: Mapping[str, str] | None) -> ServerAssignment:
        _check_topics(members, topics)
        member_ids = list(members)
        subscribers: dict[str, list[int]] = {}
        for i, m in enumerate(member_ids):
            for t in dict.fromkeys(members[m].subscribed_topics):
                subscribers.setdefault(t, []).append(i)
        if not subscribers:
            return {}
        keys = _keys(subscribers, topic_ids)
        sizes = [0] * len(member_ids)
        owners: dict[str, list[int]] = {t: [-1] * topics[t] for t in subscribers}
        target: list[dict[str, set[int]]] = [dict() for _ in member_ids]
        for i, m in enumerate(member_ids):
            subs = set(members[m].subscribed_topics)
            for tp in members[m].current_assignment:
                if tp.topic in subs and 0 <= tp.partition < topics[tp.topic]:
                    target[i].setdefault(tp.topic, set()).add(tp.partition)
                    owners[tp.topic][tp.partition] = i
            sizes[i] = sum(len(v) for v in target[i].values())

        def topic_order(t: str) -> tuple[float, int, tuple[int, int] | tuple[str]]:
            n_sub = len(subscribers[t])
            return (-(topics[t] / n_sub), n_sub, keys[t].order)

        def assign(t: str, p: int, i: int) -> None:
            old = owners[t][p]
            if old != -1:
                target[old][t].discard(p)
                if not target[old][t]:
                    del target[old][t]
                sizes[old] -= 1
            target[i].setdefault(t, set()).add(p)
            owners[t][p] = i
            sizes[i] += 1

        unassigned = {t: [p for p in range(topics[t]) if owners[t][p] == -1] for t in subscribers}
        balancer = _Balancer(sizes)
        for t in sorted((t for t, ps in unassigned.items() if ps), key=topic_order):
            balancer.initialize(subscribers[t])
            for p in unassigned[t]:
                assign(t, p, balancer.next_least_loaded())

        movable = sorted((t for t in subscribers if len(subscribers[t]) >= 2), key=topic_order)
        last_rebalanced = -1
        for _ in range(MAX_ITERATION_COUNT):
            for index, t in enumerate(movable):
                if index == last_rebalanced:
                    return self._heterogeneous_result(member_ids, target)
                moved = self._balance_topic(t, topics[t], subscribers[t], owners[t], balancer, assign)
                if moved > 0 or last_rebalanced == -1:
                    last_rebalanced = index
        return self._heterogeneous_result(member_ids, target)

    @staticmethod
    def _heterogeneous_result(member_ids: list[str], target: list[dict[str, set[int]]]) -> ServerAssignment:
        return _sorted_result({m: target[i] for i, m in enumerate(member_ids)})

    @staticmethod
    def _balance_topic(topic: str, num_partitions: int, subscribers: list[int], owners: list[int],
                       balancer: _Balancer, assign: object) -> int:
        moved = 0
        if balancer.initialize(subscribers) <= 1:
            return moved
        partitions = sorted(range(num_partitions), key=lambda p: (owners[p], p))
        start: dict[int, int] = {}
        end: dict[int, int] = {}
        for i, p in enumerate(partitions):
            start.setdefault(owners[p], i)
            end[owners[p]] = i + 1
        while not balancer.is_balanced():
            most = -1
            while True:
                most = balancer.next_most_loaded()
                if most == -1:
                    break
                if most not in end or end[most] - start[most] <= 0:
                    balancer.exclude_most_loaded()
                    continue
                break
            if most == -1:
                break
            p = partitions[end[most] - 1]
            end[most] -= 1
            least = balancer.next_least_loaded()
            if balancer.is_balanced():
                break
            assign(topic, p, least)  # type: ignore[operator]
            moved += 1
        return moved


class _Balancer:
    """Kafka's MemberAssignmentBalancer: a least-loaded range growing right, a most-loaded range growing
    left, over subscribers sorted by (assigned partitions, member index)."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes
        self.sorted: list[int] = []
        self.least_end = 0
        self.least_count = -1
        self.next_least = 0
        self.most_start = 0
        self.most_end = 0
        self.most_count = 1
        self.next_most = -1

    def initialize(self, members: list[int]) -> int:
        if not members:
            raise ValueError("Cannot balance an empty subscriber list.")
        sizes = self.sizes
        self.sorted = sorted(members, key=lambda i: (sizes[i], i))
        s = self.sorted
        self.least_end = 0
        self.least_count = sizes[s[0]] - 1
        self.next_least = 0
        self.most_start = len(s)
        self.most_end = len(s)
        self.most_count = sizes[s[-1]] + 1
        self.next_most = len(s) - 1
        return sizes[s[-1]] - sizes[s[0]]

    def next_least_loaded(self) -> int:
        s, sizes = self.sorted, self.sizes
        if self.next_least >= self.least_end:
            self.least_count += 1
            while self.least_end < len(s) and sizes[s[self.least_end]] == self.least_count:
                self.least_end += 1
            self.next_least = 0
        member = s[self.next_least]
        self.next_least += 1
        return member

    def next_most_loaded(self) -> int:
        s, sizes = self.sorted, self.sizes
        if self.next_most < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                self.most_count = sizes[s[self.most_start - 1]]
            else:
                self.most_count -= 1
            while self.most_start > 0 and sizes[s[self.most_start - 1]] == self.most_count:
                self.most_start -= 1
            self.next_most = self.most_end - 1
        if self.next_most < 0:
            return -1
        member = s[self.next_most]
        self.next_most -= 1
        return member

    def exclude_most_loaded(self) -> None:
        s = self.sorted
        i = self.next_most + 1
        s[i], s[self.most_end - 1] = s[self.most_end - 1], s[i]
        self.most_end -= 1

    def is_balanced(self) -> bool:
        return self.most_count - self.least_count <= 1


class ServerRangeAssignor:
    """KIP-848 `range` assignor (org.apache.kafka.coordinator.group.assignor.RangeAssignor)."""

    name = "range"

    def assign(self, members: Mapping[str, MemberSpec], topics: Mapping[str, int],
               subscription_type: SubscriptionType | None = None,
               topic_ids: Mapping[str, str] | None = None) -> ServerAssignment:
        if not members:
            return {}
        _check_topics(members, topics)
        order = sorted(members, key=lambda m: member_sort_key(m, members[m].instance_id))
        counts: dict[str, int] = {}
        for m in order:
            for t in dict.fromkeys(members[m].subscribed_topics):
                counts[t] = counts.get(t, 0) + 1
        next_range = dict.fromkeys(counts, 0)
        extra = {t: topics[t] % counts[t] for t in counts}
        out: ServerAssignment = {}
        for m in order:
            mine: list[TopicPartition] = []
            for t in dict.fromkeys(members[m].subscribed_topics):
                quota = topics[t] // counts[t]
                if extra[t] > 0:
                    quota += 1
                    extra[t] -= 1
                start = next_range[t]
                end = min(start + quota, topics[t])
                next_range[t] = end
                mine.extend(TopicPartition(t, p) for p in range(start, end))
            out[m] = sorted(mine)
        return out
