"""S-39: a streaming query writing Parquet with a checkpoint is SIGKILLed mid-run and restarted; the
output holds every (topic, partition, offset) exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DRIVER = Path(__file__).with_name("eo_driver.py")


def _commits(checkpoint: Path) -> int:
    d = checkpoint / "commits"
    return len([p for p in d.iterdir() if p.name.isdigit()]) if d.exists() else 0


def _committed_offsets(checkpoint: Path, topic: str) -> dict[int, int]:
    """The end offsets of `topic`'s partitions as of the last committed micro-batch ({} before one): its
    offsets/<batch> file's last line is the source's offset JSON."""
    if _commits(checkpoint) == 0:
        return {}
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    offsets = json.loads((checkpoint / "offsets" / str(last)).read_text().splitlines()[-1])
    return {int(p): o for p, o in offsets[topic].items()}


def _start(
    kafka: Any, topic: str, out: Path, cp: Path, log: Path, per_trigger: int
) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with log.open("ab") as f:
        # its own process group: SIGKILL reaches the Python driver, its JVM and its Python workers
        return subprocess.Popen(
            [sys.executable, str(DRIVER), kafka.bootstrap, topic, str(out), str(cp), str(per_trigger)],
            stdout=f,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def _wait(cond: Any, what: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 150.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        if proc.poll() is not None:
            raise AssertionError(
                f"driver exited ({proc.returncode}) waiting for {what}:\n{log.read_text()[-3000:]}"
            )
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}:\n{log.read_text()[-3000:]}")


@pytest.mark.timeout(600)  # a driver start per kill: 200-340 s on a loaded 2-core machine
def test_kill_and_restart_keeps_every_offset_exactly_once(spark: Any, kafka: Any, tmp_path: Path) -> None:
    topic = kafka.topic("eo", 3)
    kafka.produce(topic, [{"value": b"a%d" % i, "partition": i % 3} for i in range(150)])
    out, cp, log = tmp_path / "out", tmp_path / "cp", tmp_path / "driver.log"

    first = _start(kafka, topic, out, cp, log, per_trigger=15)
    try:
        # 150 records at 15 per trigger: about 10 batches; kill after a few have committed
        _wait(lambda: _commits(cp) >= 3, "3 committed batches", first, log)
    finally:
        _kill(first)
    committed_at_kill = _commits(cp)
    assert committed_at_kill < 10, "the query finished before it was killed; nothing was tested"

    kafka.produce(topic, [{"value": b"b%d" % i, "partition": i % 3} for i in range(60)])
    # a larger limit after the restart: the replayed batch keeps its checkpointed range regardless
    second = _start(kafka, topic, out, cp, log, per_trigger=100)
    try:

        # read from the checkpoint, not by a Spark job every 0.3 s that takes CPU from the driver: the file
        # sink logs a batch's files in _spark_metadata before the batch is marked committed
        _wait(lambda: _committed_offsets(cp, topic) == {0: 70, 1: 70, 2: 70}, "all 210 records committed",
              second, log)
    finally:
        _kill(second)

    rows = spark.read.parquet(str(out)).select("topic", "partition", "offset").collect()
    keys = [(r.topic, r.partition, r.offset) for r in rows]
    assert len(keys) == len(set(keys)) == 210
    assert sorted(keys) == sorted((topic, p, o) for p in range(3) for o in range(70))
