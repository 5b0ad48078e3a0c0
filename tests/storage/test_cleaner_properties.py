"""Property test of compaction (hypothesis): random keyed appends (with tombstones), rolls, forced
cleanings, clock jumps and reopen. Invariants: every record that is still present is byte-identical to
what was appended at that offset; the latest record of every key is present (a tombstone only until
delete.retention.ms has passed); cleaned segments hold nothing but latest records; the log end offset
never moves; reads from any offset start at the first batch holding or following it."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflite.protocol.record_batch import build_record_batch, decode_records, iter_batches
from kaflite.storage import Log, LogConfig
from kaflite.storage.cleaner import compact_log

RETENTION = 1000

ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(st.tuples(st.integers(0, 6), st.booleans()), min_size=1, max_size=4)),
        st.tuples(st.just("roll")),
        st.tuples(st.just("clean")),
        st.tuples(st.just("tick"), st.integers(0, 2 * RETENTION)),
        st.tuples(st.just("reopen"), st.booleans()),
    ),
    min_size=1,
    max_size=30,
)


def _records(log: Log) -> dict[int, tuple[bytes | None, bytes | None]]:
    out: dict[int, tuple[bytes | None, bytes | None]] = {}
    off = log.log_start_offset
    while off < log.log_end_offset:
        info = log.read(off, 1 << 20)
        if not info.records:
            break
        for buf in info.records:
            for v in iter_batches(buf):
                assert v.crc_ok() and v.last_offset >= off
                for r in decode_records(v):
                    out[r.offset] = (r.key, r.value)
                off = v.next_offset
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_compaction_against_a_model(operations) -> None:  # type: ignore[no-untyped-def]
    tmp = Path(tempfile.mkdtemp(prefix="kaflite-clean-"))
    try:
        _run(tmp / "c-0", operations)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run(path: Path, operations) -> None:  # type: ignore[no-untyped-def]
    now = [10_000]
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=400, delete_retention_ms=RETENTION,
                    segment_ms=10**12)
    log = Log(path, cfg, now_ms=lambda: now[0])
    appended: dict[int, tuple[bytes, bytes | None, int]] = {}  # offset -> (key, value, timestamp)
    cleaned_upto = 0  # offsets below this were in sealed segments at the last cleaning
    latest_at_clean: dict[bytes, int] = {}
    for op in operations:
        kind = op[0]
        if kind == "append":
            recs = [(b"key%d" % k, None if tomb else b"v%d-%d" % (k, now[0]), []) for k, tomb in op[1]]
            r = log.append(build_record_batch(recs, timestamp_ms=now[0]))
            for i, (k, v, _h) in enumerate(recs):
                appended[r.base_offset + i] = (k, v, now[0])
        elif kind == "roll":
            log.roll()
        elif kind == "clean":
            compact_log(log, now[0], force=True)
            cleaned_upto = log.segments[-1].base_offset
            latest_at_clean = {}
            for off in sorted(appended):
                latest_at_clean[appended[off][0]] = off
        elif kind == "tick":
            now[0] += op[1]
        elif kind == "reopen":
            log.close()
            log = Log(path, cfg, now_ms=lambda: now[0], had_clean_shutdown=op[1])
        end = max(appended) + 1 if appended else 0
        assert log.log_end_offset == end
        present = _records(log)
        latest: dict[bytes, int] = {}
        for off in sorted(appended):
            latest[appended[off][0]] = off
        for off, (k, v) in present.items():
            assert (k, v) == appended[off][:2], off
        for k, off in latest.items():
            key, value, ts = appended[off]
            if off >= cleaned_upto or value is not None:
                assert off in present, (k, off)
        for off in present:
            if off < cleaned_upto:
                key = appended[off][0]
                assert latest_at_clean[key] == off, f"offset {off} of key {key!r} should have been cleaned"
    log.close()
