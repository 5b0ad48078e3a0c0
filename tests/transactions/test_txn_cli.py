"""`kaflite transactions list | describe | abort` against a real broker: an open transaction is listed and
described with its partitions, and aborting it by its start offset releases the last stable offset."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import confluent_kafka as ck


def _cli(broker: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kaflite", "transactions", *args, "-b", broker.bootstrap],
                          capture_output=True, text=True, timeout=60, check=False)


def test_list_describe_abort(broker: Any, topic_factory: Callable[[int], str]) -> None:
    topic = topic_factory(1)
    tid = f"cli-{uuid.uuid4().hex[:6]}"
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"hanging", partition=0)
    p.flush(10)
    listed = _cli(broker, "list")
    assert listed.returncode == 0, listed.stderr
    line = next(ln for ln in listed.stdout.splitlines() if ln.startswith(tid))
    assert line.split()[-1] == "Ongoing"
    described = _cli(broker, "describe", "--transactional-id", tid)
    assert described.returncode == 0, described.stderr
    assert "Ongoing" in described.stdout and f"{topic}-0" in described.stdout
    missing = _cli(broker, "describe", "--transactional-id", "no-such-id")
    assert missing.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr
    bad = _cli(broker, "abort", "--topic", topic, "--partition", "0", "--start-offset", "5")
    assert bad.returncode == 1 and "no open transaction starts at offset 5" in bad.stderr
    aborted = _cli(broker, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    assert aborted.returncode == 0, aborted.stderr
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "w", "isolation.level": "read_committed"})
    deadline = time.monotonic() + 10
    lso = -1
    while time.monotonic() < deadline:
        lso = c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10)[1]
        if lso == 2:
            break
        time.sleep(0.2)
    c.close()
    assert lso == 2  # the record and the ABORT marker: nothing open on the partition any more
