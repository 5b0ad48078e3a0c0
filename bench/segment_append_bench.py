"""Nanoseconds of CPU per `LogSegment.append_one` on a warm segment (descriptor open, indexes loaded): the
per-partition storage write of a Produce request, alone (no Log, no handler).

    PYTHONPATH=src .venv/bin/python bench/segment_append_bench.py --appends 100000 --rounds 7 --dir /dev/shm

Each round opens a fresh segment, warms it with 1,000 appends, then times `--appends` appends of one
`--size`-byte batch (a header prefix and a body, as Log.append passes them) with process CPU time and
wall time. Prints the best and the median round. A tmpfs `--dir` keeps the page cache's and the disk's
noise out of the write; run two source trees alternately (PYTHONPATH) to compare. `--read` times
`LogSegment.pread` of `--size` bytes instead (the call under every fetch's read), at positions walking a
1 MiB segment.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from kaflite.storage.segment import LogSegment

HEADER = 61  # a record batch's header, the part Log.append patches


def one_round(directory: str | None, appends: int, size: int) -> tuple[float, float]:
    """(CPU ns, wall ns) per append of one round."""
    tmp = tempfile.mkdtemp(prefix="kaflite-sab-", dir=directory)
    seg = LogSegment(Path(tmp), 0, index_interval_bytes=4096, max_index_size=10 * 1024 * 1024, created_ms=0)
    try:
        header = bytes(HEADER)
        body = memoryview(bytes(size - HEADER))
        append = seg.append_one
        offset = 0
        for _ in range(1000):
            append(header, body, size, offset, offset)
            offset += 1
        cpu0, wall0 = time.process_time_ns(), time.perf_counter_ns()
        for _ in range(appends):
            append(header, body, size, offset, offset)
            offset += 1
        cpu, wall = time.process_time_ns() - cpu0, time.perf_counter_ns() - wall0
        if seg.size != (offset * size) or seg.next_offset != offset:  # the writes really happened
            raise SystemExit(f"segment size {seg.size}, next offset {seg.next_offset} after {offset} appends")
        return cpu / appends, wall / appends
    finally:
        seg.close()
        shutil.rmtree(tmp, ignore_errors=True)


def read_round(directory: str | None, reads: int, size: int) -> tuple[float, float]:
    """(CPU ns, wall ns) per pread of one round."""
    tmp = tempfile.mkdtemp(prefix="kaflite-sab-", dir=directory)
    seg = LogSegment(Path(tmp), 0, index_interval_bytes=4096, max_index_size=1 << 20, created_ms=0)
    try:
        span = 1 << 20
        seg.append([bytes(span)], [(span, 0, 0, 0)])
        pread = seg.pread
        limit = span - size
        for i in range(1000):
            pread(size, (i * 4096) % limit)
        cpu0, wall0 = time.process_time_ns(), time.perf_counter_ns()
        for i in range(reads):
            pread(size, (i * 4096) % limit)
        cpu, wall = time.process_time_ns() - cpu0, time.perf_counter_ns() - wall0
        if len(pread(size, 0)) != size:
            raise SystemExit("short read")
        return cpu / reads, wall / reads
    finally:
        seg.close()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--appends", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--size", type=int, default=100, help="bytes per batch (at least 61)")
    ap.add_argument("--dir", default=None, help="where the segments are written (default: the temp dir)")
    ap.add_argument("--read", action="store_true", help="time LogSegment.pread instead (--appends reads)")
    args = ap.parse_args()
    if args.size < HEADER or args.size > 1 << 19:
        ap.error(f"--size must be {HEADER} to {1 << 19}")
    what = "pread" if args.read else "append_one"
    run = read_round if args.read else one_round
    results = [run(args.dir, args.appends, args.size) for _ in range(args.rounds)]
    cpu = sorted(r[0] for r in results)
    wall = sorted(r[1] for r in results)
    print(
        f"{what}, {args.size} B, {args.appends} calls x {args.rounds} rounds: "
        f"CPU ns/call best {cpu[0]:.0f} median {statistics.median(cpu):.0f}; "
        f"wall best {wall[0]:.0f} median {statistics.median(wall):.0f}"
    )


if __name__ == "__main__":
    main()
