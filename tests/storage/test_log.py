"""Log: append / read / offsets / reopen, rolls, validation leaves the log unchanged, timestamps."""

from __future__ import annotations

import os
import struct
import threading
import time
from pathlib import Path

import pytest

from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.record_batch import (
    RecordBatchView,
    build_record_batch,
    crc32c,
    decode_records,
    iter_batches,
)
from kaflite.storage import Log, LogConfig
from storage.storage_util import ManualClock, batch, fetched_offsets

TS = 1_700_000_000_000


def test_append_assigns_dense_offsets_and_read_returns_them(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0")
    r1 = log.append(batch(3))
    r2 = log.append(batch(2), leader_epoch=4)
    assert (r1.base_offset, r1.last_offset, r2.base_offset, r2.last_offset) == (0, 2, 3, 4)
    assert r1.log_append_time == -1 and not r1.duplicate and r1.log_start_offset == 0
    assert log.log_end_offset == 5
    info = log.read(0, 1 << 20)
    views = [v for buf in info.records for v in iter_batches(buf)]
    assert [(v.base_offset, v.last_offset, v.partition_leader_epoch) for v in views] == [(0, 2, 0), (3, 4, 4)]
    assert all(v.crc_ok() for v in views) and info.size == sum(v.size for v in views)
    # a read inside a batch starts at that batch
    assert fetched_offsets(log.read(4, 1 << 20).records) == [(3, 4)]
    # at the log end: empty; beyond either end: OFFSET_OUT_OF_RANGE
    assert log.read(5, 100).records == []
    for bad in (6, -1):
        with pytest.raises(KafkaError) as e:
            log.read(bad, 100)
        assert e.value.code == ErrorCode.offset_out_of_range
    log.close()


def test_read_respects_max_bytes_max_offset_and_min_one_message(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(index_interval_bytes=100))
    size = len(batch(1, value=b"x" * 200))
    for _ in range(10):
        log.append(batch(1, value=b"x" * 200))
    assert fetched_offsets(log.read(0, size * 3 + 10).records) == [(0, 0), (1, 1), (2, 2)]
    assert fetched_offsets(log.read(2, 10).records) == [(2, 2)]  # first batch bigger than max_bytes
    assert log.read(2, 10, min_one_message=False).records == []
    assert fetched_offsets(log.read(0, 1 << 20, max_offset=4).records) == [(0, 0), (1, 1), (2, 2), (3, 3)]
    assert log.read(4, 1 << 20, max_offset=4).records == []
    log.update_high_watermark(7)
    assert log.high_watermark == 7
    assert fetched_offsets(log.read(6, 1 << 20, max_offset=log.high_watermark).records) == [(6, 6)]


def test_reopen_keeps_everything(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=600, index_interval_bytes=50)
    log = Log(tmp_path / "t-3", cfg)
    assert (log.topic, log.partition) == ("t", 3)
    payloads = []
    for i in range(40):
        raw = build_record_batch([(b"k%d" % i, b"v%d" % i, [])], timestamp_ms=TS + i)
        payloads.append(b"v%d" % i)
        log.append(raw)
    assert len(log.segments) > 3
    before = b"".join(s.read_all() for s in log.segments)
    log.close()
    names = sorted(p.name for p in (tmp_path / "t-3").iterdir())
    assert "00000000000000000000.log" in names and "00000000000000000000.index" in names
    assert "00000000000000000000.timeindex" in names and "leader-epoch-checkpoint" in names
    for recovery_point, clean in ((40, True), (0, False), (13, False)):
        log2 = Log(tmp_path / "t-3", cfg, recovery_point=recovery_point, had_clean_shutdown=clean)
        assert log2.log_end_offset == 40 and log2.recovered_bytes_truncated == 0
        assert b"".join(s.read_all() for s in log2.segments) == before
        values = []
        off = 0
        while off < 40:
            info = log2.read(off, 1000)
            for buf in info.records:
                for v in iter_batches(buf):
                    values += [r.value for r in decode_records(v) if r.offset >= off]
                    off = v.next_offset
        assert values == payloads
        assert log2.offset_for_timestamp(TS + 17) == (17, TS + 17)
        r = log2.append(batch(1))
        assert r.base_offset == 40
        log2.truncate_to(40)
        log2.close()


def test_segments_roll_by_size_and_by_time(tmp_path: Path, clock: ManualClock) -> None:
    one = len(batch(1, ts=clock.ms))
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=one * 3, segment_ms=1000), now_ms=clock)
    for _ in range(7):
        log.append(batch(1, ts=clock.ms))
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    clock.advance(1001)
    log.append(batch(1, ts=clock.ms))  # the active segment's first batch is older than segment.ms
    assert [s.base_offset for s in log.segments] == [0, 3, 6, 7]
    log.append(batch(1, ts=clock.ms))
    assert [s.base_offset for s in log.segments] == [0, 3, 6, 7]
    for s in log.segments:
        assert (tmp_path / "t-0" / f"{s.base_offset:020d}.log").exists()


def test_record_list_too_large_and_message_too_large(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=300, max_message_bytes=200))
    with pytest.raises(KafkaError) as e:
        log.append(batch(1, value=b"x" * 250))
    assert e.value.code == ErrorCode.message_too_large
    with pytest.raises(KafkaError) as e:
        log.append(batch(1, value=b"x" * 100) * 4)
    assert e.value.code == ErrorCode.record_list_too_large
    assert log.log_end_offset == 0 and log.size == 0


def _corruptions() -> list[tuple[str, bytes, ErrorCode]]:
    good = batch(3, value=b"payload")
    flipped_crc = bytearray(good)
    flipped_crc[18] ^= 0x40
    flipped_body = bytearray(good)
    flipped_body[-3] ^= 0x01
    wrong_count = bytearray(good)
    struct.pack_into(">i", wrong_count, 57, 2)
    struct.pack_into(">I", wrong_count, 17, crc32c(bytes(wrong_count[21:])))
    huge = bytearray(good)
    struct.pack_into(">i", huge, 8, 2**31 - 1)
    nonzero_base = bytearray(good)
    struct.pack_into(">q", nonzero_base, 0, 5)
    return [
        ("flipped crc byte", bytes(flipped_crc), ErrorCode.corrupt_message),
        ("flipped payload byte", bytes(flipped_body), ErrorCode.corrupt_message),
        ("truncated batch", good[:-5], ErrorCode.corrupt_message),
        ("truncated header", good[:30], ErrorCode.corrupt_message),
        ("wrong record count", bytes(wrong_count), ErrorCode.invalid_record),
        ("huge length", bytes(huge), ErrorCode.corrupt_message),
        ("good then garbage", good + b"\x00" * 20, ErrorCode.corrupt_message),
        ("client base offset", bytes(nonzero_base), ErrorCode.invalid_record),
        ("empty", b"", ErrorCode.invalid_record),
    ]


@pytest.mark.parametrize("name, raw, code", _corruptions(), ids=[c[0] for c in _corruptions()])
def test_corrupt_input_is_refused_and_leaves_the_log_unchanged(tmp_path: Path, name: str, raw: bytes,
                                                               code: ErrorCode) -> None:
    log = Log(tmp_path / "t-0")
    log.append(batch(2))
    files_before = {p.name: p.read_bytes() for p in (tmp_path / "t-0").iterdir() if p.suffix == ".log"}
    with pytest.raises(KafkaError) as e:
        log.append(raw)
    assert e.value.code == code, name
    assert log.log_end_offset == 2
    assert {p.name: p.read_bytes() for p in (tmp_path / "t-0").iterdir() if p.suffix == ".log"} == files_before
    assert log.append(batch(1)).base_offset == 2


def test_log_append_time_rewrites_max_timestamp_and_crc(tmp_path: Path, clock: ManualClock) -> None:
    log = Log(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"), now_ms=clock)
    r = log.append(batch(2, ts=5))
    assert r.log_append_time == clock.ms
    (v,) = list(iter_batches(log.read(0, 10000).records[0]))
    assert v.crc_ok() and v.timestamp_type == 1 and v.max_timestamp == clock.ms and v.first_timestamp == 5
    assert [rec.timestamp for rec in decode_records(v)] == [clock.ms, clock.ms]
    assert log.offset_for_timestamp(clock.ms) == (0, clock.ms)


def test_create_time_bounds(tmp_path: Path, clock: ManualClock) -> None:
    log = Log(tmp_path / "t-0", LogConfig(message_timestamp_before_max_ms=1000,
                                          message_timestamp_after_max_ms=1000), now_ms=clock)
    log.append(batch(1, ts=clock.ms - 999))
    for ts in (clock.ms - 2000, clock.ms + 2000):
        with pytest.raises(KafkaError) as e:
            log.append(batch(1, ts=ts))
        assert e.value.code == ErrorCode.invalid_timestamp


def test_offset_for_timestamp_uses_record_timestamps(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(index_interval_bytes=0, segment_bytes=400))
    # batches with out-of-order record timestamps inside
    for i in range(20):
        log.append(build_record_batch([(b"a", b"1", []), (b"b", b"2", [])], timestamps=[TS + 10 * i + 5, TS + 10 * i]))
    assert len(log.segments) > 2
    assert log.offset_for_timestamp(TS) == (0, TS + 5)
    assert log.offset_for_timestamp(TS + 6) == (2, TS + 15)  # record 1 (TS) is older, record 2 is TS+15
    assert log.offset_for_timestamp(TS + 100) == (20, TS + 105)
    assert log.offset_for_timestamp(TS + 196) is None
    assert log.offset_for_timestamp(-2) == (0, -1)
    assert log.offset_for_timestamp(-1) == (40, -1)
    assert log.offset_for_timestamp(-3) == (38, TS + 195)


def test_delete_records_and_truncate_to(tmp_path: Path) -> None:
    one = len(batch(1))
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=one * 2))
    for _ in range(10):
        log.append(batch(1))
    with pytest.raises(KafkaError) as e:
        log.delete_records(5)  # above the high watermark
    assert e.value.code == ErrorCode.offset_out_of_range
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_records(5) == 5
    assert log.log_start_offset == 5 and log.segments[0].base_offset == 4
    with pytest.raises(KafkaError):
        log.read(4, 100)
    assert fetched_offsets(log.read(5, 100).records) == [(5, 5)]
    assert log.truncate_to(7)
    assert log.log_end_offset == 7 and log.high_watermark == 7
    assert log.append(batch(1)).base_offset == 7
    assert not log.truncate_to(100)
    log.truncate_to(2)  # below the log start: start afresh
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (2, 2, 1)
    assert log.append(batch(1)).base_offset == 2


def test_truncate_inside_a_batch_removes_the_whole_batch(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0")
    log.append(batch(3))
    log.append(batch(3))
    log.truncate_to(4)
    assert log.log_end_offset == 3
    log.close()
    assert Log(tmp_path / "t-0").log_end_offset == 3


def test_replica_append_keeps_offsets(tmp_path: Path) -> None:
    leader = Log(tmp_path / "t-0")
    for i in range(5):
        leader.append(batch(2), leader_epoch=i // 2)
    data = leader.read(0, 1 << 20).records[0]
    follower = Log(tmp_path / "t-1")
    r = follower.append(data, assign_offsets=False)
    assert (r.base_offset, r.last_offset) == (0, 9)
    assert follower.read(0, 1 << 20).records[0] == data
    assert follower.leader_epoch_cache.entries == [(0, 0), (1, 4), (2, 8)]
    assert follower.leader_epoch_cache.end_offset_for(1, follower.log_end_offset) == (1, 8)
    with pytest.raises(KafkaError) as e:
        follower.append(data, assign_offsets=False)  # offsets already present
    assert e.value.code == ErrorCode.invalid_record


def test_flush_messages_one_asks_for_a_flush_and_the_append_itself_never_fsyncs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (calls.append(fd), real(fd))[1])
    log = Log(tmp_path / "t-0", LogConfig(flush_interval_messages=1))
    calls.clear()
    r = log.append(batch(1))
    assert calls == [] and log.flush_needed(r.last_offset + 1)  # the append (on the loop) does not fsync
    assert log.flush_up_to(r.last_offset + 1)
    assert len(calls) == 1 and log.recovery_point == 1 and log.unflushed_messages == 0
    assert not log.flush_needed(1) and not log.flush_up_to(1)  # covered: no second fsync
    assert len(calls) == 1
    lazy = Log(tmp_path / "t-1")
    calls.clear()
    r = lazy.append(batch(1))
    assert calls == [] and lazy.unflushed_messages == 1 and not lazy.flush_needed(r.last_offset + 1)


def test_flush_messages_one_group_commit_one_fsync_covers_concurrent_appends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Producers that appended while an fsync was running share the next one; the log's lock is free
    during the fsync, so appends go on meanwhile."""
    log = Log(tmp_path / "t-0", LogConfig(flush_interval_messages=1))
    in_fsync = threading.Event()
    release = threading.Event()
    calls: list[int] = []
    real = os.fdatasync

    def slow_fdatasync(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 1:
            in_fsync.set()
            assert release.wait(10)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", slow_fdatasync)
    first = log.append(batch(1))
    t1 = threading.Thread(target=log.flush_up_to, args=(first.last_offset + 1,))
    t1.start()
    assert in_fsync.wait(10)
    # appends while the first fsync runs: they do not wait for it (no lock held), and each asks for a flush
    ends = [log.append(batch(1)).last_offset + 1 for _ in range(5)]
    assert all(log.flush_needed(e) for e in ends)
    waiters = [threading.Thread(target=log.flush_up_to, args=(e,)) for e in ends]
    for t in waiters:
        t.start()
    time.sleep(0.05)
    release.set()
    for t in [t1, *waiters]:
        t.join(10)
    assert len(calls) == 2  # the first producer's fsync, then ONE for the five that came during it
    assert log.recovery_point == log.log_end_offset == 6


def test_flush_due_by_time(tmp_path: Path, clock: ManualClock) -> None:
    log = Log(tmp_path / "t-0", LogConfig(flush_interval_ms=1000), now_ms=clock)
    log.append(batch(1))
    assert not log.flush_due(clock.ms + 500)
    assert log.flush_due(clock.ms + 1000) and log.recovery_point == 1
    assert not log.flush_due(clock.ms + 5000)  # nothing new


def test_closed_log_refuses_appends(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0")
    log.close()
    with pytest.raises(KafkaError) as e:
        log.append(batch(1))
    assert e.value.code == ErrorCode.kafka_storage_error


def test_memoryview_and_bytearray_input(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0")
    raw = bytearray(b"\x00" * 7 + batch(2))
    log.append(memoryview(raw)[7:])
    log.append(bytearray(batch(1)))
    assert log.log_end_offset == 3
    assert RecordBatchView.parse(log.read(0, 1000).records[0]).base_offset == 0
