"""CPU of one Produce request through the broker's whole Python path, in-process: the connection's protocol
object (`KafkaConnection`) fed real request frames as a socket read would hand them over, its worker, the
dispatcher (header, decode), the handler, the append, the answer's encoding and the transport write. Only
the kernel and the event loop's own socket I/O are left out (a transport stand-in keeps the answers' byte
count), so a per-request change of a few microseconds shows here where bench/broker_bench.py cannot
resolve it.

    PYTHONPATH=src .venv/bin/python bench/request_path_bench.py --requests 20000 [--idempotent] [--repeat 5]

What librdkafka sends at linger.ms=5 (bench/broker_bench.py): Produce v10 (flexible), acks=-1, one
partition per request (here 6 partitions in turn), one batch of `--records` x 100 B records; up to
`--in-flight` requests arrive per read (librdkafka keeps up to 5 in flight per connection). The loop is
uvloop's, as in the broker. Prints microseconds of process CPU time (time.process_time) per request, the
median of `--repeat` rounds (each round a fresh broker); run two source trees alternately (PYTHONPATH) to
compare them.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import io
import statistics
import struct
import time
from typing import Any

from _timing import in_process_broker
from kio.index import load_payload_module
from kio.serial import entity_writer
from kio.static.constants import EntityType

from kaflite.protocol.messages import request_schema
from kaflite.protocol.record_batch import build_record_batch, crc32c
from kaflite.server.app import new_event_loop
from kaflite.server.connection import ConnectionLimits, Connections, KafkaConnection
from kaflite.server.dispatcher import Dispatcher
from kaflite.server.handlers import load_registry

PARTITIONS = 6
VERSION = 10
CRC, BASE_SEQUENCE = 17, 53  # offsets in a record batch (v2) header
VARY = (1.0, 0.55, 0.8, 0.65, 0.95, 0.7, 0.6, 0.85)  # --vary: batch lengths, fractions of --records
READ = 65_536  # the most a socket read hands over here (a loopback read of a large request: 64-256 KiB)


class Transport:
    """What KafkaConnection uses of an asyncio transport; counts the answers (their size prefixes) written."""

    def __init__(self) -> None:
        self.answers = 0
        self.bytes = 0
        self.want = 0
        self.done: asyncio.Future[None] | None = None
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def writelines(self, parts: list[bytes | memoryview]) -> None:
        self.answers += 1  # one writelines per answer (the connection writes a small answer at once)
        self.bytes += sum(len(p) for p in parts)
        if self.answers >= self.want and self.done is not None and not self.done.done():
            self.done.set_result(None)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def is_closing(self) -> bool:
        return self.closed

    def can_write_eof(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True


def produce_frames(n: int, records: int, idempotent: bool, vary: bool = False) -> tuple[list[bytes], int]:
    """`n` framed Produce v10 requests, request i to partition i % 6 (idempotent: producer 1, epoch 0, each
    partition's sequences consecutive), and the records they carry in all. A batch of each size is encoded
    once; each request's copy gets its base sequence and CRC patched in (encoding thousands of records per
    request in Python would take minutes). `vary`: the batches cycle through VARY x `records` records, as a
    producer's requests differ in length from one to the next."""
    pq = load_payload_module(0, VERSION, EntityType.request)
    writer = entity_writer(request_schema(0, VERSION))
    counts = [max(1, int(records * f)) for f in (VARY if vary else (1.0,))]
    templates = [
        build_record_batch(
            [(None, b"x" * 100, [])] * count,
            producer_id=1 if idempotent else -1,
            producer_epoch=0 if idempotent else -1,
        )
        for count in counts
    ]
    client = b"rdkafka"
    frames = []
    sequences = [0] * PARTITIONS
    total = 0
    for i in range(n):
        p = i % PARTITIONS
        k = i % len(counts)
        batch = bytearray(templates[k])
        if idempotent:
            struct.pack_into(">i", batch, BASE_SEQUENCE, sequences[p])
            struct.pack_into(">I", batch, CRC, crc32c(memoryview(batch)[CRC + 4 :]))
        sequences[p] += counts[k]
        total += counts[k]
        body = pq.ProduceRequest(
            transactional_id=None,
            acks=-1,
            timeout=datetime.timedelta(seconds=30),
            topic_data=(
                pq.TopicProduceData(
                    name="bench", partition_data=(pq.PartitionProduceData(index=p, records=bytes(batch)),)
                ),
            ),
        )
        buf = io.BytesIO()
        writer(buf, body)
        # request header v2: api key, version, correlation id, client id, no tagged fields
        head = struct.pack(">hhih", 0, VERSION, i, len(client)) + client + b"\x00"
        payload = head + buf.getvalue()
        frames.append(struct.pack(">i", len(payload)) + payload)
    return frames, total


async def measure(requests: int, records: int, idempotent: bool, in_flight: int, vary: bool) -> float:
    async with in_process_broker("kaflite-rpb-", dev=False) as broker:
        broker.create_topic("bench", PARTITIONS, None)
        warm = 600
        frames, total = produce_frames(warm + requests, records, idempotent, vary)
        conns = Connections()
        conn = KafkaConnection(Dispatcher(broker, load_registry()), ConnectionLimits(), conns)
        transport = Transport()
        conn.connection_made(transport)  # type: ignore[arg-type]
        loop = asyncio.get_running_loop()

        async def run(chunk: list[bytes]) -> None:
            for start in range(0, len(chunk), in_flight):
                group = chunk[start : start + in_flight]
                transport.want = transport.answers + len(group)
                transport.done = loop.create_future()
                for f in group:  # each request read on its own, at most READ bytes a read
                    pos = 0
                    while pos < len(f):
                        room = conn.get_buffer(-1)
                        n = min(len(room), len(f) - pos, READ)
                        room[:n] = f[pos : pos + n]
                        conn.buffer_updated(n)
                        pos += n
                await transport.done

        await run(frames[:warm])
        t0 = time.process_time()
        await run(frames[warm:])
        t1 = time.process_time()
        assert broker.log_manager is not None
        appended = sum(broker.log_manager.get("bench", p).log_end_offset for p in range(PARTITIONS))  # type: ignore[union-attr]
        assert appended == total, appended  # every request appended: no cheap error measured
        await conn.shutdown()
        return 1e6 * (t1 - t0) / requests


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--records", type=int, default=10, help="records of 100 B per batch")
    parser.add_argument("--in-flight", type=int, default=1, help="requests handed over per read")
    parser.add_argument("--idempotent", action="store_true")
    parser.add_argument("--vary", action="store_true", help="batches of varying lengths (VARY x --records)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    runs = []
    for _ in range(args.repeat):
        loop = new_event_loop()
        try:
            runs.append(
                loop.run_until_complete(
                    measure(args.requests, args.records, args.idempotent, args.in_flight, args.vary)
                )
            )
        finally:
            loop.close()
    print(
        f"produce v{VERSION} {'idempotent' if args.idempotent else 'plain'}: "
        f"{statistics.median(runs):.1f} us CPU/request (runs {', '.join(f'{r:.1f}' for r in runs)})"
    )


if __name__ == "__main__":
    main()
