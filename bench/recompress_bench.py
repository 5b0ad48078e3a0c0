"""CPU cost of recompression: a produced batch rewritten in the topic's `compression.type` when the producer
used another codec (Kafka's LogValidator does the same). Two ways, measured in the same process, alternating:

- per record (the baseline, kaflite before this bench): every record decoded into Python objects and a new
  batch built from them (`decode_records` + `build_record_batch`);
- raw section (`kaflite.protocol.record_batch.recompress_batches`): the records section decompressed and
  compressed again as one buffer, the header patched (codec bits, length, CRC).

    PYTHONPATH=src .venv/bin/python bench/recompress_bench.py [--batches 500] [--records 100] [--repeat 3]

Each batch holds --records records of 100 B (a key of 8 B, a header). The table shows, for each
(producer codec -> topic codec) pair, the median over --repeat rounds of the CPU microseconds per batch
(time.process_time) of each way, records per second of CPU of the raw way, and the speed-up.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

PAIRS = [("none", "lz4"), ("lz4", "zstd"), ("gzip", "none"), ("snappy", "zstd"), ("zstd", "gzip")]


def per_record(buf: bytes, codec: int) -> bytes:
    """The baseline: what recompress_batches did before it kept the records section's bytes."""
    from kaflite.protocol.record_batch import build_record_batch, decode_records, iter_batches

    out = bytearray()
    for v in iter_batches(buf):
        v.validate()
        records = decode_records(v)
        out += build_record_batch([(r.key, r.value, r.headers) for r in records], base_offset=v.base_offset,
                                  timestamps=[r.timestamp for r in records], producer_id=v.producer_id,
                                  producer_epoch=v.producer_epoch, base_sequence=v.base_sequence,
                                  compression=codec, is_transactional=v.is_transactional,
                                  partition_leader_epoch=v.partition_leader_epoch)
    return bytes(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", type=int, default=500)
    ap.add_argument("--records", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if min(args.batches, args.records, args.repeat) < 1:
        ap.error("--batches, --records and --repeat must be at least 1")
    from kaflite.protocol.compression import CODECS
    from kaflite.protocol.record_batch import build_record_batch, recompress_batches

    value = bytes(range(100))
    rows = []
    for source, target in PAIRS:
        batches = [build_record_batch([(b"key-%04d" % (i % 10_000), value, [("h", b"1")])
                                       for i in range(args.records)], base_offset=0,
                                      timestamp_ms=1_700_000_000_000, producer_id=1, producer_epoch=0,
                                      base_sequence=n * args.records, compression=CODECS[source])
                   for n in range(min(args.batches, 50))]
        work = [batches[n % len(batches)] for n in range(args.batches)]
        codec = CODECS[target]
        assert recompress_batches(work[0], codec) != work[0]
        timings: dict[str, list[float]] = {"record": [], "raw": []}
        for _ in range(args.repeat):
            for name, fn in (("record", per_record), ("raw", recompress_batches)):
                t = time.process_time()
                for buf in work:
                    fn(buf, codec)
                timings[name].append((time.process_time() - t) / len(work) * 1e6)
        record, raw = statistics.median(timings["record"]), statistics.median(timings["raw"])
        rows.append((f"{source} -> {target}", record, raw, args.records / raw * 1e6, record / raw))
    print(f"recompression of {args.batches} batches x {args.records} records x 100 B, median of {args.repeat}")
    print("| producer -> topic codec | per record (µs/batch) | raw section (µs/batch) | raw records/s of CPU "
          "| speed-up |")
    print("|---|---|---|---|---|")
    for pair, record, raw, rps, up in rows:
        print(f"| {pair} | {record:,.0f} | {raw:,.0f} | {rps:,.0f} | {up:.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
