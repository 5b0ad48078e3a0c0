"""Recovery says what it did (`kaflite.storage`): records scanned, where and why a log was truncated,
which segments were deleted, which indexes were rebuilt; retention and compaction deletions too."""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path

import pytest
from brokerproc import BrokerProcess
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from helpers import poll_values
from kaflite.protocol.record_batch import build_record_batch
from kaflite.storage import Log, LogConfig
from kaflite.storage.checkpoint import RECOVERY_POINT_CHECKPOINT, read_offset_checkpoint
from kaflite.storage.cleaner import compact_log

CFG = LogConfig(segment_bytes=500, index_interval_bytes=50)


def _batch(value: bytes = b"x" * 40) -> bytes:
    return build_record_batch([(b"k", value, [])], timestamp_ms=1_700_000_000_000)


def _messages(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "kaflite.storage" and r.levelno == level]


def test_torn_tail_and_corrupt_index_are_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "t-0"
    log = Log(d, CFG)
    for _ in range(30):
        log.append(_batch())
    segs = log.segments
    end = log.log_end_offset
    log.close()
    with open(segs[-1].log_path, "ab") as f:  # a torn write: half a batch at the end
        f.write(_batch()[:37])
    with open(d / f"{segs[0].base_offset:020d}.index", "ab") as f:
        f.write(b"\x01\x02\x03")  # not a multiple of 8
    caplog.set_level(logging.INFO, logger="kaflite.storage")
    recovered = Log(d, CFG, recovery_point=segs[-1].base_offset)
    assert recovered.log_end_offset == end
    warnings = _messages(caplog, logging.WARNING)
    assert any(re.search(rf"t-0: truncated at offset {end} .*37 bytes discarded.*torn write", m) for m in warnings), warnings
    infos = _messages(caplog, logging.INFO)
    assert any(re.search(rf"t-0: recovered 1 segment\(s\).*scanned \d+ batches \(\d+ records\), log end offset {end}, "
                         r"indexes rebuilt", m) for m in infos), infos
    # segment 0 lies below the recovery point: opened lazily, its indexes read (and found corrupt) on first use
    assert recovered.segments[0].lazy and not any("rebuilding" in m for m in warnings), warnings
    assert recovered.read(0, 1 << 20).records
    warnings = _messages(caplog, logging.WARNING)
    assert any(re.search(r"t-0: rebuilding the indexes of segment 0 on first use: corrupt index", m)
               for m in warnings), warnings
    recovered.close()


def test_corrupt_middle_segment_names_the_deleted_segments(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "t-0"
    log = Log(d, CFG)
    for _ in range(30):
        log.append(_batch())
    segs = log.segments
    log.close()
    with open(segs[1].log_path, "r+b") as f:
        f.seek(segs[1].size - 10)
        f.write(b"\xff\xff")
    caplog.set_level(logging.INFO, logger="kaflite.storage")
    recovered = Log(d, CFG, recovery_point=0)
    later = [s.base_offset for s in segs[2:]]
    warnings = _messages(caplog, logging.WARNING)
    assert any("CRC-32C mismatch" in m and f"deleted the {len(later)} later segments {later}" in m
               for m in warnings), warnings
    recovered.close()


def test_retention_and_compaction_deletions_are_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kaflite.storage")
    log = Log(tmp_path / "r-0", LogConfig(segment_bytes=500, retention_bytes=600, retention_ms=-1))
    for _ in range(30):
        log.append(_batch())
    log.update_high_watermark(log.log_end_offset)
    n = log.delete_old_segments()
    assert n > 0
    assert any(re.search(rf"r-0: deleted {n} segment\(s\) .* past retention.bytes; log start offset now "
                         rf"{log.log_start_offset}", m) for m in _messages(caplog, logging.INFO))
    log.close()
    c = Log(tmp_path / "c-0", LogConfig(segment_bytes=500, cleanup_policy="compact", min_compaction_lag_ms=0))
    for _ in range(30):
        c.append(_batch())
    c.update_high_watermark(c.log_end_offset)
    assert compact_log(c, int(time.time() * 1000), force=True).records_removed > 0
    assert any(re.search(r"c-0: compacted \d+ segment\(s\) up to offset \d+: \d+ records removed", m)
               for m in _messages(caplog, logging.INFO))
    c.close()


def test_kill_9_with_a_torn_tail_logs_truncation_and_index_rebuild(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(data, {"log.segment.bytes": "2000"})
    broker.start()
    try:
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "acks": "all"})
        acked = []
        for i in range(100):
            p.produce("torn", value=b"v%03d" % i, partition=0,
                      on_delivery=lambda err, msg: acked.append(msg.offset()) if err is None else None)
            p.flush(10)
        assert len(acked) == 100
        # the recovery-point checkpoint (rewritten every 5 s) covers the sealed segments
        active = max(int(f.stem) for f in (data / "torn-0").glob("*.log"))
        deadline = time.monotonic() + 30
        while read_offset_checkpoint(data / RECOVERY_POINT_CHECKPOINT).get(("torn", 0), -1) < active:
            assert time.monotonic() < deadline, "the recovery point was not checkpointed within 30 s"
            time.sleep(0.1)
    finally:
        broker.kill()
    d = data / "torn-0"
    logs = sorted(d.glob("*.log"))
    assert len(logs) > 2
    with open(logs[-1], "ab") as f:
        f.write(_batch()[:30])  # the torn tail of a write in progress when the process died
    with open(logs[0].with_suffix(".index"), "ab") as f:
        f.write(b"\x00\x01\x02")  # a corrupt index of a sealed segment
    broker.start()
    try:
        text = broker.log()
        assert re.search(rf"WARNING kaflite.storage: torn-0: truncated at offset 100 \(byte \d+ of segment "
                         rf"{int(logs[-1].stem)}, 30 bytes discarded\): incomplete or unreadable batch", text), text
        assert re.search(r"INFO kaflite.storage: torn-0: recovered \d+ segment\(s\) .*log end offset 100, indexes rebuilt",
                         text), text
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "enable.auto.commit": False})
        c.assign([TopicPartition("torn", 0, OFFSET_BEGINNING)])
        got = poll_values(c, 100)
        c.close()
        assert got == [b"v%03d" % i for i in range(100)]
        # segment 0 (below the recovery point) was opened lazily: its corrupt index is found, and rebuilt, by
        # the first fetch that reads it
        assert re.search(r"WARNING kaflite.storage: torn-0: rebuilding the indexes of segment 0 on first use: corrupt "
                         r"index", broker.log()), broker.log()
        assert broker.stop() == 0
    finally:
        broker.kill()
    assert os.path.exists(d)


def test_kill_9_under_kafkas_default_flush_settings_rescans_only_the_active_segment(tmp_path: Path) -> None:
    """No flush.ms, flush.messages Long.MAX (Kafka's defaults): the rolls are flushed by the housekeeping
    thread (Kafka's flush on roll), so the checkpointed recovery point is the active segment's base and a
    kill -9 costs a rescan of that segment only. (Before, the recovery point stayed 0: every segment
    written since the last clean start was rescanned, and rolled segments were never fsync'd.)"""
    data = tmp_path / "data"
    broker = BrokerProcess(data, {"log.segment.bytes": "2000", "log.flush.interval.messages": str(2**63 - 1)})
    broker.start()
    try:
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "acks": "all"})
        for i in range(100):
            p.produce("rolled", value=b"v%03d" % i, partition=0)
            p.flush(10)
        d = data / "rolled-0"
        active = max(int(f.stem) for f in d.glob("*.log"))
        assert active > 0
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # the housekeeping pass (every second at most) and its checkpoint
            if read_offset_checkpoint(data / RECOVERY_POINT_CHECKPOINT).get(("rolled", 0)) == active:
                break
            time.sleep(0.1)
        assert read_offset_checkpoint(data / RECOVERY_POINT_CHECKPOINT).get(("rolled", 0)) == active
    finally:
        broker.kill()
    broker.start()
    try:
        text = broker.log()
        assert re.search(rf"INFO kaflite.storage: rolled-0: recovered 1 segment\(s\) \[{active}\] from recovery point "
                         rf"{active}: .*log end offset 100", text), text
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "enable.auto.commit": False})
        c.assign([TopicPartition("rolled", 0, OFFSET_BEGINNING)])
        got = poll_values(c, 100)
        c.close()
        assert got == [b"v%03d" % i for i in range(100)]
        assert broker.stop() == 0
    finally:
        broker.kill()


def test_kill_9_after_many_segments_recovers_from_the_recovery_point_and_reads_no_older_segment(
        tmp_path: Path) -> None:
    """Issue 25's recovery acceptance, scaled down: a broker under Kafka's default flush settings writes
    200 MB over 200 segments of 1 MiB (KAFLITE_SOAK=1: the issue's 2 GiB over 2,000) with acks=all, is
    killed with SIGKILL once the housekeeping thread flushed the rolls, and after a restart it rescans the
    active segment only (not the log written since the last clean start) and opens every older segment
    lazily: no index read, no descriptor, no header read before a client asks for it (the broker's load line
    says so: it counted 199 of 200 before; before lazy loading the line had no such count and every segment's
    indexes were read at start); every acknowledged record is there, unchanged. How soon the broker answers
    is a speed goal, measured by bench/recovery_bench.py against an empty broker in the same run, not here:
    a bound in seconds failed under the shared machine's load whatever the code did."""
    from confluent_kafka.admin import AdminClient

    segments = 2000 if os.environ.get("KAFLITE_SOAK") == "1" else 200
    record = 100_000  # 10 records of 100 KB per 1 MiB segment
    count = segments * 10
    data = tmp_path / "data"
    broker = BrokerProcess(data, {"log.segment.bytes": str(1 << 20), "log.flush.interval.messages": str(2**63 - 1)})
    broker.start()
    acked: dict[int, int] = {}  # offset -> record number
    try:
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "acks": "all",
                      "batch.size": 1 << 20, "queue.buffering.max.kbytes": 256 * 1024})

        def delivered(err: object, msg: object) -> None:
            if err is None:
                acked[msg.offset()] = int(msg.value()[:8])  # type: ignore[attr-defined]

        filler = os.urandom(record - 8)
        for i in range(count):
            while True:
                try:
                    p.produce("big", value=b"%08d" % i + filler, partition=0, on_delivery=delivered)
                    break
                except BufferError:
                    p.poll(0.05)
            p.poll(0)
        assert p.flush(120) == 0
        assert len(acked) == count
        d = data / "big-0"
        active = max(int(f.stem) for f in d.glob("*.log"))
        assert len(list(d.glob("*.log"))) >= segments * 9 // 10
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the housekeeping pass flushed the rolls and checkpointed
            if read_offset_checkpoint(data / RECOVERY_POINT_CHECKPOINT).get(("big", 0)) == active:
                break
            time.sleep(0.1)
        assert read_offset_checkpoint(data / RECOVERY_POINT_CHECKPOINT).get(("big", 0)) == active
    finally:
        broker.kill()
    on_disk = len(list(d.glob("*.log")))
    broker.start()
    try:
        md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics("big", timeout=30)
        assert md.topics["big"].error is None
        text = broker.log()
        assert re.search(rf"big-0: recovered 1 segment\(s\) \[{active}\] from recovery point {active}", text), text
        assert re.search(rf"loaded 1 logs from .*[(;] ?no clean-shutdown marker: 1 recovered; {on_disk - 1} of {on_disk} "
                         r"segments opened lazily", text), text
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "enable.auto.commit": False,
                      "fetch.max.bytes": 8 << 20, "max.partition.fetch.bytes": 8 << 20})
        c.assign([TopicPartition("big", 0, OFFSET_BEGINNING)])
        got: dict[int, int] = {}
        deadline = time.monotonic() + 120
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                value = m.value()
                assert value[8:] == filler
                got[m.offset()] = int(value[:8])
        c.close()
        assert got == acked
        assert broker.stop() == 0
    finally:
        broker.kill()
