"""Property tests (hypothesis): random sequences of appends, rolls, retention, DeleteRecords,
truncation and reopen (clean or crash) keep offsets dense and reads exact; index lookups equal a
linear scan; offset-for-timestamp equals a linear scan over the records."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.record_batch import build_record_batch, decode_records, iter_batches
from kaflite.storage import Log, LogConfig

T0 = 1_000_000

ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 4), st.integers(0, 300), st.lists(st.integers(0, 50), min_size=4, max_size=4)),
        st.tuples(st.just("roll")),
        st.tuples(st.just("delete_records"), st.floats(0, 1)),
        st.tuples(st.just("retention_bytes"), st.integers(0, 3000)),
        st.tuples(st.just("truncate"), st.floats(0, 1)),
        st.tuples(st.just("reopen"), st.sampled_from(["clean", "crash", "crash-rp"])),
        st.tuples(st.just("read"), st.floats(0, 1), st.integers(1, 2000)),
    ),
    min_size=1,
    max_size=40,
)


class Model:
    def __init__(self) -> None:
        self.batches: list[tuple[int, list[int]]] = []  # (base offset, record timestamps)
        self.lso = 0
        self.leo = 0

    def records(self) -> list[tuple[int, int]]:
        return [(b + i, ts) for b, tss in self.batches for i, ts in enumerate(tss) if b + i >= self.lso]


def _check_read(log: Log, m: Model, offset: int, max_bytes: int) -> None:
    if offset < m.lso or offset > m.leo:
        with pytest.raises(KafkaError) as e:
            log.read(offset, max_bytes)
        assert e.value.code == ErrorCode.offset_out_of_range
        return
    info = log.read(offset, max_bytes)
    if offset == m.leo:
        assert info.records == [] and info.size == 0
        return
    views = [v for buf in info.records for v in iter_batches(buf)]
    assert views, f"nothing read at {offset} in [{m.lso}, {m.leo})"
    assert views[0].base_offset <= offset <= views[0].last_offset
    assert sum(v.size for v in views) == info.size
    assert len(views) == 1 or info.size <= max_bytes
    expected = views[0].base_offset
    for v in views:
        assert v.crc_ok() and v.base_offset == expected
        for r in decode_records(v):
            assert r.offset == expected and r.value == b"%d" % expected
            expected += 1


def _check_indexes(log: Log, m: Model) -> None:
    for seg in log.segments:
        for o in range(seg.base_offset, seg.next_offset + 1, 3):
            assert seg.translate_offset(o) == seg.translate_offset(o, start_position=0)
    recs = m.records()
    for target in (T0 - 1, T0, T0 + 7, T0 + 25, T0 + 49, T0 + 51):
        expect = next(((o, ts) for o, ts in recs if ts >= target), None)
        assert log.offset_for_timestamp(target) == expect


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops, st.integers(1000, 5000), st.integers(0, 300))
def test_random_operations_against_a_model(operations, segment_bytes, index_interval) -> None:  # type: ignore[no-untyped-def]
    tmp = Path(tempfile.mkdtemp(prefix="kaflite-prop-"))
    try:
        _run(tmp / "p-0", operations, segment_bytes, index_interval)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run(path: Path, operations, segment_bytes: int, index_interval: int) -> None:  # type: ignore[no-untyped-def]
    cfg = LogConfig(segment_bytes=max(segment_bytes, 1500), index_interval_bytes=index_interval,
                    retention_ms=-1, segment_ms=10**12)
    log = Log(path, cfg)
    m = Model()
    opened = [log]
    for op in operations:
        kind = op[0]
        if kind == "append":
            _, n, pad, tss = op
            tss = [T0 + t for t in tss[:n]]
            raw = build_record_batch([(b"k", b"%d" % (m.leo + i), [("p", b"x" * pad)]) for i in range(n)],
                                     timestamps=tss)
            r = log.append(raw)
            assert (r.base_offset, r.last_offset) == (m.leo, m.leo + n - 1)
            m.batches.append((m.leo, tss))
            m.leo += n
            log.update_high_watermark(log.log_end_offset)
        elif kind == "roll":
            log.roll()
        elif kind == "delete_records":
            target = m.lso + int(op[1] * (m.leo - m.lso))
            assert log.delete_records(target) == max(target, m.lso)
            m.lso = max(target, m.lso)
        elif kind == "retention_bytes":
            log.update_config(cfg.replace(retention_bytes=op[1]))
            log.delete_old_segments()
            log.update_config(cfg)
            assert m.lso <= log.log_start_offset <= m.leo
            m.lso = log.log_start_offset
            assert m.lso == log.segments[0].base_offset or m.lso == log.log_start_offset
        elif kind == "truncate":
            t = int(op[1] * m.leo)
            if t >= m.leo:
                continue
            if t < m.lso:
                log.truncate_to(t)
                m.batches, m.lso, m.leo = [], t, t
            else:
                containing = next(b for b in m.batches if b[0] <= t < b[0] + len(b[1]))
                if containing[0] < m.lso:
                    continue  # replication never truncates inside a batch straddling the log start
                log.truncate_to(t)
                m.batches = [b for b in m.batches if b[0] < containing[0]]
                m.leo = containing[0]
        elif kind == "reopen":
            mode = op[1]
            if mode == "clean":
                log.close()
                log = Log(path, cfg, log_start_offset=m.lso, high_watermark=m.leo, had_clean_shutdown=True,
                          recovery_point=m.leo)
            else:
                # crash: abandon the object (pending index entries are lost), recover from 0 or the
                # recovery point it had reached
                rp = log.recovery_point if mode == "crash-rp" else 0
                if mode == "crash-rp":
                    log.flush()
                log = Log(path, cfg, log_start_offset=m.lso, high_watermark=m.leo, recovery_point=rp)
            opened.append(log)
            assert log.recovered_bytes_truncated == 0
        elif kind == "read":
            span = m.leo - m.lso + 2
            _check_read(log, m, m.lso - 1 + int(op[1] * span), op[2])
        assert (log.log_start_offset, log.log_end_offset) == (m.lso, m.leo), op
        assert log.high_watermark <= log.log_end_offset
    # final: every offset reads exactly, indexes equal a linear scan
    for o in range(m.lso, m.leo + 1):
        _check_read(log, m, o, 1 << 20)
    _check_indexes(log, m)
    for lg in opened:  # release the file descriptors of the "crashed" instances too
        if not lg.closed:
            for seg in lg.segments:
                seg.retire_fd()
