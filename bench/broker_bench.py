"""kaflite broker benchmark, with Tansu (Rust, memory storage) measured in the same run as the baseline.

    .venv/bin/python bench/broker_bench.py                 # 1M x 100 B, 6 partitions, linger 5 ms
    .venv/bin/python bench/broker_bench.py --records 200000 --latency-seconds 5 --no-tansu
    .venv/bin/python bench/broker_bench.py --fresh-partitions 10000   # only the new-partition cost
    .venv/bin/python bench/broker_bench.py --records 500000 --idempotent-rounds 3 --no-tansu
                                           # only produce: plain and idempotent producers alternating
    .venv/bin/python bench/broker_bench.py --partitions 10000 --records 300000 --produce-only
                                           # only produce (plain), into a new topic of that many partitions
    ... --produce-only --profile docs/img/x.svg   # and py-spy's flame graph of the kaflite broker meanwhile

For each broker: produce throughput (confluent-kafka, acks=all, linger.ms=5), consume throughput (assign,
from the beginning), broker CPU-seconds per million records produced (utime+stime of the broker process
from /proc/<pid>/stat, sampled around the produce phase), and end-to-end latency p50/p99 at a fixed rate
(5,000 msg/s by default) with the clients' default settings. Prints one table and the kaflite/Tansu ratios.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# free_port, wait_port, stop_process and cpu_seconds: names other benches import from here
from _broker_process import BrokerProcess, free_port, peak_rss_mib, stop_process, wait_port  # noqa: F401
from _timing import proc_cpu_seconds as cpu_seconds
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[1]
# ../shared beside the main checkout; a worktree (/work/wt/<name>) finds it one level further up
TANSU = next(
    (
        p
        for base in (REPO.parent, REPO.parent.parent)
        if (p := base / "shared" / "peers" / "tansu.sh").exists()
    ),
    REPO.parent / "shared" / "peers" / "tansu.sh",
)
# producer settings every produce phase adds (--no-sticky)
PRODUCER_EXTRA: dict[str, object] = {}


@dataclass
class BrokerProc:
    name: str
    bootstrap: str
    pid: int
    stop: object


def start_kaflite(
    data_dir: Path,
    flush_each: bool = False,
    extra: tuple[str, ...] = (),
    flags: tuple[str, ...] = (),
    grace: float = 20.0,
) -> BrokerProc:
    """A `python -m kaflite.server` on a free loopback port with its data in `data_dir` (its output in
    data_dir/broker.log; bench/_broker_process.py): `extra` more key=value overrides, `flags` more arguments (--dev), `grace` the
    seconds its stop waits for a clean exit before SIGKILL."""
    overrides = {"log.flush.interval.messages": "1"} if flush_each else {}
    for item in extra:
        key, _, value = item.partition("=")
        overrides[key] = value
    data_dir.mkdir(parents=True, exist_ok=True)
    b = BrokerProcess(
        data_dir, overrides=overrides, args=flags, server_module=True, log_path=data_dir / "broker.log"
    ).start(wait=20)
    return BrokerProc("kaflite", b.bootstrap, b.pid, lambda: b.stop(grace, strict=False))


def start_tansu() -> BrokerProc:
    out = subprocess.run(
        [str(TANSU), "start"], capture_output=True, text=True, timeout=300, check=True
    ).stdout
    info = dict(kv.split("=", 1) for kv in out.split())
    pid = int(info["PID"])

    def stop() -> None:
        subprocess.run([str(TANSU), "stop", str(pid)], timeout=30)

    return BrokerProc("tansu", info["BOOTSTRAP"], pid, stop)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # 10,000 partitions took over 30 s to create on a machine at load 14
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=120)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10)
        if (
            topic in md.topics
            and len(md.topics[topic].partitions) == partitions
            and md.topics[topic].error is None
        ):
            return
        time.sleep(0.1)


def produce_phase(
    b: BrokerProc, topic: str, n: int, size: int, idempotent: bool = False, linger_ms: float = 5
) -> tuple[float, float]:
    conf = {
        "bootstrap.servers": b.bootstrap,
        "acks": "all",
        "linger.ms": linger_ms,
        "queue.buffering.max.messages": 1_000_000,
        **PRODUCER_EXTRA,
    }
    if idempotent:
        conf["enable.idempotence"] = True
    producer = Producer(conf)
    # connected (and an idempotent producer's id asked) before the clock
    producer.list_topics(topic, timeout=30)
    payload = b"x" * size
    errors = 0

    def cb(err, _msg) -> None:  # noqa: ANN001
        nonlocal errors
        if err is not None:
            errors += 1

    cpu0 = cpu_seconds(b.pid)
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                producer.produce(topic, payload, on_delivery=cb)
                break
            except BufferError:
                producer.poll(0.005)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - t0
    cpu = cpu_seconds(b.pid) - cpu0
    if remaining or errors:
        raise RuntimeError(f"{b.name}: {remaining} undelivered, {errors} failed")
    return n / elapsed, cpu * 1_000_000 / n


def consume_phase(b: BrokerProc, topic: str, partitions: int, n: int, **extra: object) -> float:
    consumer = Consumer(
        {"bootstrap.servers": b.bootstrap, "group.id": "bench", "enable.auto.commit": False} | extra
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = 0
    t0 = time.perf_counter()
    deadline = time.monotonic() + 300
    while got < n and time.monotonic() < deadline:
        for m in consumer.consume(10_000, 0.5):
            if m.error() is None:
                got += 1
    elapsed = time.perf_counter() - t0
    consumer.close()
    if got < n:
        raise RuntimeError(f"{b.name}: consumed {got} of {n}")
    return n / elapsed


def _latency_consumer(bootstrap: str, topic: str, total: int, seconds: float, ready, out) -> None:  # noqa: ANN001
    """Runs in its own process, so the producer's pacing loop never delays it (one GIL each)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-lat", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    consumer.poll(1.0)  # connected, first fetch parked
    ready.set()
    latencies: list[float] = []
    deadline = time.monotonic() + seconds + 30
    while len(latencies) < total and time.monotonic() < deadline:
        # poll() hands over each message as soon as it arrives (consume(n, t) would wait for n or t)
        m = consumer.poll(0.1)
        if m is not None and m.error() is None:
            now = time.perf_counter_ns()  # CLOCK_MONOTONIC: comparable across processes
            (sent,) = struct.unpack_from(">q", m.value())
            latencies.append((now - sent) / 1e6)
    consumer.close()
    out.put(latencies)


def latency_phase(b: BrokerProc, topic: str, rate: int, seconds: float) -> tuple[float, float, int]:
    """Default client settings; each value carries its send time (perf_counter_ns)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    total = int(rate * seconds)
    ready, out = ctx.Event(), ctx.Queue()
    child = ctx.Process(target=_latency_consumer, args=(b.bootstrap, topic, total, seconds, ready, out))
    child.start()
    if not ready.wait(60):
        child.kill()
        raise RuntimeError(f"{b.name}: latency consumer did not start")
    producer = Producer({"bootstrap.servers": b.bootstrap})
    interval = 1.0 / rate
    start = time.perf_counter()
    pad = b"x" * 92
    for i in range(total):
        target = start + i * interval
        delay = target - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        producer.produce(topic, struct.pack(">q", time.perf_counter_ns()) + pad)
        producer.poll(0)
    producer.flush(30)
    latencies = sorted(out.get(timeout=seconds + 60))
    child.join(10)
    if not latencies:
        raise RuntimeError(f"{b.name}: no latency samples")
    return (
        latencies[len(latencies) // 2],
        latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        len(latencies),
    )


def run_one(b: BrokerProc, args: argparse.Namespace) -> dict[str, float]:
    tag = f"{int(time.time())}"
    topic = f"bench-{tag}"
    create_topic(b.bootstrap, topic, args.partitions)
    produce_rate, cpu_per_m = produce_phase(b, topic, args.records, args.size, linger_ms=args.linger_ms)
    consume_rate = consume_phase(b, topic, args.partitions, args.records)
    # librdkafka pauses a partition's fetching for fetch.queue.backoff.ms (1 s) whenever its local queue
    # passes queued.min.messages; a consumer that drains fast sees the broker's own speed with 10 ms
    consume_fast = consume_phase(b, topic, args.partitions, args.records, **{"fetch.queue.backoff.ms": 10})
    lat_topic = f"lat-{tag}"
    create_topic(b.bootstrap, lat_topic, 1)
    p50, p99, samples = latency_phase(b, lat_topic, args.rate, args.latency_seconds)
    return {
        "produce msg/s": produce_rate,
        "produce MB/s": produce_rate * args.size / 1e6,
        "consume msg/s": consume_rate,
        "consume msg/s, fetch.queue.backoff.ms=10": consume_fast,
        "broker CPU s / 1M produced": cpu_per_m,
        "e2e p50 ms": p50,
        "e2e p99 ms": p99,
        "latency samples": samples,
        "broker peak RSS MiB": peak_rss_mib(b.pid),
    }


def idempotent_rounds_one(b: BrokerProc, args: argparse.Namespace) -> dict[str, float]:
    """The produce phase only, a plain and an idempotent producer alternating `--idempotent-rounds` times,
    each into a topic of its own (a machine's changing load hits both alike); medians of each."""
    rates: dict[bool, list[float]] = {False: [], True: []}
    cpus: dict[bool, list[float]] = {False: [], True: []}
    for r in range(args.idempotent_rounds):
        for idem in (False, True):
            topic = f"{'idem' if idem else 'plain'}-{r}-{int(time.time())}"
            create_topic(b.bootstrap, topic, args.partitions)
            rate, cpu = produce_phase(
                b, topic, args.records, args.size, idempotent=idem, linger_ms=args.linger_ms
            )
            rates[idem].append(rate)
            cpus[idem].append(cpu)
            print(
                f"{b.name} round {r + 1} {'idempotent' if idem else 'plain':<10} {rate:>12,.0f} msg/s "
                f"{cpu:6.3f} broker CPU s / 1M",
                flush=True,
            )
    plain, idem = statistics.median(rates[False]), statistics.median(rates[True])
    cpu_plain, cpu_idem = statistics.median(cpus[False]), statistics.median(cpus[True])
    return {
        "plain produce msg/s (median)": plain,
        "idempotent produce msg/s (median)": idem,
        "idempotent / plain throughput": idem / plain,
        "plain: broker CPU s / 1M (median)": cpu_plain,
        "idempotent: broker CPU s / 1M (median)": cpu_idem,
        "idempotent / plain broker CPU": cpu_idem / cpu_plain,
    }


def produce_only_one(b: BrokerProc, args: argparse.Namespace) -> dict[str, float]:
    """One plain produce phase into a new topic of `--partitions` partitions (the producer spreads the records
    over all of them: confluent-kafka's default partitioner on keyless records). With `--profile` (kaflite
    only) py-spy samples the broker for exactly that phase."""
    topic = f"produce-{int(time.time())}"
    create_topic(b.bootstrap, topic, args.partitions)
    spy = None
    if args.profile and b.name == "kaflite":
        spy = subprocess.Popen(
            [
                "py-spy",
                "record",
                "--pid",
                str(b.pid),
                "--rate",
                "200",
                "--nonblocking",
                "--output",
                args.profile,
                "--format",
                "flamegraph",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)  # attached before the clock starts
    try:
        rate, cpu = produce_phase(b, topic, args.records, args.size, linger_ms=args.linger_ms)
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            spy.wait(60)
    return {"produce msg/s": rate, "broker CPU s / 1M produced": cpu}


def fresh_partitions_one(b: BrokerProc, n: int) -> dict[str, float]:
    """The cost of new partitions: CreateTopics of one `n`-partition topic (until Metadata lists all of them),
    then one 100 B record produced into each partition (acks=all, linger.ms=5) until all are acknowledged.
    kaflite creates each partition's log (directory, segment file) when the topic is created."""
    topic = f"fresh-{int(time.time())}"
    cpu0 = cpu_seconds(b.pid)
    t0 = time.perf_counter()
    create_topic(b.bootstrap, topic, n)
    created = time.perf_counter() - t0
    cpu_create = cpu_seconds(b.pid) - cpu0
    producer = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 5})
    producer.list_topics(topic, timeout=30)  # metadata fetched before the clock starts
    errors = 0

    def cb(err, _msg) -> None:  # noqa: ANN001
        nonlocal errors
        if err is not None:
            errors += 1

    cpu0 = cpu_seconds(b.pid)
    t0 = time.perf_counter()
    for p in range(n):
        producer.produce(topic, b"x" * 100, partition=p, on_delivery=cb)
    remaining = producer.flush(120)
    produced = time.perf_counter() - t0
    cpu_produce = cpu_seconds(b.pid) - cpu0
    if remaining or errors:
        raise RuntimeError(f"{b.name}: {remaining} undelivered, {errors} failed")
    return {
        "create topic, s": created,
        "create: broker CPU us / partition": cpu_create * 1e6 / n,
        "first produce into each, s": produced,
        "produce: broker CPU us / partition": cpu_produce * 1e6 / n,
        "create + produce, us / partition": (created + produced) * 1e6 / n,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument(
        "--linger-ms", type=float, default=5, help="the produce phase's linger.ms (smaller batches below 5)"
    )
    ap.add_argument("--latency-seconds", type=float, default=10.0)
    ap.add_argument("--flush-each", action="store_true", help="kaflite with log.flush.interval.messages=1")
    ap.add_argument("--no-tansu", action="store_true")
    ap.add_argument(
        "--no-sticky",
        action="store_true",
        help="the produce phase with sticky.partitioning.linger.ms=0: keyless records go to a random "
        "partition each, not to one partition per 10 ms (librdkafka's default), so a request "
        "carries a batch for many partitions (the per-partition cost of --partitions 10000)",
    )
    ap.add_argument(
        "--fresh-partitions",
        type=int,
        default=0,
        metavar="N",
        help="only measure creating an N-partition topic and the first produce into each partition",
    )
    ap.add_argument(
        "--idempotent-rounds",
        type=int,
        default=0,
        metavar="N",
        help="only the produce phase: a plain and an idempotent (enable.idempotence) producer "
        "alternating N times each, and the medians",
    )
    ap.add_argument(
        "--produce-only",
        action="store_true",
        help="only one plain produce phase into a new topic of --partitions partitions",
    )
    ap.add_argument(
        "--profile",
        metavar="SVG",
        help="with --produce-only: py-spy's flame graph of the kaflite broker during the produce phase",
    )
    args = ap.parse_args()
    if args.no_sticky:
        PRODUCER_EXTRA["sticky.partitioning.linger.ms"] = 0
    run = (
        (lambda b, a: fresh_partitions_one(b, a.fresh_partitions))
        if args.fresh_partitions
        else produce_only_one
        if args.produce_only
        else idempotent_rounds_one
        if args.idempotent_rounds
        else run_one
    )

    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="kaflite-bench-") as tmp:
        print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} before kaflite", flush=True)
        k = start_kaflite(Path(tmp), args.flush_each)
        try:
            results["kaflite"] = run(k, args)
        finally:
            k.stop()  # type: ignore[operator]
    if not args.no_tansu:
        print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} before tansu", flush=True)
        t = start_tansu()
        try:
            results["tansu"] = run(t, args)
        finally:
            t.stop()  # type: ignore[operator]

    names = list(results)
    metrics = list(results[names[0]])
    if args.fresh_partitions:
        print(
            f"\none topic of {args.fresh_partitions:,} partitions created, then one 100 B record produced into "
            "each (acks=all, linger.ms=5)"
        )
    elif args.produce_only:
        print(
            f"\n{args.records:,} records x {args.size} B into one new topic of {args.partitions:,} partitions, "
            f"linger.ms={args.linger_ms:g}, acks=all{', sticky.partitioning.linger.ms=0' if args.no_sticky else ''}"
        )
    elif args.idempotent_rounds:
        print(
            f"\n{args.records:,} records x {args.size} B, {args.partitions} partitions, linger.ms={args.linger_ms:g}, "
            f"acks=all; plain and idempotent producers alternating, {args.idempotent_rounds} rounds each"
        )
    else:
        print(
            f"\n{args.records:,} records x {args.size} B, {args.partitions} partitions, linger.ms={args.linger_ms:g}, "
            "acks=all; "
            f"latency at {args.rate} msg/s for {args.latency_seconds:g} s (client defaults); kaflite "
            + (
                "fsyncs before every ack (log.flush.interval.messages=1)"
                if args.flush_each
                else "acks from the page cache"
            )
        )
    header = f"{'metric':<42}" + "".join(f"{n:>14}" for n in names)
    if "tansu" in results:
        header += f"{'kaflite/tansu':>15}"
    print(header)
    print("-" * len(header))
    for m in metrics:
        row = f"{m:<42}" + "".join(f"{results[n][m]:>14,.2f}" for n in names)
        if "tansu" in results and results["tansu"][m]:
            row += f"{results['kaflite'][m] / results['tansu'][m]:>15.2f}"
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
