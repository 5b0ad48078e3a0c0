"""Benchmark kaflite's assignors at Kafka's own "large group" scale.

Default scale: 2,000 members x 100,000 partitions (100 topics x 1,000), for Sticky, CooperativeSticky and
the server-side Uniform assignor, with equal subscriptions and with unequal ones (the last member
subscribes to one topic only, as in Kafka's testLargeAssignmentAndGroupWithNonEqualSubscription; and
"split": every 4th member on the first half of the topics, the others on the second half), each
fresh and then incrementally after one member leaves (every survivor owning its previous partitions).
Baseline measured in the same run: RoundRobin and Range over the same group (no stickiness to compute).
Client assignors run as a group leader runs them (`assign_group`: Java's HashMap order of members and
topics included). Target: 1 s of CPU per assignor call (wall time is reported too: the machine is shared).

    .venv/bin/python bench/assign_bench.py [--members 2000] [--topics 100] [--partitions 1000] [--only sticky]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from _timing import clock

from kaflite.assign import Subscription, TopicPartition, assign_group, get_assignor
from kaflite.assign.server import MemberSpec
from kaflite.assign.userdata import encode_sticky_user_data

TARGET_S = 1.0


def timed(fn: Callable[[], Any]) -> tuple[tuple[float, float], Any]:
    """(wall seconds, CPU seconds of this process) — the machine is shared, so both are reported."""
    with clock() as took:
        out = fn()
    return (took.wall, took.cpu), out


def balance(out: dict[str, list[TopicPartition]]) -> str:
    sizes = [len(v) for v in out.values()] or [0]
    return f"{min(sizes)}..{max(sizes)}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", type=int, default=2000)
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=1000, help="partitions per topic")
    ap.add_argument(
        "--only",
        action="append",
        default=None,
        help="run only these assignors (sticky, cooperative-sticky, uniform, baseline)",
    )
    args = ap.parse_args(argv)

    topics = {f"topic{i:03d}": args.partitions for i in range(args.topics)}
    names = list(topics)
    members = [f"consumer{i:04d}" for i in range(args.members)]
    total = args.topics * args.partitions
    print(
        f"group: {len(members)} members, {len(topics)} topics, {total} partitions (target <= {TARGET_S:g} s CPU each)"
    )
    rows: list[tuple[str, str, str, tuple[float, float], str]] = []
    only = set(args.only or ["baseline", "sticky", "cooperative-sticky", "uniform"])

    def subs_for(pattern: str) -> dict[str, list[str]]:
        if pattern == "equal":
            return {m: names for m in members}
        if pattern == "unequal":  # Kafka's testLargeAssignmentAndGroupWithNonEqualSubscription
            return {m: (names if i < len(members) - 1 else names[:1]) for i, m in enumerate(members)}
        # Kafka's ...NonEqualSubscriptionNotTimeout: every 4th member on the first half of the topics
        half = len(names) // 2
        return {m: (names[:half] if i % 4 == 0 else names[half:]) for i, m in enumerate(members)}

    for label in ("equal", "unequal", "split"):
        equal = label == "equal"
        subs = subs_for(label)
        if "baseline" in only:
            for name in ("roundrobin", "range"):
                s = {m: Subscription(t) for m, t in subs.items()}
                dt, out = timed(lambda n=name, s=s: assign_group(get_assignor(n), topics, s))
                rows.append((name + " (baseline)", label, "fresh", dt, balance(out)))
        for name in ("sticky", "cooperative-sticky"):
            if name not in only:
                continue
            s = {m: Subscription(t) for m, t in subs.items()}
            dt, first = timed(lambda n=name, s=s: assign_group(get_assignor(n), topics, s))
            rows.append((name, label, "fresh", dt, balance(first)))
            # one member leaves; the others rejoin owning what they had
            left = {m: t for m, t in subs.items() if m != members[0]}
            if name == "sticky":
                s2 = {
                    m: Subscription(t, user_data=encode_sticky_user_data(first[m], 1))
                    for m, t in left.items()
                }
            else:
                s2 = {
                    m: Subscription(t, owned_partitions=list(first[m]), generation_id=1)
                    for m, t in left.items()
                }
            dt, second = timed(lambda n=name, s2=s2: assign_group(get_assignor(n), topics, s2))
            rows.append((name, label, "1 member left", dt, balance(second)))
        if "uniform" in only:
            specs = {m: MemberSpec(t) for m, t in subs.items()}
            kind = "homogeneous" if equal else "heterogeneous"
            dt, first = timed(
                lambda specs=specs, kind=kind: get_assignor("uniform").assign(specs, topics, kind)
            )
            rows.append(("uniform", label, "fresh", dt, balance(first)))
            specs2 = {m: MemberSpec(t, list(first.get(m, []))) for m, t in subs.items() if m != members[0]}
            dt, second = timed(
                lambda specs2=specs2, kind=kind: get_assignor("uniform").assign(specs2, topics, kind)
            )
            rows.append(("uniform", label, "1 member left", dt, balance(second)))

    print(
        f"{'assignor':28} {'subscriptions':13} {'case':14} {'wall s':>7} {'cpu s':>7}  {'per member':>10}  target"
    )
    for name, label, case, (wall, cpu), bal in rows:
        ok = "ok" if cpu <= TARGET_S else "OVER"
        print(f"{name:28} {label:13} {case:14} {wall:7.2f} {cpu:7.2f}  {bal:>10}  {ok}")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
