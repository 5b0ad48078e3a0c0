"""The broker's CPU per row under the Spark sink's producer path, without Spark (issue 29).

    PYTHONPATH=src .venv/bin/python bench/sink_append_bench.py [--rows 1000000] [--repeat 3]
        [--base /tmp/other-checkout/src] [--profile out.prof]

A kaflite broker in a process of its own (`kaflite serve`, as deployed and as bench/spark_bench.py runs
it), and in this process the sink's task body, `kaflite.spark.writer.produce_arrow`, over kaflite's
idempotent client (acks=all, the compiled encoder when it is built): the rows of bench/spark_bench.py's
synthetic source (keys `key-%06d` of i % 1000, 100 B values, Arrow batches of 10,000 rows) into a topic
of 3 partitions. Measured per run: the broker process's CPU (utime + stime from /proc) over the produce,
per million rows, the wall time and this process's CPU. With --base, runs of a broker on that source tree
alternate with runs of one on this tree (base first; the client is this process's code in both), each
run with a fresh broker and log directory. --profile runs the broker (this tree) once under cProfile (its start-up and the warm-up
included) and prints its top functions.
"""

from __future__ import annotations

import argparse
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from shutil import rmtree

from _timing import proc_cpu
from broker_bench import free_port, stop_process, wait_port

HERE = Path(__file__).resolve().parent.parent / "src"


def start_broker(src: Path, data_dir: Path, profile: str | None) -> tuple[subprocess.Popen[bytes], int]:
    """`kaflite serve` of the tree `src` (its own PYTHONPATH), under cProfile when `profile` names a file."""
    port = free_port()
    prefix = ["-m", "cProfile", "-o", profile] if profile else []
    cmd = [
        sys.executable,
        *prefix,
        "-m",
        "kaflite",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-dir",
        str(data_dir),
    ]
    proc = subprocess.Popen(
        cmd, env=dict(os.environ, PYTHONPATH=str(src)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_port(port, 60)
    except RuntimeError:
        proc.kill()
        proc.wait()
        raise RuntimeError("the broker did not start") from None
    return proc, port


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


def one_run(src: Path, rows: int, value_bytes: int, profile: str | None) -> tuple[float, float, float, float]:
    """(broker user CPU s, broker system CPU s, wall s, client CPU s) of producing `rows` rows to a fresh
    broker running `src`."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from kaflite.spark.options import parse_writer_options
    from kaflite.spark.produce import ArrowProducer
    from kaflite.spark.writer import produce_arrow

    data_dir = Path(tempfile.mkdtemp(prefix="kaflite-sab-"))
    proc, port = start_broker(src, data_dir, profile)
    try:
        bootstrap = f"127.0.0.1:{port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_topics([NewTopic("sink", 3, 1)]).values():
            f.result(30)
        options = parse_writer_options({"kafka.bootstrap.servers": bootstrap, "topic": "sink"})
        with ArrowProducer({"bootstrap.servers": bootstrap}).start() as warm:  # connections, first segment
            produce_arrow(warm, options, batches(20_000, value_bytes), None)  # type: ignore[arg-type]
        broker0, wall0, own0 = proc_cpu(proc.pid), time.perf_counter(), time.process_time()
        with ArrowProducer({"bootstrap.servers": bootstrap}).start() as producer:
            assert produce_arrow(producer, options, batches(rows, value_bytes), None) == rows  # type: ignore[arg-type]
        user, system = proc_cpu(proc.pid)
        return user - broker0[0], system - broker0[1], time.perf_counter() - wall0, time.process_time() - own0
    finally:
        stop_process(proc, 60)
        rmtree(data_dir, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--base", type=Path, default=None, help="another tree's src/, run alternately with this one"
    )
    ap.add_argument("--profile", default=None, help="write the broker's cProfile here and print its top")
    args = ap.parse_args()
    print(f"load average (1 min) {os.getloadavg()[0]:.1f}", file=sys.stderr)
    if args.profile:
        user, system, wall, own = one_run(HERE, args.rows, args.value_bytes, args.profile)
        print(
            f"profiled: broker {(user + system) / args.rows * 1e6:.2f} CPU-s per million rows "
            f"(user {user:.2f} s, system {system:.2f} s), wall {wall:.2f} s"
        )
        pstats.Stats(args.profile).sort_stats("tottime").print_stats(25)
        return
    trees = [("base", args.base), ("this", HERE)] if args.base else [("this", HERE)]
    per_m: dict[str, list[float]] = {name: [] for name, _ in trees}
    for i in range(args.repeat):
        for name, src in trees:
            user, system, wall, own = one_run(src, args.rows, args.value_bytes, None)
            per_m[name].append((user + system) / args.rows * 1e6)
            print(
                f"run {i + 1} {name}: broker {per_m[name][-1]:.3f} CPU-s per million rows (user {user:.2f} s, "
                f"system {system:.2f} s); wall {wall:.2f} s "
                f"({args.rows / wall:,.0f} rows/s), client CPU {own:.2f} s; load {os.getloadavg()[0]:.1f}"
            )
    for name, values in per_m.items():
        print(
            f"{name}: broker CPU-s per million rows min {min(values):.3f} median {statistics.median(values):.3f} "
            f"max {max(values):.3f}"
        )


if __name__ == "__main__":
    main()
