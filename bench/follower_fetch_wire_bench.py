"""CPU cost of the replica fetcher's Fetch v12 on the wire, per round: building and encoding the request for
N partitions and decoding the leader's answer (N partitions, each one batch of --record-bytes), with kio
(the baseline: what the fetcher used before) and with kaflite.protocol.fetch_v12, in the same process,
alternating.

    PYTHONPATH=src .venv/bin/python bench/follower_fetch_wire_bench.py [--repeat 5] [--record-bytes 1000]

The table shows the best of --repeat rounds of CPU microseconds (time.process_time) per fetch round for
1, 100, 1,000 and 10,000 partitions.
"""

from __future__ import annotations

import argparse
import datetime
import io
import sys

from _timing import best_cpu_us


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--record-bytes", type=int, default=1000)
    args = ap.parse_args()
    if args.repeat < 1 or args.record_bytes < 0:
        ap.error("--repeat must be at least 1, --record-bytes at least 0")
    from kio.schema.errors import ErrorCode
    from kio.schema.fetch.v12 import request as rq
    from kio.schema.fetch.v12 import response as rs
    from kio.schema.types import BrokerId, TopicName
    from kio.serial import entity_reader, entity_writer
    from kio.static.primitive import i8, i32, i32Timedelta, i64

    from kaflite.protocol import fetch_v12
    from kaflite.protocol.record_batch import build_record_batch

    records = build_record_batch([(None, b"x" * args.record_bytes, [])])
    write_req, read_resp = entity_writer(rq.FetchRequest), entity_reader(rs.FetchResponse)
    rows = []
    for n in (1, 100, 1000, 10_000):
        parts = [(p, 5, 1000 + p, 4, 0, 1 << 20) for p in range(n)]
        answer = rs.FetchResponse(
            throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
            error_code=ErrorCode.none,
            session_id=i32(0),
            responses=(
                rs.FetchableTopicResponse(
                    topic=TopicName("t"),
                    partitions=tuple(
                        rs.PartitionData(
                            partition_index=i32(p),
                            error_code=ErrorCode.none,
                            high_watermark=i64(2000),
                            last_stable_offset=i64(2000),
                            log_start_offset=i64(0),
                            aborted_transactions=None,
                            preferred_read_replica=BrokerId(-1),
                            records=records,
                        )
                        for p in range(n)
                    ),
                ),
            ),
        )
        out = io.BytesIO()
        entity_writer(rs.FetchResponse)(out, answer)
        frame = out.getvalue()

        def with_kio(parts: list = parts, frame: bytes = frame) -> None:
            req = rq.FetchRequest(
                replica_id=BrokerId(1),
                max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=500)),
                min_bytes=i32(1),
                max_bytes=i32(10 << 20),
                isolation_level=i8(0),
                session_id=i32(0),
                session_epoch=i32(-1),
                topics=(
                    rq.FetchTopic(
                        topic=TopicName("t"),
                        partitions=tuple(
                            rq.FetchPartition(
                                partition=i32(p),
                                current_leader_epoch=i32(e),
                                fetch_offset=i64(o),
                                last_fetched_epoch=i32(le),
                                log_start_offset=i64(s),
                                partition_max_bytes=i32(m),
                            )
                            for p, e, o, le, s, m in parts
                        ),
                    ),
                ),
                forgotten_topics_data=(),
            )
            write_req(io.BytesIO(), req)
            resp, _ = read_resp(frame, 0)
            for t in resp.responses:
                for p in t.partitions:
                    bytes(p.records)

        def by_hand(parts: list = parts, frame: bytes = frame) -> None:
            fetch_v12.encode_request(1, 500, 1, 10 << 20, 0, 0, -1, [("t", parts)])
            for t in fetch_v12.decode_response(frame, 0).responses:
                for p in t.partitions:
                    p.records  # noqa: B018 - the view the log appends from, no copy

        count = max(3, 3000 // n)
        best = best_cpu_us((("kio", with_kio), ("hand", by_hand)), count, args.repeat)
        rows.append((n, best["kio"], best["hand"]))
    print(
        f"follower Fetch v12 round (request encoded, answer decoded), {args.record_bytes} B of records per "
        f"partition, CPU µs, best of {args.repeat}"
    )
    print("| partitions | kio (µs) | by hand (µs) | µs per partition, kio -> hand | ratio |")
    print("|---|---|---|---|---|")
    for n, kio, hand in rows:
        print(f"| {n:,} | {kio:,.0f} | {hand:,.0f} | {kio / n:.2f} -> {hand / n:.2f} | {hand / kio:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
