"""The cluster's control plane, timed: a real ZooKeeper and cluster members as real processes.

    .venv/bin/python bench/cluster_bench.py                       # 3 members, 3 s sessions, 3 runs
    .venv/bin/python bench/cluster_bench.py --partitions 10000    # also a 10,000-partition topic

Measured (each a median / min / max over --runs):
- controller failover: kill -9 of the controller process until ZooKeeper names another controller with
  the epoch bumped (target: <= zookeeper.session.timeout.ms + 2 s);
- leader failover: kill -9 of a broker leading partitions until every one of them is led by an ISR
  member and the dead broker is in no ISR (same target);
- with --partitions N: a topic of N partitions, replication factor 3, from its creation until the last
  partition's state znode is written, and the ZooKeeper client's raw write/read costs for N states.

The members are `python -m kaflite.cluster.member` (registration and controller, no Kafka listener):
the times are the control plane's. With the broker wired into the cluster, the issue's definition (kill
until a producer's next acknowledged record) applies on top of these.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kaflite.cluster.admin import ZkAdmin  # noqa: E402
from kaflite.cluster.zk import KafkaZkClient  # noqa: E402
from kaflite.cluster.zkdata import LeaderAndIsr, TopicAssignment  # noqa: E402
from kaflite.cluster.zkserver import ZooKeeperServer, missing_reason  # noqa: E402

T = TypeVar("T")


def wait(fn: Callable[[], T | None], timeout: float = 60.0) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(0.02)
    raise TimeoutError("condition not met in time")


class Members:
    def __init__(self, connect: str, directory: Path, session_ms: int) -> None:
        self.connect, self.directory, self.session_ms = connect, directory, session_ms
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    def start(self, broker_id: int) -> None:
        log = open(self.directory / f"member-{broker_id}.log", "ab")
        self.procs[broker_id] = subprocess.Popen(
            [sys.executable, "-m", "kaflite.cluster.member", "--broker-id", str(broker_id), "--zookeeper",
             self.connect, "--session-timeout-ms", str(self.session_ms)],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        )  # fmt: skip
        log.close()

    def kill(self, broker_id: int) -> None:
        proc = self.procs.pop(broker_id)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        self.procs.clear()


def states(zk: KafkaZkClient, topic: str, n: int) -> dict[int, LeaderAndIsr]:
    got = zk.get_partition_states([(topic, p) for p in range(n)])
    return {p: s for (_, p), s in got.items() if s is not None}


def one_run(zk_connect: str, workdir: Path, session_ms: int) -> tuple[float, float]:
    chroot = f"{zk_connect}/bench-{uuid.uuid4().hex[:8]}"
    members = Members(chroot, workdir, session_ms)
    zk = KafkaZkClient(chroot, session_timeout_ms=20000)
    zk.start()
    try:
        for b in (1, 2, 3):
            members.start(b)
        wait(lambda: zk.get_broker_ids() == [1, 2, 3] and zk.get_controller_id())
        ZkAdmin(zk, rng=random.Random(0)).create_topic("t", 6, 3, {})
        wait(lambda: len(states(zk, "t", 6)) == 6)
        controller = zk.get_controller_id()
        assert controller is not None
        t0 = time.monotonic()
        members.kill(controller)
        wait(lambda: (c := zk.get_controller_id()) not in (None, controller) and c)
        controller_failover = time.monotonic() - t0
        members.start(controller)  # back, out of sync
        wait(lambda: controller in zk.get_broker_ids())
        ctl = zk.get_controller_id()
        now = states(zk, "t", 6)
        victim = next(b for b in (1, 2, 3) if b != ctl and any(s.leader == b for s in now.values()))
        led = [p for p, s in now.items() if s.leader == victim]
        t0 = time.monotonic()
        members.kill(victim)
        wait(
            lambda: (
                (s := states(zk, "t", 6))
                and all(s[p].leader != victim for p in led)
                and all(victim not in x.isr for x in s.values())
            )
        )
        leader_failover = time.monotonic() - t0
        return controller_failover, leader_failover
    finally:
        zk.close()
        members.stop()


def many_partitions(zk_connect: str, workdir: Path, n: int, session_ms: int) -> None:
    chroot = f"{zk_connect}/bench-{uuid.uuid4().hex[:8]}"
    zk = KafkaZkClient(chroot, session_timeout_ms=20000)
    zk.start()
    zk.create_top_level_paths()
    guard = zk.register_controller_and_increment_epoch(99)
    tps = [("raw", p) for p in range(n)]
    t0 = time.perf_counter()
    zk.create_partition_states({tp: LeaderAndIsr(1, 0, (1, 2, 3), guard.epoch) for tp in tps}, guard)
    t1 = time.perf_counter()
    got = zk.get_partition_states(tps)
    t2 = time.perf_counter()
    zk.update_partition_states(
        {tp: LeaderAndIsr(2, 1, (2, 3), guard.epoch, s.zk_version) for tp, s in got.items() if s}, guard
    )
    t3 = time.perf_counter()
    print(f"  {n} states: create {t1 - t0:.2f}s, read {t2 - t1:.2f}s, compare-and-set {t3 - t2:.2f}s")
    zk.resign_controller(99)
    zk.close()

    chroot = f"{zk_connect}/bench-{uuid.uuid4().hex[:8]}"
    members = Members(chroot, workdir, session_ms)
    zk = KafkaZkClient(chroot, session_timeout_ms=20000)
    zk.start()
    try:
        for b in (1, 2, 3):
            members.start(b)
        wait(lambda: zk.get_broker_ids() == [1, 2, 3] and zk.get_controller_id())
        placed = {p: (1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3) for p in range(n)}
        t0 = time.monotonic()
        zk.create_topic(TopicAssignment("big", placed, uuid.uuid4()))
        wait(lambda: zk.get_partition_states([("big", n - 1)])[("big", n - 1)], timeout=600)
        print(
            f"  {n}-partition RF 3 topic on 3 members: last state written {time.monotonic() - t0:.2f}s after creation"
        )
    finally:
        zk.close()
        members.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--session-timeout-ms", type=int, default=3000)
    parser.add_argument("--partitions", type=int, default=0, help="also time a topic of this many partitions")
    args = parser.parse_args()
    reason = missing_reason()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp, ZooKeeperServer(Path(tmp) / "zk") as zks:
        work = Path(tmp)
        results = [one_run(zks.connect, work, args.session_timeout_ms) for _ in range(args.runs)]
        s = args.session_timeout_ms / 1000
        for name, values in (
            ("controller failover", [r[0] for r in results]),
            ("leader failover", [r[1] for r in results]),
        ):
            print(
                f"{name} after kill -9 (session {s:.0f}s, target <= {s + 2:.0f}s): median {statistics.median(values):.2f}s "
                f"min {min(values):.2f}s max {max(values):.2f}s over {len(values)} runs"
            )
        if args.partitions:
            many_partitions(zks.connect, work, args.partitions, args.session_timeout_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())
