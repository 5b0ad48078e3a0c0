"""The pipeline demo behind `kaflite pipeline demo` (and examples/pipeline_demo.py).

One command, nothing to set up: a broker (`bootstrap`, or one started by the `broker` factory the caller
injects: `kaflite pipeline demo` passes an embedded kaflite broker; this package never imports the
broker, it is a client like any other), a generator producing a
keyed stream of purchase events, and a Spark Structured Streaming job that reads the topic with the
`kaflite` source, aggregates per user and 5-second event-time window, and writes every micro-batch's
updated aggregates to Parquet and to an output topic (with the `kaflite` sink). At the end it checks
the aggregates against what the generator sent, and prints what it did.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WINDOW_SECONDS = 5


@dataclass
class DemoReport:
    bootstrap: str
    input_topic: str
    output_topic: str
    parquet_dir: str
    work_dir: str = ""  # broker data (when embedded), checkpoint and Parquet
    work_dir_is_temporary: bool = False  # created by the demo (no --out): left for inspection, said so
    events_produced: int = 0
    events_read: int = 0
    batches: int = 0
    output_records: int = 0
    spark_startup_s: float = 0.0
    run_s: float = 0.0
    windows: int = 0
    mismatches: int = 0
    top: list[tuple[str, str, int, float]] = field(default_factory=list)


@dataclass
class Truth:
    """What the generator sent, per (user, window start): count and total amount."""

    counts: Counter[tuple[str, int]] = field(default_factory=Counter)
    amounts: dict[tuple[str, int], float] = field(default_factory=lambda: defaultdict(float))


def generate(
    bootstrap: str, topic: str, events: int, users: int, rate: float, truth: Truth, stop: threading.Event
) -> int:
    """Produce `events` keyed JSON events (about `rate` per second); returns how many were acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 20})
    rng = random.Random(7)
    acked = [0]

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked[0] += 1

    start = time.monotonic()
    for i in range(events):
        if stop.is_set():
            break
        user = f"user-{rng.randrange(users):02d}"
        amount = round(rng.uniform(1, 100), 2)
        ts_ms = int(time.time() * 1000)
        event = {"user": user, "action": rng.choice(["view", "cart", "buy"]), "amount": amount}
        producer.produce(
            topic, json.dumps(event).encode(), user.encode(), timestamp=ts_ms, on_delivery=delivered
        )
        window = ts_ms // 1000 // WINDOW_SECONDS * WINDOW_SECONDS
        truth.counts[(user, window)] += 1
        truth.amounts[(user, window)] += amount
        producer.poll(0)
        ahead = (i + 1) / rate - (time.monotonic() - start)
        if ahead > 0:
            time.sleep(ahead)
    producer.flush(30)
    return acked[0]


# Starts a broker keeping its data under the given directory and yields its bootstrap address.
BrokerFactory = Callable[[Path], AbstractContextManager[str]]


@contextmanager
def _broker(bootstrap: str | None, factory: BrokerFactory | None, data_dir: Path) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    if factory is None:
        raise ValueError("run_demo: give the bootstrap address of a broker, or a broker factory")
    with factory(data_dir / "broker") as servers:
        yield servers


def _create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})  # librdkafka: errors only
    futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names])
    for f in futures.values():
        f.result(30)


def run_demo(
    bootstrap: str | None = None,
    events: int = 2000,
    users: int = 20,
    rate: float = 200.0,
    partitions: int = 3,
    out_dir: str | None = None,
    progress: Callable[[str], None] = lambda msg: print(msg, file=sys.stderr, flush=True),
    spark: Any | None = None,
    broker: BrokerFactory | None = None,
) -> DemoReport:
    """Run the whole pipeline once; returns what it did. `spark`: an existing session to use (and
    leave running), e.g. in tests; by default a local session is started and stopped. Without
    `bootstrap`, `broker(data_dir)` starts the broker to use (e.g. an embedded kaflite broker)."""
    work = (Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="kaflite-pipeline-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    progress(f"work directory: {work}" + ("" if out_dir else " (temporary)"))
    stamp = time.strftime("%H%M%S")
    input_topic, output_topic = f"events-{stamp}", f"user-window-totals-{stamp}"
    with _broker(bootstrap, broker, work) as servers:
        report = DemoReport(
            servers, input_topic, output_topic, str(work / "parquet"), str(work), out_dir is None
        )
        progress(f"broker: {servers}{' (embedded kaflite)' if not bootstrap else ''}")
        _create_topics(servers, [input_topic, output_topic], partitions)
        progress(f"topics: {input_topic} ({partitions} partitions) -> {output_topic}")

        own_session = spark is None
        if spark is None:
            progress("spark: starting a local SparkSession (about 20 s here) ...")
            t0 = time.monotonic()
            spark = _spark_session(work)
            report.spark_startup_s = time.monotonic() - t0
            progress(f"spark: ready in {report.spark_startup_s:.1f} s")

        truth = Truth()
        stop = threading.Event()
        produced: list[int] = []
        gen = threading.Thread(
            target=lambda: produced.append(generate(servers, input_topic, events, users, rate, truth, stop)),
            name="event-generator",
            daemon=True,
        )

        def start_generator() -> None:
            gen.start()
            progress(f"generator: {events} keyed events for {users} users at ~{rate:.0f}/s")

        try:
            _run_query(spark, servers, report, truth, gen, start_generator, produced, work, progress)
        finally:
            stop.set()
            if own_session:
                spark.stop()
    return report


# Spark's own log lines go to stderr at ERROR only, from the JVM's first line (setLogLevel comes too late
# for the start-up warnings); written into the work directory and passed to the driver JVM. The root level
# stays WARN, the level Spark announces for interactive sessions, so it does not print its
# "Setting default log level" banner; the appender's threshold drops everything below ERROR.
QUIET_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.filter.threshold.type = ThresholdFilter
appender.stderr.filter.threshold.level = error
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


# The demo's JVM lives a minute or two and handles a few thousand small records: only C1, the quick JIT
# compiler, and the serial GC. C2's compile threads and the parallel GC's threads took CPU from the
# generator, the broker and the query on a small machine: the `kaflite pipeline demo --events 300 --rate 100`
# of docs/cli.md took 100 s on a loaded 2-core machine with the JVM's defaults, 73 s with these (its test:
# 121 -> 63 s and 72 -> 51 s in two pairs of runs; the test
# SparkSessions use the same options: tests/spark/conftest.py TEST_JVM_OPTIONS).
DEMO_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _spark_session(work: Path | None = None) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from kaflite.spark import register

    builder = SparkSession.builder.master("local[2]")
    java_options = DEMO_JVM_OPTIONS
    if work is not None:
        log_config = work / "log4j2.properties"
        log_config.write_text(QUIET_LOG4J2)
        java_options += f" -Dlog4j2.configurationFile={log_config}"
    builder = builder.config("spark.driver.extraJavaOptions", java_options)
    spark = (
        builder.appName("kaflite-pipeline-demo")
        # loopback only: the driver neither binds nor advertises another interface
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def _run_query(
    spark: Any,
    servers: str,
    report: DemoReport,
    truth: Truth,
    gen: threading.Thread,
    start_generator: Callable[[], None],
    produced: list[int],
    work: Path,
    progress: Callable[[str], None],
) -> None:
    from pyspark.sql import functions as F

    events = (
        spark.readStream.format("kaflite")
        .option("kafka.bootstrap.servers", servers)
        .option("subscribe", report.input_topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    parsed = events.select(
        F.col("key").cast("string").alias("user"),
        F.col("timestamp"),
        F.get_json_object(F.col("value").cast("string"), "$.amount").cast("double").alias("amount"),
    )
    totals = parsed.groupBy(F.window("timestamp", f"{WINDOW_SECONDS} seconds"), "user").agg(
        F.count("*").alias("events"), F.round(F.sum("amount"), 2).alias("amount")
    )

    def write_batch(df: Any, batch_id: int) -> None:
        rows = df.select(
            F.lit(batch_id).alias("batch_id"),
            "user",
            F.col("window.start").alias("window_start"),
            "events",
            "amount",
        ).cache()
        rows.write.mode("append").parquet(report.parquet_dir)
        rows.select(
            F.col("user").alias("key"),
            F.to_json(F.struct("window_start", "events", "amount", "batch_id")).alias("value"),
        ).write.format("kaflite").option("kafka.bootstrap.servers", servers).option(
            "topic", report.output_topic
        ).mode("append").save()
        report.output_records += rows.count()
        report.batches += 1
        rows.unpersist()

    t0 = time.monotonic()
    query = (
        totals.writeStream.outputMode("update")
        .foreachBatch(write_batch)
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(processingTime="2 seconds")
        .start()
    )
    progress("stream: query started (trigger every 2 s)")
    start_generator()
    last = -1
    while gen.is_alive() and query.isActive:
        time.sleep(1)
        p = query.lastProgress
        if p and p["batchId"] != last:
            last = p["batchId"]
            progress(
                f"stream: batch {last}: {p['numInputRows']} events in, {report.output_records} totals out so far"
            )
    gen.join()
    report.events_produced = produced[0] if produced else 0
    progress(f"generator: done, {report.events_produced} events acknowledged; draining the stream ...")
    query.processAllAvailable()
    query.stop()
    report.run_s = time.monotonic() - t0
    report.events_read = sum(int(p["numInputRows"]) for p in query.recentProgress)
    if query.exception() is not None:
        raise RuntimeError(f"streaming query failed: {query.exception()}")

    # the final value of each (user, window) is the one from the latest batch that updated it
    final = spark.read.parquet(report.parquet_dir)
    from pyspark.sql.window import Window

    latest = (
        final.withColumn(
            "rn", F.row_number().over(Window.partitionBy("user", "window_start").orderBy(F.desc("batch_id")))
        )
        .where("rn = 1")
        .collect()
    )
    got = {(r.user, int(r.window_start.timestamp())): (r.events, r.amount) for r in latest}
    report.windows = len(got)
    report.mismatches = sum(
        1
        for k, n in truth.counts.items()
        if k not in got or got[k][0] != n or abs(got[k][1] - truth.amounts[k]) > 0.011
    )
    best = sorted(latest, key=lambda r: (-r.amount, r.user))[:5]
    report.top = [(r.user, r.window_start.strftime("%H:%M:%S"), r.events, r.amount) for r in best]


def print_report(report: DemoReport) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    summary = Table(title="kaflite pipeline demo", show_header=False)
    summary.add_row("broker", report.bootstrap)
    summary.add_row("input topic", report.input_topic)
    summary.add_row("events produced / read by Spark", f"{report.events_produced} / {report.events_read}")
    summary.add_row("micro-batches", str(report.batches))
    summary.add_row("(user, 5 s window) totals", str(report.windows))
    summary.add_row(
        "updates written to Parquet and topic", f"{report.output_records} -> {report.output_topic}"
    )
    summary.add_row(
        "totals equal to the generator's",
        "yes" if report.mismatches == 0 else f"NO ({report.mismatches} differ)",
    )
    summary.add_row(
        "Spark startup / streaming time", f"{report.spark_startup_s:.1f} s / {report.run_s:.1f} s"
    )
    console.print(summary)
    top = Table(title="top windows by amount")
    for col in ("user", "window start (UTC)", "events", "amount"):
        top.add_column(col)
    for user, start, n, amount in report.top:
        top.add_row(user, start, str(n), f"{amount:.2f}")
    console.print(top)
    # full paths on lines of their own (a table column would cut them to the terminal's width)
    print(f"Parquet output: {report.parquet_dir}")
    if report.work_dir_is_temporary:
        print(
            f"Temporary work directory (checkpoint, Parquet, embedded broker data), kept so you can look at "
            f"it: {report.work_dir}\nRemove it with: rm -rf {report.work_dir}"
        )
