"""Rebalance simulation for tools and docs: run a strategy on a group, then again after members join or
leave, with every surviving member reporting what it owned — the way real members rejoin.

Rules:
- eager strategies (range, roundrobin, sticky, zookeeper) compute the whole new assignment in one
  round (everything is revoked first; sticky gets the previous assignment from its user data);
- cooperative-sticky runs follow-up rounds while something is revoked: a moved partition is first only
  revoked, then handed to its new owner one round later (at most 5 rounds);
- server-side strategies (uniform, server-range) receive each member's current assignment directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kaflite.assign.registry import assign_group, get_assignor
from kaflite.assign.server import MemberSpec
from kaflite.assign.types import Assignment, Subscription, TopicPartition
from kaflite.assign.userdata import encode_cooperative_user_data, encode_sticky_user_data

CLIENT_STRATEGIES = ("range", "roundrobin", "sticky", "cooperative-sticky", "zookeeper")
SERVER_STRATEGIES = ("uniform", "server-range")
ALL_STRATEGIES = CLIENT_STRATEGIES + SERVER_STRATEGIES
MAX_ROUNDS = 5


@dataclass(slots=True)
class Member:
    topics: list[str]
    rack: str | None = None
    instance_id: str | None = None


@dataclass(slots=True)
class Group:
    topics: dict[str, int]
    members: dict[str, Member]
    partition_racks: dict[TopicPartition, list[str | None]] = field(default_factory=dict)

    def without(self, *names: str) -> Group:
        missing = [n for n in names if n not in self.members]
        if missing:
            raise ValueError(f"no such member: {', '.join(missing)} (members: {', '.join(self.members)})")
        return Group(self.topics, {m: v for m, v in self.members.items() if m not in names}, self.partition_racks)

    def with_members(self, extra: Mapping[str, Member]) -> Group:
        clash = [n for n in extra if n in self.members]
        if clash:
            raise ValueError(f"member already in the group: {', '.join(clash)}")
        return Group(self.topics, {**self.members, **extra}, self.partition_racks)


@dataclass(slots=True)
class Round:
    assignment: Assignment
    revoked: dict[str, list[TopicPartition]]
    added: dict[str, list[TopicPartition]]


@dataclass(slots=True)
class Rebalance:
    strategy: str
    rounds: list[Round]

    @property
    def final(self) -> Assignment:
        return self.rounds[-1].assignment


def _diff(before: Mapping[str, list[TopicPartition]], after: Assignment) -> Round:
    revoked = {m: [tp for tp in before.get(m, []) if tp not in set(after.get(m, []))] for m in before}
    added = {m: [tp for tp in tps if tp not in set(before.get(m, []))] for m, tps in after.items()}
    return Round(after, {m: v for m, v in revoked.items() if v}, {m: v for m, v in added.items() if v})


def _client_subscriptions(strategy: str, group: Group, owned: Mapping[str, list[TopicPartition]],
                          generation: int) -> dict[str, Subscription]:
    subs: dict[str, Subscription] = {}
    for name, m in group.members.items():
        mine = list(owned.get(name, []))
        had = name in owned
        user_data = None
        if strategy == "sticky" and had:
            # a Java member holds its assignment as ConsumerProtocol delivered it: grouped by topic, first
            # seen first (the grouping decides when Java's HashMap grows, so the user data's topic order)
            topics = list(dict.fromkeys(tp.topic for tp in mine))
            rank = {t: i for i, t in enumerate(topics)}
            user_data = encode_sticky_user_data(sorted(mine, key=lambda tp: rank[tp.topic]), generation)
        elif strategy == "cooperative-sticky":
            user_data = encode_cooperative_user_data(generation if had else -1)
        subs[name] = Subscription(
            topics=list(m.topics),
            # a Java member's owned partitions reach the leader sorted by topic, then partition
            # (ConsumerProtocol.serializeSubscription); eager members own nothing when they rejoin
            owned_partitions=sorted(mine) if strategy == "cooperative-sticky" else [],
            generation_id=generation if had and strategy == "cooperative-sticky" else None,
            group_instance_id=m.instance_id, rack_id=m.rack, user_data=user_data)
    return subs


def rebalance(strategy: str, group: Group, previous: Mapping[str, list[TopicPartition]] | None = None,
              generation: int = 1) -> Rebalance:
    """Run `strategy` on `group`; `previous` is what the members owned before (None: a fresh group)."""
    if strategy not in ALL_STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; allowed: {', '.join(ALL_STRATEGIES)}")
    owned: dict[str, list[TopicPartition]] = {m: list(v) for m, v in (previous or {}).items() if m in group.members}
    before = dict(previous or {})
    rounds: list[Round] = []
    if strategy in SERVER_STRATEGIES:
        specs = {m: MemberSpec(list(v.topics), owned.get(m, []), v.rack, v.instance_id) for m, v in group.members.items()}
        wanted = {t for v in group.members.values() for t in v.topics}
        topics = {t: n for t, n in group.topics.items() if t in wanted}
        out = get_assignor(strategy).assign(specs, topics)
        out = {m: out.get(m, []) for m in group.members}
        return Rebalance(strategy, [_diff(before, out)])
    for _ in range(MAX_ROUNDS):
        subs = _client_subscriptions(strategy, group, owned, generation)
        out = assign_group(get_assignor(strategy), group.topics, subs, group.partition_racks or None)
        out = {m: list(out.get(m, [])) for m in group.members}
        rnd = _diff(before, out)
        rounds.append(rnd)
        if strategy != "cooperative-sticky" or not any(
                set(owned.get(m, [])) - set(out[m]) for m in group.members):
            break
        before = {m: list(v) for m, v in out.items()}
        owned = {m: list(v) for m, v in out.items()}
        generation += 1
    return Rebalance(strategy, rounds)


def moves(before: Mapping[str, list[TopicPartition]], after: Mapping[str, list[TopicPartition]]
          ) -> list[tuple[TopicPartition, str | None, str | None]]:
    """Every partition whose owner differs: (partition, old owner or None, new owner or None)."""
    old = {tp: m for m, tps in before.items() for tp in tps}
    new = {tp: m for m, tps in after.items() for tp in tps}
    return sorted((tp, old.get(tp), new.get(tp)) for tp in set(old) | set(new) if old.get(tp) != new.get(tp))


@dataclass(frozen=True, slots=True)
class Balance:
    counts: dict[str, int]
    min: int
    max: int
    spread: int
    unassigned: int


def balance(group: Group, assignment: Mapping[str, list[TopicPartition]]) -> Balance:
    counts = {m: len(assignment.get(m, [])) for m in group.members}
    wanted = {t for v in group.members.values() for t in v.topics}
    total = sum(n for t, n in group.topics.items() if t in wanted)
    assigned = len({tp for v in assignment.values() for tp in v})
    lo = min(counts.values(), default=0)
    hi = max(counts.values(), default=0)
    return Balance(counts, lo, hi, hi - lo, total - assigned)
