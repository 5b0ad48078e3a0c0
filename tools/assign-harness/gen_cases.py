"""Random group scenarios for the assignor harness (tools/assign-harness/README.md).

Writes scenarios.json: each scenario names an assignor, topics (with partition counts, optional replica
racks and, for the broker-side assignors, topic ids) and a sequence of group states (members in join
order: id, topics, instance id, rack). AssignHarness.java runs every state through Kafka's assignor.

What the shapes cover: equal and unequal subscriptions, static members, member racks and partitions
replicated on a subset of racks, members leaving and joining, subscription changes, unchanged groups
(a repeated rebalance must change nothing), and topic names that share a java.util.HashMap bucket —
both exact String.hashCode collisions ("Aa" and "BB" hash alike) and equal low bits of the spread hash.
Deterministic: the same seed gives the same file.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import string
from typing import Any

ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky", "uniform", "server-range")
RACKS = ("a", "b", "c")


def java_hash(s: str) -> int:
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h


def bucket(s: str, capacity: int) -> int:
    h = java_hash(s)
    return (h ^ (h >> 16)) & (capacity - 1)


def colliding_family(rng: random.Random, size: int) -> list[str]:
    """Names with one String.hashCode: a prefix then blocks of "Aa" or "BB" (at most 8: more would make
    Java turn the bucket into a tree once the table has 64 buckets, which kaflite does not model)."""
    prefix = rng.choice(["orders", "t", "clicks-", "x.y", "metrics_"])
    blocks = 3
    names = sorted({prefix + "".join(rng.choice(("Aa", "BB")) for _ in range(blocks)) for _ in range(size * 3)})
    rng.shuffle(names)
    return names[:min(size, 8)]


def same_bucket_names(rng: random.Random, size: int, capacity: int = 16) -> list[str]:
    """Different hash codes, same bucket of a 16- (or 32-) bucket table."""
    target = rng.randrange(capacity)
    out: list[str] = []
    while len(out) < size:
        name = rng.choice(["topic-", "t", "events.", "p"]) + "".join(rng.choices(string.ascii_lowercase + string.digits, k=rng.randint(1, 6)))
        if bucket(name, capacity) == target and name not in out:
            out.append(name)
    return out


def topic_names(rng: random.Random, n: int) -> list[str]:
    style = rng.random()
    names: list[str] = []
    if style < 0.3:
        names += colliding_family(rng, rng.randint(2, min(n, 8)) if n >= 2 else 1)
    elif style < 0.55:
        # at most 9 (and 8 for the large shapes): more names in one bucket could make a tree bin
        names += same_bucket_names(rng, rng.randint(2, max(2, n if n <= 9 else 8)), rng.choice((16, 16, 32)))
    while len(names) < n:
        name = rng.choice(["t", "topic", "orders", "events", "T", "z"]) + rng.choice(["", "-", "_", "."]) + \
            "".join(rng.choices(string.ascii_letters + string.digits, k=rng.randint(1, 4)))
        if name not in names:
            names.append(name)
    names = names[:n]
    rng.shuffle(names)
    return names


def member_id(rng: random.Random, n: int) -> str:
    style = rng.random()
    if style < 0.4:
        return f"consumer-{n}-" + "".join(rng.choices("0123456789abcdef", k=8))
    if style < 0.7:
        return f"C{n}"
    return "".join(rng.choices(string.ascii_letters, k=rng.randint(1, 3))) + str(n)


class Scenario:
    def __init__(self, rng: random.Random, idx: int, assignor: str, large: bool = False) -> None:
        self.rng = rng
        self.idx = idx
        self.assignor = assignor
        self.server = assignor in ("uniform", "server-range")
        self.large = large
        size = rng.random()
        if large:  # 13-24 topics: Java's 16-bucket tables grow (members hold many topics)
            n_topics = rng.randint(13, 24)
            self.topics = {t: rng.randint(1, 8) for t in topic_names(rng, n_topics)}
        else:
            n_topics = rng.randint(1, 3) if size < 0.3 else rng.randint(2, 9)
            self.topics = {t: rng.randint(1, 6 if size < 0.3 else 16) for t in topic_names(rng, n_topics)}
        self.racks: dict[str, list[str | None]] | None = None
        if not self.server and rng.random() < 0.6:
            self.racks = {}
            for t, n in self.topics.items():
                for p in range(n):
                    k = rng.randint(1, 3)
                    rs: list[str | None] = rng.sample(RACKS, k)
                    if rng.random() < 0.05:
                        rs.append(None)
                    self.racks[f"{t}-{p}"] = rs
        self.equal = rng.random() < 0.5
        self.next_member = 0
        self.rack_rate = 0.0 if not self.racks else rng.choice((0.5, 0.9, 1.0))
        self.static_rate = rng.choice((0.0, 0.0, 0.3, 0.8))
        self.common = self._subset()

    def _subset(self) -> list[str]:
        names = list(self.topics)
        return self.rng.sample(names, self.rng.randint(1, len(names)))

    def new_member(self) -> dict[str, Any]:
        self.next_member += 1
        rng = self.rng
        topics = list(self.common) if self.equal else self._subset()
        rng.shuffle(topics)
        return {
            "id": member_id(rng, self.next_member),
            "topics": topics,
            "instance_id": (f"instance-{rng.randint(0, 99)}-{self.next_member}" if rng.random() < self.static_rate else None),
            "rack": rng.choice(RACKS) if rng.random() < self.rack_rate else None,
        }

    def states(self) -> list[list[dict[str, Any]]]:
        rng = self.rng
        n = rng.choice((2, 3, 5, 8)) if self.large else rng.choice((1, 2, 3, 4, 5, 7, 10, 14))
        state = [self.new_member() for _ in range(n)]
        out = [state]
        for _ in range(rng.randint(1, 3)):
            state = [dict(m) for m in state]
            change = rng.random()
            if change < 0.3:
                pass  # unchanged: a repeated rebalance
            elif change < 0.55 and len(state) > 1:
                del state[rng.randrange(len(state))]
            elif change < 0.8:
                state.insert(rng.randint(0, len(state)), self.new_member())
            else:
                m = state[rng.randrange(len(state))]
                m["topics"] = list(self.common) if self.equal and rng.random() < 0.5 else self._subset()
                if self.equal and m["topics"] != self.common:
                    self.equal = False
            out.append(state)
        return out

    def as_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": f"h-{self.assignor}-{'large-' if self.large else ''}{self.idx:04d}",
            "assignor": self.assignor,
            "topics": [[t, n] for t, n in self.topics.items()],
            "partition_racks": self.racks,
            "states": self.states(),
        }
        if self.server:
            d["topic_ids"] = {t: base64.urlsafe_b64encode(self.rng.randbytes(16)).decode().rstrip("=")
                              for t in self.topics}
        return d


# A rack-aware group with unequal subscriptions that Kafka's StickyAssignor and CooperativeStickyAssignor
# never settle: every rebalance of the unchanged group moves (cooperative: revokes, then hands back) the
# same 3 partitions. Found by kaflite's fixed-point search; run through Kafka with 6 unchanged states.
NONCONVERGENT_TOPICS = [["t0", 5], ["t1", 11], ["t2", 9], ["t3", 7], ["t4", 9]]
NONCONVERGENT_MEMBERS: list[dict[str, Any]] = [
    {"id": "m0", "topics": ["t4", "t1"], "rack": "c", "instance_id": None},
    {"id": "m1", "topics": ["t4"], "rack": "a", "instance_id": None},
    {"id": "m2", "topics": ["t2", "t0", "t3", "t1", "t4"], "rack": "b", "instance_id": "i90-2"},
    {"id": "m3", "topics": ["t0", "t4", "t1"], "rack": "b", "instance_id": "i98-3"},
    {"id": "m4", "topics": ["t1", "t3", "t0"], "rack": "a", "instance_id": None},
]
NONCONVERGENT_RACKS: dict[str, list[str | None]] = {
    "t0-0": ["b", "c"], "t0-1": ["a", "c"], "t0-2": ["c", "b", "a"], "t0-3": ["a"], "t0-4": ["c"],
    "t1-0": ["b"], "t1-1": ["a"], "t1-2": ["c", "b", "a"], "t1-3": ["a", "c"], "t1-4": ["a", "b", "c"],
    "t1-5": ["b"], "t1-6": ["c", "a", "b"], "t1-7": ["a"], "t1-8": ["b", "c", "a"], "t1-9": ["b", "a", "c"],
    "t1-10": ["c", "a"], "t2-0": ["a"], "t2-1": ["a", "c"], "t2-2": ["c", "a"], "t2-3": ["c", "a", "b"],
    "t2-4": ["b", "c"], "t2-5": ["a"], "t2-6": ["a"], "t2-7": ["b", "c"], "t2-8": ["c", "b", "a"],
    "t3-0": ["c", "b"], "t3-1": ["c", "b"], "t3-2": ["c", "b", "a"], "t3-3": ["b", "a"], "t3-4": ["b"],
    "t3-5": ["c", "b", "a"], "t3-6": ["b", "a", "c"], "t4-0": ["c", "a", "b"], "t4-1": ["b", "c"],
    "t4-2": ["a"], "t4-3": ["c", "b"], "t4-4": ["b"], "t4-5": ["c", "a"], "t4-6": ["b"], "t4-7": ["b"],
    "t4-8": ["a", "b"]
}


def nonconvergent_scenarios() -> list[dict[str, Any]]:
    return [{"id": f"h-nonconvergent-{a}", "assignor": a, "topics": NONCONVERGENT_TOPICS,
             "partition_racks": NONCONVERGENT_RACKS, "states": [NONCONVERGENT_MEMBERS] * 6}
            for a in ("sticky", "cooperative-sticky")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--per-assignor", type=int, default=180)
    ap.add_argument("--large-per-assignor", type=int, default=20, help="scenarios with 13-24 topics")
    ap.add_argument("--out", default="scenarios.json")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    scenarios = [Scenario(rng, i, a).as_json() for a in ASSIGNORS for i in range(args.per_assignor)]
    if args.large_per_assignor:
        large = random.Random(args.seed + 1)  # its own stream: the scenarios above stay as they were
        scenarios += [Scenario(large, i, a, large=True).as_json()
                      for a in ASSIGNORS for i in range(args.large_per_assignor)]
    scenarios += nonconvergent_scenarios()
    with open(args.out, "w") as f:
        json.dump({"meta": {"seed": args.seed, "per_assignor": args.per_assignor,
                            "large_per_assignor": args.large_per_assignor}, "scenarios": scenarios}, f)
    print(f"{len(scenarios)} scenarios -> {args.out}")


if __name__ == "__main__":
    main()
