"""EmbeddedBroker (sync and async) and run_broker as a process (log line, SIGTERM exits cleanly)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

from helpers import free_port
from kaflite import EmbeddedBroker


def test_sync_context_manager_temp_dir_is_removed() -> None:
    with EmbeddedBroker() as b:
        assert b.port > 0 and b.bootstrap == f"127.0.0.1:{b.port}"
        data_dir = b.data_dir
        assert data_dir is not None and data_dir.exists()
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        assert admin.list_topics(timeout=10).controller_id == 0
    assert not data_dir.exists()
    b.stop()  # idempotent


def test_async_context_manager_with_aiokafka(tmp_path: Path) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run() -> None:
        async with EmbeddedBroker(data_dir=tmp_path) as b:
            producer = AIOKafkaProducer(bootstrap_servers=b.bootstrap)
            await producer.start()
            try:
                meta = await producer.send_and_wait("emb-async", b"hello")
            finally:
                await producer.stop()
            consumer = AIOKafkaConsumer(bootstrap_servers=b.bootstrap)
            await consumer.start()
            try:
                tp = TopicPartition("emb-async", meta.partition)
                consumer.assign([tp])
                await consumer.seek_to_beginning(tp)
                msg = await asyncio.wait_for(consumer.getone(), 10)
                assert msg.value == b"hello"
            finally:
                await consumer.stop()
        assert tmp_path.exists(), "a caller's data dir is kept"

    asyncio.run(run())


def test_fixed_port_and_overrides(tmp_path: Path) -> None:
    port = free_port()
    with EmbeddedBroker(data_dir=tmp_path, port=port, overrides={"num.partitions": "3"}) as b:
        assert b.port == port
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        md = admin.list_topics("emb-auto", timeout=10)  # auto-created with num.partitions
        deadline = time.monotonic() + 5
        while len(md.topics["emb-auto"].partitions) != 3 and time.monotonic() < deadline:
            md = admin.list_topics("emb-auto", timeout=10)
        assert len(md.topics["emb-auto"].partitions) == 3


def test_run_broker_process_logs_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "broker.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kaflite.server", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
         "--override", f"log.dirs={tmp_path / 'data'}"],
        stdout=open(log, "wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 20
        while "kaflite listening on" not in log.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            time.sleep(0.05)
        assert f"kaflite listening on 127.0.0.1:{port}" in log.read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        assert "kaflite stopped" in log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_bad_config_is_a_clear_error(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kaflite.server", "--override", "num.partitons=3"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 2
    assert "num.partitons" in out.stderr and "Traceback" not in out.stderr
