"""The source's fetch decoder alone (kaflite.spark.batches.decode_batches), compiled and pure in the same
run, on a realistic Fetch answer: 4 MiB of batches of 500 records (10-byte keys from 1,000 distinct ones,
100-byte values), uncompressed, lz4 and zstd. No broker, no Spark: rows/s of the decoder itself.

    .venv/bin/python bench/spark_decode_bench.py [--records 36000] [--batch 500] [--repeat 5] [--headers]
    .venv/bin/python bench/spark_decode_bench.py --profile pure|compiled   # cProfile of one codec's decode

Each figure is the best of --repeat runs (the machine is shared: the best is the least disturbed).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time

from kaflite.protocol.record_batch import build_record_batch
from kaflite.spark import batches

CODECS = {"none": 0, "lz4": 3, "zstd": 4}


def fetch_answer(records: int, per_batch: int, codec: int, headers: bool) -> bytes:
    rng = os.urandom(100 * 64)
    out, offset = [], 0
    while offset < records:
        n = min(per_batch, records - offset)
        rows = []
        for i in range(offset, offset + n):
            value = rng[(i % 64) * 100 : (i % 64) * 100 + 100]
            rows.append((b"key-%06d" % (i % 1000), value, [("trace", b"%d" % i)] if headers else []))
        out.append(build_record_batch(rows, base_offset=offset, timestamps=list(range(offset, offset + n)),
                                      compression=codec))
        offset += n
    return b"".join(out)


def best(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=36_000)  # about 4 MiB of 100-byte records
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--headers", action="store_true", help="one header per record, includeHeaders=true")
    ap.add_argument("--profile", choices=["pure", "compiled"])
    ap.add_argument("--codec", choices=list(CODECS), default="none", help="with --profile")
    args = ap.parse_args()
    print(f"decoder selected by default: {batches.DECODER}")
    if args.profile:
        data = fetch_answer(args.records, args.batch, CODECS[args.codec], args.headers)
        pure = args.profile == "pure"
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.repeat):
            batches.decode_batches(data, "t", 0, 0, args.records, args.headers, pure=pure)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(12)
        return
    print(f"{args.records} records of 100 B in batches of {args.batch}, headers={args.headers}, "
          f"best of {args.repeat}")
    print(f"{'codec':6} {'MiB':>6} {'pure rows/s':>14} {'compiled rows/s':>16} {'ratio':>7}")
    for name, codec in CODECS.items():
        data = fetch_answer(args.records, args.batch, codec, args.headers)
        figures = []
        for pure in (True, False):
            if not pure and batches.DECODER != "compiled":
                figures.append(float("nan"))
                continue
            rows, _ = batches.decode_batches(data, "t", 0, 0, args.records, args.headers, pure=pure)
            assert rows is not None and rows.num_rows == args.records
            figures.append(args.records / best(
                lambda p=pure, d=data: batches.decode_batches(d, "t", 0, 0, args.records, args.headers, pure=p),
                args.repeat))
        print(f"{name:6} {len(data) / 2**20:6.2f} {figures[0]:14,.0f} {figures[1]:16,.0f} "
              f"{figures[1] / figures[0]:6.2f}x")


if __name__ == "__main__":
    main()
