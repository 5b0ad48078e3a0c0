"""One local SparkSession for every Spark test (startup costs ~20 s here): local[2], few shuffle
partitions, no UI. The `kaflite` format is registered once."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import spark_tmp_env

# The test JVMs (this session and the drivers the exactly-once tests start and SIGKILL) run only C1, the
# quick JIT compiler, and the serial GC: they handle little data and live minutes, so C2's compile threads
# and the parallel GC's threads only take CPU from everything else on a 2-core machine (a session start
# plus two small jobs: about 35 -> 19 s of CPU). eo_driver.py and eos_sink_driver.py repeat the string.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@pytest.fixture(scope="session", autouse=True)
def spark_tmp() -> Iterator[Path]:
    """One directory for every Spark JVM of these tests (this session's, the drivers' the exactly-once and
    local-cluster tests start and SIGKILL, their executors), removed at the end: a Spark run left nothing
    in /tmp then (helpers.spark_tmp_env). Set in os.environ, so each driver subprocess inherits it; the
    environment is restored after."""
    tempfile.gettempdir()  # fixed first: TMPDIR below is for the subprocesses, not this one's tempfile
    directory = Path(tempfile.mkdtemp(prefix="kaflite-spark-tests-"))
    env = spark_tmp_env(directory)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield directory
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def spark(spark_tmp: Path) -> Iterator[Any]:
    # executors' Python workers must import kaflite from this venv
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only
    from pyspark.sql import SparkSession

    from kaflite.spark import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("kaflite-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.streaming.stopTimeout", "10s")
        .config("spark.driver.extraJavaOptions", TEST_JVM_OPTIONS)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


class Kafka:
    """Small helpers over confluent-kafka for the Spark tests (a real broker on 127.0.0.1)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self._n = 0

    def admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap})

    def topic(self, prefix: str, partitions: int) -> str:
        """A new topic with a unique name, waited for until its partitions have leaders."""
        import time
        import uuid

        from confluent_kafka.admin import NewTopic

        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        admin = self.admin()  # kept alive until the future resolves
        admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            md = admin.list_topics(name, timeout=10).topics.get(name)
            if md is not None and md.error is None and len(md.partitions) == partitions:
                return name
            time.sleep(0.1)
        raise TimeoutError(f"topic {name} has no metadata after 30 s")

    def produce(self, topic: str, records: list[dict[str, Any]]) -> None:
        """records: dicts of value, key, partition, headers, timestamp (ms) -> produced, all acknowledged."""
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "partitioner": "murmur2_random", "linger.ms": 5})
        errors: list[Any] = []
        for r in records:
            kwargs = {
                k: v
                for k, v in r.items()
                if k in ("key", "partition", "headers", "timestamp") and v is not None
            }
            p.produce(
                topic, r.get("value"), on_delivery=lambda e, m: errors.append(e) if e else None, **kwargs
            )
        remaining = p.flush(30)
        del p  # destroyed now, not at some later GC when the broker may be gone (librdkafka would log)
        assert remaining == 0 and not errors, errors

    def read_all(self, topic: str, timeout: float = 30.0) -> list[Any]:
        """Every record of `topic` up to the current high watermarks (a plain consumer, for checks)."""
        import time

        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "check", "enable.auto.commit": False})
        try:
            parts = self.admin().list_topics(topic, timeout=10).topics[topic].partitions
            ends = {
                p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False) for p in parts
            }
            c.assign([TopicPartition(topic, p, lo) for p, (lo, _) in ends.items()])
            want = sum(hi - lo for lo, hi in ends.values())
            out: list[Any] = []
            deadline = time.monotonic() + timeout
            while len(out) < want and time.monotonic() < deadline:
                out.extend(m for m in c.consume(1000, 0.5) if m.error() is None)
            return out
        finally:
            c.close()


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kafka]:
    """kaflite's EmbeddedBroker, shared by the Spark tests; KAFLITE_SPARK_BOOTSTRAP points the tests at
    another Kafka-compatible broker instead (development, comparisons)."""
    external = os.environ.get("KAFLITE_SPARK_BOOTSTRAP")
    if external:
        yield Kafka(external)
        return
    from kaflite.server.embedded import EmbeddedBroker

    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("spark-broker")) as broker:
        yield Kafka(broker.bootstrap)
