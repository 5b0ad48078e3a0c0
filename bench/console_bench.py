"""Observability benchmark: the cost of Prometheus metrics on produce, and the console's page load times.

    .venv/bin/python bench/console_bench.py                      # both parts, defaults below
    .venv/bin/python bench/console_bench.py --records 300000 --rounds 3 --skip-console
    .venv/bin/python bench/console_bench.py --topics 1000 --groups 100 --skip-metrics

Part 1, metrics on vs off (in one run): two kaflite brokers as processes, one started with
`metrics.listener` and scraped once a second by a thread of this script (as Prometheus would, but more
often), one without. Both get the same produce load (confluent-kafka, acks=all, linger.ms=5, N records of
100 B over 6 partitions), in `--rounds` rounds (which broker goes first alternates); the table shows each round and the
median on/off ratio (target >= 0.95).

Part 2, console page load: one broker with `--topics` topics (2 partitions each, one record in each
partition) and `--groups` consumer groups (each with committed offsets on 10 topics), a `kaflite console`
process against it, and the wall time of GET for each page (whole response read), median and max of
`--loads` loads after one warm-up (target <= 300 ms).
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from broker_bench import (  # noqa: E402
    BrokerProc,
    cpu_seconds,
    create_topic,
    free_port,
    produce_phase,
    start_kaflite,
    wait_port,
)


def start_broker(data_dir: Path, extra: tuple[str, ...] = ()) -> BrokerProc:
    return start_kaflite(data_dir, extra=extra, grace=30)


class Scraper(threading.Thread):
    """GET /metrics every `interval` seconds until stopped; remembers the last body and scrape times."""

    def __init__(self, url: str, interval: float) -> None:
        super().__init__(daemon=True)
        self.url, self.interval = url, interval
        self.stop_event = threading.Event()
        self.times: list[float] = []
        self.last = b""

    def run(self) -> None:
        while not self.stop_event.is_set():
            t0 = time.perf_counter()
            with urllib.request.urlopen(self.url, timeout=10) as r:
                self.last = r.read()
            self.times.append(time.perf_counter() - t0)
            self.stop_event.wait(self.interval)


def metrics_part(args: argparse.Namespace, tmp: Path) -> None:
    mport = free_port()
    off = start_broker(tmp / "off")
    on = start_broker(tmp / "on", (f"metrics.listener=http://127.0.0.1:{mport}",))
    try:
        for b in (off, on):
            create_topic(b.bootstrap, "bench", 6)
        wait_port(mport)
        scraper = Scraper(f"http://127.0.0.1:{mport}/metrics", args.scrape_interval)
        scraper.start()
        rows: list[tuple[int, float, float, float, float]] = []
        for i in range(args.rounds):
            # alternate which broker goes first, so a drift of the shared machine's load hits both
            if i % 2 == 0:
                off_rate, off_cpu = produce_phase(off, "bench", args.records, 100)
                on_rate, on_cpu = produce_phase(on, "bench", args.records, 100)
            else:
                on_rate, on_cpu = produce_phase(on, "bench", args.records, 100)
                off_rate, off_cpu = produce_phase(off, "bench", args.records, 100)
            rows.append((i + 1, off_rate, on_rate, off_cpu, on_cpu))
        scraper.stop_event.set()
        scraper.join(15)
        with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=10) as r:
            final = r.read().decode()
        counted = [
            line
            for line in final.splitlines()
            if line.startswith('kafka_server_brokertopicmetrics_messagesin_total{topic="bench"}')
        ]
    finally:
        off.stop()
        on.stop()  # type: ignore[operator]
    print(
        f"\nproduce with metrics off vs on: {args.records:,} x 100 B, 6 partitions, acks=all, linger.ms=5; "
        f"the 'on' broker scraped every {args.scrape_interval:g} s"
    )
    print(
        f"{'round':>5} {'off msg/s':>12} {'on msg/s':>12} {'on/off':>7} {'off CPU s/M':>12} {'on CPU s/M':>11}"
    )
    for i, off_rate, on_rate, off_cpu, on_cpu in rows:
        print(
            f"{i:>5} {off_rate:>12,.0f} {on_rate:>12,.0f} {on_rate / off_rate:>7.3f} {off_cpu:>12.2f} {on_cpu:>11.2f}"
        )
    ratio = statistics.median(r[2] / r[1] for r in rows)
    cpu_ratio = statistics.median(r[4] / r[3] for r in rows)
    print(
        f"median on/off: {ratio:.3f} (target >= 0.95); broker CPU per record on/off: {cpu_ratio:.3f}; "
        f"{len(scraper.times)} scrapes, "
        f"median {statistics.median(scraper.times) * 1000:.1f} ms, max {max(scraper.times) * 1000:.1f} ms"
    )
    print(
        f"last scrape: {counted[0] if counted else '(no bench series)'} "
        f"(expected {args.records * args.rounds:,} records)"
    )


def populate(bootstrap: str, topics: int, groups: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [f"bench-t{i}" for i in range(topics)]
    for start in range(0, topics, 200):
        futures = admin.create_topics(
            [NewTopic(n, 2, 1) for n in names[start : start + 200]], operation_timeout=60
        )
        for f in futures.values():
            f.result(timeout=120)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for n in names:
        for p in (0, 1):
            producer.produce(n, b"v", partition=p)
    assert producer.flush(120) == 0
    for g in range(groups):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-g{g}", "enable.auto.commit": False})
        c.commit(
            offsets=[CTP(names[(g * 10 + k) % topics], p, 1) for k in range(10) for p in (0, 1)],
            asynchronous=False,
        )
        c.close()


def timed(url: str) -> float:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as r:
        r.read()
        assert r.status == 200, (url, r.status)
    return time.perf_counter() - t0


def console_part(args: argparse.Namespace, tmp: Path) -> None:
    broker = start_broker(tmp / "console")
    console: subprocess.Popen[bytes] | None = None
    try:
        t0 = time.perf_counter()
        populate(broker.bootstrap, args.topics, args.groups)
        setup = time.perf_counter() - t0
        port = free_port()
        console = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kaflite",
                "console",
                "-b",
                broker.bootstrap,
                "--port",
                str(port),
                "--sample-interval",
                "5",
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(tmp / "console.log", "wb"),
        )
        wait_port(port, 60)
        base = f"http://127.0.0.1:{port}"
        pages = [
            "/",
            "/topics",
            "/groups",
            "/groups/bench-g0",
            "/topics/bench-t0",
            "/topics/bench-t0/messages",
            "/lab?group=bench-g0",
        ]
        print(
            f"\nconsole page load: {args.topics:,} topics x 2 partitions, {args.groups} groups "
            f"(set up in {setup:.0f} s); {args.loads} loads per page after a warm-up"
        )
        print(f"{'page':<28} {'median ms':>10} {'max ms':>8}")
        cpu0 = cpu_seconds(console.pid)
        for page in pages:
            timed(base + page)
            times = [timed(base + page) * 1000 for _ in range(args.loads)]
            print(f"{page:<28} {statistics.median(times):>10.1f} {max(times):>8.1f}")
        print(f"console process CPU for all loads: {cpu_seconds(console.pid) - cpu0:.2f} s")
    finally:
        if console is not None:
            console.send_signal(signal.SIGINT)
            try:
                console.wait(30)
            except subprocess.TimeoutExpired:
                console.kill()
        stop: Callable[[], None] = broker.stop  # type: ignore[assignment]
        stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000, help="records per produce round")
    ap.add_argument("--rounds", type=int, default=5, help="off/on produce rounds (the order alternates)")
    ap.add_argument(
        "--scrape-interval", type=float, default=1.0, help="seconds between scrapes of the 'on' broker"
    )
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--loads", type=int, default=10, help="timed loads per page")
    ap.add_argument("--skip-metrics", action="store_true")
    ap.add_argument("--skip-console", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="console-bench-") as d:
        if not args.skip_metrics:
            metrics_part(args, Path(d))
        if not args.skip_console:
            console_part(args, Path(d))
    return 0


if __name__ == "__main__":
    sys.exit(main())
