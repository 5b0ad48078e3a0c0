"""Compaction throughput and what an append waits meanwhile (docs/storage.md, "Compaction").

Builds a compacted log of `--mb` MB (1 MiB segments; 100-record uncompressed batches of 60-byte values over
`--keys` keys, so most records are superseded and most batches are rewritten), then times one forced
`compact_log` pass: MB/s = bytes of the cleaned segments / pass time (wall, and per CPU second of the
cleaning thread, which a busy machine disturbs less). Meanwhile a probe thread appends one record every
2 ms and reports its worst and median wait (the pass used to hold the log's lock throughout). A second
log of the same size whose keys are all distinct measures the scan alone (offset map + survivors: nothing
is removed, nothing rewritten). Runs in well under 60 s at the default size. The probe's wait includes
taking the interpreter lock back from the pass after its 2 ms sleep, as the event loop's thread must after
each of its I/O calls: `--no-yield` runs the passes without the cleaner's lock yields (storage/cleaner.py
rule 10) to compare, and `--io-cap` sets log.cleaner.io.max.bytes.per.second (bytes/s).

    .venv/bin/python bench/compaction_bench.py [--mb 16] [--keys 5000] [--no-yield] [--io-cap BYTES]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from kaflite.protocol.record_batch import build_record_batch
from kaflite.storage import Log, LogConfig
from kaflite.storage.cleaner import CleanerThrottle, CleanResult, compact_log


def build(directory: Path, megabytes: int, keys: int) -> Log:
    cfg = LogConfig(segment_bytes=1 << 20, cleanup_policy="compact", min_compaction_lag_ms=0)
    log = Log(directory, cfg)
    value = b"v" * 60
    n = 0
    while log.size < megabytes << 20:
        log.append(build_record_batch([(b"key-%d" % ((n + i) % keys), value, []) for i in range(100)]))
        n += 100
    log.update_high_watermark(log.log_end_offset)
    return log


def timed_pass(log: Log, throttle: CleanerThrottle) -> tuple[CleanResult, float, float, list[float]]:
    done = threading.Event()
    waits: list[float] = []
    probe = build_record_batch([(b"probe", b"x", [])])

    def prober() -> None:
        while not done.is_set():
            t0 = time.perf_counter()
            log.append(probe)
            log.update_high_watermark(log.log_end_offset)
            waits.append(time.perf_counter() - t0)
            time.sleep(0.002)

    t = threading.Thread(target=prober)
    t.start()
    t0 = time.perf_counter()
    c0 = time.thread_time()
    result = compact_log(log, int(time.time() * 1000), force=True, throttle=throttle)
    cpu = time.thread_time() - c0
    took = time.perf_counter() - t0
    done.set()
    t.join()
    return result, took, cpu, waits


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=16)
    ap.add_argument("--keys", type=int, default=5000)
    ap.add_argument("--no-yield", action="store_true", help="the passes do not yield the interpreter lock")
    ap.add_argument("--io-cap", type=float, default=float("inf"), help="log.cleaner.io.max.bytes.per.second")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        for label, keys in (("5,000 keys (rewrite)", args.keys), ("distinct keys (scan)", 1 << 40)):
            log = build(Path(d) / f"c-{keys}", args.mb, keys)
            throttle = CleanerThrottle(args.io_cap, **({"yield_s": 0} if args.no_yield else {}))
            result, took, cpu, waits = timed_pass(log, throttle)
            mb = result.bytes_before / 1e6
            print(f"{label:21} {mb:5.1f} MB -> {result.bytes_after / 1e6:5.1f} MB in {took:5.2f} s "
                  f"({cpu:5.2f} s CPU): {mb / took:5.1f} MB/s, {mb / cpu:5.1f} MB/CPU-s; "
                  f"{result.records_removed} records removed; probe appends: {len(waits)}, "
                  f"median {statistics.median(waits) * 1000:.2f} ms, "
                  f"p99 {sorted(waits)[int(0.99 * len(waits))] * 1000:.2f} ms, worst {max(waits) * 1000:.1f} ms")
            log.close()


if __name__ == "__main__":
    main()
