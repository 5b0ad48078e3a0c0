"""Issue 14: the exactly-once option of the kaflite sink. A streaming query topic -> topic is SIGKILLed at
random points (twice; KAFLITE_SOAK=1: the 5 times of issue 14) and restarted on its checkpoint; the output
topic, read read_committed, holds every input record exactly once."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from helpers import read_to_end

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DRIVER = Path(__file__).with_name("eos_sink_driver.py")
# on the drivers' PYTHONPATH: their Python workers log the path each task took (kaflite.spark at debug)
WORKER_LOG = Path(__file__).with_name("worker_log")
# each kill costs a driver start (a JVM and a first micro-batch: about 50 s alone on a loaded 2-core
# machine); every run kills at a random point of a micro-batch the same way and each restart replays the
# batch planned before its kill, so the default suite runs 2 (a restarted run is killed again, and the
# final run restarts after that second kill) and KAFLITE_SOAK=1 the 5 of issue 14
KILLS = 5 if os.environ.get("KAFLITE_SOAK", "") not in ("", "0") else 2


def _start(kafka: Any, src: str, dst: str, cp: Path, log: Path, prefix: str,
           per_trigger: int = 20) -> subprocess.Popen[bytes]:
    path = os.pathsep.join(p for p in (str(WORKER_LOG), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=path)
    with log.open("ab") as f:
        return subprocess.Popen([sys.executable, str(DRIVER), kafka.bootstrap, src, dst, str(cp),
                                 str(per_trigger), prefix],
                                stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)


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


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def _assert_fast_paths(log: Path) -> None:
    """What was tested is the fast path: every task of the drivers wrote through kaflite's transactional
    client (never librdkafka), and read through kaflite's fetch client with the decoder this environment
    selects (the compiled one when built), as their Python workers logged it (WORKER_LOG)."""
    from kaflite.spark import batches

    text = log.read_text()
    fast = re.findall(r"task (\d+) of batch \d+: exactly once through kaflite's client", text)
    assert {"0", "1"} <= set(fast), f"no task reported kaflite's client:\n{text[-3000:]}"
    reads = re.findall(r"through kaflite's fetch client \((\w+) decoder\)", text)
    assert reads and set(reads) == {batches.DECODER}, (batches.DECODER, set(reads))
    assert "through librdkafka" not in text, text[-3000:]


# up to six driver starts (a JVM and a first micro-batch each, 25-50 s on a loaded 2-core machine) need more
# than the suite's default 300 s limit; 900 s still bounds a hung driver
@pytest.mark.timeout(900)
def test_exactly_once_sink_survives_kill_9(spark: Any, kafka: Any, tmp_path: Path) -> None:
    src, dst = kafka.topic("eos-in", 2), kafka.topic("eos-out", 2)
    total = 600  # 20 records per micro-batch: the query is still running when the last kill comes
    kafka.produce(src, [{"value": b"r%04d" % i, "partition": i % 2} for i in range(total)])
    cp, log = tmp_path / "checkpoint", tmp_path / "driver.log"
    prefix = f"eos-{uuid.uuid4().hex[:6]}"
    rng = random.Random(14)
    kills = 0
    for _run in range(KILLS):
        committed = _commits(cp)
        proc = _start(kafka, src, dst, cp, log, prefix)
        try:
            deadline = time.monotonic() + 180
            while _commits(cp) <= committed and time.monotonic() < deadline:  # this run made progress
                if proc.poll() is not None:
                    raise AssertionError(f"driver exited:\n{log.read_text()[-3000:]}")
                time.sleep(0.1)
            time.sleep(rng.uniform(0.0, 3.0))  # then killed at a random point of a later micro-batch
        finally:
            _kill(proc)
        kills += 1
    assert kills == KILLS
    _assert_fast_paths(log)  # the killed runs' tasks (checked here too: a wrong path fails before the rest)
    # read_committed to the end (the last stable offset: a killed run's open transaction ends it); whatever
    # it does not see yet (a commit whose markers are not written) the final read below sees
    before = Counter(read_to_end(kafka.bootstrap, dst, 2))
    assert before, "nothing was written before the last restart: the kills tested nothing"
    assert not {v for v, n in before.items() if n > 1}, "duplicates after the kills"
    # the last run drains the rest in large micro-batches: a batch planned before the last kill is replayed
    # with its recorded offsets whatever the limit, and what follows needs no more kill points (20 records a
    # batch left it ~20 more micro-batches, about 30 s of the suite)
    proc = _start(kafka, src, dst, cp, log, prefix, per_trigger=total)
    try:
        # until a committed micro-batch has consumed the whole input (read from the checkpoint: a
        # read_committed scan per check costs its 4 s idle wait); the sink commits a batch's transactions
        # before Spark marks the batch committed, so the output read below is complete
        deadline = time.monotonic() + 240
        while _committed_offsets(cp, src) != {0: total // 2, 1: total // 2} and time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"driver exited:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
    finally:
        _kill(proc)
    counts = Counter(read_to_end(kafka.bootstrap, dst, 2, at_least=total))
    assert set(counts) == {b"r%04d" % i for i in range(total)}, log.read_text()[-3000:]
    duplicates = {v: n for v, n in counts.items() if n > 1}
    assert not duplicates, f"{len(duplicates)} records more than once"
    _assert_fast_paths(log)
