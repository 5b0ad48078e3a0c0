"""How fast does a consumer group form? Real librdkafka consumers against a real broker.

    .venv/bin/python bench/group_bench.py                 # 3 and 100 members, kaflite dev + default profile
    .venv/bin/python bench/group_bench.py --peer tansu    # also against the Tansu peer broker (baseline)

"Formed" = from the moment the members subscribe until every member owns at least one partition and the
members' assignments cover the topic exactly once (members = partitions). Printed per configuration:
median / min / max over --runs, and the number of generations the group went through (kaflite only).

Baselines measured in the same run: the same members against kaflite with Kafka's default
`group.initial.rebalance.delay.ms=3000` (what a Kafka broker does out of the box), and optionally
against Tansu. A pure-coordinator line shows what the state machine itself costs for the same joins.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import confluent_kafka as ck  # noqa: E402
import confluent_kafka.admin as cka  # noqa: E402

HEARTBEAT_MS = 1000


def form_group(bootstrap: str, members: int, timeout: float = 120.0) -> tuple[float, str]:
    """Seconds until `members` consumers own disjoint, non-empty parts of a `members`-partition topic."""
    topic, group = f"bench-{uuid.uuid4().hex[:8]}", f"bench-{uuid.uuid4().hex[:8]}"
    admin = cka.AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([cka.NewTopic(topic, members, 1)])[topic].result(30)
    time.sleep(0.2)  # let metadata settle so every member sees all partitions at once
    owned: list[frozenset[int]] = [frozenset()] * members
    stop = threading.Event()
    ready = threading.Barrier(members + 1)

    def run(i: int) -> None:
        c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 10000,
                         "heartbeat.interval.ms": HEARTBEAT_MS, "partition.assignment.strategy": "range",
                         "log_level": 0})
        ready.wait()
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while not stop.is_set() and time.monotonic() < deadline:
            c.poll(0.02)
            owned[i] = frozenset(tp.partition for tp in c.assignment())
        c.close()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(members)]
    for t in threads:
        t.start()
    ready.wait()
    start = time.monotonic()
    elapsed = float("nan")
    while time.monotonic() - start < timeout:
        snap = list(owned)
        flat = [p for o in snap for p in o]
        if all(snap) and len(flat) == len(set(flat)) == members:
            elapsed = time.monotonic() - start
            break
        time.sleep(0.005)
    stop.set()
    for t in threads:
        t.join(30)
    admin.delete_topics([topic])
    return elapsed, group


def coordinator_only(members: int) -> float:
    """The pure coordinator alone: `members` JoinGroup v4+ round trips, the join phase, every SyncGroup."""
    from kaflite.coordinator import CoordinatorConfig, GroupCoordinator
    from kaflite.coordinator import messages as m

    gc = GroupCoordinator(CoordinatorConfig(group_initial_rebalance_delay_ms=0))
    protocols = (m.Protocol("range", b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"),)
    t0 = time.perf_counter()
    ids = []
    for i in range(members):
        r = gc.handle_join(m.JoinGroupRequest("g", "", "consumer", protocols, 10000, 10000, None, f"c{i}",
                                              version=7, token=("a", i)), 0)
        ids.append(r.response(("a", i)).member_id)
    for i, mid in enumerate(ids):
        gc.handle_join(m.JoinGroupRequest("g", mid, "consumer", protocols, 10000, 10000, None, f"c{i}",
                                          version=7, token=("b", i)), 0)
    gc.poll_timers(0)
    gen = gc.groups["g"].generation_id
    leader = gc.groups["g"].leader_id
    assert leader is not None
    gc.handle_sync(m.SyncGroupRequest("g", gen, leader, tuple((mid, b"") for mid in ids), token="s"), 0)
    for mid in ids:
        gc.handle_sync(m.SyncGroupRequest("g", gen, mid, token=mid), 0)
    return time.perf_counter() - t0


def kaflite_runs(members: int, runs: int, dev: bool, delay_ms: int | None = None) -> tuple[list[float], list[int]]:
    from kaflite.server.embedded import EmbeddedBroker

    times, generations = [], []
    overrides = {} if delay_ms is None else {"group.initial.rebalance.delay.ms": str(delay_ms)}
    with EmbeddedBroker(dev=dev, overrides=overrides) as b:
        for _ in range(runs):
            elapsed, group = form_group(b.bootstrap, members)
            times.append(elapsed)

            def gens(b: Any = b, group: str = group) -> int:
                return int(b.server.broker.extensions["group_coordinator"].group(group).generation_id)
            generations.append(b.call(gens))
    return times, generations


def tansu_runs(members: int, runs: int) -> list[float]:
    script = "/work/shared/peers/tansu.sh"
    out = subprocess.run([script, "start"], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    fields = dict(kv.split("=", 1) for kv in out.stdout.split())
    try:
        return [form_group(fields["BOOTSTRAP"], members)[0] for _ in range(runs)]
    finally:
        subprocess.run([script, "stop", fields["PID"]], timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", default="3,100", help="comma-separated group sizes (default 3,100)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--peer", choices=["tansu"], help="also measure this peer broker as a baseline")
    ap.add_argument("--short-delay", type=int, default=0,
                    help="group.initial.rebalance.delay.ms of the extra dev-profile row (default 0)")
    ap.add_argument("--heartbeat-ms", type=int, default=1000, help="the consumers' heartbeat.interval.ms")
    ap.add_argument("--skip-default-profile", action="store_true", help="skip the 3 s initial-delay baseline")
    args = ap.parse_args()
    global HEARTBEAT_MS
    HEARTBEAT_MS = args.heartbeat_ms
    sizes = [int(s) for s in args.members.split(",") if s.strip()]
    rows: list[tuple[str, int, list[float], str]] = []
    for n in sizes:
        t, g = kaflite_runs(n, args.runs, dev=True)
        rows.append(("kaflite --dev (delay 100 ms)", n, t, f"generations {g}"))
        t, g = kaflite_runs(n, args.runs, dev=True, delay_ms=args.short_delay)
        rows.append((f"kaflite --dev but delay {args.short_delay} ms", n, t, f"generations {g}"))
        if not args.skip_default_profile:
            t, g = kaflite_runs(n, 1, dev=False)
            rows.append(("kaflite default (delay 3000 ms)", n, t, f"generations {g}"))
        if args.peer == "tansu":
            try:
                rows.append(("tansu (peer)", n, tansu_runs(n, args.runs), ""))
            except Exception as e:  # noqa: BLE001 - the baseline is optional
                rows.append(("tansu (peer)", n, [], f"unavailable: {e}"))
        rows.append(("pure coordinator (no I/O)", n, [coordinator_only(n) for _ in range(args.runs)], ""))
    print(f"group formation, librdkafka consumers, heartbeat.interval.ms={HEARTBEAT_MS}, {args.runs} run(s)")
    print(f"{'configuration':34} {'members':>7} {'median s':>9} {'min s':>8} {'max s':>8}  note")
    for name, n, times, note in rows:
        if times:
            print(f"{name:34} {n:7d} {statistics.median(times):9.3f} {min(times):8.3f} {max(times):8.3f}  {note}")
        else:
            print(f"{name:34} {n:7d} {'-':>9} {'-':>8} {'-':>8}  {note}")


if __name__ == "__main__":
    main()
