"""CPU cost per partition of a Produce request spread over many partitions, in-process (no socket, no
client): each request is a Produce v9 body carrying one small batch (1 record x 100 B) for each of
`--per-request` partitions of a `--partitions`-partition topic, decoded (protocol/produce_request.py),
handled (handle_produce: ReplicaManager, Partition, Log, one segment write per partition) and answered
(the encoded response), the work of the broker's event loop for such a request.

    PYTHONPATH=src .venv/bin/python bench/produce_wide_bench.py --partitions 2000 --per-request 500 --rounds 20

This is what a producer spreading keyless records over 10,000 partitions without sticky partitioning
(`sticky.partitioning.linger.ms=0`) sends: a few records per partition per request. Prints microseconds
of process CPU time per partition appended; run two source trees alternately (PYTHONPATH) to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import struct
import time

from _timing import in_process_broker

from kaflite.protocol.messages import RequestHeader
from kaflite.protocol.produce_request import decode_request
from kaflite.protocol.record_batch import build_record_batch
from kaflite.protocol.varint import uvarint
from kaflite.server.context import RequestContext
from kaflite.server.handlers.produce import handle_produce

VERSION = 9  # flexible (compact arrays and varints), as librdkafka sends Produce


def produce_body(topic: str, partitions: range, batch: bytes) -> bytes:
    """A Produce v9 body: acks=-1, one topic, `batch` for each partition."""
    name = topic.encode()
    out = bytearray(b"\x00")  # null transactional id
    out += struct.pack(">hi", -1, 30_000)
    out += uvarint(2) + uvarint(len(name) + 1) + name + uvarint(len(partitions) + 1)
    for p in partitions:
        out += struct.pack(">i", p) + uvarint(len(batch) + 1) + batch + b"\x00"
    out += b"\x00\x00"  # the topic's and the body's tagged fields
    return bytes(out)


async def measure(partitions: int, per_request: int, rounds: int) -> float:
    async with in_process_broker("kaflite-pwb-") as broker:
        broker.create_topic("wide", partitions, None)
        batch = build_record_batch([(None, b"x" * 100, [])])
        bodies = [
            produce_body("wide", range(s, min(partitions, s + per_request)), batch)
            for s in range(0, partitions, per_request)
        ]
        ctx = RequestContext(broker, RequestHeader(0, VERSION, 1, "bench"))
        # warm-up: every partition's first append (its segment, its epoch) before the clock
        for body in bodies:
            await handle_produce(ctx, decode_request(body, 0, VERSION))
        t0 = time.process_time()
        for _ in range(rounds):
            for body in bodies:
                answer = await handle_produce(ctx, decode_request(body, 0, VERSION))
                assert answer is not None
        t1 = time.process_time()
        assert broker.log_manager is not None
        ends = {broker.log_manager.get("wide", p).log_end_offset for p in range(partitions)}  # type: ignore[union-attr]
        assert ends == {rounds + 1}, ends  # every append succeeded (an error would be a cheap answer)
        return 1e6 * (t1 - t0) / (rounds * partitions)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=2000)
    parser.add_argument("--per-request", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    us = asyncio.run(measure(args.partitions, args.per_request, args.rounds))
    print(
        f"produce over {args.partitions} partitions, {args.per_request} a request: {us:.2f} us CPU per partition"
    )


if __name__ == "__main__":
    main()
