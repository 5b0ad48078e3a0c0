"""Issue 29: the kaflite source and sink on Spark's `local-cluster[2,1,1024]` master, where each executor is
a JVM process of its own with its own Python workers, as on a real cluster (the other Spark tests run
local[2]: one JVM, the driver's). A batch job reads a topic with the source and writes it with the sink;
the output holds every record exactly once, written by both executors through the fast paths, with the
code under test (this checkout's src) imported in the executors."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DRIVER = Path(__file__).with_name("cluster_driver.py")
WORKER_LOG = Path(__file__).with_name("worker_log")  # the Python workers log the path each task took


def _spark_home(tmp: Path) -> Path:
    """A SPARK_HOME whose entries link to pyspark's: the standalone workers find the jars and Python files
    there, and write their executors' stdout/stderr to SPARK_HOME/work, here instead of into the venv."""
    import pyspark

    home = tmp / "spark-home"
    home.mkdir()
    for entry in Path(pyspark.__file__).parent.iterdir():
        if entry.name != "work":
            (home / entry.name).symlink_to(entry)
    return home


# three JVMs and two executors' Python workers start on a 2-core machine: about 40 s quiet, over 3 min at
# load 12
@pytest.mark.timeout(400)
def test_source_and_sink_on_local_cluster(kafka: Any, tmp_path: Path) -> None:
    import kaflite
    from kaflite.spark import batches

    src, dst = kafka.topic("lc-in", 4), kafka.topic("lc-out", 3)
    total = 2000
    sent = [(b"k%03d" % (i % 100), b"v%05d" % i) for i in range(total)]
    kafka.produce(src, [{"key": k, "value": v, "partition": i % 4} for i, (k, v) in enumerate(sent)])
    home, log = _spark_home(tmp_path), tmp_path / "driver.log"
    path = os.pathsep.join(p for p in (str(WORKER_LOG), os.environ.get("PYTHONPATH", "")) if p)
    with log.open("wb") as out:
        done = subprocess.run([sys.executable, str(DRIVER), str(home), kafka.bootstrap, src, dst],
                              stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONPATH=path),
                              timeout=380)
    assert done.returncode == 0, log.read_text()[-4000:]

    # every record once, key and value intact
    counts = Counter((m.key(), m.value()) for m in kafka.read_all(dst))
    assert counts == Counter(sent)

    # one stderr per executor process (SPARK_HOME/work/<app>/<executor id>/stderr, where its standalone
    # worker started it): each executor's tasks read through kaflite's fetch client and wrote through
    # kaflite's client (none through librdkafka), with this checkout's kaflite
    ours = str(Path(kaflite.__file__).parent)
    logs = sorted((home / "work").glob("app-*/*/stderr"))
    assert len(logs) == 2, logs
    for executor_log in logs:
        text = executor_log.read_text()
        reads = re.findall(r"through kaflite's fetch client \((\w+) decoder\)", text)
        assert reads and set(reads) == {batches.DECODER}, (executor_log, text[-2000:])
        assert "a task writes through kaflite's client" in text, (executor_log, text[-2000:])
        assert "through librdkafka" not in text, (executor_log, text[-2000:])
        files = set(re.findall(r"^kaflite-worker \d+ (\S+): ", text, re.MULTILINE))
        assert files and all(f.startswith(ours + os.sep) for f in files), (ours, files)
