"""Does a follower that truncates many partitions stall its broker? A probe's latency and the follower's
event-loop lag, idle and while it truncates `--partitions` partitions (issue 25's acceptance, "a follower
truncates 1,000 partitions"; docs/storage.md, "Storage work and the event loop").

A real ZooKeeper and four brokers (`python -m kaflite.server`, default profile: fsyncs as in production);
broker 3 is started first so it is the controller, and hosts no replica of the measured topic; broker 1 is
the one measured. The topic has `--partitions` partitions, replicas [2, 4, 1], all in the ISR from the
creation: broker 2 leads, and takes `--records` records per partition (acks=1, then waited for until every
replica has them all). The probe topic has one partition on broker 1 alone. The probe (loop_stall_bench's: a
record every 5 ms, acks=all, round trip to its consumer) and a ping (ApiVersions every 10 ms: the event
loop's lag as a client sees it; see `Pinger`) are measured in three phases of one run, and broker 1's
watchdog's stalls over 100 ms are counted in the last (its log lines):
- idle: the baseline, `--idle-seconds`;
- follow: broker 4 is frozen (SIGSTOP; its ZooKeeper session and its place in the ISRs outlive the freeze:
  zookeeper.session.timeout.ms and replica.lag.time.max.ms are 60 s here); broker 2 takes `--diverge-records`
  more records per partition (acks=1), which broker 1 copies and broker 4 does not; broker 2 is stopped
  (SIGTERM: a controlled shutdown), the controller names broker 4, the next replica in the ISRs, leader of
  every partition at epoch 1, and broker 1 follows it and asks it where epoch 0 ended (OffsetForLeaderEpoch,
  unanswered while broker 4 is frozen); then 2.5 s without change;
- truncate: broker 4 is thawed (SIGCONT), answers at its log end, and broker 1 truncates every partition
  (its `truncating from` log lines counted) and fetches from broker 4; until all are truncated and at least
  `--min-load-seconds`.
Targets (issue 25) for the truncate phase: longest stall (the longest ping) <= 50 ms, probe p99 <= 3x idle.

    .venv/bin/python bench/follower_truncation_bench.py                     # 1,000 partitions
    .venv/bin/python bench/follower_truncation_bench.py --partitions 200 --idle-seconds 5   # a quick run
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker_bench import free_port  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from loop_stall_bench import PROBE, Probe, pct, start_broker  # noqa: E402

from kaflite.cluster.admin import ZkAdmin  # noqa: E402
from kaflite.cluster.zk import KafkaZkClient  # noqa: E402
from kaflite.cluster.zkserver import ZooKeeperServer, missing_reason  # noqa: E402

TOPIC = "trunc"
PHASES = ("warmup", "idle", "follow", "truncate")
BROKERS = (1, 2, 3, 4)


class Pinger:
    """ApiVersions v0 to broker 1 every 10 ms on one connection, its round trip recorded per phase: the
    broker answers it on its event loop with no other work, so its lateness is the loop's, as a client sees
    it. (Not the watchdog's lag metrics: a /metrics scrape renders every partition's series on the loop,
    100-300 ms at 1,000 partitions on a loaded machine, and scraping every second made the stalls it was
    meant to measure.)"""

    def __init__(self, port: int) -> None:
        self.port = port
        self.phase = "warmup"
        self.by_phase: dict[str, list[float]] = {ph: [] for ph in PHASES}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with socket.create_connection(("127.0.0.1", self.port), 10) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            corr = 0
            next_at = time.perf_counter()
            while not self._stop.is_set():
                corr += 1
                body = struct.pack(">hhih", 18, 0, corr, 4) + b"ping"
                t0 = time.perf_counter()
                sock.sendall(struct.pack(">i", len(body)) + body)
                size = struct.unpack(">i", _recv(sock, 4))[0]
                _recv(sock, size)
                self.by_phase[self.phase].append((time.perf_counter() - t0) * 1000)
                next_at += 0.01
                time.sleep(max(0.0, next_at - time.perf_counter()))


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return buf


def wait(what: str, fn: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if fn():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=1000, help="partitions the follower truncates")
    ap.add_argument("--records", type=int, default=10, help="records per partition written by both replicas")
    ap.add_argument("--diverge-records", type=int, default=5,
                    help="records per partition only broker 1 has (acks=1 while broker 2 is frozen)")
    ap.add_argument("--idle-seconds", type=float, default=8)
    ap.add_argument("--min-load-seconds", type=float, default=6)
    ap.add_argument("--max-load-seconds", type=float, default=60)
    ap.add_argument("--logs", type=Path, default=None,
                    help="copy the brokers' logs into this directory at the end (the watchdog's stall stacks)")
    args = ap.parse_args()
    reason = missing_reason()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    n = args.partitions
    load_start = Path("/proc/loadavg").read_text().split()[:3]
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="trunc-bench-") as d, ZooKeeperServer(Path(d) / "zk") as zks:
        tmp = Path(d)
        zk = KafkaZkClient(zks.connect, session_timeout_ms=30000)
        zk.start()
        ports = {b: free_port() for b in BROKERS}
        mports = {b: free_port() for b in BROKERS}
        procs: dict[int, subprocess.Popen[bytes]] = {}

        def start(b: int) -> None:
            (tmp / f"b{b}").mkdir(exist_ok=True)
            procs[b] = start_broker(tmp / f"b{b}", ports[b], mports[b], {
                "broker.id": str(b), "zookeeper.connect": zks.connect,
                "zookeeper.session.timeout.ms": "60000", "replica.lag.time.max.ms": "60000",
                "offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
                "auto.leader.rebalance.enable": "false"})

        def log_count(b: int, text: str) -> int:
            return (tmp / f"b{b}" / "broker.log").read_text(errors="replace").count(text)

        def topic_bytes(b: int) -> int:
            return sum(f.stat().st_size for f in (tmp / f"b{b}" / "data").glob(f"{TOPIC}-*/*.log"))

        probe: Probe | None = None
        pinger: Pinger | None = None
        try:
            start(3)
            wait("broker 3 the controller", lambda: zk.get_controller_id() == 3)
            for b in (1, 2, 4):
                start(b)
            wait("brokers 1-4 registered", lambda: zk.get_broker_ids() == list(BROKERS))
            # replicas [2, 4, 1], all alive at the creation: broker 2 leads with the ISR [2, 4, 1] from the start
            # (the setup changes no ISR by a leader: the controller reads one notification per partition, which
            # kept it busy for minutes at 1,000 partitions; a reassignment was as slow)
            admin_zk = ZkAdmin(zk)
            admin_zk.create_topic(TOPIC, -1, -1, {}, assignment=[[2, 4, 1]] * n)
            admin_zk.create_topic(PROBE, -1, -1, {}, assignment=[[1]])

            def states() -> dict[int, object]:
                got = zk.get_partition_states([(TOPIC, p) for p in range(n)])
                return {p: s for (_t, p), s in got.items() if s is not None}

            def all_led_by(b: int) -> bool:
                s = states()
                return len(s) == n and all(x.leader == b for x in s.values())  # type: ignore[attr-defined]

            wait("broker 2 leads every partition", lambda: all_led_by(2), 120)
            b2 = f"127.0.0.1:{ports[2]}"
            # the producer of the divergent records writes these too: it knows the topic's leader then (once
            # broker 4 is frozen, a new producer's metadata request could go to it and wait)
            p = Producer({"bootstrap.servers": b2, "acks": "1", "linger.ms": 20})
            for part in range(n):
                for i in range(args.records):
                    p.produce(TOPIC, b"r" * 100, key=b"k%d" % i, partition=part)
            assert p.flush(120) == 0
            # every replica has them all (byte for byte: the followers copy the leader's batches); not waited
            # for with acks=all, whose high watermark moved slowly at 1,000 partitions on a loaded machine
            wait("brokers 4 and 1 copied every record", lambda: topic_bytes(1) == topic_bytes(4) == topic_bytes(2),
                 300)
            print(f"cluster ready: {n} partitions x {args.records} records on brokers 2 (leader), 4 and 1, "
                  f"{time.monotonic() - t_start:.1f} s", flush=True)

            b1 = f"127.0.0.1:{ports[1]}"
            probe = Probe(b1)
            probe.by_phase = {ph: [] for ph in PHASES}
            pinger = Pinger(ports[1])
            probe.start()
            pinger.start()
            time.sleep(5)  # warm-up: the probe's clients connect, the start's lag leaves the windows
            probe.phase = pinger.phase = "idle"
            time.sleep(args.idle_seconds)
            probe.phase = pinger.phase = "follow"
            t_follow = time.monotonic()
            os.kill(procs[4].pid, signal.SIGSTOP)
            # a long-polling Fetch of broker 4's in flight is answered (empty) before the divergent appends:
            # else broker 4 would find those records in its socket once thawed, and copy them
            time.sleep(1.0)
            errors: list[object] = []
            for part in range(n):
                for _ in range(args.diverge_records):
                    p.produce(TOPIC, b"d" * 100, partition=part,
                              on_delivery=lambda err, _m: errors.append(err) if err else None)
            assert p.flush(60) == 0 and not errors, errors[:3]
            wait("broker 1 copied the divergent records", lambda: topic_bytes(1) == topic_bytes(2))
            diverged_at = time.monotonic()
            # a controlled shutdown of broker 2: the controller hands every partition to the next replica in
            # the ISR, broker 4 (alive for ZooKeeper while frozen)
            procs[2].send_signal(signal.SIGTERM)
            wait("broker 4 named leader of every partition", lambda: all_led_by(4))
            elected_at = time.monotonic()
            # broker 1 follows broker 4 everywhere, and broker 2 is gone, before broker 4 thaws: else broker 4's
            # fetcher, resuming first, could still copy the divergent records from broker 2
            wait("broker 1 following broker 4 everywhere", lambda: log_count(1, "following broker 4 (") >= n)
            followed_at = time.monotonic()
            procs[2].wait(60)
            gone_at = time.monotonic()
            # the pause keeps what becoming a follower cost out of the next phase (broker 1's
            # OffsetForLeaderEpoch waits meanwhile)
            time.sleep(2.5)
            # the watchdog's stalls over 100 ms counted from its log lines, not its metric: a /metrics scrape
            # would stall the loop itself (see Pinger)
            stalls_before = log_count(1, "event loop stalled")
            lines_before = log_count(1, "truncating from")
            probe.phase = pinger.phase = "truncate"
            thawed_at = time.monotonic()
            os.kill(procs[4].pid, signal.SIGCONT)
            truncated = 0
            truncated_at = None
            while time.monotonic() - thawed_at < args.max_load_seconds:
                if truncated_at is None:
                    truncated = log_count(1, "truncating from") - lines_before
                    if truncated >= n:
                        truncated_at = time.monotonic()
                if truncated_at is not None and time.monotonic() - thawed_at >= args.min_load_seconds:
                    break
                time.sleep(0.1)
            truncate_s = time.monotonic() - thawed_at
            probe.phase = pinger.phase = "warmup"  # what follows is no phase's
            stalls = log_count(1, "event loop stalled") - stalls_before
        finally:
            if probe is not None:
                probe.stop()
            if pinger is not None:
                pinger.stop()
            for proc in procs.values():  # killed: a controlled shutdown of 1,000 partitions each took a minute
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            zk.close()
            if args.logs is not None:
                args.logs.mkdir(parents=True, exist_ok=True)
                for b in procs:
                    shutil.copyfile(tmp / f"b{b}" / "broker.log", args.logs / f"broker-{b}.log")
    load_end = Path("/proc/loadavg").read_text().split()[:3]
    print(f"\nload average (/proc/loadavg) {' '.join(load_start)} at the start, {' '.join(load_end)} at the end; "
          f"run {time.monotonic() - t_start:.1f} s")
    print(f"follow: divergent appends {diverged_at - t_follow:.1f} s (1 s of it waiting), the election seen in "
          f"ZooKeeper {elected_at - diverged_at:.1f} s later, broker 1 following broker 4 in every partition "
          f"{followed_at - elected_at:.1f} s after that, broker 2 exited {gone_at - followed_at:.1f} s later; "
          f"truncate: {truncated} of {n} partitions truncated by broker 1 ('truncating from' lines), the last "
          f"{(truncated_at - thawed_at) if truncated_at else float('nan'):.1f} s after the thaw; phase {truncate_s:.1f} s")
    print(f"{'phase':9} {'probe n':>8} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7}   {'ping n':>7} {'p50 ms':>7} "
          f"{'p99 ms':>7} {'max ms':>7}")
    print("-" * 81)
    for name in ("idle", "follow", "truncate"):
        xs, ys = probe.by_phase[name], pinger.by_phase[name]
        print(f"{name:9} {len(xs):8d} {pct(xs, 0.5):7.2f} {pct(xs, 0.99):7.2f} {max(xs, default=float('nan')):7.2f}   "
              f"{len(ys):7d} {pct(ys, 0.5):7.2f} {pct(ys, 0.99):7.2f} {max(ys, default=float('nan')):7.2f}")
    print("(probe: a record every 5 ms produced to broker 1 (acks=all) and consumed from it, round trip; ping: "
          "ApiVersions to broker 1 every 10 ms, round trip: the event loop's lag as a client sees it)")
    probe_ratio = pct(probe.by_phase["truncate"], 0.99) / pct(probe.by_phase["idle"], 0.99)
    ping_ratio = pct(pinger.by_phase["truncate"], 0.99) / pct(pinger.by_phase["idle"], 0.99)
    longest = max(pinger.by_phase["truncate"], default=float("nan"))
    print(f"broker 1's watchdog: {stalls:.0f} loop stalls over 100 ms while truncating")
    print(f"targets while truncating: longest ping {longest:.1f} ms <= 50 ms: {'met' if longest <= 50 else 'NOT met'}; "
          f"probe p99 / idle {probe_ratio:.2f}x <= 3x: {'met' if probe_ratio <= 3 else 'NOT met'} "
          f"(ping p99 / idle {ping_ratio:.2f}x)")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
