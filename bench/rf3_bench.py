"""RF 3 acks=all against RF 1, with the CPU each process spent (issue 28).

    PYTHONPATH=src .venv/bin/python bench/rf3_bench.py [--rounds 3] [--records 100000] [--one-leader]
                                                        [--src <another checkout>/src]

ZooKeeper and three `python -m kaflite.server --dev` brokers on loopback (tests/cluster's BrokerProcesses),
one idempotent confluent-kafka producer (acks=all, linger.ms=5, batch.size 1 MB, as bench/cluster_bench.py's
throughput phase) writing `--records` x 1,000 B round robin to 3 partitions: RF 1, then RF 3
(min.insync.replicas=2), `--rounds` times alternated, each on a fresh topic. Per run: MB/s, the wall time,
and each broker's utime + stime (from /proc) and the producer process's own CPU over that run, as ms of CPU
per MB and as a share of wall x cores (2 here): a sum near 1.0 means the run was CPU-bound.

`--one-leader` places all 3 partitions on broker 1 (replicas [1, 2, 3]): broker 1 is then the leader of
everything and brokers 2 and 3 are pure followers, so leader and follower CPU per MB are apart.
`--src` runs the brokers from another tree's src (before / after comparisons on the same machine state).
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
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from confluent_kafka import KafkaError, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from cluster.conftest import BrokerProcesses  # noqa: E402
from kaflite.cluster.zk import KafkaZkClient  # noqa: E402
from kaflite.cluster.zkserver import ZooKeeperServer, missing_reason  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
CORES = os.cpu_count() or 1


def cpu_s(pid: int) -> float:
    """utime + stime of process `pid` (all its threads), in seconds."""
    return sum(cpu_us(pid))


def cpu_us(pid: int) -> tuple[float, float]:
    """(utime, stime) of process `pid` (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICK, int(fields[12]) / TICK


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


def wait(fn: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if fn():
            return
        time.sleep(0.05)
    raise TimeoutError("condition not met")


def produce(bootstrap: str, topic: str, records: int, size: int) -> float:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                  "batch.size": 1_000_000, "queue.buffering.max.kbytes": 65536, "message.timeout.ms": 300000})
    failed = [0]

    def cb(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failed[0] += 1

    value = b"v" * size
    # a warm-up record per partition: the producer id and the connections exist before the clock starts
    for i in range(3):
        p.produce(topic, value=value, partition=i, on_delivery=cb)
    p.flush(60)
    t0 = time.monotonic()
    for i in range(records):
        while True:
            try:
                p.produce(topic, value=value, partition=i % 3, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    left = p.flush(600)
    took = time.monotonic() - t0
    assert left == 0 and failed[0] == 0, (left, failed[0])
    return took


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
    args = ap.parse_args()
    reason = missing_reason()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    os.environ["PYTHONPATH"] = str(Path(args.src).resolve()) + os.pathsep + str(ROOT / "tests")
    mb = args.records * args.size / 1e6
    print(f"brokers from {args.src}; load average {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory() as tmp, ZooKeeperServer(Path(tmp) / "zk") as zks:
        chroot = f"{zks.connect}/rf3-{uuid.uuid4().hex[:8]}"
        brokers = BrokerProcesses(chroot, Path(tmp), session_timeout_ms=6000)
        zk = KafkaZkClient(chroot, session_timeout_ms=30000)
        zk.start()
        try:
            for b in (1, 2, 3):
                brokers.start(b, *args.override)
            wait(lambda: zk.get_broker_ids() == [1, 2, 3] and zk.get_controller_id())
            admin = AdminClient({"bootstrap.servers": brokers.bootstrap()})
            ratios = []
            for rnd in range(args.rounds):
                got = {}
                for rf in (1, 3):
                    topic = f"rf{rf}-{rnd}"
                    cfg = {"min.insync.replicas": "2"} if rf == 3 else {}
                    if args.one_leader:
                        nt = NewTopic(topic, 3, replica_assignment=[[1, 2, 3][:rf]] * 3, config=cfg)
                    else:
                        nt = NewTopic(topic, 3, rf, config=cfg)
                    for f in admin.create_topics([nt], request_timeout=60).values():
                        f.result(60)

                    def led(topic: str = topic, rf: int = rf) -> bool:
                        s = zk.get_partition_states([(topic, p) for p in range(3)])
                        return all(x is not None and x.leader > 0 and len(x.isr) == rf for x in s.values())

                    wait(led)
                    time.sleep(0.5)
                    load = os.getloadavg()[0]
                    c0 = {b: cpu_s(brokers.procs[b].pid) for b in (1, 2, 3)}
                    sys0 = {b: cpu_us(brokers.procs[b].pid)[1] for b in (1, 2, 3)}
                    d0 = sum(run_delay_s(brokers.procs[b].pid) for b in (1, 2, 3)) + run_delay_s(os.getpid())
                    spies = []
                    if args.profile and rf == 3:
                        for b in (1, 2, 3):
                            out = Path(args.profile) / f"{topic}-broker{b}.txt"
                            spies.append(subprocess.Popen(
                                [str(Path(sys.executable).parent / "py-spy"), "record", "--nonblocking", "-r", "50", "-f", "raw", "-o", str(out),
                                 "-p", str(brokers.procs[b].pid)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL))
                        time.sleep(1)
                    s0 = self_cpu_s()
                    took = produce(brokers.bootstrap(), topic, args.records, args.size)
                    c1 = {b: cpu_s(brokers.procs[b].pid) for b in (1, 2, 3)}
                    sys1 = {b: cpu_us(brokers.procs[b].pid)[1] for b in (1, 2, 3)}
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
                    print(f"round {rnd} RF {rf}: {rate:6.1f} MB/s  wall {took:5.2f} s  load {load:4.2f}  "
                          f"CPU ms/MB: brokers " + " ".join(
                              f"{b}:{per[b] * 1000 / mb:5.1f} (sys {(sys1[b] - sys0[b]) * 1000 / mb:4.1f})"
                              for b in (1, 2, 3))
                          + f" sum {sum(per.values()) * 1000 / mb:5.1f}  producer {prod * 1000 / mb:5.1f}  "
                          f"busy {share:4.2f} of {CORES} cores  waiting for a core {(d1 - d0) / took:4.2f}", flush=True)
                ratios.append(got[3] / got[1])
                print(f"round {rnd}: RF 3 / RF 1 = {ratios[-1]:.2f}x", flush=True)
            print(f"RF 3 / RF 1: {' '.join(f'{r:.2f}' for r in ratios)}; load average {os.getloadavg()[0]:.2f}")
        finally:
            zk.close()
            brokers.stop_all()
            if args.logs:
                for b in (1, 2, 3):
                    shutil.copy(Path(tmp) / f"broker-{b}.log", Path(args.logs) / f"broker-{b}.log")
    return 0


if __name__ == "__main__":
    sys.exit(main())
