"""RF 3 acks=all against RF 1, with the CPU each process spent (issue 28).

    PYTHONPATH=src .venv/bin/python bench/rf3_bench.py [--rounds 3] [--records 100000] [--one-leader]
                                                        [--src <another checkout>/src]

ZooKeeper and three `python -m kaflite.server --dev` brokers on loopback (bench/_cluster_common.py's Cluster),
one idempotent confluent-kafka producer (acks=all, linger.ms=5, batch.size 1 MB, as bench/cluster_bench.py's
throughput phase) writing `--records` x 1,000 B round robin to 3 partitions: RF 1, then RF 3
(min.insync.replicas=2), `--rounds` times alternated, each on a fresh topic. Per run: MB/s, the wall time,
and each broker's utime + stime (from /proc) and the producer process's own CPU over that run, as ms of CPU
per MB and as a share of wall x cores (2 here): a sum near 1.0 means the run was CPU-bound.

`--one-leader` places all 3 partitions on broker 1 (replicas [1, 2, 3]): broker 1 is then the leader of
everything and brokers 2 and 3 are pure followers, so leader and follower CPU per MB are apart.
`--src` runs the brokers from another tree's src (before / after comparisons on the same machine state).
`--producer KEY=VALUE` (repeatable) changes the producer's settings, e.g. `enable.idempotence=false`.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from _cluster_common import Cluster, produce_acks_all, wait  # noqa: E402
from _timing import proc_cpu, proc_cpu_seconds  # noqa: E402

from kaflite.cluster.zkserver import ZooKeeperServer, missing_reason  # noqa: E402

CORES = os.cpu_count() or 1


def run_delay_s(pid: int) -> float:
    """Time the threads of `pid` alive now spent runnable but waiting for a core (schedstat), in seconds."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[1])
        except OSError:
            pass
    return total / 1e9


def self_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--one-leader", action="store_true")
    ap.add_argument("--src", default=str(ROOT / "src"))
    ap.add_argument("--profile", help="directory: py-spy raw profiles of each broker during the RF 3 runs")
    ap.add_argument("--logs", help="directory: the brokers' logs are copied there at the end")
    ap.add_argument("--override", action="append", default=[], help="broker override key=value")
    ap.add_argument(
        "--producer",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="producer setting (librdkafka name) replacing the bench's, e.g. enable.idempotence=false",
    )
    args = ap.parse_args()
    try:
        args.producer_config = dict(kv.split("=", 1) for kv in args.producer)
    except ValueError:
        ap.error(f"--producer takes KEY=VALUE, got {args.producer}")
    reason = missing_reason()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    os.environ["PYTHONPATH"] = str(Path(args.src).resolve()) + os.pathsep + str(ROOT / "tests")
    mb = args.records * args.size / 1e6
    print(f"brokers from {args.src}; load average {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory() as tmp, ZooKeeperServer(Path(tmp) / "zk") as zks:
        try:
            with Cluster(zks.connect, Path(tmp), tuple(args.override), name="rf3") as c:
                ratios = run_rounds(c, args, mb)
            print(
                f"RF 3 / RF 1: {' '.join(f'{r:.2f}' for r in ratios)}; load average {os.getloadavg()[0]:.2f}"
            )
        finally:
            if args.logs:
                for b in (1, 2, 3):
                    shutil.copy(Path(tmp) / f"broker-{b}.log", Path(args.logs) / f"broker-{b}.log")
    return 0


def run_rounds(c: Cluster, args: argparse.Namespace, mb: float) -> list[float]:
    """RF 1 then RF 3, `args.rounds` times, each on a fresh topic; RF 3 / RF 1 of each round."""
    brokers = c.brokers
    ratios = []
    for rnd in range(args.rounds):
        got = {}
        for rf in (1, 3):
            topic = f"rf{rf}-{rnd}"
            cfg = {"min.insync.replicas": "2"} if rf == 3 else {}
            assignment = [[1, 2, 3][:rf]] * 3 if args.one_leader else None
            c.create(topic, 3, rf, assignment=assignment, configs=cfg)

            def in_sync(topic: str = topic, rf: int = rf) -> bool:
                s = c.states(topic, 3)
                return len(s) == 3 and all(x.leader > 0 and len(x.isr) == rf for x in s.values())

            wait(in_sync, what=f"{topic}: every replica in the ISR")
            time.sleep(0.5)
            load = os.getloadavg()[0]
            c0 = {b: proc_cpu_seconds(brokers.procs[b].pid) for b in (1, 2, 3)}
            sys0 = {b: proc_cpu(brokers.procs[b].pid)[1] for b in (1, 2, 3)}
            d0 = sum(run_delay_s(brokers.procs[b].pid) for b in (1, 2, 3)) + run_delay_s(os.getpid())
            spies = []
            if args.profile and rf == 3:
                for b in (1, 2, 3):
                    out = Path(args.profile) / f"{topic}-broker{b}.txt"
                    spies.append(
                        subprocess.Popen(
                            [
                                str(Path(sys.executable).parent / "py-spy"),
                                "record",
                                "--nonblocking",
                                "-r",
                                "50",
                                "-f",
                                "raw",
                                "-o",
                                str(out),
                                "-p",
                                str(brokers.procs[b].pid),
                            ],
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                        )
                    )
                time.sleep(1)
            s0 = self_cpu_s()
            took = produce_acks_all(
                c.bootstrap, topic, args.records, args.size, warm_up=True, config=args.producer_config
            )
            c1 = {b: proc_cpu_seconds(brokers.procs[b].pid) for b in (1, 2, 3)}
            sys1 = {b: proc_cpu(brokers.procs[b].pid)[1] for b in (1, 2, 3)}
            d1 = sum(run_delay_s(brokers.procs[b].pid) for b in (1, 2, 3)) + run_delay_s(os.getpid())
            for spy in spies:
                spy.send_signal(signal.SIGINT)
            for spy in spies:
                spy.wait(30)
            s1 = self_cpu_s()
            per = {b: c1[b] - c0[b] for b in (1, 2, 3)}
            prod = s1 - s0
            rate = mb / took
            got[rf] = rate
            share = (sum(per.values()) + prod) / (took * CORES)
            print(
                f"round {rnd} RF {rf}: {rate:6.1f} MB/s  wall {took:5.2f} s  load {load:4.2f}  "
                f"CPU ms/MB: brokers "
                + " ".join(
                    f"{b}:{per[b] * 1000 / mb:5.1f} (sys {(sys1[b] - sys0[b]) * 1000 / mb:4.1f})"
                    for b in (1, 2, 3)
                )
                + f" sum {sum(per.values()) * 1000 / mb:5.1f}  producer {prod * 1000 / mb:5.1f}  "
                f"cores busy {share * CORES:4.2f} of {CORES}  waiting for a core {(d1 - d0) / took:4.2f}",
                flush=True,
            )
        ratios.append(got[3] / got[1])
        print(f"round {rnd}: RF 3 / RF 1 = {ratios[-1]:.2f}x", flush=True)
    return ratios


if __name__ == "__main__":
    sys.exit(main())
