"""Per-request cost of the share-group coordinator's session expiry on the ShareFetch path, 1,000 members.

    .venv/bin/python bench/share_expiry_bench.py [--members 1000] [--requests 10000]

Every ShareFetch / ShareAcknowledge runs `ShareGroupCoordinator.session()`, and every ShareGroupHeartbeat
`heartbeat()`; both first call `expire(now)`. The baseline (measured in the same run, same calls) is the
former `expire`, kept in tests/coordinator/share/expiry_reference.py (the tests' reference too): a scan of
every member and every share session at each call. The new one returns at once while now is before the
earliest deadline it knows (kaflite.coordinator.share.group's rules). Pure, in one process, with a
simulated clock: `--members` members in one group (built directly as their joins would leave it: epoch 1,
the simple assignor's target), each with an open share session; requests 1 ms apart, each member's
session step in turn, and every member heartbeating every 5 s (Kafka's default interval, 45 s session
timeout), so no member expires and the scans find nothing, as in a healthy group. Reported: microseconds
per request (session steps and heartbeats together) and per session step alone, CPU time, the ratio.
Runs well under 30 s.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _timing import clock  # noqa: E402

from coordinator.share.expiry_reference import ScanEveryCall  # noqa: E402
from kaflite.coordinator.share.group import (  # noqa: E402
    ShareGroup,
    ShareGroupCoordinator,
    ShareMember,
    simple_assign,
)
from kaflite.coordinator.share.partition import ShareConfig  # noqa: E402

TOPICS = {"t": 6}
HEARTBEAT_MS = 5_000


def run(cls: type[ShareGroupCoordinator], members: int, requests: int) -> tuple[float, float, float]:
    """(µs per request, µs per session step, CPU seconds) over `requests` requests."""
    c = cls(ShareConfig(), max_size=members)
    ids = [f"member-{i:05d}" for i in range(members)]
    # the group as 1,000 joins would leave it, built at once (each join recomputes the assignment: the
    # set-up would cost more than the measurement)
    target = simple_assign(dict.fromkeys(ids, frozenset(TOPICS)), TOPICS)
    group = ShareGroup("g", group_epoch=1, assignment_epoch=1, target=target, topics_seen=dict(TOPICS))
    for m in ids:
        group.members[m] = ShareMember(
            m, 1, frozenset(TOPICS), c.session_timeout_for("g"), assigned=target[m]
        )
    c.groups["g"] = group
    epochs = dict.fromkeys(ids, 1)
    for m in ids:
        assert c.session("g", m, 0, [("t", int(m[-1]) % 6)], [], now=0).error == 0
    session_epoch = dict.fromkeys(ids, 1)
    last_beat = dict.fromkeys(ids, 0)
    step_s = 0.0
    with clock() as took:
        for i in range(requests):
            now = 1 + i
            m = ids[i % members]
            if now - last_beat[m] >= HEARTBEAT_MS:
                c.heartbeat("g", m, epochs[m], None, TOPICS, now=now)
                last_beat[m] = now
            s0 = time.perf_counter()
            answer = c.session("g", m, session_epoch[m], (), (), now)
            step_s += time.perf_counter() - s0
            assert answer.error == 0, answer
            session_epoch[m] += 1
    assert len(c.groups["g"].members) == members  # nobody expired: the scans found nothing
    return took.wall / requests * 1e6, step_s / requests * 1e6, took.cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=10_000)
    args = ap.parse_args()
    print(
        f"{args.members} members, {args.requests} requests (session steps, heartbeats every {HEARTBEAT_MS} ms)"
    )
    print(f"{'expire':<22}{'us/request':>12}{'us/session step':>17}{'cpu s':>8}")
    results = {}
    for name, cls in (("scan every call (old)", ScanEveryCall), ("bounded (new)", ShareGroupCoordinator)):
        per_req, per_step, cpu = run(cls, args.members, args.requests)
        results[name] = per_req
        print(f"{name:<22}{per_req:>12.2f}{per_step:>17.2f}{cpu:>8.2f}")
    old, new = results["scan every call (old)"], results["bounded (new)"]
    print(f"speed-up per request: {old / new:.1f}x")


if __name__ == "__main__":
    main()
