"""How often does rebalancing an unchanged group keep moving partitions? (kaflite, exact to Kafka.)

Random groups (seeded; 1-5 topics of 1-12 partitions, 1-8 members, racks a-c on members and replicas,
some static members) per subscription shape; each strategy rebalances the unchanged group up to
--max-rebalances times after the first assignment and the survey counts after how many nothing moved.
Groups that never settle are candidates to run through Kafka's classes (gen_cases.py's NONCONVERGENT).

    PYTHONPATH=src python tools/assign-harness/fixed_point_survey.py --groups 2000 --seed 1
"""

from __future__ import annotations

import argparse
import collections
import random

from kaflite.assign.simulate import Group, Member, rebalance
from kaflite.assign.types import TopicPartition

RACKS = ("a", "b", "c")


def random_group(rng: random.Random, equal: bool) -> Group:
    topics = {f"t{i}": rng.randint(1, 12) for i in range(rng.randint(1, 5))}
    names = list(topics)
    common = rng.sample(names, rng.randint(1, len(names)))
    members = {
        f"m{i}": Member(list(common) if equal else rng.sample(names, rng.randint(1, len(names))),
                        rng.choice(RACKS) if rng.random() < 0.8 else None,
                        f"i{rng.randint(0, 99)}-{i}" if rng.random() < 0.3 else None)
        for i in range(rng.randint(1, 8))}
    racks: dict[TopicPartition, list[str | None]] = {
        TopicPartition(t, p): list(rng.sample(RACKS, rng.randint(1, 3))) for t, n in topics.items() for p in range(n)}
    return Group(topics, members, racks)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-rebalances", type=int, default=6)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    settled_after: collections.Counter[tuple[str, str, str]] = collections.Counter()
    for i in range(args.groups):
        shape = "equal" if i % 2 == 0 else "unequal"
        group = random_group(rng, shape == "equal")
        for strategy in ("range", "roundrobin", "sticky", "cooperative-sticky", "uniform", "server-range"):
            previous = rebalance(strategy, group).final
            generation = 2
            outcome = "never"
            for k in range(1, args.max_rebalances + 1):
                again = rebalance(strategy, group, previous, generation)
                generation += len(again.rounds)
                if len(again.rounds) == 1 and {m: sorted(v) for m, v in again.final.items()} == {
                        m: sorted(v) for m, v in previous.items()}:
                    outcome = "at once" if k == 1 else f"after {k - 1} moving rebalance(s)"
                    break
                previous = again.final
            settled_after[(strategy, shape, outcome)] += 1
    print(f"{args.groups} rack-aware groups (half equal, half unequal subscriptions), seed {args.seed}")
    for key in sorted(settled_after):
        print(f"{key[0]:20} {key[1]:8} {key[2]:30} {settled_after[key]}")


if __name__ == "__main__":
    main()
