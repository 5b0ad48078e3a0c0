"""The assignment lab: every assignor on one group shape, side by side, and what a change moves (pure).

A shape is topics with partition counts, members in join order with their subscriptions and racks (a
live group's shape is read by the console; a described one is typed in the page or given to
`kaflite assign --html`). Each strategy runs through `kaflite.assign.simulate` (the same code the
`kaflite assign` table uses), so the lab can never disagree with it.

Rules:
- client strategies (range, roundrobin, sticky, cooperative-sticky) and the broker's KIP-848 ones
  (uniform, server-range) all get the same shape;
- a change is any of: members leave, members join, topics grow; the second run receives the first
  run's final assignment as what each surviving member owned (cooperative-sticky may need follow-up
  rounds: every round is shown);
- balance = min / max / spread of partitions per member, and subscribed partitions left unassigned.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kaflite.assign.partitioners import CLIENT_PARTITIONERS, client_partition
from kaflite.assign.simulate import Balance, Group, Member, balance, moves, rebalance
from kaflite.assign.types import TopicPartition
from kaflite.console.svg import assignment_grid, bar_chart

__all__ = ["LAB_STRATEGIES", "Change", "StrategyRun", "parse_topics", "parse_members", "parse_change",
           "run_lab", "KeySkew", "key_skew", "key_placements"]

#: the lab's columns: Kafka's client assignors, then the broker's (KIP-848) ones
LAB_STRATEGIES = ("range", "roundrobin", "sticky", "cooperative-sticky", "uniform", "server-range")

_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


def parse_topics(text: str) -> dict[str, int]:
    """"orders:6, payments:3" (commas or new lines) -> {"orders": 6, "payments": 3}."""
    out: dict[str, int] = {}
    for item in re.split(r"[,\n]", text):
        item = item.strip()
        if not item:
            continue
        name, sep, n = item.rpartition(":")
        if not sep or not _NAME.match(name) or not n.strip().isdigit() or int(n) < 1:
            raise ValueError(f"topics: expected NAME:PARTITIONS with PARTITIONS >= 1, got {item!r}")
        out[name] = int(n)
    if not out:
        raise ValueError("topics: give at least one NAME:PARTITIONS")
    return out


def _parse_member(line: str, what: str) -> tuple[str, Member]:
    name, sep, rest = line.partition(":")
    rack = None
    if "@" in rest:
        rest, rack = rest.rsplit("@", 1)
        rack = rack.strip() or None
    topics = [t.strip() for t in rest.split(",") if t.strip()]
    name = name.strip()
    if not sep or not name or not topics:
        raise ValueError(f"{what}: expected NAME: TOPIC[,TOPIC...] [@RACK], got {line.strip()!r}")
    return name, Member(topics, rack)


def parse_members(text: str, topics: Mapping[str, int] | None = None, what: str = "members") -> dict[str, Member]:
    """One member a line (or ';'-separated): "C0: orders,payments @rack-a", in join order."""
    out: dict[str, Member] = {}
    for line in re.split(r"[\n;]", text):
        if not line.strip():
            continue
        name, m = _parse_member(line, what)
        if name in out:
            raise ValueError(f"{what}: member {name!r} given twice")
        if topics is not None:
            unknown = [t for t in m.topics if t not in topics]
            if unknown:
                raise ValueError(f"{what}: {name} subscribes to unknown topic(s) {', '.join(unknown)}; "
                                 f"topics: {', '.join(topics)}")
        out[name] = m
    return out


@dataclass(slots=True)
class Change:
    """What happens next: members leaving, members joining, topics growing to a new partition count."""

    leave: list[str] = field(default_factory=list)
    join: dict[str, Member] = field(default_factory=dict)
    grow: dict[str, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.leave or self.join or self.grow)

    def describe(self) -> str:
        parts = [f"{m} leaves" for m in self.leave] + [f"{m} joins" for m in self.join]
        parts += [f"{t} grows to {n} partitions" for t, n in self.grow.items()]
        return ", ".join(parts)

    def apply(self, group: Group) -> Group:
        after = group.without(*self.leave) if self.leave else group
        if self.grow:
            for t, n in self.grow.items():
                if t not in group.topics:
                    raise ValueError(f"grow: unknown topic {t!r}; topics: {', '.join(group.topics)}")
                if n < group.topics[t]:
                    raise ValueError(f"grow: {t} has {group.topics[t]} partitions; a topic can only grow")
            after = Group({**after.topics, **self.grow}, dict(after.members), after.partition_racks)
        if self.join:
            for name, m in self.join.items():
                unknown = [t for t in m.topics if t not in after.topics]
                if unknown:
                    raise ValueError(f"join: {name} subscribes to unknown topic(s) {', '.join(unknown)}")
            after = after.with_members(self.join)
        return after


def parse_change(leave: str = "", join: str = "", grow: str = "") -> Change:
    """Form fields: leave "C0, C1"; join lines like members; grow "orders:12"."""
    left = [m.strip() for m in re.split(r"[,\s]+", leave) if m.strip()]
    joined = parse_members(join, what="join") if join.strip() else {}
    grown = parse_topics(grow) if grow.strip() else {}
    return Change(left, joined, grown)


@dataclass(slots=True)
class RoundView:
    assignment: dict[str, list[TopicPartition]]
    revoked: dict[str, list[TopicPartition]]
    svg: str


@dataclass(slots=True)
class StrategyRun:
    strategy: str
    assignment: dict[str, list[TopicPartition]]
    balance: Balance
    svg: str
    error: str = ""
    after: dict[str, list[TopicPartition]] | None = None
    after_balance: Balance | None = None
    after_rounds: list[RoundView] = field(default_factory=list)
    moved: list[tuple[TopicPartition, str | None, str | None]] = field(default_factory=list)
    kept: int = 0

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {"strategy": self.strategy, "error": self.error,
                                  "assignment": {m: [str(tp) for tp in v] for m, v in self.assignment.items()}}
        if self.after is not None:
            out["after"] = {m: [str(tp) for tp in v] for m, v in self.after.items()}
            out["moves"] = [[str(tp), a, b] for tp, a, b in self.moved]
        return out


def _partitions(group: Group) -> list[tuple[str, int]]:
    wanted = {t for m in group.members.values() for t in m.topics}
    return [(t, p) for t, n in group.topics.items() if t in wanted for p in range(n)]


def _owner(assignment: Mapping[str, Sequence[TopicPartition]]) -> dict[tuple[str, int], str]:
    return {(tp.topic, tp.partition): m for m, tps in assignment.items() for tp in tps}


def run_lab(group: Group, change: Change | None = None, strategies: Iterable[str] = LAB_STRATEGIES
            ) -> tuple[list[StrategyRun], Group | None]:
    """Each strategy's assignment of `group` (and, with a change, the rebalance that follows)."""
    after_group = change.apply(group) if change else None
    runs: list[StrategyRun] = []
    members = list(group.members)
    for s in strategies:
        try:
            first = rebalance(s, group)
        except Exception as err:  # an assignor refusing a shape (e.g. uniform with racks) is shown, not raised
            runs.append(StrategyRun(s, {}, balance(group, {}), "", error=str(err)))
            continue
        run = StrategyRun(s, first.final, balance(group, first.final),
                          assignment_grid(members, _partitions(group), _owner(first.final), title=f"{s}"))
        if after_group is not None:
            try:
                second = rebalance(s, after_group, first.final)
            except Exception as err:
                run.error = f"after the change: {err}"
                runs.append(run)
                continue
            after_members = list(dict.fromkeys([*members, *after_group.members]))
            parts = _partitions(after_group)
            prev = _owner(first.final)
            for i, rnd in enumerate(second.rounds, 1):
                title = f"{s} after: round {i} of {len(second.rounds)}" if len(second.rounds) > 1 else f"{s} after"
                revoked = {(tp.topic, tp.partition): m for m, tps in rnd.revoked.items() for tp in tps}
                run.after_rounds.append(RoundView(rnd.assignment, rnd.revoked, assignment_grid(
                    after_members, parts, _owner(rnd.assignment), title=title,
                    previous_owner=prev if i == len(second.rounds) else None,
                    revoked=revoked if i < len(second.rounds) else None)))
            run.after = second.final
            run.after_balance = balance(after_group, second.final)
            run.moved = moves(first.final, second.final)
            run.kept = sum(1 for m, tps in first.final.items() for tp in tps if tp in set(second.final.get(m, [])))
        runs.append(run)
    return runs, after_group


# -- key skew -------------------------------------------------------------------------------------

@dataclass(slots=True)
class KeySkew:
    topic: str
    partitions: int
    records_per_partition: list[int]
    sampled: int
    heaviest: list[tuple[bytes | None, int]]
    null_keys: int
    svg_partitions: str
    svg_keys: str

    @property
    def skew(self) -> float | None:
        """max / mean records per partition (1.0 = perfectly even)."""
        total = sum(self.records_per_partition)
        if not total:
            return None
        return max(self.records_per_partition) / (total / len(self.records_per_partition))


def key_label(key: bytes | None) -> str:
    if key is None:
        return "(null)"
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + key.hex()


def key_skew(topic: str, records_per_partition: Sequence[int], sampled_keys: Iterable[bytes | None],
             top: int = 20) -> KeySkew:
    """Records per partition (from offsets) and the heaviest keys of a sample of records."""
    counts: Counter[bytes | None] = Counter(sampled_keys)
    null = counts.pop(None, 0)
    heaviest = counts.most_common(top)
    sampled = sum(counts.values()) + null
    n = len(records_per_partition)
    heavy_p = max(range(n), key=lambda p: records_per_partition[p]) if n else -1
    return KeySkew(
        topic, n, list(records_per_partition), sampled, list(heaviest), null,
        bar_chart([f"partition {p}" for p in range(n)], list(records_per_partition),
                  title=f"{topic}: records per partition", highlight=[heavy_p] if n > 1 else []),
        bar_chart([key_label(k) for k, _ in heaviest], [c for _, c in heaviest],
                  title=f"heaviest keys in {sampled} sampled records"))


def key_placements(key: bytes, num_partitions: int) -> list[tuple[str, str, int | None]]:
    """(client, how, partition or None for random) for every client's default partitioner."""
    return [(name, cp.description, client_partition(name, key, num_partitions))
            for name, cp in CLIENT_PARTITIONERS.items()]
