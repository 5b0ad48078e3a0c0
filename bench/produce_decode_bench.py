"""CPU cost of decoding a Produce request: kio's generic reader (the baseline: what the broker used for
v3-v13 before, with kaflite's length pre-check) next to kaflite.protocol.produce_request, measured in the
same process, alternating.

    PYTHONPATH=src .venv/bin/python bench/produce_decode_bench.py [--repeat 5] [--version 9]

Requests of 1, 6, 100 and 1,000 partitions (one topic), each partition one batch of 160 records x 100 B
(about 17 KB); the table shows the best of --repeat rounds of CPU microseconds (time.process_time) per
request and per partition, and the ratio.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import io
import sys

from _timing import best_cpu_us


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--version", type=int, default=9, help="Produce version, 3-12")
    args = ap.parse_args()
    if args.repeat < 1 or not 3 <= args.version <= 12:
        ap.error("--repeat must be at least 1 and --version within 3-12")
    from kio.serial import entity_writer
    from kio.static.primitive import i16, i32

    from kaflite.protocol import produce_request
    from kaflite.protocol.messages import _reader, check_request_lengths
    from kaflite.protocol.record_batch import build_record_batch

    m = importlib.import_module(f"kio.schema.produce.v{args.version}.request")
    batch = build_record_batch([(None, b"x" * 100, [])] * 160)
    rows = []
    for parts in (1, 6, 100, 1000):
        req = m.ProduceRequest(
            transactional_id=None,
            acks=i16(-1),
            timeout=datetime.timedelta(seconds=30),
            topic_data=(
                m.TopicProduceData(
                    name="t",
                    partition_data=tuple(
                        m.PartitionProduceData(index=i32(p), records=batch) for p in range(parts)
                    ),
                ),
            ),
        )
        out = io.BytesIO()
        entity_writer(m.ProduceRequest)(out, req)
        body = out.getvalue()
        n = max(5, 4000 // parts)

        def with_kio(body: bytes = body) -> None:
            check_request_lengths(m.ProduceRequest, body, 0)
            _reader(m.ProduceRequest)(body, 0)

        def by_hand(body: bytes = body) -> None:
            produce_request.decode_request(body, 0, args.version)

        best = best_cpu_us((("kio", with_kio), ("hand", by_hand)), n, args.repeat)
        rows.append((parts, len(body), best["kio"], best["hand"]))
    print(f"Produce v{args.version} decode, CPU µs per request, best of {args.repeat}")
    print("| partitions | request bytes | kio (µs) | by hand (µs) | µs per partition, kio -> hand | ratio |")
    print("|---|---|---|---|---|---|")
    for parts, size, kio, hand in rows:
        print(
            f"| {parts:,} | {size:,} | {kio:,.1f} | {hand:,.1f} | {kio / parts:.2f} -> {hand / parts:.2f} "
            f"| {hand / kio:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
