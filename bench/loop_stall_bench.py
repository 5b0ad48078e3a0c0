"""Does storage work stall the broker? A probe's latency and the event loop's longest stall, idle and loaded
(issue 25's acceptance; docs/storage.md, "Storage off the event loop").

One broker process. A probe producer/consumer pair (confluent-kafka, acks=all, linger 0) sends one record
every 5 ms carrying its send time and measures the round trip to its consumer: first idle (the baseline,
same broker, same run), then while in the same broker
- a compacted topic of `--mb` MB (1 MiB segments, 100-record batches over 5,000 keys: most records
  superseded) is cleaned: written beforehand with the broker stopped, its first cleaner pass scheduled
  (log.cleaner.backoff.ms) to start right after the idle phase;
- a topic of `--delete-partitions` partitions (one record each) is deleted;
- `--flush-producers` producers write to a `flush.messages=1` topic (acks=all, an fsync before each answer).
The loaded phase lasts until the cleaner's staging directory is gone (the pass ended) and at least
`--min-load-seconds`. The loop's longest stall is the broker's watchdog metric kaflite_eventloop_lag_max_ms
(read from /metrics every second; the bench shortens the watchdog's windows to 2 s, see `_SERVE`, so each
phase's maximum is its own; the first 5 s after start are a warm-up counted in neither phase).
Targets (issue 25): longest stall <= 50 ms, probe p99 loaded <= 3x idle.

    .venv/bin/python bench/loop_stall_bench.py                    # 200 MB, 200 partitions deleted
    .venv/bin/python bench/loop_stall_bench.py --gib 1            # the issue's 1 GiB
    .venv/bin/python bench/loop_stall_bench.py --mb 32 --idle-seconds 6   # a quick run
(The follower truncating 1,000 partitions of the issue needs a cluster: bench/follower_truncation_bench.py.)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kaflite.protocol.record_batch import build_record_batch
from kaflite.storage import LogConfig, LogManager

sys.path.insert(0, str(Path(__file__).resolve().parent))
from broker_bench import free_port, stop_process, wait_port  # noqa: E402

BIG, DOOMED, FLUSHY, PROBE = "stall-compacted", "stall-doomed", "stall-flush", "stall-probe"


# the broker as `python -m kaflite.server`, with the watchdog's windows shortened to 2 s (60 s in the product)
# so that a reading of kaflite_eventloop_lag_max_ms covers the last 2-4 s: sampled every second, the phases'
# maxima are told apart, and the startup's loading is not counted in the idle figure
_SERVE = (
    "import sys; from kaflite.server import loop_watchdog as w; d = list(w.LoopWatchdog.__init__.__defaults__); "
    "d[2] = 2.0; w.LoopWatchdog.__init__.__defaults__ = tuple(d); from kaflite.server.__main__ import main; "
    "sys.exit(main(sys.argv[1:]))"
)


# --cleaner-no-yield: the cleaner's interpreter-lock yields (storage/cleaner.py rule 10) off, to compare
_NO_YIELD = (
    "from kaflite.storage import cleaner as c; c.CleanerThrottle.__init__.__kwdefaults__['yield_s'] = 0; "
)


def start_broker(
    data_dir: Path, port: int, metrics_port: int, extra: dict[str, str], no_yield: bool = False
) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable,
        "-c",
        (_NO_YIELD if no_yield else "") + _SERVE,
        "--override",
        f"listeners=PLAINTEXT://127.0.0.1:{port}",
        "--override",
        f"log.dirs={data_dir / 'data'}",
        "--override",
        f"metrics.listener=http://127.0.0.1:{metrics_port}",
    ]
    for k, v in extra.items():
        cmd += ["--override", f"{k}={v}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(data_dir / "broker.log", "ab"))
    wait_port(port)
    return proc


def metric(metrics_port: int, name: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    m = re.search(rf"^{name} ([0-9.e+-]+)$", text, re.M)
    return float(m.group(1)) if m else float("nan")


def prepare(tmp: Path, bootstrap_port: int, metrics_port: int, mb: int, delete_partitions: int) -> None:
    """Topics created through a first broker; the compacted log written directly (fast), broker stopped."""
    proc = start_broker(tmp, bootstrap_port, metrics_port, {})
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{bootstrap_port}"})
        futures = admin.create_topics(
            [
                NewTopic(
                    BIG,
                    1,
                    1,
                    config={
                        "cleanup.policy": "compact",
                        "segment.bytes": str(1 << 20),
                        "min.compaction.lag.ms": "0",
                    },
                ),
                NewTopic(DOOMED, delete_partitions, 1),
                NewTopic(FLUSHY, 2, 1, config={"flush.messages": "1"}),
                NewTopic(PROBE, 1, 1),
            ]
        )
        for f in futures.values():
            f.result(60)
        p = Producer({"bootstrap.servers": f"127.0.0.1:{bootstrap_port}", "linger.ms": 5})
        for i in range(delete_partitions):
            p.produce(DOOMED, b"x" * 100, partition=i)
        p.flush(60)
    finally:
        stop_process(proc, grace=60)
    manager = LogManager([tmp / "data"])
    manager.load()
    log = manager.get_or_create(
        BIG, 0, LogConfig(segment_bytes=1 << 20, cleanup_policy="compact", min_compaction_lag_ms=0)
    )
    value = b"v" * 60
    batches = [
        build_record_batch([(b"key-%d" % ((j * 100 + i) % 5000), value, []) for i in range(100)])
        for j in range(50)
    ]
    n = 0
    while log.size < mb << 20:
        log.append(batches[n % len(batches)])
        n += 1
    log.update_high_watermark(log.log_end_offset)
    manager.close()


class LagSampler:
    """kaflite_eventloop_lag_max_ms read every second; the max of the readings of each phase."""

    def __init__(self, metrics_port: int) -> None:
        self.metrics_port = metrics_port
        self.phase = "warmup"
        self.by_phase: dict[str, list[float]] = {"warmup": [], "idle": [], "loaded": []}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                self.by_phase[self.phase].append(metric(self.metrics_port, "kaflite_eventloop_lag_max_ms"))
            except OSError:
                pass

    def max(self, phase: str) -> float:
        return max(self.by_phase[phase], default=float("nan"))


class Probe:
    """One record every 5 ms (its send time inside), consumed by an assigned consumer: round trips in ms."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.latencies: list[float] = []
        self.phase = "warmup"
        self.by_phase: dict[str, list[float]] = {"warmup": [], "idle": [], "loaded": []}
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._produce), threading.Thread(target=self._consume)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()

    def _produce(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 0})
        next_at = time.perf_counter()
        while not self._stop.is_set():
            p.produce(PROBE, struct.pack(">d", time.perf_counter()), partition=0)
            p.poll(0)
            next_at += 0.005
            time.sleep(max(0.0, next_at - time.perf_counter()))
        p.flush(10)

    def _consume(self) -> None:
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "stall-probe",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 100,
                "fetch.min.bytes": 1,
            }
        )
        c.assign([TopicPartition(PROBE, 0, -1)])  # the end: only this run's records
        while not self._stop.is_set():
            m = c.poll(0.1)
            if m is None or m.error() is not None:
                continue
            self.by_phase[self.phase].append((time.perf_counter() - struct.unpack(">d", m.value())[0]) * 1000)
        c.close()


def flush_producer(bootstrap: str, stop: threading.Event, sent: list[int], rate: float) -> None:
    """`rate` records/s of 200 B to the flush.messages=1 topic (acks=all: each answer after its fsync)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1})
    n = 0
    next_at = time.perf_counter()
    while not stop.is_set():
        try:
            p.produce(FLUSHY, b"f" * 200)
            n += 1
        except BufferError:
            p.poll(0.01)
        p.poll(0)
        next_at += 1 / rate
        time.sleep(max(0.0, next_at - time.perf_counter()))
    p.flush(30)
    sent.append(n)


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=200, help="size of the compacted topic (MB)")
    ap.add_argument(
        "--gib", type=float, default=None, help="size of the compacted topic in GiB (overrides --mb)"
    )
    ap.add_argument("--delete-partitions", type=int, default=200)
    ap.add_argument("--flush-producers", type=int, default=2)
    ap.add_argument(
        "--flush-rate", type=float, default=1000, help="records/s of each flush.messages=1 producer"
    )
    ap.add_argument(
        "--loads",
        default="compact,delete,flush",
        help="which loads run in the loaded phase (to attribute a stall): compact, delete, flush",
    )
    ap.add_argument(
        "--cleaner-no-yield",
        action="store_true",
        help="the cleaner does not yield the interpreter lock (the code before, to compare)",
    )
    ap.add_argument(
        "--broker-log",
        type=Path,
        default=None,
        help="copy the broker's log there at the end (the watchdog's stall stacks)",
    )
    ap.add_argument("--idle-seconds", type=float, default=10)
    ap.add_argument("--min-load-seconds", type=float, default=5)
    ap.add_argument("--max-load-seconds", type=float, default=300)
    args = ap.parse_args()
    mb = int(args.gib * 1024) if args.gib else args.mb
    with tempfile.TemporaryDirectory(prefix="loop-stall-") as d:
        tmp = Path(d)
        port, metrics_port = free_port(), free_port()
        t0 = time.monotonic()
        prepare(tmp, port, metrics_port, mb, args.delete_partitions)
        print(
            f"prepared {mb} MB compacted + {args.delete_partitions} partitions in {time.monotonic() - t0:.1f} s",
            flush=True,
        )
        # the first cleaner pass starts once the idle phase is over (startup + warm-up + idle + margin)
        backoff_ms = int((args.idle_seconds + 8) * 1000) if "compact" in args.loads else 3_600_000
        proc = start_broker(
            tmp,
            port,
            metrics_port,
            {"log.cleaner.backoff.ms": str(backoff_ms)},
            no_yield=args.cleaner_no_yield,
        )
        started = time.monotonic()
        bootstrap = f"127.0.0.1:{port}"
        probe = Probe(bootstrap)
        lags = LagSampler(metrics_port)
        try:
            probe.start()
            lags.start()
            time.sleep(5)  # warm-up: clients connect, the startup's lag leaves the watchdog's windows
            probe.phase = lags.phase = "idle"
            time.sleep(args.idle_seconds)
            stalls_before = metric(metrics_port, "kaflite_eventloop_stalls_total")
            probe.phase = lags.phase = "loaded"
            loaded_at = time.monotonic()
            stop = threading.Event()
            sent: list[int] = []
            loads = set(args.loads.split(","))
            producers = [
                threading.Thread(target=flush_producer, args=(bootstrap, stop, sent, args.flush_rate))
                for _ in range(args.flush_producers if "flush" in loads else 0)
            ]
            for t in producers:
                t.start()
            admin = AdminClient({"bootstrap.servers": bootstrap})
            if "delete" in loads:
                admin.delete_topics([DOOMED])[DOOMED].result(60)
            big_dir = tmp / "data" / f"{BIG}-0"
            seen_cleaning = False
            cleaned_at = None
            if "compact" not in loads:
                seen_cleaning, cleaned_at = True, loaded_at
            while time.monotonic() - loaded_at < args.max_load_seconds:
                cleaning = any(p.name.startswith(".cleaning") for p in big_dir.iterdir())
                seen_cleaning = seen_cleaning or cleaning
                if seen_cleaning and not cleaning and cleaned_at is None:
                    cleaned_at = time.monotonic()
                if cleaned_at is not None and time.monotonic() - loaded_at >= args.min_load_seconds:
                    break
                time.sleep(0.05)
            load_s = time.monotonic() - loaded_at
            stop.set()
            for t in producers:
                t.join()
            time.sleep(1.5)  # one more reading covering the end
            stalls = metric(metrics_port, "kaflite_eventloop_stalls_total") - stalls_before
        finally:
            probe.stop()
            lags.stop()
            stop_process(proc, grace=60)
        segments_left = len(list((tmp / "data" / f"{BIG}-0").glob("*.log")))
        if args.broker_log is not None:
            shutil.copyfile(tmp / "broker.log", args.broker_log)
    idle, loaded = probe.by_phase["idle"], probe.by_phase["loaded"]
    idle_lag, loaded_lag = lags.max("idle"), lags.max("loaded")
    print(
        f"\ncleaner yields {'OFF' if args.cleaner_no_yield else 'on'}; load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"loads: {args.loads}; compacted {mb} MB ({'pass ended' if cleaned_at else 'pass NOT seen ending'}, "
        f"{segments_left} segments left), deleted {args.delete_partitions} partitions, {args.flush_producers} "
        f"flush.messages=1 producers ({sum(sent)} records); loaded phase {load_s:.1f} s, "
        f"run {time.monotonic() - started:.1f} s"
    )
    print(f"{'phase':8} {'probe n':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'loop lag max ms':>16}")
    print("-" * 60)
    for name, xs, lag in (("idle", idle, idle_lag), ("loaded", loaded, loaded_lag)):
        print(
            f"{name:8} {len(xs):8d} {pct(xs, 0.5):8.2f} {pct(xs, 0.99):8.2f} {max(xs, default=float('nan')):8.2f} "
            f"{lag:16.1f}"
        )
    ratio = pct(loaded, 0.99) / pct(idle, 0.99)
    print(f"loop stalls > 100 ms while loaded: {stalls:.0f}")
    print(
        f"targets: longest stall {loaded_lag:.1f} ms <= 50 ms: {'met' if loaded_lag <= 50 else 'NOT met'}; "
        f"probe p99 loaded/idle {ratio:.2f}x <= 3x: {'met' if ratio <= 3 else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
