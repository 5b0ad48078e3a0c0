"""The replica hot path (Log._append_replica: one header walk, log_validator.scan_replica_batches, the whole
fetched buffer in one write) against the general path (Log._append_general with assign_offsets=False, its
RecordBatchView per batch): for random sequences of fetched record sets -- plain, idempotent, transactional
and compressed batches, COMMIT / ABORT markers, leader-epoch bumps, offset gaps (a compacted leader),
truncations, segment rolls and index entries, and corrupt or out-of-order sets -- both give the same
results and errors, the same bytes in every file (.log, .index, .timeindex, .txnindex, .snapshot), the same
producer state, open transactions, last stable offset and leader-epoch cache."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflite.protocol.control_record import build_marker_batch
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.record_batch import build_record_batch
from kaflite.storage import Log, LogConfig
from kaflite.storage.log_validator import scan_replica_batches
from storage.storage_util import ManualClock

_TS = 1_700_000_000_000

# one batch of a fetched set: (kind, producer id, record count, compression, offset gap before it, a new
# leader epoch from it on: a set fetched across an election holds batches of several epochs)
_batch = st.tuples(st.sampled_from(["plain", "idem", "txn", "txn", "commit", "abort"]), st.sampled_from([1, 2]),
                   st.integers(1, 4), st.sampled_from([0, 0, 1, 4]), st.sampled_from([0, 0, 0, 3]),
                   st.sampled_from([False, False, False, True]))
# one step: fetch a set of 1-5 batches (maybe under a new leader epoch, maybe damaged), or truncate
_fetch = st.tuples(st.just("fetch"), st.lists(_batch, min_size=1, max_size=5), st.booleans(),
                   st.sampled_from(["none", "none", "none", "crc", "behind", "cut", "magic"]))
_truncate = st.tuples(st.just("truncate"), st.integers(0, 6), st.just(False), st.just("none"))
steps = st.lists(st.one_of(_fetch, _fetch, _fetch, _truncate), min_size=1, max_size=25)


class _Leader:
    """What a leader's log would hold: offsets, epochs, sequences and transactions, kept consistent."""

    def __init__(self) -> None:
        self.epoch = 0
        self.seq: dict[tuple[int, int], int] = {}
        self.producer_epoch = {1: 0, 2: 3}

    def build(self, spec: list[tuple[Any, ...]], start: int, new_epoch: bool, ts: int) -> bytes:
        if new_epoch:
            self.epoch += 1
        out = b""
        offset = start
        for kind, pid, count, compression, gap, bump in spec:
            offset += gap
            self.epoch += bump
            pepoch = self.producer_epoch[pid]
            if kind in ("commit", "abort"):
                out += build_marker_batch(pid, pepoch, kind == "commit", 5, ts, base_offset=offset,
                                          partition_leader_epoch=self.epoch)
                offset += 1
                continue
            kw: dict[str, Any] = {}
            if kind != "plain":
                s = self.seq.get((pid, pepoch), 0)
                self.seq[(pid, pepoch)] = s + count
                kw = {"producer_id": pid, "producer_epoch": pepoch, "base_sequence": s,
                      "is_transactional": kind == "txn"}
            out += build_record_batch([(b"k%d" % i, b"v" * (i * 7), []) for i in range(count)],
                                      base_offset=offset, timestamps=[ts + i for i in range(count)],
                                      compression=compression, partition_leader_epoch=self.epoch, **kw)
            offset += count
        return out


def _damage(data: bytes, how: str, log_end: int) -> bytes:
    buf = bytearray(data)
    if how == "crc":
        buf[-1] ^= 0x55
    elif how == "cut":
        return bytes(buf[: len(buf) - 3])
    elif how == "magic":
        buf[16] = 1
    elif how == "behind" and log_end > 0:
        buf[0:8] = (log_end - 1).to_bytes(8, "big", signed=True)
    return bytes(buf)


def _outcome(log: Log, data: bytes) -> tuple[Any, ...]:
    try:
        return ("ok", tuple(log.append(data, assign_offsets=False)))
    except KafkaError as e:
        return ("error", e.code)


def _state(log: Log) -> tuple[Any, ...]:
    segs = [(s.base_offset, s.size, s.next_offset, s.max_timestamp, s.offset_of_max_timestamp,
             s.rolling_based_timestamp, s.bytes_since_last_index_entry,
             list(s.index._keys), list(s.index._values),  # noqa: SLF001
             list(s.time_index._keys), list(s.time_index._values))  # noqa: SLF001
            for s in log.segments]
    return (log.producer_state.to_json(), dict(log.producer_state.ongoing), log.log_end_offset,
            log.last_stable_offset, list(log.leader_epoch_cache.entries), log.aborted_transactions(), segs)


def _files(log: Log) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(Path(log.dir).iterdir()) if p.is_file()}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps, st.sampled_from([1 << 30, 700]), st.sampled_from([4096, 100]))
def test_fast_and_general_replica_paths_agree(plan: list[tuple[Any, ...]], segment_bytes: int,
                                              index_interval: int) -> None:
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=index_interval)
    with tempfile.TemporaryDirectory() as tmp:
        clock = ManualClock()
        fast = Log(Path(tmp) / "f-0", config, now_ms=clock)
        general = Log(Path(tmp) / "g-0", config, now_ms=clock)
        general.replica_fast_path = False
        leader = _Leader()
        try:
            for kind, arg, new_epoch, damage in plan:
                clock.advance(10)
                if kind == "truncate":
                    to = max(fast.log_end_offset - arg, 0)
                    assert fast.truncate_to(to) == general.truncate_to(to)
                    leader.seq.clear()  # the new leader's producers start their sequences again
                    leader.producer_epoch = {p: e + 1 for p, e in leader.producer_epoch.items()}
                    continue
                data = _damage(leader.build(arg, fast.log_end_offset, new_epoch, clock.ms), damage,
                               fast.log_end_offset)
                assert _outcome(fast, data) == _outcome(general, data)
                assert _state(fast) == _state(general)
            fast.flush()
            general.flush()
            assert _state(fast) == _state(general)
        finally:
            fast.close()
            general.close()
        assert _files(fast) == _files(general)


def test_scan_refuses_what_the_general_path_refuses() -> None:
    """scan_replica_batches answers None (the general path then raises) for each refused set, and the
    general path's error is the one Kafka's follower gives."""
    good = build_record_batch([(b"k", b"v", [])] * 2, base_offset=5, timestamp_ms=_TS)
    assert [f[0] for f in scan_replica_batches(memoryview(good), 5) or []] == [5]
    cases = {
        "empty": (b"", ErrorCode.invalid_record),
        "behind": (good, ErrorCode.invalid_record),  # the log end is 7 below
        "crc": (good[:-1] + bytes([good[-1] ^ 1]), ErrorCode.corrupt_message),
        "cut": (good[:-1], ErrorCode.corrupt_message),
        "magic": (good[:16] + b"\x01" + good[17:], ErrorCode.invalid_record),
        "short length": (good[:8] + (48).to_bytes(4, "big") + good[12:], ErrorCode.corrupt_message),
    }
    for name, (data, code) in cases.items():
        with tempfile.TemporaryDirectory() as tmp:
            log = Log(Path(tmp) / "t-0")
            try:
                if name == "behind":
                    log.append(build_record_batch([(b"k", b"v", [])] * 7, base_offset=0, timestamp_ms=_TS),
                               assign_offsets=False)
                end = log.log_end_offset
                assert scan_replica_batches(memoryview(data), end) is None, name
                with pytest.raises(KafkaError) as e:
                    log.append(data, assign_offsets=False)
                assert e.value.code == code, name
                assert log.log_end_offset == end
            finally:
                log.close()


def test_a_fetched_set_is_written_with_one_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path hands the segment the fetched buffer itself (one piece), not a slice per batch, and
    builds no RecordBatchView for a data batch."""
    import kaflite.storage.log as log_module
    from kaflite.storage.segment import LogSegment

    pieces: list[int] = []
    real_append = LogSegment.append

    def spy(self: LogSegment, p: list[Any], infos: list[Any]) -> int:
        pieces.append(len(p))
        return real_append(self, p, infos)

    def no_view(*_a: Any, **_k: Any) -> None:
        raise AssertionError("a RecordBatchView was built for a data batch")

    monkeypatch.setattr(LogSegment, "append", spy)
    monkeypatch.setattr(log_module, "RecordBatchView", no_view)
    data = b"".join(build_record_batch([(b"k", b"v", [])] * 3, base_offset=3 * i, timestamp_ms=_TS,
                                       producer_id=7, producer_epoch=0, base_sequence=3 * i) for i in range(10))
    log = Log(tmp_path / "t-0")
    try:
        assert tuple(log.append(data, assign_offsets=False))[:2] == (0, 29)
        assert pieces == [1]
        assert log.read(0, 1 << 20).size == len(data)
        assert log.producer_state.producers[7].batches[-1][:4] == (27, 29, 27, 29)
    finally:
        log.close()
