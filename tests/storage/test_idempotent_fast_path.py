"""Log's hot path for batches with a producer id (Log._append, producer_state rule 7) against the general
path (_append_general + ProducerStateManager.check/update): same offsets, same errors, same producer
state, same bytes on disk, for random sequences of idempotent and transactional batches with
duplicates, gaps, epoch bumps, out-of-order and wrapping sequences, markers and segment rolls."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.storage import Log, LogConfig
from storage.storage_util import ManualClock, batch

_INT32_MAX = 0x7FFFFFFF
_WRITER = Path(__file__).with_name("idempotent_crash_writer.py")
_CRASH_CONFIG = LogConfig(segment_bytes=64 * 1024)  # as the writer's

# (kind, pid, epoch, sequence choice, record count, transactional)
_batch_op = st.tuples(
    st.just("batch"),
    st.sampled_from([1, 2]),
    st.sampled_from([0, 1, 2]),
    st.sampled_from(["next", "next", "next", "dup", "gap", "zero", "behind", "wrap", "none"]),
    st.integers(1, 3),
    st.booleans(),
)
_marker_op = st.tuples(st.sampled_from(["commit", "abort"]), st.sampled_from([1, 2]), st.sampled_from([0, 1, 2]),
                       st.just(""), st.just(0), st.just(False))
ops = st.lists(st.one_of(_batch_op, _batch_op, _batch_op, _marker_op), min_size=1, max_size=40)


def _sequence(log: Log, pid: int, epoch: int, choice: str, draw: int) -> int:
    """The base sequence `choice` names, read from the state both logs share."""
    entry = log.producer_state.producers.get(pid)
    batches = list(entry.batches) if entry is not None else []
    nxt = (batches[-1].last_seq + 1) & _INT32_MAX if batches else 0
    if choice == "dup" and batches:
        return batches[draw % len(batches)].first_seq
    return {"next": nxt, "gap": (nxt + 1 + draw % 3) & _INT32_MAX, "zero": 0, "behind": max(0, nxt - 2),
            "wrap": _INT32_MAX - draw % 3, "none": -1, "dup": nxt}[choice]


def _outcome(fn: Any, *args: Any) -> tuple[Any, ...]:
    try:
        return ("ok", tuple(fn(*args, leader_epoch=1)))
    except KafkaError as e:
        return ("error", e.code)


def _state(log: Log) -> tuple[Any, ...]:
    return (log.producer_state.to_json(), dict(log.producer_state.ongoing), log.log_end_offset,
            log.producer_state.first_unstable_offset)


def _files(log: Log) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(Path(log.dir).iterdir())
            if p.suffix in (".log", ".snapshot", ".txnindex")}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops, st.booleans(), st.sampled_from([1 << 30, 400]))
def test_fast_and_general_paths_agree(steps: list[tuple[Any, ...]], append_time: bool, segment_bytes: int) -> None:
    config = LogConfig(segment_bytes=segment_bytes,
                       message_timestamp_type="LogAppendTime" if append_time else "CreateTime")
    with tempfile.TemporaryDirectory() as tmp:
        clock = ManualClock()
        fast = Log(Path(tmp) / "f-0", config, now_ms=clock)
        general = Log(Path(tmp) / "g-0", config, now_ms=clock)
        general._fast_limit = 0  # no record set fits the hot path: every append takes _append_general
        try:
            for i, (kind, pid, epoch, choice, n, txn) in enumerate(steps):
                clock.advance(3)
                if kind == "batch":
                    seq = _sequence(fast, pid, epoch, choice, i)
                    raw = batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn,
                                ts=clock.ms - 5)
                    got = _outcome(fast.append, raw)
                    want = _outcome(general.append, raw)
                else:
                    got = _outcome(fast.append_marker, pid, epoch, kind == "commit", 0)
                    want = _outcome(general.append_marker, pid, epoch, kind == "commit", 0)
                assert got == want, (i, kind, pid, epoch, choice)
                assert _state(fast) == _state(general), i
            assert _files(fast) == _files(general)
        finally:
            fast.close()
            general.close()


def test_in_sequence_idempotent_batches_take_the_hot_path(tmp_path: Path) -> None:
    """Accepted and duplicate batches of a producer never reach _append_general; a refused one does (its
    precise error comes from ProducerStateManager.check)."""
    log = Log(tmp_path / "t-0")
    general_calls: list[int] = []
    original = log._append_general

    def counting(*a: Any, **k: Any) -> Any:
        general_calls.append(1)
        return original(*a, **k)

    log._append_general = counting  # type: ignore[method-assign]
    try:
        assert tuple(log.append(batch(3, producer_id=9, producer_epoch=0, base_sequence=0)))[:2] == (0, 2)
        assert tuple(log.append(batch(2, producer_id=9, producer_epoch=0, base_sequence=3)))[:2] == (3, 4)
        dup = log.append(batch(3, producer_id=9, producer_epoch=0, base_sequence=0))
        assert (dup.base_offset, dup.last_offset, dup.duplicate) == (0, 2, True)
        assert tuple(log.append(batch(1, producer_id=9, producer_epoch=1, base_sequence=0)))[:2] == (5, 5)
        assert general_calls == []
        entry = log.producer_state.producers[9]
        assert (entry.producer_epoch, [tuple(b)[:4] for b in entry.batches]) == (1, [(0, 0, 5, 5)])
        try:
            log.append(batch(1, producer_id=9, producer_epoch=1, base_sequence=5))
            raise AssertionError("a gap was accepted")
        except KafkaError as e:
            assert e.code == ErrorCode.out_of_order_sequence_number
        assert general_calls == [1]
    finally:
        log.close()


def _counting_general(log: Log) -> list[int]:
    """Every call of log._append_general from now on appends one entry to the returned list."""
    calls: list[int] = []
    original = log._append_general

    def counting(*a: Any, **k: Any) -> Any:
        calls.append(1)
        return original(*a, **k)

    log._append_general = counting  # type: ignore[method-assign]
    return calls


def _code(fn: Any, *args: Any) -> ErrorCode:
    try:
        fn(*args)
    except KafkaError as e:
        return e.code
    raise AssertionError("accepted")


def test_refusals_answer_kafka_codes_and_leave_the_log_unchanged(tmp_path: Path) -> None:
    """Each refusal of the producer state (old epoch, new epoch not at 0, gap, a plain batch during the
    producer's open transaction) reaches the general path and answers Kafka's code, writing nothing; every
    accepted or duplicate batch stays on the hot path, also from a producer the log has no state of (Kafka
    3.8's ProducerAppendInfo accepts any sequence then: no UNKNOWN_PRODUCER_ID answer)."""
    log = Log(tmp_path / "t-0")
    general = _counting_general(log)
    try:
        assert tuple(log.append(batch(3, producer_id=9, producer_epoch=1, base_sequence=0)))[:2] == (0, 2)
        size, leo = log.size, log.log_end_offset
        refusals = [
            (batch(1, producer_id=9, producer_epoch=0, base_sequence=3), ErrorCode.invalid_producer_epoch),
            (batch(1, producer_id=9, producer_epoch=2, base_sequence=5), ErrorCode.out_of_order_sequence_number),
            (batch(1, producer_id=9, producer_epoch=1, base_sequence=4), ErrorCode.out_of_order_sequence_number),
        ]
        for raw, code in refusals:
            assert _code(log.append, raw) == code
            assert (log.size, log.log_end_offset) == (size, leo)
        assert len(general) == 3
        assert log.append(batch(1, producer_id=9, producer_epoch=1, base_sequence=3)).base_offset == 3
        assert log.append(batch(2, producer_id=12, producer_epoch=0, base_sequence=1000)).base_offset == 4  # unknown
        # a transaction: opened by its first batch, plain batches refused until the marker closes it
        assert log.append(batch(1, producer_id=11, producer_epoch=0, base_sequence=0, is_transactional=True)
                          ).base_offset == 6
        assert log.producer_state.first_unstable_offset == 6
        size, leo = log.size, log.log_end_offset
        assert _code(log.append, batch(1, producer_id=11, producer_epoch=0, base_sequence=1)) \
            == ErrorCode.invalid_txn_state
        assert (log.size, log.log_end_offset) == (size, leo) and len(general) == 4
        dup = log.append(batch(1, producer_id=11, producer_epoch=0, base_sequence=0, is_transactional=True))
        assert (dup.base_offset, dup.duplicate) == (6, True)
        log.append_marker(11, 0, True, 0)  # COMMIT at offset 7
        assert log.producer_state.first_unstable_offset is None
        assert _code(log.append_marker, 11, -1, True, 0) == ErrorCode.invalid_producer_epoch  # a fenced epoch
        assert log.append(batch(1, producer_id=11, producer_epoch=0, base_sequence=1)).base_offset == 8
        assert len(general) == 4
    finally:
        log.close()


def test_only_the_last_five_batches_are_answered_as_duplicates(tmp_path: Path) -> None:
    """Kafka keeps 5 batches per producer: a retry of any of them is DUPLICATE_SEQUENCE_NUMBER, answered as
    success with its original offsets (on the hot path); a retry of the sixth-last is out of order."""
    log = Log(tmp_path / "t-0")
    general = _counting_general(log)
    try:
        firsts = [log.append(batch(2, producer_id=3, producer_epoch=0, base_sequence=2 * i)).base_offset
                  for i in range(6)]
        assert firsts == [0, 2, 4, 6, 8, 10]
        size = log.size
        for i in range(1, 6):
            dup = log.append(batch(2, producer_id=3, producer_epoch=0, base_sequence=2 * i))
            assert (dup.base_offset, dup.last_offset, dup.duplicate) == (2 * i, 2 * i + 1, True)
        assert general == [] and log.size == size
        assert _code(log.append, batch(2, producer_id=3, producer_epoch=0, base_sequence=0)) \
            == ErrorCode.out_of_order_sequence_number
        assert log.size == size and log.log_end_offset == 12
    finally:
        log.close()


@pytest.mark.parametrize("fast", [True, False])
def test_a_batch_in_sequence_that_repeats_an_older_retained_batch_is_a_duplicate(tmp_path: Path, fast: bool) -> None:
    """A producer's retained batches need not be contiguous (here a follower copied the leader's batches
    after the leader had expired the producer and seen it start again at 0): a batch that follows the last
    one AND repeats the sequences of an older one is a duplicate, as Kafka looks for duplicates first."""
    log = Log(tmp_path / "t-0")
    if not fast:
        log._fast_limit = 0  # every append takes _append_general
    try:
        log.append(batch(5, producer_id=4, producer_epoch=0, base_sequence=5), assign_offsets=False)
        log.append(batch(5, producer_id=4, producer_epoch=0, base_sequence=0, base_offset=5), assign_offsets=False)
        assert [tuple(b)[:2] for b in log.producer_state.producers[4].batches] == [(5, 9), (0, 4)]
        r = log.append(batch(5, producer_id=4, producer_epoch=0, base_sequence=5))
        assert (r.base_offset, r.last_offset, r.duplicate) == (0, 4, True)
        assert log.log_end_offset == 10
        assert log.append(batch(1, producer_id=4, producer_epoch=0, base_sequence=5)).base_offset == 10
    finally:
        log.close()


def test_kill_9_on_the_hot_path_keeps_every_acknowledged_batch_deduplicated(tmp_path: Path) -> None:
    """An idempotent producer appending on the hot path is SIGKILLed at random moments (small segments: a
    producer snapshot, not fsync'd, at every roll), three times: after each kill the recovered state answers a
    retry of each acknowledged batch it retains as a duplicate with the acknowledged offsets, equals the
    state rebuilt from the log alone (no snapshot), and accepts the next sequence at the log end."""
    rng = random.Random(28)
    data = tmp_path / "idem-0"
    acks: list[tuple[int, int, int, int]] = []  # (first seq, records, base offset, last offset)
    resume = (0, 0)  # (log end, next sequence) the writer must recover
    for cycle in range(3):
        proc = subprocess.Popen([sys.executable, str(_WRITER), str(data), str(cycle)], stdout=subprocess.PIPE,
                                text=True)
        try:
            assert proc.stdout is not None
            start = proc.stdout.readline().split()
            assert start[0] == "START", start
            assert (int(start[1]), int(start[2])) == resume  # right after the last batch written
            time.sleep(rng.uniform(0.1, 0.35))
            assert proc.poll() is None, "the writer died before it was killed"
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate(timeout=30)
        acks += [(int(a), int(b), int(c), int(d)) for line in out.splitlines() if line.startswith("ACK ")
                 and len(parts := line.split()) == 5 for a, b, c, d in [parts[1:]]]
        assert acks, "nothing acknowledged"
        copy = tmp_path / f"check-{cycle}" / "idem-0"  # what the kill left, checked without touching it
        shutil.copytree(data, copy)
        assert list(copy.glob("*.snapshot")), "no roll wrote a producer snapshot"
        rebuilt_dir = tmp_path / f"rebuilt-{cycle}" / "idem-0"
        shutil.copytree(data, rebuilt_dir)
        for p in rebuilt_dir.glob("*.snapshot"):
            p.unlink()
        rebuilt = Log(rebuilt_dir, _CRASH_CONFIG)
        log = Log(copy, _CRASH_CONFIG)
        try:
            assert log.producer_state.to_json() == rebuilt.producer_state.to_json()
            retained = list(log.producer_state.producers[42].retained)
            last_ack = acks[-1]
            # the last batch written is the last acknowledged one, or the one after it (killed before its ACK)
            unacked = retained[-1][2] > last_ack[3]
            if unacked:
                assert (retained[-1][0], retained[-1][2]) == ((last_ack[0] + last_ack[1]) & _INT32_MAX, last_ack[3] + 1)
            assert retained[-1][3] == log.log_end_offset - 1
            resume = (log.log_end_offset, (retained[-1][1] + 1) & _INT32_MAX)
            kept = [a for a in acks if any(b[0] == a[0] and b[2] == a[2] for b in retained)]
            assert len(kept) == min(len(acks), 4 if unacked else 5)
            size = log.size
            for seq, n, base, last in kept:
                r = log.append(batch(n, producer_id=42, producer_epoch=0, base_sequence=seq))
                assert (r.base_offset, r.last_offset, r.duplicate) == (base, last, True)
            assert log.size == size
            leo = log.log_end_offset
            assert log.append(batch(1, producer_id=42, producer_epoch=0, base_sequence=resume[1])
                              ).base_offset == leo
        finally:
            log.close()
            rebuilt.close()
