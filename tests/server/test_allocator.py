"""kaflite.server.allocator: glibc's mmap and trim thresholds in the broker's own process, so the chunks a
Fetch answer is sent in reuse freed memory instead of faulting fresh pages in for every chunk."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import free_port

PROBE = "from kaflite.server.allocator import tune_allocator; print(tune_allocator())"


def _env(**env: str) -> dict[str, str]:
    """This environment without glibc's malloc knobs (which turn the tuning off), plus `env`."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    return clean | env


def _probe(**env: str) -> str:
    out = subprocess.run([sys.executable, "-c", PROBE], env=_env(**env), capture_output=True, text=True,
                         timeout=60, check=True)
    return out.stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_tuned_unless_the_user_set_glibc_s_own_knobs() -> None:
    assert _probe() == "True"
    assert _probe(MALLOC_TRIM_THRESHOLD_="131072") == "False"
    assert _probe(MALLOC_MMAP_THRESHOLD_="131072") == "False"
    assert _probe(GLIBC_TUNABLES="glibc.malloc.trim_threshold=131072") == "False"
    assert _probe(GLIBC_TUNABLES="glibc.rtld.nns=4") == "True"  # a tunable of something else


def _minor_faults(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


def _broker_faults(tmp_path: Path, **env: str) -> tuple[int, int]:
    """A broker process (`python -m kaflite serve`): its minor page faults while 32 MiB in one partition are
    read whole with Fetch v12 and 4 MiB per answer (after a first read), and while 64 MiB of 100-byte
    rows are produced by the Spark sink's client (after a first 16 MiB)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from kaflite.spark.fetch import FetchConnection

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kaflite", "serve", "--host", "127.0.0.1", "--port", str(port), "--log-dir",
         str(tmp_path / f"data-{port}")], env=_env(**env), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the broker did not listen in time"
                time.sleep(0.1)
        bootstrap = f"127.0.0.1:{port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("chunks", 1, 1)])["chunks"].result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        value = b"v" * 1000
        for i in range(32 * 1024):
            producer.produce("chunks", value, partition=0)
            if i % 4096 == 0:
                producer.poll(0)
        assert producer.flush(60) == 0

        def read_all() -> None:
            conn = FetchConnection("127.0.0.1", port, "test", 30)
            try:
                offset = 0
                for _ in range(1000):
                    correlation = conn.send_fetch("chunks", 0, offset, 4 << 20, False)
                    # a reader slower than the broker (Spark's is): the socket fills, and the answer's
                    # chunks wait in the broker, several alive at a time
                    time.sleep(0.02)
                    part = conn.receive_fetch(correlation, "chunks", 0)
                    assert part.error_code == 0 and part.records is not None
                    last = offset
                    pos, data = 0, part.records
                    while len(data) - pos >= 61:  # batch headers: base offset, length, last offset delta
                        base = int.from_bytes(data[pos:pos + 8], "big")
                        length = int.from_bytes(data[pos + 8:pos + 12], "big")
                        if pos + 12 + length > len(data):
                            break
                        last = base + int.from_bytes(data[pos + 23:pos + 27], "big") + 1
                        pos += 12 + length
                    if last >= 32 * 1024:
                        return
                    offset = last
                raise AssertionError("the partition was not read to its end")
            finally:
                conn.close()

        read_all()  # warm-up: the heap grows to what a pass needs
        before = _minor_faults(proc.pid)
        read_all()
        fetch_faults = _minor_faults(proc.pid) - before

        admin.create_topics([NewTopic("frames", 3, 1)])["frames"].result(30)
        # the Spark sink's client: one batch of up to 1 MB per partition in each Produce request, keyed
        # rows over three partitions, frames of up to 3 MB
        import pyarrow as pa

        from kaflite.spark.options import parse_writer_options
        from kaflite.spark.produce import ArrowProducer
        from kaflite.spark.writer import produce_arrow

        options = parse_writer_options({"kafka.bootstrap.servers": bootstrap, "topic": "frames"})
        keys = pa.array([b"key-%06d" % (i % 1000) for i in range(10_000)], pa.binary())
        rows = pa.record_batch([keys, pa.array([b"x" * 100] * 10_000, pa.binary())], names=["key", "value"])

        def produce(mib: int) -> None:
            n = mib * 1024 * 1024 // 120 // 10_000
            with ArrowProducer({"bootstrap.servers": bootstrap}).start() as producer:
                assert produce_arrow(producer, options, iter([rows] * n), None) == n * 10_000

        produce(16)
        before = _minor_faults(proc.pid)
        produce(64)
        return fetch_faults, _minor_faults(proc.pid) - before
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate(timeout=5)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt, /proc")
def test_fetched_and_produced_bytes_fault_no_fresh_pages_in_the_broker(tmp_path: Path) -> None:
    tuned = _broker_faults(tmp_path)
    # glibc's defaults, fixed (the knob also turns the tuning off): every chunk's and frame's pages
    # faulted in afresh
    default = _broker_faults(
        tmp_path, GLIBC_TUNABLES="glibc.malloc.trim_threshold=131072:glibc.malloc.mmap_threshold=131072")
    # fetch: measured 1,300-5,071 faults with glibc's defaults and 0-166 tuned
    assert default[0] > 1000
    assert tuned[0] < default[0] / 10, (tuned, default)
    # produce: 16,120 with the defaults, 4-1,254 tuned, 4,631 with the mmap threshold at 1 MiB (frames above it)
    assert tuned[1] < default[1] / 5, (tuned, default)
