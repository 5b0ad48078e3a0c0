"""Throughput of the kaflite Spark connector, next to baselines measured in the same run.

    .venv/bin/python bench/spark_bench.py [--rows 200000] [--value-bytes 100] [--bootstrap HOST:PORT]

Every bench here stays under 60 s on the shared 2-core machine, which limits this one to about 1M rows;
the 10M-row figures of issue 29 (several minutes, run alone) take more memory than Spark's default 1 GiB
driver for the cached sink rows and skip the producer-only figure:

    nice .venv/bin/python bench/spark_bench.py --rows 10000000 --repeat 1 --driver-memory 6g --no-producer

Source: `spark.read.format("kaflite")...write.format("noop")` against a synthetic Python data source
that yields the same rows as ready-made Arrow batches (the cost of Spark's Python data source path
itself; target >= 0.5x of it). Sink: `df.write.format("kaflite")` of cached rows, against a Python Arrow
writer that discards the batches (the same path without Kafka) and against confluent-kafka producing the
same rows outside Spark (`--no-producer`: not measured). Both sinks are measured at Spark level: a real
`df.write` of the same cached rows, in the same run, and the rows the kaflite sink wrote are counted
(the output topic's offsets) at the end. `--eos`: the exactly-once sink's task on kaflite's transactional client against
its librdkafka path, same rows, same run, without Spark (`run_eos`). Rows/s is wall-clock; CPU-s per million rows counts the Spark processes (JVM and
Python workers; not the broker), and the broker's columns the broker's own CPU over the same runs, with
its user/system split (each run's, and the memory the VM reported to its host meanwhile, on stderr: the
broker's system time per GB written depends on it, docs/spark.md "Why the broker costs more per row
under Spark").

The broker, unless --bootstrap is given, is a kaflite broker in a process of its own (`kaflite serve`, as
deployed): `--broker embedded` runs it inside this process instead, as the bench did before 2026-11-29,
where its threads compete with the driver for the CPU, and its CPU is not measured.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from shutil import rmtree
from tempfile import mkdtemp
from typing import Any

import _broker_process
import pyarrow as pa
from _timing import proc_cpu
from page_cache_bench import reported_gb
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)

from kaflite.spark.arrow import arrow_schema, spark_schema_ddl

CLK = os.sysconf("SC_CLK_TCK")


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            tree.setdefault(ppid, []).append(int(entry.name))
    return tree


BROKER_PID: int | None = None  # the broker process's pid, not counted among Spark's processes


def spark_cpu_seconds() -> float:
    """CPU time of this process's descendants (the Spark JVM, its Python workers), live and reaped; not
    the broker's (still running: reaped children's time includes it only after the run)."""
    tree = _children()
    total, todo = 0.0, [p for p in tree.get(os.getpid(), []) if p != BROKER_PID]
    seen = set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / CLK  # utime + stime
        except OSError:
            pass
        todo.extend(tree.get(pid, []))
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return total + usage.ru_utime + usage.ru_stime


class SyntheticPartition(InputPartition):
    def __init__(self, index: int, rows: int, value_bytes: int) -> None:
        super().__init__(index)
        self.index, self.rows, self.value_bytes = index, rows, value_bytes


class SyntheticReader(DataSourceReader):
    def __init__(self, rows: int, partitions: int, value_bytes: int) -> None:
        self.rows, self.parts, self.value_bytes = rows, partitions, value_bytes

    def partitions(self) -> list[InputPartition]:
        share, extra = divmod(self.rows, self.parts)
        return [SyntheticPartition(i, share + (i < extra), self.value_bytes) for i in range(self.parts)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SyntheticPartition)
        import numpy as np

        n = 10_000
        # every column except the offsets is built once: the baseline is Spark's cost, not Python's
        keys = pa.array([b"key-%06d" % (i % 1000) for i in range(n)], pa.binary())
        values = pa.array([b"x" * partition.value_bytes] * n, pa.binary())
        topics = pa.array(["bench"] * n, pa.string())
        parts = pa.array(np.full(n, partition.index, dtype=np.int32))
        kinds = pa.array(np.zeros(n, dtype=np.int32))
        for start in range(0, partition.rows, n):
            m = min(n, partition.rows - start)
            offsets = np.arange(start, start + m, dtype=np.int64)
            yield pa.RecordBatch.from_arrays(
                [
                    keys.slice(0, m),
                    values.slice(0, m),
                    topics.slice(0, m),
                    parts.slice(0, m),
                    pa.array(offsets),
                    pa.array(offsets * 1000, pa.timestamp("us", tz="UTC")),
                    kinds.slice(0, m),
                ],
                schema=arrow_schema(False),
            )


class SyntheticSource(DataSource):
    """The same rows as the kaflite source would return, already vectorised: Spark's own overhead."""

    @classmethod
    def name(cls) -> str:
        return "synthetic_kafka"

    def schema(self) -> str:
        return spark_schema_ddl(False)

    def reader(self, schema: Any) -> DataSourceReader:
        o = self.options
        return SyntheticReader(int(o["rows"]), int(o["partitions"]), int(o["valueBytes"]))

    def writer(self, schema: Any, overwrite: bool) -> DataSourceArrowWriter:
        return DiscardWriter()


class DiscardWriter(DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        rows = sum(b.num_rows for b in iterator)
        del rows
        return WriterCommitMessage()


def broker_cpu() -> tuple[float, float]:
    """The broker process's (user, system) CPU seconds so far."""
    return proc_cpu(BROKER_PID) if BROKER_PID is not None else (float("nan"), float("nan"))


Timing = tuple[float, float, float, float, float]
Result = tuple[str, float, float, float, float, float]  # a measurement's name and its best Timing


def timed(fn: Any) -> Timing:
    """(wall s, Spark processes' CPU s, broker user CPU s, broker system CPU s, GB of free memory the VM
    reported to its host meanwhile) of one call."""
    cpu0, broker0, reported0, t0 = spark_cpu_seconds(), broker_cpu(), reported_gb(), time.perf_counter()
    fn()
    wall, cpu, broker = time.perf_counter() - t0, spark_cpu_seconds() - cpu0, broker_cpu()
    return wall, cpu, broker[0] - broker0[0], broker[1] - broker0[1], reported_gb() - reported0


class BrokerProcess(_broker_process.BrokerProcess):
    """`kaflite serve` in a process of its own, on a free port, its data in `data_dir`
    (bench/_broker_process.py), started and listening once constructed; its stop waits 30 s for the
    clean stop, then kills (bench/spark_codec_bench.py starts its broker the same way)."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(data_dir)
        self.start(wait=60)

    def stop(self, grace: float = 30, strict: bool = False) -> float:
        return super().stop(grace, strict)


def produce_raw(bootstrap: str, topic: str, rows: int, value_bytes: int, compression: str = "none") -> float:
    from confluent_kafka import Producer

    p = Producer(
        {"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 5, "acks": "all",
         "compression.codec": compression}
    )
    value = b"x" * value_bytes
    t0 = time.perf_counter()
    for i in range(rows):
        while True:
            try:
                p.produce(topic, value, b"key-%06d" % (i % 1000))
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=2, help="runs per measurement; the best is reported")
    ap.add_argument("--bootstrap", default=None)
    ap.add_argument("--broker", choices=("process", "embedded"), default="process",
                    help="without --bootstrap: a kaflite broker in its own process (default) or in this one")
    ap.add_argument("--source-only", action="store_true", help="measure the source and its baseline only")
    ap.add_argument("--sink-only", action="store_true",
                    help="measure the sink and its baseline only (rows from the synthetic source, cached)")
    ap.add_argument("--driver-memory", default=None,
                    help="spark.driver.memory (Spark's default 1g spills the cached rows of a 10M-row run)")
    ap.add_argument("--no-producer", action="store_true",
                    help="do not measure confluent-kafka producing the rows alone (long at 10M rows)")
    ap.add_argument("--compression", choices=("none", "gzip", "snappy", "lz4", "zstd"), default="none",
                    help="the source topic's batches (written by confluent-kafka) and the sink's "
                         "(kafka.compression.type) compressed with this codec; the baselines are unchanged")
    ap.add_argument("--eos", action="store_true",
                    help="measure the exactly-once sink's task only (no Spark): kaflite's client and librdkafka")
    args = ap.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # the Spark JVM's temporary files (spark.local.dir: spark-*, blockmgr-*; java.io.tmpdir: artifacts-*,
    # liblz4-java-*.so) in a directory removed at the end, not left in /tmp (tests/helpers.py
    # spark_tmp_env does the same for the tests): PYSPARK_SUBMIT_ARGS's defaultJavaOptions go before the
    # builder's own extraJavaOptions
    spark_tmp = mkdtemp(prefix="kaflite-spark-bench-tmp-")
    os.environ["SPARK_LOCAL_DIRS"] = spark_tmp
    os.environ["PYSPARK_SUBMIT_ARGS"] = (
        f"--conf spark.driver.defaultJavaOptions=-Djava.io.tmpdir={spark_tmp} pyspark-shell")
    broker, data_dir = None, None
    bootstrap = args.bootstrap
    if bootstrap is None:
        import tempfile

        from kaflite.server.embedded import EmbeddedBroker

        data_dir = Path(tempfile.mkdtemp(prefix="spark-bench-"))
        if args.broker == "embedded":
            broker = EmbeddedBroker(data_dir=data_dir).start()
        else:
            global BROKER_PID
            broker = BrokerProcess(data_dir)
            BROKER_PID = broker.pid
        bootstrap = broker.bootstrap
    started, load = time.perf_counter(), os.getloadavg()[0]
    try:
        run(args, bootstrap)
        print(f"whole run {time.perf_counter() - started:.0f} s; load average (1 min) {load:.1f} at the start, "
              f"{os.getloadavg()[0]:.1f} at the end")
    finally:
        if broker is not None:
            broker.stop()
        if data_dir is not None:  # a 10M-row run leaves about 5 GB of logs
            import shutil

            shutil.rmtree(data_dir, ignore_errors=True)
        rmtree(spark_tmp, ignore_errors=True)


def run(args: Any, bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    from pyspark.sql import SparkSession

    from kaflite.spark import register

    stamp = int(time.time())
    src, dst, raw = f"bench-src-{stamp}", f"bench-sink-{stamp}", f"bench-raw-{stamp}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, args.partitions, 1) for t in (src, dst, raw)]).values():
        f.result(30)
    load_s = 0.0
    if args.eos:
        run_eos(args, bootstrap, dst)
        return
    if not args.sink_only:
        print(f"loading {args.rows} rows ({args.value_bytes} B values) into {src} ...", file=sys.stderr)
        load_s = produce_raw(bootstrap, src, args.rows, args.value_bytes, args.compression)

    builder = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
    )
    if args.driver_memory:
        builder = builder.config("spark.driver.memory", args.driver_memory)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    spark.dataSource.register(SyntheticSource)

    def kaflite_read() -> Any:
        return (
            spark.read.format("kaflite")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", src)
            .load()
        )

    def synthetic_read() -> Any:
        return (
            spark.read.format("synthetic_kafka")
            .option("rows", str(args.rows))
            .option("partitions", str(args.partitions))
            .option("valueBytes", str(args.value_bytes))
            .load()
        )

    results: list[Result] = []

    def measure(name: str, fn: Any) -> None:
        fn()  # warm-up: Python workers, JIT
        runs = [timed(fn) for _ in range(args.repeat)]
        for wall, _cpu, user, system, reported in runs:
            print(f"  {name}: {wall:.2f} s; broker user {user:.2f} s, system {system:.2f} s; memory reported "
                  f"to the host {reported:.2f} GB; load {os.getloadavg()[0]:.1f}", file=sys.stderr)
        results.append((name, *min(runs, key=lambda x: x[0])))

    if args.sink_only:
        # the source is not measured: the sink's rows are the synthetic source's (same keys and values)
        rows_df = synthetic_read().select("key", "value").cache()
        rows_df.count()
        measure_sink(args, spark, bootstrap, dst, rows_df, measure)
        spark.stop()
        report(args, results, None)
        return
    assert kaflite_read().count() == args.rows, "the source topic does not hold the rows produced"
    measure(
        "source: synthetic Arrow source -> noop (baseline)",
        lambda: synthetic_read().write.format("noop").mode("overwrite").save(),
    )
    measure("source: kaflite -> noop", lambda: kaflite_read().write.format("noop").mode("overwrite").save())

    if args.source_only:
        spark.stop()
        report(args, results, None)
        return
    rows_df = kaflite_read().select("key", "value").cache()
    rows_df.count()
    measure_sink(args, spark, bootstrap, dst, rows_df, measure)
    spark.stop()
    if args.no_producer:
        report(args, results, None)
        return
    raw_s = produce_raw(bootstrap, raw, args.rows, args.value_bytes, args.compression)
    report(args, results, (raw_s, load_s))


def measure_sink(args: Any, spark: Any, bootstrap: str, dst: str, rows_df: Any, measure: Any) -> None:
    measure(
        "sink: cached rows -> discarding Arrow writer (baseline)",
        lambda: rows_df.write.format("synthetic_kafka").mode("append").save(),
    )
    measure(
        "sink: cached rows -> kaflite",
        lambda: (
            rows_df.write.format("kaflite")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", dst)
            .option("kafka.compression.type", args.compression)
            .mode("append")
            .save()
        ),
    )
    # the output topic's offsets (no control records: the at-least-once sink is not transactional), not
    # a Spark scan of (repeat + 1) x rows, which at 10M rows would take longer than a measurement
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-check"})
    try:
        marks = [c.get_watermark_offsets(TopicPartition(dst, p), timeout=30, cached=False)
                 for p in range(args.partitions)]
    finally:
        c.close()
    sink_rows = sum(high - low for low, high in marks)
    assert sink_rows == args.rows * (args.repeat + 1), f"sink topic holds {sink_rows} rows"


def run_eos(args: Any, bootstrap: str, dst: str) -> None:
    """The exactly-once sink's task, `writer.produce_exactly_once` (one transaction: progress read, rows,
    progress offset, commit), called in this process as a Spark task calls it, on kaflite's client and on
    the librdkafka path, alternately, with the synthetic source's rows (10,000-row Arrow batches; Spark
    itself is not started: its start alone takes 20-45 s on the 2-core machine, over the 60 s budget).
    Wall clock and CPU of this process (the producing task and, with the embedded broker, the broker)."""
    import uuid

    from kaflite.spark import writer
    from kaflite.spark.options import parse_writer_options

    reader = SyntheticReader(args.rows, 1, args.value_bytes)
    batches = [b.select(["key", "value"]) for b in reader.read(reader.partitions()[0])]
    def librdkafka(options: Any, rows: Any, batch_id: int, task: int) -> int:
        tid = f"{options.transactional_id_prefix}-{task}"
        return writer._exactly_once_librdkafka(options, rows, batch_id, task, tid)

    paths = {"kaflite client": writer.produce_exactly_once, "librdkafka": librdkafka}
    best: dict[str, tuple[float, float]] = {}
    for run in range(args.repeat + 1):  # the first round warms both paths up (imports, connections)
        for name, fn in paths.items():
            options = parse_writer_options({"kafka.bootstrap.servers": bootstrap, "topic": dst,
                                            "exactlyOnce": "true",
                                            "transactionalIdPrefix": f"bench-{uuid.uuid4().hex[:8]}"})
            cpu0, t0 = time.process_time(), time.perf_counter()
            assert fn(options, iter(batches), 0, 0) == args.rows
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            if run and (name not in best or wall < best[name][0]):
                best[name] = (wall, cpu)
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "isolation.level": "read_committed"})
    ends = [c.get_watermark_offsets(TopicPartition(dst, p), timeout=10, cached=False)[1]
            for p in range(args.partitions)]
    c.close()
    # every row plus one commit marker per partition per transaction
    assert sum(ends) >= 2 * args.rows * (args.repeat + 1), ends
    n = args.rows
    print(f"\nexactly-once sink task, no Spark: {n} rows, {args.value_bytes} B values, {args.partitions} "
          f"partitions, best of {args.repeat}")
    print(f"{'path':30} {'rows/s':>10} {'CPU-s/M rows':>13}")
    for name, (wall, cpu) in best.items():
        print(f"{name:30} {n / wall:>10,.0f} {cpu / n * 1e6:>13.2f}")
    ratio = best["librdkafka"][0] / best["kaflite client"][0]
    print(f"kaflite client vs librdkafka (same run): {ratio:.2f}x the rows/s")


def report(args: Any, results: list[Result],
           producer: tuple[float, float] | None) -> None:
    n = args.rows
    print(
        f"\nSpark connector throughput: {n} rows, {args.value_bytes} B values, {args.partitions} partitions, local[2], "
        f"best of {args.repeat}; broker: {args.bootstrap or args.broker}; compression: {args.compression}"
    )
    print(f"{'measurement':58} {'rows/s':>10} {'CPU-s/M rows':>13} {'vs baseline':>12} {'broker CPU-s/M':>15} "
          f"{'(user/system)':>13}")
    for i, (name, wall, cpu, user, system, _reported) in enumerate(results):
        base = results[i - i % 2][1]  # each measurement follows its baseline
        print(f"{name:58} {n / wall:>10,.0f} {cpu / n * 1e6:>13.2f} {base / wall:>11.2f}x "
              f"{(user + system) / n * 1e6:>15.2f} {user / n * 1e6:>6.2f}/{system / n * 1e6:.2f}")
    if producer is None:
        return
    raw_s, load_s = producer
    print(
        f"{'confluent-kafka producer alone (same rows, no Spark)':58} {n / raw_s:>10,.0f} {'-':>13} {'-':>12}"
    )
    print(
        f"{'(initial load of the source topic, same producer)':58} {n / load_s:>10,.0f} {'-':>13} {'-':>12}"
    )


if __name__ == "__main__":
    main()
