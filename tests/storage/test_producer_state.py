"""Idempotent producers: duplicates answered with the original offsets, gaps and old epochs refused,
state rebuilt on reopen (from the log, or from a snapshot plus the tail)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.storage import Log, LogConfig
from kaflite.storage.producer_state import ProducerStateManager, in_sequence
from storage.storage_util import batch


def _pb(seq: int, n: int = 1, pid: int = 7, epoch: int = 0) -> bytes:
    return batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


# --- pure rules -------------------------------------------------------------------------------------
def test_rules_without_files() -> None:
    s = ProducerStateManager()
    assert s.check(-1, -1, -1, -1) is None  # no producer id: not checked
    assert s.check(7, 0, 42, 42) is None  # unknown producer: any sequence
    s.update(7, 0, 0, 4, 100, 104, 1)
    assert s.check(7, 0, 5, 5) is None  # in sequence
    dup = s.check(7, 0, 0, 4)
    assert dup is not None and (dup.first_offset, dup.last_offset) == (100, 104)
    for first, last, code in (
        (6, 6, ErrorCode.out_of_order_sequence_number),  # gap
        (3, 3, ErrorCode.out_of_order_sequence_number),  # overlaps, not a retained batch
    ):
        with pytest.raises(KafkaError) as e:
            s.check(7, 0, first, last)
        assert e.value.code == code
    s.update(7, 2, 0, 0, 105, 105, 1)  # epoch bump starts at 0
    with pytest.raises(KafkaError) as e:
        s.check(7, 1, 1, 1)
    assert e.value.code == ErrorCode.invalid_producer_epoch
    with pytest.raises(KafkaError) as e:
        s.check(7, 3, 5, 5)  # a new epoch must start at 0
    assert e.value.code == ErrorCode.out_of_order_sequence_number
    assert s.check(7, 3, 0, 0) is None
    assert in_sequence(2**31 - 1, 0) and not in_sequence(5, 7)


def test_only_last_five_batches_are_remembered() -> None:
    s = ProducerStateManager()
    for i in range(7):
        s.update(1, 0, i, i, i, i, 0)
    assert s.check(1, 0, 2, 2) is not None
    with pytest.raises(KafkaError):
        s.check(1, 0, 1, 1)  # too old to be recognised: out of order
    s2 = ProducerStateManager.from_json(s.to_json())
    assert s2.check(1, 0, 6, 6) is not None and s2.check(1, 0, 7, 7) is None


# --- through the Log ---------------------------------------------------------------------------------
def test_retry_returns_original_offsets_and_writes_nothing(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0")
    log.append(batch(2))
    r = log.append(_pb(0, 3))
    assert (r.base_offset, r.last_offset, r.duplicate) == (2, 4, False)
    log.append(_pb(3, 1))
    size = log.size
    again = log.append(_pb(0, 3))
    assert (again.base_offset, again.last_offset, again.duplicate) == (2, 4, True)
    assert log.size == size and log.log_end_offset == 6
    with pytest.raises(KafkaError) as e:
        log.append(_pb(9))
    assert e.value.code == ErrorCode.out_of_order_sequence_number
    with pytest.raises(KafkaError) as e:
        log.append(batch(1, producer_id=7, producer_epoch=0, base_sequence=-1))
    assert e.value.code == ErrorCode.invalid_record
    assert log.log_end_offset == 6


@pytest.mark.parametrize("clean", [True, False])
def test_state_survives_reopen(tmp_path: Path, clean: bool) -> None:
    cfg = LogConfig(segment_bytes=300)
    log = Log(tmp_path / "t-0", cfg)
    for seq in range(0, 20, 2):
        log.append(_pb(seq, 2))
    log.append(_pb(0, 1, pid=8, epoch=5))
    assert len(log.segments) > 2
    if clean:
        log.close()
        assert list((tmp_path / "t-0").glob("*.snapshot"))
    else:
        for p in (tmp_path / "t-0").glob("*.snapshot"):
            p.unlink()  # force a rebuild from the log alone
    log2 = Log(tmp_path / "t-0", cfg, had_clean_shutdown=clean)
    r = log2.append(_pb(18, 2))
    assert r.duplicate and (r.base_offset, r.last_offset) == (18, 19)
    with pytest.raises(KafkaError) as e:
        log2.append(_pb(0, 1, pid=8, epoch=4))
    assert e.value.code == ErrorCode.invalid_producer_epoch
    assert log2.append(_pb(20, 1)).base_offset == 21


def test_truncation_rebuilds_state(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0")
    log.append(_pb(0, 1))
    log.append(_pb(1, 1))
    log.truncate_to(1)
    r = log.append(_pb(1, 1))  # the batch with seq 1 is gone: accepted again, not a duplicate
    assert (r.base_offset, r.duplicate) == (1, False)


def test_idle_producers_expire(tmp_path: Path) -> None:
    s = ProducerStateManager()
    s.update(1, 0, 0, 0, 0, 0, 1000)
    s.update(2, 0, 0, 0, 1, 1, 5000)
    assert s.remove_expired(6001, 5000) == 1 and set(s.producers) == {2}
    log = Log(tmp_path / "t-0", LogConfig(producer_id_expiration_ms=1000), now_ms=lambda: 10_000)
    log.append(batch(1, producer_id=3, producer_epoch=0, base_sequence=0, ts=9_500))
    assert log.remove_expired_producers(10_400) == 0
    assert log.remove_expired_producers(10_600) == 1
    assert log.append(batch(1, producer_id=3, producer_epoch=0, base_sequence=7, ts=10_000)).base_offset == 1
    assert LogConfig.from_broker_configs({"producer.id.expiration.ms": "5"}).producer_id_expiration_ms == 5


def test_roll_writes_the_snapshot_without_fsync_and_sync_snapshots_does_it_later(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An fsync on roll ran on the appending thread under the log's lock: every produce and follower fetch
    of the broker waited for the disk (bench/cluster_bench.py's RF 3 stalls). The roll now only writes
    the file; sync_snapshots (the flusher thread) fsyncs it with the directory."""
    import os

    import kaflite.storage.checkpoint as checkpoint

    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(checkpoint.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=300))
    log.append(_pb(0, 2))  # the first append of an epoch writes the leader-epoch checkpoint (once per epoch)
    synced.clear()
    for seq in range(2, 20, 2):
        log.append(_pb(seq, 2))
    assert len(log.segments) > 2
    assert synced == []  # no fsync on the append path, rolls included
    snaps = sorted((tmp_path / "t-0").glob("*.snapshot"))
    assert snaps and all(ProducerStateManager.from_json(p.read_text()).producers for p in snaps)
    assert log.unsynced_snapshots >= len(snaps)
    assert log.sync_snapshots() == len(snaps)  # the two kept; the older ones were deleted meanwhile
    assert len(synced) == len(snaps) + 1  # each file, then the directory
    assert log.unsynced_snapshots == 0 and log.sync_snapshots() == 0
    log.close()


def test_a_snapshot_torn_by_a_crash_is_skipped_by_the_recovery(tmp_path: Path) -> None:
    """A roll's snapshot is not fsync'd at once: after a crash it may be empty or cut; the recovery skips
    it and replays the log, and the producers' state is the same."""
    cfg = LogConfig(segment_bytes=300)
    log = Log(tmp_path / "t-0", cfg)
    for seq in range(0, 20, 2):
        log.append(_pb(seq, 2))
    snaps = sorted((tmp_path / "t-0").glob("*.snapshot"))
    assert snaps
    snaps[-1].write_bytes(snaps[-1].read_bytes()[:7])  # torn
    if len(snaps) > 1:
        snaps[0].write_bytes(b"")  # never written
    log2 = Log(tmp_path / "t-0", cfg, had_clean_shutdown=False)
    r = log2.append(_pb(18, 2))
    assert r.duplicate and (r.base_offset, r.last_offset) == (18, 19)
    assert log2.append(_pb(20, 1)).base_offset == 20
