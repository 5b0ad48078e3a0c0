"""CPU cost of Log.append for idempotent batches next to plain ones, in-process (no socket, no handler):
what the storage layer spends per record on a producer id (sequence/epoch check, dedup window, producer
state update) on top of a plain append.

    PYTHONPATH=src .venv/bin/python bench/idempotent_append_bench.py [--batches 20000] [--repeat 5]
        [--base /tmp/other-checkout/src]

Each measurement runs in a fresh subprocess: N batches of 10 records x 100 B appended to a new Log
(default config) without a producer id and N batches of producer 1 with consecutive sequences to
another, after 500 untimed warm-up appends to each, in alternating chunks of 500 appends each timed
with time.process_time (CPU of the process, user + system). With --base, the same measurement runs with that source tree first on PYTHONPATH,
alternating with this tree, so that both see the same machine load; the table shows the median of
--repeat runs of each: CPU seconds per million records, plain and idempotent, and idempotent
throughput as a fraction of plain (plain CPU / idempotent CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RECORDS_PER_BATCH = 10
WARMUP = 500
CHUNK = 500


def worker(batches: int) -> dict[str, float]:
    from kaflite.protocol.record_batch import build_record_batch
    from kaflite.storage import Log

    records = [(None, b"x" * 100, [])] * RECORDS_PER_BATCH
    total = batches + WARMUP
    # distinct bytes objects on both sides (equal memory traffic): a plain batch is copied, not reused
    plain = [bytes(bytearray(build_record_batch(records, timestamp_ms=1_700_000_000_000))) for _ in range(total)]
    idem = [build_record_batch(records, timestamp_ms=1_700_000_000_000, producer_id=1, producer_epoch=0,
                               base_sequence=i * RECORDS_PER_BATCH) for i in range(total)]
    out = {"plain": 0.0, "idempotent": 0.0}
    tmp = tempfile.mkdtemp(prefix="kaflite-iab-")
    try:
        logs = {name: Log(Path(tmp) / f"{name}-0") for name in out}
        sides = [("plain", logs["plain"].append, plain), ("idempotent", logs["idempotent"].append, idem)]
        for _, append, raws in sides:
            for raw in raws[:WARMUP]:
                append(raw)
        # chunks of CHUNK appends, the two sides alternating: a change of machine load hits both alike
        clock = time.process_time
        for start in range(WARMUP, total, CHUNK):
            for name, append, raws in sides:
                chunk = raws[start:start + CHUNK]
                t = clock()
                for raw in chunk:
                    append(raw)
                out[name] += clock() - t
        for log in logs.values():
            assert log.log_end_offset == total * RECORDS_PER_BATCH
            log.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def run(src: str, batches: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=src)
    done = subprocess.run([sys.executable, __file__, "--worker", "--batches", str(batches)], env=env,
                          check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--base", help="source tree (its src/) to compare with, e.g. a checkout of main")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.batches)))
        return
    here = str(Path(__file__).resolve().parent.parent / "src")
    trees = [("before", args.base), ("after", here)] if args.base else [("this tree", here)]
    runs: dict[str, list[dict[str, float]]] = {label: [] for label, _ in trees}
    for _ in range(args.repeat):
        for label, src in trees:
            runs[label].append(run(src, args.batches))
    million = 1e6 / (args.batches * RECORDS_PER_BATCH)
    print(f"{args.batches} batches x {RECORDS_PER_BATCH} records x 100 B, median of {args.repeat} runs, "
          "CPU s per million records")
    print(f"{'tree':<10} {'plain':>8} {'idempotent':>11} {'idem/plain throughput':>22}")
    for label, _ in trees:
        plain = statistics.median(r["plain"] for r in runs[label]) * million
        idem = statistics.median(r["idempotent"] for r in runs[label]) * million
        print(f"{label:<10} {plain:8.3f} {idem:11.3f} {plain / idem:21.2f}x")


if __name__ == "__main__":
    main()
