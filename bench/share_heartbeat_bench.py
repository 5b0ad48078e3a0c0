"""Per-heartbeat cost of the share-group coordinator with 1,000 members, a heartbeat that changes nothing;
and (`--rebalance N`) the write of the heartbeats of a group joining 1 -> N members.

    .venv/bin/python bench/share_heartbeat_bench.py [--members 1000] [--heartbeats 20000] [--shell-heartbeats 300]
    .venv/bin/python bench/share_heartbeat_bench.py --rebalance 200 [--beats-per-join 5]

`--rebalance N` (only that is run): N members join one group one at a time, and after each join
`--beats-per-join` heartbeats of the members already in, in turn (each moving to the new group epoch, as
members do at their next heartbeat); every heartbeat is written as the broker writes it, by
kaflite.server.coordinators.share_membership.write_touched, onto a real GroupCoordinator shard (the
coordinator runtime replaced by a step run at once: no log, no I/O). Reported per group-size quarter: CPU
microseconds per heartbeat (coordinator + write), records handed to the write step (built and diffed) and
records it wrote, for the joins and the other heartbeats apart. The same file runs against an older
kaflite (PYTHONPATH=<old checkout>/src) for a before/after comparison: it uses only the shell's API.

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
import gc
import time
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


class _Runtime:
    """The group coordinator runtime reduced to what share_membership.write uses: the step runs at once on
    the shard, its records counted (as tests/server/test_share_membership_writes.py's)."""

    def __init__(self) -> None:
        from kaflite.coordinator.coordinator import GroupCoordinator

        self.shard = GroupCoordinator()
        self.built = 0  # records handed to the last share-group write step
        self.written = 0  # records it wrote

    def active_shards(self) -> list[tuple[int, Any]]:
        return [(0, self.shard)]

    def write(self, partition: int, op: Any) -> Any:
        import asyncio

        real = self.shard.handle_share_group_write

        def counting(group_id: str, records: Any, now: int, *covered: Any) -> Any:
            self.built = len(records)
            result = real(group_id, records, now, *covered)
            self.written = len(result.records)
            return result
        self.shard.handle_share_group_write = counting  # type: ignore[method-assign]
        try:
            result = op(self.shard, 0)
        finally:
            del self.shard.handle_share_group_write
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(result.response())
        return fut


def rebalance(members: int, beats_per_join: int) -> None:
    import asyncio
    from types import SimpleNamespace

    from kaflite.server.coordinators import share_membership
    from kaflite.server.coordinators.groups import GROUP_SERVICE
    from kaflite.server.services import BrokerServices

    runtime = _Runtime()
    services = BrokerServices()
    services.set(GROUP_SERVICE, SimpleNamespace(runtime=runtime, partition_for=lambda _g: 0))  # type: ignore[arg-type]
    broker: Any = SimpleNamespace(services=services, now_ms=lambda: 0, metadata=SimpleNamespace(
        topics={t: SimpleNamespace(topic_id=IDS[t]) for t in TOPICS}))
    c = ShareGroupCoordinator(ShareConfig(), max_size=members)
    share_membership.reconcile(broker, c)
    quarter = max(1, members // 4)
    # per quarter, per kind ("join", "beat"): [heartbeats, cpu seconds, records built, records written,
    # most built in one write]
    rows: dict[tuple[int, str], list[float]] = {}

    async def scenario() -> None:
        epochs: dict[str, int] = {}
        ids: list[str] = []
        turn = 0
        for i in range(members):
            m = f"member-{i:05d}"
            beats: list[tuple[str, str]] = [("join", m)]
            for _ in range(beats_per_join if ids else 0):
                beats.append(("beat", ids[turn % len(ids)]))
                turn += 1
            ids.append(m)
            for kind, who in beats:
                runtime.built = runtime.written = 0
                c0 = time.process_time()
                if kind == "join":
                    answer = c.heartbeat("g", who, 0, sorted(TOPICS), TOPICS, now=i)
                else:
                    answer = c.heartbeat("g", who, epochs[who], None, TOPICS, now=i)
                assert answer.error == 0, answer
                epochs[who] = answer.member_epoch
                assert await share_membership.write_touched(broker, c) == {}
                cpu = time.process_time() - c0
                row = rows.setdefault((min(i // quarter, 3), kind), [0, 0.0, 0, 0, 0])
                row[0] += 1
                row[1] += cpu
                row[2] += runtime.built
                row[3] += runtime.written
                row[4] = max(row[4], runtime.built)
        group = c.groups["g"]
        assert len(group.members) == members
        written = runtime.shard.share_records["g"]
        assert written == mr.group_records(group, IDS)  # the shard holds exactly the group's records

    gc.collect()
    c0 = time.process_time()
    asyncio.run(scenario())
    total = time.process_time() - c0
    print(f"rebalance: {members} members join one at a time, {beats_per_join} heartbeats of the others per join")
    print(f"{'members':<12}{'kind':<6}{'beats':>7}{'cpu us/beat':>13}{'built/write':>13}{'max built':>11}"
          f"{'written/write':>15}")
    for (q, kind), (n, cpu, built, written, most) in sorted(rows.items()):
        lo, hi = q * quarter + 1, members if q == 3 else (q + 1) * quarter
        print(f"{f'{lo}-{hi}':<12}{kind:<6}{int(n):>7}{cpu / n * 1e6:>13.1f}{built / n:>13.1f}{int(most):>11}"
              f"{written / n:>15.2f}")
    print(f"total cpu s: {total:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", type=int, default=1000)
    ap.add_argument("--heartbeats", type=int, default=20_000)
    ap.add_argument("--shell-heartbeats", type=int, default=300)
    ap.add_argument("--rebalance", type=int, default=0, metavar="N")
    ap.add_argument("--beats-per-join", type=int, default=5)
    args = ap.parse_args()
    if args.rebalance:
        rebalance(args.rebalance, args.beats_per_join)
        return
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
