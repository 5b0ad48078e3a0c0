"""Blocking storage work runs off the event loop: the housekeeping passes (flush, retention, compaction)
and the `__consumer_offsets` replay run in worker threads, and the loop keeps answering meanwhile."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kaflite.coordinator import OFFSETS_TOPIC
from kaflite.protocol.record_batch import build_record_batch
from kaflite.server.embedded import EmbeddedBroker
from kaflite.server.handlers.groups import GroupService, OffsetsTopicWriter


def test_a_slow_housekeeping_pass_does_not_stall_the_loop(tmp_path: Path) -> None:
    overrides = {"log.flush.scheduler.interval.ms": "20", "log.cleaner.backoff.ms": "100"}
    with EmbeddedBroker(data_dir=tmp_path, overrides=overrides) as b:
        loop_thread = b.call(threading.get_ident)
        manager = b.server.broker.log_manager
        seen: list[int] = []
        busy = threading.Event()
        real = manager.run_compaction

        def slow_compaction(now_ms: int | None = None) -> int:
            seen.append(threading.get_ident())
            busy.set()
            time.sleep(1.0)  # a cleaner pass rewriting a big segment
            return real(now_ms)

        manager.run_compaction = slow_compaction
        try:
            assert busy.wait(30), "no compaction pass ran"
            t0 = time.monotonic()
            b.call(lambda: None)  # the loop answers while the pass is still sleeping
            answered_in = time.monotonic() - t0
        finally:
            manager.run_compaction = real
        assert seen and all(ident != loop_thread for ident in seen)
        assert answered_in < 0.9, f"the loop waited {answered_in:.2f} s for the housekeeping pass"


def test_offsets_replay_reads_in_a_worker_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readers: list[int] = []
    sizes: set[int] = set()
    real = OffsetsTopicWriter.loaded_records

    def records(lg: Any, read_bytes: int) -> Any:
        readers.append(threading.get_ident())
        sizes.add(read_bytes)
        return real(lg, read_bytes)

    monkeypatch.setattr(OffsetsTopicWriter, "loaded_records", staticmethod(records))
    monkeypatch.setattr(OffsetsTopicWriter, "THREAD_MIN_BYTES", 0)  # as if the partition were big
    with EmbeddedBroker(data_dir=tmp_path, overrides={"offsets.load.buffer.size": "4096"}) as b:
        broker = b.server.broker
        loop_thread = b.call(threading.get_ident)

        def setup() -> Any:
            service = GroupService.of(broker)
            readers.clear()  # the start-up loads of the (empty) partitions
            # a key the replay cannot read (it skips it, logged): the partition is no longer empty
            broker.append(OFFSETS_TOPIC, 0, build_record_batch([(b"\xff\xff", b"x", [])]))
            return service.writer.read(0), service.writer.read(1)

        nonempty, empty = b.call(setup)
        assert list(empty) == [] and readers == [loop_thread]  # an empty partition is read at once
        readers.clear()

        async def replay() -> Any:
            return await nonempty

        records_read = asyncio.run_coroutine_threadsafe(replay(), b._loop).result(30)  # noqa: SLF001
        assert records_read == [(b"\xff\xff", b"x")]
        assert readers and all(ident != loop_thread for ident in readers)
        assert sizes == {4096}  # offsets.load.buffer.size is the read size of the replay


def test_flush_before_acknowledge_fsyncs_off_the_loop_before_the_answer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """flush.messages=1: the produce is answered after its fdatasync, which runs in a worker thread (an
    fsync on the loop made every connection wait for every fsync)."""
    from confluent_kafka import Producer

    syncs: list[int] = []
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        syncs.append(threading.get_ident())
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    with EmbeddedBroker(data_dir=tmp_path, overrides={"log.flush.interval.messages": "1"}) as b:
        loop_thread = b.call(threading.get_ident)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "acks": 1})
        durable_at_ack: list[tuple[int, int]] = []
        log_ = None
        for i in range(5):
            syncs.clear()

            def delivered(err: Any, msg: Any) -> None:
                assert err is None, err
                lg = b.server.broker.log_manager.get("durable", 0)
                durable_at_ack.append((msg.offset(), lg.recovery_point))

            p.produce("durable", value=b"v%d" % i, partition=0, on_delivery=delivered)
            assert p.flush(30) == 0
            assert syncs and loop_thread not in syncs, "fdatasync ran on the event loop"
        log_ = b.server.broker.log_manager.get("durable", 0)
        assert log_ is not None
        # each answer came after the fsync that covered its record
        assert all(rp > offset for offset, rp in durable_at_ack), durable_at_ack
