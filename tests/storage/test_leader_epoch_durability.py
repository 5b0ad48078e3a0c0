"""The leader-epoch checkpoint (storage/leader_epoch.py's rules): an epoch's first batch changes it in memory
only, no file write on the appending thread (the event loop for a leader); the log's next flush writes it
(with fsync, without for a new partition's first file) before the recovery point moves, the housekeeping
pass within a second; a crash before that loses no epoch (recovery assigns them again from the batches)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kaflite.storage import Log
from kaflite.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT
from storage.storage_util import batch


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    return calls


def test_new_partition_first_epoch_waits_for_the_flush(tmp_path: Path, fsyncs: list[int]) -> None:
    log = Log(tmp_path / "t-0")
    fsyncs.clear()
    log.append(batch(3), leader_epoch=4)
    cache = log.leader_epoch_cache
    path = tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT
    assert fsyncs == [] and cache.pending_write and not path.exists()
    assert cache.entries == [(4, 0)]
    log.flush()
    assert not cache.unsynced and not cache.pending_write and log.recovery_point == 3
    assert path.read_text() == "0\n1\n4 0\n"
    fsyncs.clear()
    log.append(batch(1), leader_epoch=6)
    assert fsyncs == [] and path.read_text() == "0\n1\n4 0\n"  # nothing on the appending thread
    assert cache.entries == [(4, 0), (6, 3)] and cache.pending_write
    log.flush()
    assert path.read_text() == "0\n2\n4 0\n6 3\n" and not cache.unsynced and not cache.pending_write
    log.close()


def test_a_new_epochs_first_append_writes_no_file_and_the_housekeeping_pass_fsyncs_it(
        tmp_path: Path, fsyncs: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, the first append of a new leader epoch rewrote and fsync'd the checkpoint (file and
    directory) under the log's lock on the appending thread: the event loop, for a leader."""
    from kaflite.storage import LogManager, leader_epoch

    m = LogManager([tmp_path])
    m.load()
    log = m.get_or_create("t", 0)
    log.append(batch(1), leader_epoch=0)
    m.flush_due()
    log.flush()
    path = log.dir / LEADER_EPOCH_CHECKPOINT
    assert path.read_text() == "0\n1\n0 0\n"
    writes: list[Path] = []
    for name in ("atomic_write", "replace_unsynced"):
        real = getattr(leader_epoch, name)
        monkeypatch.setattr(leader_epoch, name, lambda p, data, real=real: (writes.append(p), real(p, data))[1])
    fsyncs.clear()
    log.append(batch(1), leader_epoch=1)  # a new leader's first batch
    assert fsyncs == [] and writes == [] and path.read_text() == "0\n1\n0 0\n"
    assert log.leader_epoch_cache.entries == [(0, 0), (1, 1)] and log.end_offset_for_epoch(0) == (0, 1)
    m.flush_due()  # the housekeeping pass (a worker thread in the broker)
    assert path.read_text() == "0\n2\n0 0\n1 1\n" and not log.leader_epoch_cache.pending_write
    assert len(fsyncs) >= 2  # the file, then its directory
    m.close()


def test_a_flush_before_acknowledge_makes_the_new_epoch_durable_before_the_recovery_point_moves(
        tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0")
    log.append(batch(1), leader_epoch=0)
    log.flush()
    log.append(batch(2), leader_epoch=2)
    path = tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT
    assert path.read_text() == "0\n1\n0 0\n" and log.recovery_point == 1
    assert log.flush_up_to(3)  # what the produce handler awaits in a worker thread (flush.messages=1)
    assert log.recovery_point == 3 and path.read_text() == "0\n2\n0 0\n2 1\n"
    assert not log.leader_epoch_cache.pending_write and not log.leader_epoch_cache.unsynced
    log.close()


def test_a_crash_before_the_flush_loses_no_epoch(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0")
    log.append(batch(2), leader_epoch=2)
    log.append(batch(3), leader_epoch=5)
    assert log.write_pending_epochs()  # the housekeeping pass: a new partition's file, without fsync
    assert log.leader_epoch_cache.unsynced and log.recovery_point == 0
    # the crash: the unsynced rename reached the disk, its content did not (an empty file); no close
    (tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT).write_bytes(b"")
    reopened = Log(tmp_path / "t-0")
    assert reopened.log_end_offset == 5
    assert reopened.leader_epoch_cache.entries == [(2, 0), (5, 2)]
    assert reopened.leader_epoch_cache.end_offset_for(2, reopened.log_end_offset) == (2, 2)
    # recovery wrote the epochs durably again
    assert not reopened.leader_epoch_cache.unsynced
    assert (tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n2\n2 0\n5 2\n"
    reopened.close()
    log.close()


def test_a_flushed_partition_keeps_its_epochs_through_a_crash(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0")
    log.append(batch(2), leader_epoch=1)
    log.flush()  # the recovery point passes offset 2: the epoch must be durable now
    log.append(batch(1), leader_epoch=3)
    log.write_pending_epochs()
    path = tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT
    assert path.read_text() == "0\n2\n1 0\n3 2\n"
    reopened = Log(tmp_path / "t-0", recovery_point=log.recovery_point)
    assert reopened.leader_epoch_cache.entries == [(1, 0), (3, 2)]
    reopened.close()
    log.close()


def test_an_election_entry_is_kept_in_memory_until_the_epochs_first_batch(tmp_path: Path, fsyncs: list[int]) -> None:
    """A new leader's epoch is in the cache from the election (Kafka's makeLeader), without a file write
    on the event loop: the file gets it with the epoch's first batch. A deposed leader whose epoch got no
    batch drops it on its truncation, even one at its log end (Kafka's truncateTo)."""
    log = Log(tmp_path / "t-0")
    log.append(batch(2), leader_epoch=1)
    log.flush()
    path = tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT
    fsyncs.clear()
    assert log.assign_leader_epoch_start(3)
    assert log.leader_epoch_cache.entries == [(1, 0), (3, 2)] and fsyncs == []
    assert path.read_text() == "0\n1\n1 0\n"  # not written yet
    assert log.end_offset_for_epoch(3) == (3, 2) and log.end_offset_for_epoch(2) == (1, 2)
    assert not log.assign_leader_epoch_start(3)  # once
    log.append(batch(1), leader_epoch=3)  # the epoch's first batch: the file gets it at the next pass
    assert path.read_text() == "0\n1\n1 0\n"
    log.write_pending_epochs()
    assert path.read_text() == "0\n2\n1 0\n3 2\n"
    # leader again under 5, deposed before any batch: the truncation at the log end drops the entry
    assert log.assign_leader_epoch_start(5)
    assert log.end_offset_for_epoch(5) == (5, 3)
    assert not log.truncate_to(3)
    assert log.leader_epoch_cache.entries == [(1, 0), (3, 2)] and log.end_offset_for_epoch(5) == (-1, -1)
    log.append(batch(1), leader_epoch=6)  # a batch of the new leader's epoch, as a follower copies it
    log.write_pending_epochs()
    assert path.read_text() == "0\n3\n1 0\n3 2\n6 3\n"
    log.close()


def test_a_truncations_epoch_file_is_written_outside_the_lock_and_never_over_a_newer_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A truncation changes the epochs in memory under the log's lock and writes the file after releasing it
    (`write_pending`); a change made while that write's fsync runs (an append's new epoch)
    is not replaced by the older entries."""
    import os
    import threading

    from kaflite.storage.leader_epoch import LeaderEpochFileCache

    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochFileCache(path, read=False)
    for epoch, start in ((1, 0), (2, 10), (3, 20)):
        cache.assign(epoch, start)
    cache.flush()
    lock = threading.RLock()
    with lock:
        cache.truncate_from_end(15, persist=False)
    assert cache.entries == [(1, 0), (2, 10)] and cache.pending_write
    assert LeaderEpochFileCache(path).entries == [(1, 0), (2, 10), (3, 20)]  # not written under the lock
    real_fsync = os.fsync
    raced: list[bool] = []

    def racing_fsync(fd: int) -> None:
        if not raced:  # write_pending's fsync of the new file
            assert not lock._is_owned()  # type: ignore[attr-defined]
            raced.append(True)
            with lock:
                cache.assign(4, 15)  # an append of epoch 4 meanwhile
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", racing_fsync)
    cache.write_pending(lock)
    assert LeaderEpochFileCache(path).entries == [(1, 0), (2, 10), (4, 15)]
    assert not cache.pending_write and not path.with_name(path.name + ".tmp").exists()
