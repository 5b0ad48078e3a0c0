"""Per-heartbeat cost of the share-group coordinator with 1,000 members, a heartbeat that changes nothing.

    .venv/bin/python bench/share_heartbeat_bench.py [--members 1000] [--heartbeats 20000] [--shell-heartbeats 300]

Every ShareGroupHeartbeat runs `ShareGroupCoordinator.heartbeat()`, which recomputes the group's target
when something changed (`_refresh`) and, on the broker (`initialize_partitions`), looks for partitions to
initialize. The baseline (measured in the same run, same calls) is the former computation, kept here only:
the subscribed topics rebuilt from every member's subscription at each heartbeat (in `_refresh` and in
`_start_initializing`), and the partitions of every member's target gathered for the
initialized-assignment-pending check. The new one reads the group's subscription counts and its cached
targeted partitions (kaflite.coordinator.share.group's rules). A second pair of rows adds what the
broker shell then does for a heartbeat that touched its group (`touched`): build the group's records and
their difference from those written, which goes over every member; before, every heartbeat touched its
group, now only one that changes one of its records does. (The baseline leaves out the timeline
events of a change, which a heartbeat that changes nothing does not record either.) Pure, in one
process, simulated clock: `--members` members join one group subscribed to 2 topics of 6 partitions, every partition initialized,
each member heartbeats until the group is Stable; then the measured heartbeats, 1 ms apart, members in
turn (nobody expires: 45 s session timeout). Reported: microseconds per heartbeat, CPU time, the ratio.
Runs in well under a minute.
"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Mapping
from typing import Any

from _timing import clock

from kaflite.coordinator.share import membership_records as mr
from kaflite.coordinator.share.group import (
    Assignment,
    HeartbeatAnswer,
    ShareGroup,
    ShareGroupCoordinator,
    simple_assign,
)
from kaflite.coordinator.share.partition import ShareConfig

TOPICS = {"t": 6, "u": 6}
IDS = {t: uuid.UUID(int=i + 1) for i, t in enumerate(sorted(TOPICS))}


class ScanMembers(ShareGroupCoordinator):
    """The baseline: `_refresh` and `_start_initializing` as before the subscription counts."""

    def _refresh(self, group: ShareGroup, topics: Mapping[str, int]) -> None:
        subscribed = {t for m in group.members.values() for t in m.subscribed}
        seen = {t: topics.get(t, 0) for t in subscribed}
        if seen != group.topics_seen and group.assignment_epoch == group.group_epoch:
            group.group_epoch += 1
        assignable = self._assignable(group, seen) if self.initialize_partitions else None
        if assignable is not None and group.assignment_epoch == group.group_epoch and group.members:
            targeted = {(t, p) for a in group.target.values() for t, ps in a.items() for p in ps}
            if any((t, p) not in targeted for t, ps in assignable.items() for p in ps):
                group.group_epoch += 1
        if group.assignment_epoch == group.group_epoch:
            return
        group.topics_seen = seen
        group.target = simple_assign(
            {m.member_id: m.subscribed for m in group.members.values()}, topics, assignable
        )
        group.assignment_epoch = group.group_epoch

    def _start_initializing(self, group: ShareGroup, topics: Mapping[str, int], now: int) -> Assignment:
        {t for m in group.members.values() for t in m.subscribed}  # the former per-heartbeat rebuild
        return super()._start_initializing(group, topics, now)

    def heartbeat(self, group_id: str, *args: Any, **kw: Any) -> HeartbeatAnswer:
        answer = super().heartbeat(group_id, *args, **kw)
        self.touched.add(group_id)  # the former: every heartbeat had its group's records written
        return answer


def run(
    cls: type[ShareGroupCoordinator], members: int, heartbeats: int, shell: bool = False
) -> tuple[float, float]:
    """(µs per heartbeat, CPU seconds) over `heartbeats` heartbeats of a Stable group; `shell`: each
    heartbeat that touched the group also builds what the broker shell's write step builds (the group's
    records and their difference from those written, share_membership.write; no I/O)."""
    c = cls(ShareConfig(), max_size=members, initialize_partitions=True)
    ids = [f"member-{i:05d}" for i in range(members)]
    epochs: dict[str, int] = {}
    for i, m in enumerate(ids):  # the joins (each recomputes the assignment: not measured)
        epochs[m] = c.heartbeat("g", m, 0, sorted(TOPICS), TOPICS, now=i).member_epoch
    c.initialized("g", {t: range(n) for t, n in TOPICS.items()}, now=members)
    for _ in range(2):  # every member to the epoch of the assignment with every partition
        for m in ids:
            epochs[m] = c.heartbeat("g", m, epochs[m], None, TOPICS, now=members + 1).member_epoch
    group = c.groups["g"]
    assert group.state == "Stable" and all(mb.assigned for mb in group.members.values())
    epoch = group.group_epoch
    written = mr.group_records(group, IDS)
    c.touched.clear()
    base = members + 2
    with clock() as took:
        for i in range(heartbeats):
            m = ids[i % members]
            answer = c.heartbeat("g", m, epochs[m], None, TOPICS, now=base + i)
            assert answer.assignment is None, answer
            if shell and c.touched:
                c.touched.clear()
                assert not mr.diff(written, mr.group_records(group, IDS))  # nothing changed: an empty step
    assert group.group_epoch == epoch and len(group.members) == members  # nothing changed, nobody expired
    return took.wall / heartbeats * 1e6, took.cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", type=int, default=1000)
    ap.add_argument("--heartbeats", type=int, default=20_000)
    ap.add_argument("--shell-heartbeats", type=int, default=300)
    args = ap.parse_args()
    print(f"{args.members} members, {args.heartbeats} heartbeats that change nothing (Stable group)")
    print(f"{'subscribed topics':<28}{'us/heartbeat':>14}{'cpu s':>8}")
    results = {}
    for name, cls in (("rebuilt from members (old)", ScanMembers), ("counts (new)", ShareGroupCoordinator)):
        per_beat, cpu = run(cls, args.members, args.heartbeats)
        results[name] = per_beat
        print(f"{name:<28}{per_beat:>14.2f}{cpu:>8.2f}")
    old, new = results["rebuilt from members (old)"], results["counts (new)"]
    print(f"speed-up per heartbeat: {old / new:.1f}x")
    print(f"with the shell's record build, {args.shell_heartbeats} heartbeats")
    shell = {}
    for name, cls in (("every heartbeat (old)", ScanMembers), ("on a change (new)", ShareGroupCoordinator)):
        per_beat, cpu = run(cls, args.members, args.shell_heartbeats, shell=True)
        shell[name] = per_beat
        print(f"{name:<28}{per_beat:>14.2f}{cpu:>8.2f}")
    print(f"speed-up per heartbeat: {shell['every heartbeat (old)'] / shell['on a change (new)']:.1f}x")


if __name__ == "__main__":
    main()
