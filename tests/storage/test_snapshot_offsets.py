"""The producer snapshots a Log keeps in memory (`Log.snapshot_offsets`, issue 28): listed once at load,
then kept equal to the directory by rolls, close, truncation, a full truncation, DeleteRecords, the
recovery's discards (torn or out-of-range snapshots) and `delete_files`; a roll lists nothing and deletes
nothing (Kafka's roll neither): a snapshot goes with the segment it lies in."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kaflite.storage.log as log_module
from kaflite.storage import Log, LogConfig
from storage.storage_util import ManualClock, batch

CFG = LogConfig(segment_bytes=300)


def _on_disk(d: Path) -> list[int]:
    return sorted(int(n[: -len(".snapshot")]) for n in os.listdir(d) if n.endswith(".snapshot"))


def _pb(seq: int, n: int, pid: int = 7) -> bytes:
    return batch(n, producer_id=pid, producer_epoch=0, base_sequence=seq)


def _producers(log: Log) -> dict[int, tuple[int, int, int]]:
    """Each producer's (epoch, last sequence, last offset): what a rebuild from snapshots + log must agree on."""
    return {pid: (e.producer_epoch, e.last_seq, e.last_offset) for pid, e in log.producer_state.producers.items()}


def test_a_roll_does_not_list_the_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: every roll listed the partition directory (3 files per segment) to find the snapshot to drop."""
    log = Log(tmp_path / "t-0", CFG)
    listed: list[object] = []
    real = os.listdir
    monkeypatch.setattr(log_module.os, "listdir", lambda p=".": (listed.append(p), real(p))[1])
    seq = 0
    for _ in range(30):
        log.append(_pb(seq, 3))
        seq += 3
    assert len(log.segments) > 5
    assert listed == []
    monkeypatch.undo()
    assert log.snapshot_offsets() == _on_disk(log.dir)
    log.close()


def test_a_roll_deletes_no_file_and_retention_takes_the_snapshots_with_their_segments(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: every roll unlinked the third-newest snapshot on the appending thread (a journal operation,
    slow on a busy disk). Now one snapshot per roll stays until its segment is deleted, and then goes
    renamed `.deleted`, its unlink left to delete_due_segments (the housekeeping thread)."""
    clock = ManualClock()
    log = Log(tmp_path / "t-0", CFG, now_ms=clock)
    unlinked: list[object] = []
    real = os.unlink
    monkeypatch.setattr(os, "unlink", lambda p, *a, **k: (unlinked.append(p), real(p, *a, **k))[1])
    seq = 0
    for _ in range(30):
        log.append(_pb(seq, 3))
        seq += 3
    assert unlinked == []
    monkeypatch.undo()
    segs = log.segments
    assert log.snapshot_offsets() == _on_disk(log.dir) == [s.base_offset for s in segs[1:]]
    log.update_high_watermark(log.log_end_offset)
    log.delete_records(segs[4].base_offset)  # segments 0-3 go, and the snapshots at bases 1-3
    assert log.snapshot_offsets() == _on_disk(log.dir) == [s.base_offset for s in segs[4:]]
    assert len(list(log.dir.glob("*.snapshot.deleted"))) == 3
    clock.advance(CFG.file_delete_delay_ms)
    log.delete_due_segments()
    assert list(log.dir.glob("*.deleted")) == []
    log.close()


def test_load_truncation_and_delete_files_keep_the_list_equal_to_the_directory(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = Log(d, CFG)
    seq = 0
    for _ in range(20):
        log.append(_pb(seq, 3))
        seq += 3
    snaps = log.snapshot_offsets()
    assert snaps == _on_disk(d) == [s.base_offset for s in log.segments[1:]]  # one per roll
    log.close()
    # a snapshot left above the log end by a crash (written, then the log's tail lost) goes at load
    (d / f"{10**6:020d}.snapshot").write_text("{}")
    log = Log(d, CFG, had_clean_shutdown=True)
    assert log.snapshot_offsets() == _on_disk(d) and 10**6 not in log.snapshot_offsets()
    top = log.snapshot_offsets()[-1]
    log.truncate_to(top - 1)  # the snapshots above the truncation point go, the state is rebuilt
    assert log.snapshot_offsets() == _on_disk(d) and all(o <= top - 1 for o in log.snapshot_offsets())
    log.truncate_fully_and_start_at(500)
    assert log.snapshot_offsets() == _on_disk(d) == []
    log.append(_pb(0, 3, pid=9))
    log.roll()
    assert log.snapshot_offsets() == _on_disk(d) == [503]
    log.delete_files()
    assert log.snapshot_offsets() == _on_disk(d) == []


ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 5), st.integers(1, 3)),
        st.tuples(st.just("roll"), st.just(0), st.just(0)),
        st.tuples(st.just("truncate"), st.floats(0, 1), st.just(0)),
        st.tuples(st.just("delete_records"), st.floats(0, 1), st.just(0)),
        st.tuples(st.just("truncate_fully"), st.integers(0, 3), st.just(0)),
        st.tuples(st.just("reopen"), st.sampled_from(["clean", "crash", "torn"]), st.just(0)),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_the_list_equals_the_directory_after_every_operation(seq_ops: list[tuple[str, object, int]]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="kaflite-snaps-"))
    d = tmp / "t-0"
    log = Log(d, CFG)
    opened = [log]
    try:
        for op, a, b in seq_ops:
            if op == "append":
                assert isinstance(a, int)
                # one-record batches: every offset is a batch boundary, so a truncation or DeleteRecords
                # never cuts a batch that straddles the log start offset
                for _ in range(a):
                    entry = log.producer_state.producers.get(b)
                    log.append(_pb(entry.last_seq + 1 if entry is not None else 0, 1, pid=b))
            elif op == "roll":
                log.roll()
            elif op == "truncate":
                assert isinstance(a, float)
                lo = log.log_start_offset
                log.truncate_to(lo + int(a * (log.log_end_offset - lo)))
            elif op == "delete_records":
                assert isinstance(a, float)
                log.update_high_watermark(log.log_end_offset)
                lo = log.log_start_offset
                log.delete_records(lo + int(a * (log.high_watermark - lo)))
            elif op == "truncate_fully":
                assert isinstance(a, int)
                log.truncate_fully_and_start_at(log.log_end_offset + a)
            else:
                before = _producers(log)
                end, start = log.log_end_offset, log.log_start_offset
                if a == "clean":
                    log.close()
                    log = Log(d, CFG, log_start_offset=start, recovery_point=end, had_clean_shutdown=True)
                else:  # a crash: the Log is abandoned as it is (no close, no snapshot written)
                    if a == "torn" and log.snapshot_offsets():  # the newest one was never fsync'd
                        (d / f"{log.snapshot_offsets()[-1]:020d}.snapshot").write_bytes(b'{"pro')
                    log = Log(d, CFG, log_start_offset=start, had_clean_shutdown=False)
                opened.append(log)
                assert (log.log_start_offset, log.log_end_offset) == (start, end)
                assert _producers(log) == before  # the snapshots the list kept rebuild the same state
            assert log.snapshot_offsets() == _on_disk(d), op
            # none above the log end, none below the first segment (they went with their segments)
            assert all(log.segments[0].base_offset <= o <= log.log_end_offset for o in log.snapshot_offsets())
        log.close()
        assert log.snapshot_offsets() == _on_disk(d)
    finally:
        for lg in opened:  # the "crashed" instances' descriptors too
            if not lg.closed:
                for seg in lg.segments:
                    seg.retire_fd()
        shutil.rmtree(tmp, ignore_errors=True)
