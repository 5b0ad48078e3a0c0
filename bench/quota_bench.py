"""Issue 27's quota acceptance as a benchmark: a client over its produce (or fetch) quota is held to it
while a second, unthrottled client's p99 latency stays within 2x of its value without the first, measured
in the same run against the same broker process.

    .venv/bin/python bench/quota_bench.py                  # about 50 s: 4 s phases, a 2-sample window
    .venv/bin/python bench/quota_bench.py --seconds 15 --window-num 11   # Kafka's window: longer phases

One broker process (`python -m kaflite.server`, `quota.window.num` = `--window-num` samples of 1 s).
Client A runs flat out in a process of its own (so its Python loop never holds up B's callbacks); B is
confluent-kafka in this process:
- produce: B sends one 100 B record every 10 ms (acks=1) and records each one's send-to-ack latency; the
  phases are B alone (the baseline), B beside A under `producer_byte_rate` = `--quota`, and B beside A
  with the quota removed (what the quota protects B from);
- fetch: a producer sends one 100 B record every 10 ms and B's consumer records each one's send-to-receive
  latency; the phases are B alone, and B beside A's consumer reading a backlog under
  `consumer_byte_rate` = `--quota`.
A's rate is what it got acknowledged (or fetched) after the first `--warmup` seconds of its phase, divided
by the time: with Kafka's arithmetic a new client first takes (window_num - 1) windows' worth at once.
Targets (issue 27): A within 20 % of its quota; B's p99 within 2x of its baseline (floor 10 ms: below that
a p99 is the machine's scheduling noise).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from broker_bench import free_port, stop_process, wait_port  # noqa: E402

from kaflite.cli.quotas_cmd import alter  # noqa: E402

P99_FLOOR_S = 0.010


def _p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


# -- client A, in a process of its own ------------------------------------------------------------------------
def _a_produce(conf: dict[str, Any], topic: str, seconds: float, warmup: float, out: Any) -> None:
    # one request of at most 16 KB in flight, as tests/quota/test_clients.py: the allowance is not
    # overshot by megabytes of pipelined requests recorded before the first throttle reaches A
    p = Producer(
        {
            **conf,
            "client.id": "A",
            "acks": "1",
            "linger.ms": 5,
            "queue.buffering.max.kbytes": 2048,
            "batch.size": 16384,
            "max.in.flight.requests.per.connection": 1,
        }
    )
    value = b"a" * 1000
    acked = [0]
    start = time.monotonic()
    counting = start + warmup

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None and time.monotonic() >= counting:
            acked[0] += len(msg.value())

    end = start + seconds
    while time.monotonic() < end:
        try:
            p.produce(topic, value, on_delivery=on_delivery)
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    measured = time.monotonic() - counting
    p.purge()
    p.flush(1)
    out.put(acked[0] / measured)


def _a_consume(conf: dict[str, Any], topic: str, seconds: float, warmup: float, out: Any) -> None:
    c = Consumer(
        {
            **conf,
            "client.id": "A",
            "group.id": "quota-bench-a",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    start = time.monotonic()
    counting = start + warmup
    end = start + seconds
    exhausted = False
    while time.monotonic() < end:
        for m in c.consume(1000, 0.1):
            if m.error() is None and time.monotonic() >= counting:
                got += len(m.value())
            elif m.error() is not None and m.error().code() == -191:  # _PARTITION_EOF: backlog too small
                exhausted = True
    measured = time.monotonic() - counting
    c.close()
    out.put(-1.0 if exhausted else got / measured)


def _run_a(target: Any, *args: Any) -> tuple[Any, Any]:
    ctx = multiprocessing.get_context("spawn")  # librdkafka's threads do not survive a fork
    q = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, q))
    proc.start()
    return proc, q


# -- client B, here ----------------------------------------------------------------------------------------------
def _b_produce(conf: dict[str, Any], topic: str, seconds: float) -> list[float]:
    b = Producer({**conf, "client.id": "B", "acks": "1", "linger.ms": 0})
    b.produce(topic, b"warm-up")  # connection and metadata first: not a latency of the broker's
    b.flush(10)
    latencies: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sent = time.monotonic()
        b.produce(
            topic,
            b"b" * 100,
            on_delivery=lambda err, _m, s=sent: err is None and latencies.append(time.monotonic() - s),
        )
        b.poll(0.01)
    b.flush(10)
    return latencies


def _b_end_to_end(conf: dict[str, Any], topic: str, seconds: float) -> list[float]:
    """Send-to-receive latency of records sent every 10 ms (the send time in the value; one process, so
    one monotonic clock)."""
    c = Consumer(
        {
            **conf,
            "client.id": "B",
            "group.id": f"quota-bench-b-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    latencies: list[float] = []
    stop = threading.Event()
    ready = threading.Event()  # B received a record: joined, fetching; the measure starts after
    started = [float("inf")]

    def receive() -> None:
        while not stop.is_set():
            m = c.poll(0.05)  # one at a time: consume(n) would hold a record back until n or its timeout
            if m is not None and m.error() is None and len(m.value()) == 100:
                ready.set()
                sent = struct.unpack(">d", m.value()[:8])[0]
                if sent >= started[0]:
                    latencies.append(time.monotonic() - sent)

    t = threading.Thread(target=receive)
    t.start()
    p = Producer({**conf, "client.id": "B-producer", "acks": "1", "linger.ms": 0})
    deadline = time.monotonic() + 30
    while not ready.is_set() and time.monotonic() < deadline:
        p.produce(topic, struct.pack(">d", time.monotonic()) + b"w" * 92)
        p.poll(0.01)
    started[0] = time.monotonic()
    end = started[0] + seconds
    while time.monotonic() < end:
        p.produce(topic, struct.pack(">d", time.monotonic()) + b"b" * 92)
        p.poll(0.01)
    p.flush(10)
    time.sleep(0.5)  # the last records reach B
    stop.set()
    t.join()
    c.close()
    return latencies


def _fill(conf: dict[str, Any], topic: str, total: int) -> None:
    # 16 KB batches, as tests/quota/test_clients.py: a fetch answers at least one whole batch, so batches
    # near a window's quota make every fetch overshoot it
    p = Producer({**conf, "client.id": "filler", "acks": "1", "linger.ms": 5, "batch.size": 16384})
    value = b"f" * 1000
    for _ in range(total // len(value)):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)


def _beside_a(
    a_target: Any, conf: dict[str, Any], a_topic: str, args: argparse.Namespace, b: Any, b_topic: str
) -> dict[str, float]:
    """B's phase with A running flat out meanwhile (A starts 1.5 s before B and ends after it)."""
    a, q = _run_a(a_target, conf, a_topic, args.seconds + 3.5, args.warmup + 1.5)
    time.sleep(1.5)  # A connected and past its first burst before B measures
    out = _summary(b(conf, b_topic, args.seconds))
    out["a_rate"] = q.get(timeout=60)
    a.join(30)
    return out


def _summary(latencies: list[float]) -> dict[str, float]:
    return {
        "p50_ms": _p(latencies, 0.5) * 1000,
        "p99_ms": _p(latencies, 0.99) * 1000,
        "samples": len(latencies),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--seconds", type=float, default=4.0, help="length of each phase")
    ap.add_argument("--warmup", type=float, default=1.0, help="A's seconds not counted in its rate")
    ap.add_argument("--window-num", type=int, default=2, help="quota.window.num of the broker")
    ap.add_argument("--quota", type=float, default=1_000_000.0, help="A's byte rate quota")
    ap.add_argument("--repeat", type=int, default=1, help="rounds of the phases; medians reported")
    ap.add_argument("--only", choices=("produce", "fetch"), action="append", help="run only these cases")
    ap.add_argument("--json", action="store_true", help="print the results as one JSON object")
    args = ap.parse_args()
    cases = args.only or ["produce", "fetch"]

    data_dir = Path(tempfile.mkdtemp(prefix="kaflite-quotabench-"))
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    overrides = {
        "listeners": f"PLAINTEXT://{bootstrap}",
        "log.dirs": str(data_dir),
        "quota.window.num": str(args.window_num),
        "quota.window.size.seconds": "1",
    }
    cmd = [sys.executable, "-m", "kaflite.server"]
    for k, v in overrides.items():
        cmd += ["--override", f"{k}={v}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(data_dir / "broker.log", "wb"))
    results: dict[str, Any] = {
        "quota": args.quota,
        "window_num": args.window_num,
        "seconds": args.seconds,
        "repeat": args.repeat,
    }
    try:
        wait_port(port, timeout=60)
        conf = {"bootstrap.servers": bootstrap}
        admin = AdminClient(conf)
        for f in admin.create_topics([NewTopic(t, 1, 1) for t in ("qa", "qb", "fa", "fb")]).values():
            f.result(30)
        client_a = [("client-id", "A")]
        if "fetch" in cases:  # a backlog A cannot finish within its phase at the quota
            _fill(conf, "fa", int(args.quota * (args.seconds + 4) * 1.5))
        runs: dict[str, dict[str, list[dict[str, float]]]] = {}
        for _ in range(args.repeat):  # the phases in turn, every round: slow drifts of the machine hit all
            if "produce" in cases:
                r = runs.setdefault("produce", {})
                r.setdefault("baseline", []).append(_summary(_b_produce(conf, "qb", args.seconds)))
                alter(bootstrap, client_a, {"producer_byte_rate": str(args.quota)}, [], 10)
                r.setdefault("throttled", []).append(
                    _beside_a(_a_produce, conf, "qa", args, _b_produce, "qb")
                )
                alter(bootstrap, client_a, {}, ["producer_byte_rate"], 10)
                r.setdefault("unthrottled", []).append(
                    _beside_a(_a_produce, conf, "qa", args, _b_produce, "qb")
                )
            if "fetch" in cases:
                r = runs.setdefault("fetch", {})
                r.setdefault("baseline", []).append(_summary(_b_end_to_end(conf, "fb", args.seconds)))
                alter(bootstrap, client_a, {"consumer_byte_rate": str(args.quota)}, [], 10)
                r.setdefault("throttled", []).append(
                    _beside_a(_a_consume, conf, "fa", args, _b_end_to_end, "fb")
                )
                alter(bootstrap, client_a, {}, ["consumer_byte_rate"], 10)
        for case, phases in runs.items():
            results[case] = {
                phase: {k: statistics.median(x[k] for x in xs) for k in xs[0]} for phase, xs in phases.items()
            }
    finally:
        stop_process(proc)
        shutil.rmtree(data_dir, ignore_errors=True)

    if args.json:
        print(json.dumps(results, indent=1))
        return
    print(
        f"quota {args.quota:,.0f} B/s, quota.window.num={args.window_num}, phases of {args.seconds:.0f} s, "
        f"medians of {args.repeat} round(s)"
    )
    for case in ("produce", "fetch"):
        if case not in results:
            continue
        r = results[case]
        base = r["baseline"]["p99_ms"]
        print(f"\n{case}: B's latency (ms)        p50      p99   p99 / baseline   A's rate / quota")
        for phase, figures in r.items():
            ratio = figures["p99_ms"] / max(base, P99_FLOOR_S * 1000)
            a_rate = figures.get("a_rate")
            a_text = (
                ""
                if a_rate is None
                else (
                    "backlog ran out"
                    if a_rate < 0
                    else f"{a_rate / args.quota:.2f}x"
                    if phase == "throttled"
                    else f"{a_rate / 1e6:.1f} MB/s"
                )
            )
            print(
                f"  {phase:<24} {figures['p50_ms']:8.2f} {figures['p99_ms']:8.2f}   {ratio:14.2f}   {a_text}"
            )


if __name__ == "__main__":
    main()
