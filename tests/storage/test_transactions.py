"""Transactions in the storage engine: markers close a producer's transaction, the last stable offset
waits for the earliest open one, ABORT markers are indexed in `.txnindex` (Kafka's 34-byte layout), and
all of it survives reopen, crash recovery (no snapshot), truncation and retention."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest

from kaflite.protocol.control_record import ABORT, COMMIT, build_marker_batch, parse_marker
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.record_batch import RecordBatchView, iter_batches
from kaflite.storage import Log, LogConfig
from kaflite.storage.producer_state import ProducerStateManager
from kaflite.storage.txn_index import ABORTED_TXN_SIZE, AbortedTxn, TransactionIndex
from storage.storage_util import batch as _batch

NOW = int(time.time() * 1000)  # markers carry the wall clock: data of the same time keeps one segment


def batch(n: int = 1, **kw: object) -> bytes:
    return _batch(n, ts=NOW, **kw)


def _txn(seq: int, n: int = 1, pid: int = 7, epoch: int = 0) -> bytes:
    return batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True)


def _open(path: Path, **kw: object) -> Log:
    log = Log(path / "t-0", LogConfig(**kw))  # type: ignore[arg-type]
    return log


def _everything_hw(log: Log) -> None:
    log.update_high_watermark(log.log_end_offset)


def test_control_record_format_is_kafkas() -> None:
    raw = build_marker_batch(9, 3, True, 5, 1000, base_offset=42)
    v = RecordBatchView.parse(raw)
    assert v.is_control and v.is_transactional and v.producer_id == 9 and v.producer_epoch == 3
    assert v.base_sequence == -1 and v.crc_ok()
    m = parse_marker(v)
    assert m is not None and m.type == COMMIT and m.coordinator_epoch == 5
    from kaflite.protocol.record_batch import decode_records

    rec = decode_records(v)[0]
    assert rec.key == struct.pack(">hh", 0, 1)  # version 0, type COMMIT
    assert rec.value == struct.pack(">hi", 0, 5)  # version 0, coordinator epoch
    assert parse_marker(RecordBatchView.parse(build_marker_batch(9, 3, False, 5, 1000))).type == ABORT  # type: ignore[union-attr]


def test_pure_rules() -> None:
    s = ProducerStateManager()
    s.update(7, 0, 0, 0, 10, 10, 1, is_transactional=True)
    s.update(8, 0, 0, 0, 11, 11, 1, is_transactional=True)
    s.update(7, 0, 1, 1, 12, 12, 1, is_transactional=True)
    assert s.first_unstable_offset == 10
    with pytest.raises(KafkaError) as e:
        s.check(7, 0, 2, 2, is_transactional=False)
    assert e.value.code == ErrorCode.invalid_txn_state
    with pytest.raises(KafkaError) as e:
        s.check_marker(7, -1, 0)  # an older producer epoch
    assert e.value.code == ErrorCode.invalid_producer_epoch
    aborted = s.complete_txn(7, 0, 13, False, 2, 1)
    assert aborted == AbortedTxn(7, 10, 13, 11)  # pid 8's transaction is still open at 11
    assert s.first_unstable_offset == 11
    with pytest.raises(KafkaError) as e:
        s.check_marker(7, 0, 1)  # pid 7's last marker came from coordinator epoch 2
    assert e.value.code == ErrorCode.transaction_coordinator_fenced
    assert s.complete_txn(8, 0, 14, True, 2, 1) is None
    assert s.first_unstable_offset is None
    assert s.complete_txn(9, 0, 15, False, 2, 1) == AbortedTxn(9, 15, 15, 16)  # no data: still indexed
    # an open transaction survives a snapshot, and its producer is never expired
    s.update(7, 0, 2, 2, 16, 16, 1, is_transactional=True)
    back = ProducerStateManager.from_json(s.to_json())
    assert back.first_unstable_offset == 16 and back.producers[7].coordinator_epoch == 2
    assert back.remove_expired(10**12, 1) == 2 and 7 in back.producers


def test_coordinator_fence() -> None:
    s = ProducerStateManager()
    s.complete_txn(7, 0, 1, True, 5, 1)
    with pytest.raises(KafkaError) as e:
        s.check_marker(7, 0, 4)
    assert e.value.code == ErrorCode.transaction_coordinator_fenced


def test_lso_markers_and_txn_index(tmp_path: Path) -> None:
    log = _open(tmp_path)
    log.append(batch(2))  # 0-1 plain
    log.append(_txn(0, 2, pid=7))  # 2-3 txn A
    log.append(batch(1))  # 4 plain
    log.append(_txn(0, 1, pid=8))  # 5 txn B
    _everything_hw(log)
    assert log.last_stable_offset == 2
    with pytest.raises(KafkaError) as e:
        log.append(batch(1, producer_id=7, producer_epoch=0, base_sequence=2))  # non-txn write mid-txn
    assert e.value.code == ErrorCode.invalid_txn_state
    r = log.append_marker(7, 0, False, 0)  # abort A at 6
    assert r.base_offset == 6
    _everything_hw(log)
    assert log.last_stable_offset == 5  # B still open
    log.append_marker(8, 0, True, 0)  # commit B at 7
    assert log.last_stable_offset == 7  # capped by the high watermark until it moves
    _everything_hw(log)
    assert log.last_stable_offset == 8
    assert log.collect_aborted_transactions(0, 8) == [(7, 2)]
    assert log.collect_aborted_transactions(7, 8) == []
    raw = (tmp_path / "t-0" / f"{0:020d}.txnindex").read_bytes()
    assert len(raw) == ABORTED_TXN_SIZE
    assert struct.unpack(">hqqqq", raw) == (0, 7, 2, 6, 5)
    # stale markers
    with pytest.raises(KafkaError) as e:
        log.append_marker(7, 0, True, -1)
    assert e.value.code == ErrorCode.transaction_coordinator_fenced
    log.close()
    # clean reopen (snapshot) keeps it; a reopen without snapshots and without the index rebuilds it
    log = _open(tmp_path)
    assert log.collect_aborted_transactions(0, 100) == [(7, 2)]
    log.append(_txn(2, 1, pid=7))  # a new transaction of pid 7 at 8, open across the crash
    log.close()
    for p in (tmp_path / "t-0").iterdir():
        if p.suffix in (".snapshot", ".txnindex"):
            p.unlink()
    log = Log(tmp_path / "t-0", LogConfig(), high_watermark=9)
    assert log.collect_aborted_transactions(0, 100) == [(7, 2)]
    assert log.last_stable_offset == 8
    assert struct.unpack(">hqqqq", (tmp_path / "t-0" / f"{0:020d}.txnindex").read_bytes()) == (0, 7, 2, 6, 5)
    log.append_marker(7, 0, False, 0)  # 9
    log.update_high_watermark(10)
    assert log.collect_aborted_transactions(0, 100) == [(7, 2), (7, 8)]
    # truncation removes the marker: the transaction is open again and its index entry is gone
    log.truncate_to(9)
    assert log.collect_aborted_transactions(0, 100) == [(7, 2)]
    assert log.last_stable_offset == 8
    log.close()


def test_index_per_segment_and_retention(tmp_path: Path) -> None:
    log = _open(tmp_path)
    log.append(_txn(0, 1, pid=7))  # 0
    log.append_marker(7, 0, False, 0)  # 1
    log.roll()
    log.append(_txn(1, 1, pid=7))  # 2
    log.append_marker(7, 0, False, 0)  # 3
    _everything_hw(log)
    d = tmp_path / "t-0"
    assert sorted(p.name for p in d.glob("*.txnindex")) == [f"{0:020d}.txnindex", f"{2:020d}.txnindex"]
    assert log.collect_aborted_transactions(2, 4) == [(7, 2)]
    assert log.collect_aborted_transactions(0, 4) == [(7, 0), (7, 2)]
    log.delete_records(2)
    assert not (d / f"{0:020d}.txnindex").exists()
    assert log.collect_aborted_transactions(0, 4) == [(7, 2)]
    log.close()


def test_replica_copies_markers(tmp_path: Path) -> None:
    leader = Log(tmp_path / "a-0", LogConfig())
    leader.append(_txn(0, 2, pid=7))
    leader.append_marker(7, 0, False, 3)
    leader.update_high_watermark(3)
    data = b"".join(bytes(r) for r in leader.read(0, 1 << 20).records)
    follower = Log(tmp_path / "b-0", LogConfig())
    follower.append(data, assign_offsets=False)
    assert [b.base_offset for b in iter_batches(data)] == [0, 2]
    assert follower.collect_aborted_transactions(0, 3) == [(7, 0)]
    assert follower.producer_state.first_unstable_offset is None
    leader.close()
    follower.close()


def test_torn_index_entry_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "x.txnindex"
    idx = TransactionIndex(path)
    idx.append(AbortedTxn(1, 0, 5, 6))
    with path.open("ab") as f:
        f.write(b"\x00" * 10)
    assert TransactionIndex(path).entries == [AbortedTxn(1, 0, 5, 6)]
    assert path.stat().st_size == ABORTED_TXN_SIZE


def _kb(key: bytes, value: bytes, **kw: object) -> bytes:
    return _batch(1, key=key, value=value, ts=NOW, **kw)


def test_compaction_removes_aborted_records_keeps_markers_and_stops_at_lso(tmp_path: Path) -> None:
    from kaflite.protocol.record_batch import decode_records
    from kaflite.storage.cleaner import compact_log

    log = Log(tmp_path / "c-0", LogConfig(cleanup_policy="compact", min_compaction_lag_ms=0))
    log.append(_kb(b"a", b"committed-1"))  # 0
    log.append(_kb(b"a", b"aborted", producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True))  # 1
    log.append_marker(7, 0, False, 0)  # 2: ABORT
    log.roll()
    log.append(_kb(b"b", b"open", producer_id=8, producer_epoch=0, base_sequence=0, is_transactional=True))  # 3
    log.roll()
    log.append(_kb(b"b", b"later"))  # 4: would shadow offset 3 — but 3 is past the last stable offset
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 3
    compact_log(log, NOW + 10**9, force=True)
    kept: list[tuple[int, bool, list[tuple[bytes | None, bytes | None]]]] = []
    offset = 0
    while offset < log.log_end_offset:  # one segment per read
        for r in log.read(offset, 1 << 20).records:
            for b in iter_batches(bytes(r)):
                kept.append((b.base_offset, b.is_control, [(x.key, x.value) for x in decode_records(b)]))
                offset = b.last_offset + 1
    # the aborted record is gone and did not shadow "committed-1"; the marker stays; offset 3 (open) is
    # untouched (its segment ends past the last stable offset) and offset 4 did not enter the offset map
    assert kept[0] == (0, False, [(b"a", b"committed-1")])
    assert kept[1][0:2] == (2, True)
    assert [k[0] for k in kept] == [0, 2, 3, 4]
    log.close()


def _batches(log: Log) -> list[tuple[int, bool, list[bytes | None]]]:
    from kaflite.protocol.record_batch import decode_records

    out: list[tuple[int, bool, list[bytes | None]]] = []
    offset = log.log_start_offset
    for _ in range(1000):
        if offset >= log.log_end_offset:
            break
        info = log.read(offset, 1 << 20)
        data = b"".join(bytes(r) for r in info.records)
        if not data:
            break
        for b in iter_batches(data):
            out.append((b.base_offset, b.is_control, [x.key for x in decode_records(b)]))
            offset = b.last_offset + 1
    return out


def test_compaction_removes_markers_of_emptied_transactions_after_delete_retention(tmp_path: Path) -> None:
    """Kafka's LogCleaner rule: a COMMIT / ABORT marker goes once its transaction has no record left in
    the log and delete.retention.ms has passed (kaflite counts from the marker's timestamp); a marker
    whose transaction still has data, or that is its producer's last batch, stays. The log rebuilt from
    scratch afterwards has no open transaction."""

    from kaflite.storage.cleaner import compact_log

    log = Log(tmp_path / "c-0", LogConfig(cleanup_policy="compact", min_compaction_lag_ms=0, delete_retention_ms=1000))

    def txn(key: bytes, pid: int, seq: int) -> None:
        log.append(_kb(key, key + b"-txn", producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True))

    txn(b"a", 7, 0)  # 0: aborted
    log.append_marker(7, 0, False, 0, now_ms=NOW)  # 1: ABORT -> its transaction is emptied by the cleaner
    txn(b"b", 7, 1)  # 2: committed, then superseded by 4
    log.append_marker(7, 0, True, 0, now_ms=NOW)  # 3: COMMIT -> emptied once 2 is compacted away
    log.append(_kb(b"b", b"b-plain"))  # 4
    txn(b"c", 8, 0)  # 5: committed, the latest "c": survives
    log.append_marker(8, 0, True, 0, now_ms=NOW)  # 6: COMMIT of data that survives: stays
    txn(b"d", 7, 2)  # 7: aborted
    log.append_marker(7, 0, False, 0, now_ms=NOW)  # 8: ABORT, but producer 7's last batch: stays
    txn(b"e", 8, 1)  # 9
    log.append_marker(8, 0, True, 0, now_ms=NOW)  # 10: producer 8's last batch
    log.roll()
    log.append(_kb(b"z", b"active"))  # 11
    _everything_hw(log)
    assert log.last_stable_offset == log.log_end_offset

    compact_log(log, NOW + 500, force=True)  # within delete.retention.ms: every marker stays
    assert [(o, c) for o, c, _k in _batches(log)] == [
        (1, True), (3, True), (4, False), (5, False), (6, True), (8, True), (9, False), (10, True), (11, False)]

    compact_log(log, NOW + 10_000, force=True)  # past it: the markers of emptied transactions go
    assert [(o, c) for o, c, _k in _batches(log)] == [
        (4, False), (5, False), (6, True), (8, True), (9, False), (10, True), (11, False)]
    assert [k for _o, c, ks in _batches(log) if not c for k in ks] == [b"b", b"c", b"e", b"z"]
    log.close()

    # crash recovery without producer snapshots: no transaction looks open, the state is the producers' last
    for snap in (tmp_path / "c-0").glob("*.snapshot"):
        snap.unlink()
    again = Log(tmp_path / "c-0", LogConfig(cleanup_policy="compact", min_compaction_lag_ms=0))
    _everything_hw(again)
    assert again.producer_state.first_unstable_offset is None
    assert again.last_stable_offset == again.log_end_offset == 12
    assert set(again.producer_state.producers) == {7, 8}
    again.close()
