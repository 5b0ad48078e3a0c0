"""A Log shared by threads (the event loop plus a flusher/retention thread): appends, reads,
DeleteRecords, retention, flushes and checkpoints interleave without errors, deadlocks or gaps."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.record_batch import iter_batches
from kaflite.storage import LogConfig, LogManager
from storage.storage_util import batch


def test_threads_share_a_log(tmp_path: Path) -> None:
    m = LogManager([tmp_path], LogConfig(segment_bytes=2000, retention_bytes=6000, flush_interval_ms=5))
    m.load()
    log = m.get_or_create("shared", 0)
    stop = time.monotonic() + 1.5
    errors: list[BaseException] = []

    def guard(fn):  # type: ignore[no-untyped-def]
        def run() -> None:
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - reported by the test thread
                errors.append(e)
        return run

    def appender() -> None:
        while time.monotonic() < stop:
            log.append(batch(2, value=b"x" * 50))
            log.update_high_watermark(log.log_end_offset)

    def reader() -> None:
        offset = 0
        while time.monotonic() < stop:
            try:
                info = log.read(offset, 4096, max_offset=log.high_watermark)
            except KafkaError as e:
                assert e.code == ErrorCode.offset_out_of_range
                offset = log.log_start_offset  # retention moved past us: reset, as a consumer would
                continue
            for buf in info.records:
                for v in iter_batches(buf):
                    assert v.crc_ok() and v.last_offset >= offset
                    offset = v.next_offset

    def maintenance() -> None:
        n = 0
        while time.monotonic() < stop:
            n += 1
            now = int(time.time() * 1000)
            m.run_retention(now)
            m.flush_due(now)
            if n % 7 == 0:
                hw = log.high_watermark
                log.delete_records(max(log.log_start_offset, hw - 20))
            m.checkpoint()

    threads = [threading.Thread(target=guard(f)) for f in (appender, reader, maintenance)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "deadlock"
    assert not errors, errors
    assert log.log_start_offset > 0 and log.log_end_offset > log.log_start_offset
    m.close()
    m2 = LogManager([tmp_path], LogConfig(segment_bytes=2000))
    m2.load()
    again = m2.get("shared", 0)
    assert again is not None and again.log_end_offset == log.log_end_offset
    assert again.log_start_offset == log.log_start_offset
    m2.close()
