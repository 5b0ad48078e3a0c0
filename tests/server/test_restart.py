"""Crash safety: acks=all with flush-before-ack (log.flush.interval.messages=1), kill -9 the broker process
mid-stream, restart it on the same data dir: every acknowledged record is there exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from helpers import free_port, start_broker_process, stop_process


def _start(data_dir: Path, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable,
        "-m",
        "kaflite.server",
        "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
        "--override", f"log.dirs={data_dir}",
        "--override", "log.flush.interval.messages=1",
    ]
    return start_broker_process(cmd, port, log_path, 20)


def test_kill_9_keeps_every_acknowledged_record(tmp_path: Path) -> None:
    port = free_port()
    data = tmp_path / "data"
    log_path = tmp_path / "broker.log"
    proc = _start(data, port, log_path)
    bootstrap = f"127.0.0.1:{port}"
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("crash", 2, 1)])["crash"].result(timeout=10)
        acked: list[bytes] = []
        lock = threading.Lock()

        def on_delivery(err, msg) -> None:  # noqa: ANN001
            if err is None:
                with lock:
                    acked.append(msg.value())

        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "linger.ms": 1,
                "enable.idempotence": True,
                "message.timeout.ms": 3000,
                "reconnect.backoff.max.ms": 200,
            }
        )
        stop = threading.Event()

        def produce() -> None:
            i = 0
            while not stop.is_set() and i < 200_000:
                try:
                    producer.produce("crash", value=b"rec-%08d" % i, on_delivery=on_delivery)
                    i += 1
                except BufferError:
                    producer.poll(0.01)
                producer.poll(0)

        t = threading.Thread(target=produce, daemon=True)
        t.start()
        deadline = time.monotonic() + 15
        while len(acked) < 3000 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)  # mid-stream: requests are in flight
        proc.wait(10)
        stop.set()
        t.join(10)
        producer.flush(5)  # whatever is still queued fails: the broker is gone
        with lock:
            acknowledged = list(acked)
        assert len(acknowledged) >= 1000

        proc = _start(data, port, log_path)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False})
        ends = [consumer.get_watermark_offsets(TopicPartition("crash", p), timeout=10)[1] for p in (0, 1)]
        consumer.assign([TopicPartition("crash", p, OFFSET_BEGINNING) for p in (0, 1)])
        seen: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(seen) < sum(ends) and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                assert m.error() is None
                seen.append(m.value())
        consumer.close()
        counts = Counter(seen)
        missing = [v for v in acknowledged if counts[v] == 0]
        duplicated = [v for v in acknowledged if counts[v] > 1]
        assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:3]}"
        assert not duplicated, f"{len(duplicated)} acknowledged records duplicated, e.g. {duplicated[:3]}"
    finally:
        stop_process(proc, timeout=10)
