"""Log's hot path for batches with a producer id (Log._append, producer_state rule 7) against the general
path (_append_general + ProducerStateManager.check/update): same offsets, same errors, same producer
state, same bytes on disk, for random sequences of idempotent and transactional batches with
duplicates, gaps, epoch bumps, out-of-order and wrapping sequences, markers and segment rolls."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.storage import Log, LogConfig
from storage.storage_util import ManualClock, batch

_INT32_MAX = 0x7FFFFFFF

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
    return {"next": nxt, "gap": nxt + 1 + draw % 3, "zero": 0, "behind": max(0, nxt - 2),
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
