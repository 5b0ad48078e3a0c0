"""Storage engine benchmark: Log.append / Log.read against plain file write()/read() of the same bytes.

Prints one table: for 16 KiB and 1 MiB batches, append throughput (MB/s, batches/s) of kaflite's
Log (header validation + CRC-32C check + offset patch + write + index) next to a plain unbuffered
`write()` of the same batch bytes, sequential read throughput of `Log.read(offset, 1 MiB)` next to
plain `read()` of the same byte ranges, and (16 KiB) random reads of one batch by offset (index lookup)
next to `pread()` at the known positions, and (16 KiB) opening the log after a crash (full rescan with
CRC checks, indexes rebuilt) or after a clean shutdown, next to reading the file once. Both sides run in the same process, on the same disk, with the
page cache in the same state; each figure is the best of `--repeat` runs. With `--fsync`, also the
flush-before-acknowledge mode (flush.messages=1) against write()+fdatasync().

Usage: .venv/bin/python bench/storage_bench.py [--mb 128] [--repeat 3] [--dir /tmp] [--fsync] [--clock wall|cpu]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

from kaflite.protocol.record_batch import build_record_batch
from kaflite.storage import Log, LogConfig

READ_MAX_BYTES = 1 << 20  # a consumer's max.partition.fetch.bytes default
TIMER = time.perf_counter  # --clock cpu: time.process_time (CPU seconds of this process, user + system)


def make_batch(size: int) -> tuple[bytes, int]:
    """A valid batch of about `size` bytes made of 1 KiB records; returns (bytes, record count)."""
    rec = 1024
    n = max(1, (size - 100) // (rec + 20))  # stay under max.message.bytes (1048588) for 1 MiB
    value = os.urandom(rec)
    raw = build_record_batch([(b"key-%06d" % i, value, []) for i in range(n)], timestamp_ms=1_700_000_000_000)
    return raw, n


def settle() -> None:
    """Start every timed run from the same state: no dirty pages waiting for writeback."""
    os.sync()


def bench_append_plain(path: Path, raw: bytes, count: int, fsync: bool) -> float:
    path.unlink(missing_ok=True)
    settle()
    with open(path, "wb", buffering=0) as f:
        f.write(raw)  # untimed warm-up write, like the Log's first append below
        t = TIMER()
        for _ in range(count - 1):
            f.write(raw)
            if fsync:
                os.fdatasync(f.fileno())
        elapsed = TIMER() - t
        os.fdatasync(f.fileno())  # untimed, like Log.close() below
    return elapsed


def bench_append_log(directory: Path, raw: bytes, count: int, fsync: bool) -> float:
    shutil.rmtree(directory, ignore_errors=True)
    cfg = LogConfig(flush_interval_messages=1) if fsync else LogConfig()
    log = Log(directory, cfg)
    mv = memoryview(raw)
    append = log.append
    # untimed first append: it creates the leader-epoch checkpoint (one fsync per partition, once)
    append(mv)
    settle()
    t = TIMER()
    if fsync:  # flush-before-acknowledge: the append, then the fsync the produce handler waits for
        flush_up_to = log.flush_up_to
        for _ in range(count - 1):
            flush_up_to(append(mv).last_offset + 1)
    else:
        for _ in range(count - 1):
            append(mv)
    elapsed = TIMER() - t
    log.close()
    return elapsed


READ_PASSES = 4  # reads are fast: several passes over the data make each timing long enough


def bench_read_plain(path: Path, chunk: int) -> tuple[float, int]:
    total = 0
    with open(path, "rb", buffering=0) as f:
        t = TIMER()
        for _ in range(READ_PASSES):
            f.seek(0)
            while True:
                data = f.read(chunk)
                if not data:
                    break
                total += len(data)
        return TIMER() - t, total // READ_PASSES


def bench_read_log(directory: Path, per_batch_records: int, batch_size: int) -> tuple[float, int]:
    log = Log(directory, LogConfig(), had_clean_shutdown=True, recovery_point=2**62)
    end = log.log_end_offset
    total = 0
    offset = 0
    read = log.read
    t = TIMER()
    for _ in range(READ_PASSES):
        offset = 0
        while offset < end:
            info = read(offset, READ_MAX_BYTES)
            size = info.size
            total += size
            # every batch is identical, so the next offset follows from the byte count (what a consumer
            # learns by walking the batch headers it received)
            offset += (size // batch_size) * per_batch_records
    elapsed = TIMER() - t
    total //= READ_PASSES
    log.close()
    return elapsed, total


def bench_random_read_log(directory: Path, offsets: list[int], max_bytes: int) -> float:
    """Random-access reads of one batch each: index lookup + header scan + pread (no sequential memo)."""
    log = Log(directory, LogConfig(), had_clean_shutdown=True, recovery_point=2**62)
    read = log.read
    t = TIMER()
    for o in offsets:
        read(o, max_bytes)  # exactly the batch holding o (the next one does not fit)
    elapsed = TIMER() - t
    log.close()
    return elapsed


def bench_random_read_plain(path: Path, positions: list[int], size: int) -> float:
    fd = os.open(path, os.O_RDONLY)
    try:
        t = TIMER()
        for p in positions:
            os.pread(fd, size, p)
        return TIMER() - t
    finally:
        os.close(fd)


def bench_open_log(directory: Path, clean: bool) -> float:
    """Open an existing log: clean (indexes sanity-checked, tail scanned) or after a crash (every
    segment rescanned: headers, CRC-32C of every batch, indexes rebuilt)."""
    t = TIMER()
    log = Log(directory, LogConfig(), had_clean_shutdown=clean, recovery_point=2**62 if clean else 0)
    elapsed = TIMER() - t
    log.close()
    return elapsed


def bench_scan_plain(path: Path) -> float:
    """Baseline of recovery: read the file in 1 MiB chunks."""
    with open(path, "rb", buffering=0) as f:
        t = TIMER()
        while f.read(1 << 20):
            pass
        return TIMER() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, default=128, help="MiB written per case (default 128)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure, best kept (default 3)")
    ap.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    ap.add_argument("--fsync", action="store_true", help="also measure flush.messages=1 vs write+fdatasync")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall: elapsed time (default); cpu: CPU time of this process (user + system), "
                         "stable on a loaded machine, blind to I/O waits (meaningless for --fsync rows)")
    args = ap.parse_args()
    global TIMER
    TIMER = time.process_time if args.clock == "cpu" else time.perf_counter
    root = Path(tempfile.mkdtemp(prefix="kaflite-bench-", dir=args.dir))
    rows = []
    try:
        for label, size in (("16 KiB", 16 * 1024), ("1 MiB", 1024 * 1024)):
            raw, n = make_batch(size)
            count = max(2, args.mb * 1024 * 1024 // len(raw))
            mb = count * len(raw) / 1e6
            plain_path = root / "plain.bin"
            log_dir = root / "bench-0"
            # plain and kaflite runs alternate, so both see the same machine load; best of each kept
            tp = tl = float("inf")
            for _ in range(args.repeat):
                tp = min(tp, bench_append_plain(plain_path, raw, count, False))
                tl = min(tl, bench_append_log(log_dir, raw, count, False))
            timed = count - 1  # the first write of each side is an untimed warm-up
            tmb = timed * len(raw) / 1e6
            rows.append((f"append {label}", tmb / tl, timed / tl, tmb / tp, timed / tp, tp / tl))
            seg = next(log_dir.glob("*.log"))
            assert seg.stat().st_size == plain_path.stat().st_size == count * len(raw)
            chunk = max(READ_MAX_BYTES // len(raw), 1) * len(raw)  # the byte ranges Log.read returns
            rp = rl = float("inf")
            for _ in range(args.repeat):
                t, total_plain = bench_read_plain(plain_path, chunk)
                rp = min(rp, t)
                t, total_log = bench_read_log(log_dir, n, len(raw))
                rl = min(rl, t)
                assert total_log == total_plain == count * len(raw), (total_log, total_plain)
            rl, rp = rl / READ_PASSES, rp / READ_PASSES
            rows.append((f"read {label}", mb / rl, count / rl, mb / rp, count / rp, rp / rl))
            if size < 1 << 20:
                rp = rl = rc = float("inf")
                for _ in range(args.repeat):
                    rp = min(rp, bench_scan_plain(plain_path))
                    rl = min(rl, bench_open_log(log_dir, clean=False))
                    rc = min(rc, bench_open_log(log_dir, clean=True))
                rows.append((f"recover {label}", mb / rl, count / rl, mb / rp, count / rp, rp / rl))
                rows.append((f"clean open {label}", mb / rc, count / rc, mb / rp, count / rp, rp / rc))
                # random access: what the sparse index costs (Kafka's mmap'd index is replaced by arrays)
                rng = random.Random(7)
                picks = [rng.randrange(count) for _ in range(min(count, 3000))]
                offsets = [i * n + rng.randrange(n) for i in picks]
                positions = [i * len(raw) for i in picks]
                rmb = len(picks) * len(raw) / 1e6
                rp = rl = float("inf")
                for _ in range(args.repeat):
                    rp = min(rp, bench_random_read_plain(plain_path, positions, len(raw)))
                    rl = min(rl, bench_random_read_log(log_dir, offsets, len(raw)))
                rows.append((f"random read {label}", rmb / rl, len(picks) / rl, rmb / rp, len(picks) / rp, rp / rl))
            if args.fsync:
                fcount = max(2, min(count, 200 if size < 1 << 20 else 50))
                tp = tl = float("inf")
                for _ in range(args.repeat):
                    tp = min(tp, bench_append_plain(plain_path, raw, fcount, True))
                    tl = min(tl, bench_append_log(log_dir, raw, fcount, True))
                fmb = (fcount - 1) * len(raw) / 1e6
                rows.append((f"append+fsync {label}", fmb / tl, (fcount - 1) / tl, fmb / tp, (fcount - 1) / tp,
                             tp / tl))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"kaflite storage bench: {args.mb} MiB per case, best of {args.repeat}, {args.clock} clock, "
          f"scratch dir {root.parent}")
    head = f"{'case':<22}{'kaflite MB/s':>14}{'batches/s':>12}{'plain MB/s':>13}{'batches/s':>12}{'ratio':>8}"
    print(head)
    print("-" * len(head))
    for name, lmb, lbs, pmb, pbs, ratio in rows:
        print(f"{name:<22}{lmb:>14.1f}{lbs:>12.0f}{pmb:>13.1f}{pbs:>12.0f}{ratio:>7.2f}x")
    print("ratio = kaflite throughput / plain-file throughput (targets: append >= 0.7x, read >= 0.8x)")


if __name__ == "__main__":
    main()
