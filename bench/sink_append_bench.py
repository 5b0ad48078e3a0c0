"""The broker's CPU per row under the Spark sink's producer path, without Spark (issue 29).

    PYTHONPATH=src .venv/bin/python bench/sink_append_bench.py [--rows 1000000] [--repeat 3]
        [--base /tmp/other-checkout/src] [--profile out.prof]
        [--producers N] [--same-topic] [--busy N] [--pause S]

A kaflite broker in a process of its own (`kaflite serve`, as deployed and as bench/spark_bench.py runs
it), and in this process the sink's task body, `kaflite.spark.writer.produce_arrow`, over kaflite's
idempotent client (acks=all, the compiled encoder when it is built): the rows of bench/spark_bench.py's
synthetic source (keys `key-%06d` of i % 1000, 100 B values, Arrow batches of 10,000 rows) into a topic
of 3 partitions. Measured per run: the broker process's CPU (utime + stime from /proc) over the produce,
per million rows, the wall time, the producing processes' CPU, and the broker threads' context switches
(voluntary: it waited for something, a wake-up; involuntary: it was preempted). With --base, runs of a
broker on that source tree alternate with runs of one on this tree (base first; the client is this
process's code in both), each run with a fresh broker and log directory. --profile runs the broker (this
tree) once under cProfile (its start-up and the warm-up included) and prints its top functions.

The shape of bench/spark_bench.py's sink run, piece by piece, without Spark:
- `--producers N`: N producing processes at once (Spark's tasks run in Python workers of their own, two
  at a time in local[2]), each with its own connection and producer id and rows/N of the rows;
- `--same-topic`: one broker and one topic for the whole bench, a warm-up of --rows rows first and then
  the measured runs, as spark_bench's `measure` writes its warm-up and repeats into one output topic (at
  10M rows and --repeat 2, 30M rows, 3.6 GB); without it each run has a fresh broker, its warm-up 20,000
  rows;
- `--busy N`: N processes spinning on the CPU during each measured produce (Spark's JVM and workers
  competing for the 2 cores);
- `--pause S`: S seconds of sleep before each measured produce (after the previous run's broker and
  files are gone): the memory they freed is handed back to the host meanwhile (bench/page_cache_bench.py),
  as it is during Spark's start and between spark_bench's measurements.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.synchronize import Event
from pathlib import Path
from shutil import rmtree
from typing import Any

from _broker_process import BrokerProcess, minor_faults, switches
from _timing import CLK_TCK, proc_cpu
from page_cache_bench import reported_gb

HERE = Path(__file__).resolve().parent.parent / "src"
TOPIC = "sink"
BUSY_MAX_S = 900.0  # a CPU burner stops by itself after this long, whatever happens to the bench


def batches(rows: int, value_bytes: int) -> Iterator[object]:
    import pyarrow as pa

    n = 10_000
    keys = pa.array([b"key-%06d" % (i % 1000) for i in range(n)], pa.binary())
    values = pa.array([b"x" * value_bytes] * n, pa.binary())
    full = pa.record_batch([keys, values], names=["key", "value"])
    left = rows
    while left > 0:
        yield full if left >= n else full.slice(0, left)
        left -= n


def produce(bootstrap: str, rows: int, value_bytes: int) -> None:
    """The sink task's body: `rows` rows through kaflite's client, all acknowledged."""
    from kaflite.spark.options import parse_writer_options
    from kaflite.spark.produce import ArrowProducer
    from kaflite.spark.writer import produce_arrow

    options = parse_writer_options({"kafka.bootstrap.servers": bootstrap, "topic": TOPIC})
    with ArrowProducer({"bootstrap.servers": bootstrap}).start() as producer:
        assert produce_arrow(producer, options, batches(rows, value_bytes), None) == rows  # type: ignore[arg-type]


def _producer_process(bootstrap: str, rows: int, value_bytes: int, ready: Any, go: Event, out: Any) -> None:
    """A producing process of --producers: imports done and the rows' first batch built before `ready`,
    then waits for `go`; puts its CPU seconds over the produce (or the error) on `out`."""
    # imported before the clock starts, as a Spark worker has them after its first batch
    import numpy  # noqa: F401
    import pyarrow  # noqa: F401

    import kaflite.spark.encode
    import kaflite.spark.options
    import kaflite.spark.produce
    import kaflite.spark.writer  # noqa: F401

    next(batches(1, value_bytes))
    ready.put(os.getpid())
    try:
        if not go.wait(600):
            raise TimeoutError("no go within 600 s")
        cpu0 = time.process_time()
        produce(bootstrap, rows, value_bytes)
        out.put(time.process_time() - cpu0)
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which fails the run
        out.put(f"{type(e).__name__}: {e}")


def _burn(stop: Event) -> None:
    """Spin on the CPU until `stop` (or BUSY_MAX_S)."""
    deadline = time.monotonic() + BUSY_MAX_S
    while not stop.is_set() and time.monotonic() < deadline:
        x = 0
        for i in range(200_000):
            x += i


@dataclass
class Sample:
    """One measured produce: the broker's user and system CPU s, the wall s, the producers' CPU s, the
    broker's context switches, the machine's steal time over it (s, all CPUs) and the GB of free memory
    the guest reported to the host (page_cache_bench) before it (since the previous measurement, or the
    bench's start) and during it."""

    user: float
    system: float
    wall: float
    client: float
    voluntary: int
    involuntary: int
    steal: float
    faults: int
    reported_before: float
    reported_during: float

    def per_m(self, rows: int) -> float:
        return (self.user + self.system) / rows * 1e6


def steal_seconds() -> float:
    """The machine's steal time so far (all CPUs, /proc/stat): time the hypervisor ran something else."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]) / CLK_TCK


_reported_mark = [reported_gb()]  # where the previous measurement ended


def measured(pid: int, bootstrap: str, rows: int, value_bytes: int, producers: int, busy: int) -> Sample:
    """Produce `rows` rows to the broker `pid` with `producers` processes (1: in this process), `busy`
    CPU burners spinning meanwhile; what the broker spent over it."""
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    burners = [ctx.Process(target=_burn, args=(stop,), daemon=True) for _ in range(busy)]
    for b in burners:
        b.start()
    workers: list[Any] = []
    go, ready, out = ctx.Event(), ctx.Queue(), ctx.Queue()
    if producers > 1:
        share, extra = divmod(rows, producers)
        workers = [
            ctx.Process(
                target=_producer_process,
                daemon=True,
                args=(bootstrap, share + (i < extra), value_bytes, ready, go, out),
            )
            for i in range(producers)
        ]
        for w in workers:
            w.start()
        for _ in workers:
            ready.get(timeout=120)
    try:
        broker0, switches0, steal0, reported0 = proc_cpu(pid), switches(pid), steal_seconds(), reported_gb()
        faults0 = minor_faults(pid)
        wall0, own0 = time.perf_counter(), time.process_time()
        if workers:
            go.set()
            results = [out.get(timeout=900) for _ in workers]
            failed = [r for r in results if isinstance(r, str)]
            if failed:
                raise RuntimeError(f"a producer failed: {failed[0]}")
            client = float(sum(results))
        else:
            produce(bootstrap, rows, value_bytes)
            client = time.process_time() - own0
        wall = time.perf_counter() - wall0
        (user, system), (vol, invol), steal = proc_cpu(pid), switches(pid), steal_seconds() - steal0
        reported, faults = reported_gb(), minor_faults(pid) - faults0
    finally:
        stop.set()
        for p in [*workers, *burners]:
            p.join(30)
            if p.is_alive():
                p.kill()
                p.join(10)
    return Sample(
        user - broker0[0],
        system - broker0[1],
        wall,
        client,
        vol - switches0[0],
        invol - switches0[1],
        steal,
        faults,
        reported0 - _reported_mark[0],
        reported - reported0,
    )
    _reported_mark[0] = reported


class Broker(BrokerProcess):
    """`kaflite serve` of the tree `src` (its own PYTHONPATH; under cProfile when `profile` names a file)
    with topic `sink` (3 partitions) in a temporary directory, warmed up by `warm_rows` rows from this
    process (connections, first segments, imports)."""

    def __init__(self, src: Path, value_bytes: int, warm_rows: int, profile: str | None = None) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        super().__init__(
            Path(tempfile.mkdtemp(prefix="kaflite-sab-")),
            env={"PYTHONPATH": str(src)},
            python_args=["-m", "cProfile", "-o", profile] if profile else [],
        )
        try:
            self.start(wait=60)
        except BaseException:
            rmtree(self.data_dir, ignore_errors=True)
            raise
        try:
            admin = AdminClient({"bootstrap.servers": self.bootstrap})
            for f in admin.create_topics([NewTopic(TOPIC, 3, 1)]).values():
                f.result(30)
            produce(self.bootstrap, warm_rows, value_bytes)
        except BaseException:
            self.stop()
            raise

    def stop(self, grace: float = 60, strict: bool = False) -> float:
        try:
            return super().stop(grace, strict)
        finally:
            rmtree(self.data_dir, ignore_errors=True)


def report(name: str, i: int, rows: int, s: Sample) -> None:
    mb = rows * 120 / 1e6  # about 120 bytes a row on the wire and on disk
    line = (
        f"run {i} {name}: broker {s.per_m(rows):.3f} CPU-s per million rows (user {s.user:.2f} s, system "
        f"{s.system:.2f} s); wall {s.wall:.2f} s ({rows / s.wall:,.0f} rows/s), producers' CPU {s.client:.2f} s; "
        f"broker switches per MB: {s.voluntary / mb:.1f} voluntary, {s.involuntary / mb:.1f} involuntary; "
        f"broker minor faults per MB {s.faults / mb:.1f}; "
        f"machine steal {s.steal:.2f} s; memory reported to the host {s.reported_before:.2f} GB before, "
        f"{s.reported_during:.2f} GB during; load {os.getloadavg()[0]:.1f}"
    )
    print(line, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--base", type=Path, default=None, help="another tree's src/, run alternately with this one"
    )
    ap.add_argument("--profile", default=None, help="write the broker's cProfile here and print its top")
    ap.add_argument("--producers", type=int, default=1, help="producing processes at once (1: this process)")
    ap.add_argument(
        "--same-topic",
        action="store_true",
        help="one broker and topic for all runs, warmed up by --rows rows (spark_bench's shape)",
    )
    ap.add_argument("--busy", type=int, default=0, help="CPU-burning processes during each measured produce")
    ap.add_argument("--pause", type=float, default=0.0, help="seconds of sleep before each measured produce")
    args = ap.parse_args()
    if args.producers < 1 or args.busy < 0 or not 0 <= args.pause <= 600:
        ap.error("--producers must be at least 1, --busy at least 0, --pause in [0, 600]")
    print(f"load average (1 min) {os.getloadavg()[0]:.1f}", file=sys.stderr)
    shape = (args.producers, args.busy)
    if args.profile:
        broker = Broker(HERE, args.value_bytes, 20_000, args.profile)
        try:
            s = measured(broker.pid, broker.bootstrap, args.rows, args.value_bytes, *shape)
        finally:
            broker.stop()
        report("profiled", 1, args.rows, s)
        pstats.Stats(args.profile).sort_stats("tottime").print_stats(25)
        return
    trees = [("base", args.base), ("this", HERE)] if args.base else [("this", HERE)]
    per_m: dict[str, list[float]] = {name: [] for name, _ in trees}
    kept: dict[str, Broker] = {}
    try:
        if args.same_topic:
            for name, src in trees:
                kept[name] = Broker(src, args.value_bytes, args.rows)
        for i in range(args.repeat):
            for name, src in trees:
                broker = kept.get(name) or Broker(src, args.value_bytes, 20_000)
                time.sleep(args.pause)
                try:
                    s = measured(broker.pid, broker.bootstrap, args.rows, args.value_bytes, *shape)
                finally:
                    if name not in kept:
                        broker.stop()
                per_m[name].append(s.per_m(args.rows))
                report(name, i + 1, args.rows, s)
    finally:
        for broker in kept.values():
            broker.stop()
    for name, values in per_m.items():
        print(
            f"{name}: broker CPU-s per million rows min {min(values):.3f} median {statistics.median(values):.3f} "
            f"max {max(values):.3f}"
        )


if __name__ == "__main__":
    main()
