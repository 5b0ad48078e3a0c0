"""CPU cost of the Produce and Fetch handler paths, in-process (no socket, no client): what the broker
spends per request between the decoded request and the encoded answer (ReplicaManager, Partition, Log).

    PYTHONPATH=src .venv/bin/python bench/handler_path_bench.py --requests 20000 [--idempotent]

Produce: acks=-1, one partition per request (10 records x 100 B), over 6 partitions; Fetch: 6 partitions
of 16 KiB each, read_uncommitted. --idempotent: each produced batch carries producer id 1, epoch 0 and
its partition's next sequence (the requests are built before the clock starts). Prints microseconds of process CPU time per request. Run two source
trees alternately (PYTHONPATH) on the same machine to compare them: the whole-broker bench
(bench/broker_bench.py) cannot resolve a few percent on a loaded machine.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import time
from typing import Any

from _timing import in_process_broker
from kio.index import load_payload_module
from kio.static.constants import EntityType

from kaflite.protocol.messages import RequestHeader
from kaflite.protocol.record_batch import build_record_batch
from kaflite.server.context import RequestContext
from kaflite.server.handlers.fetch import handle_fetch
from kaflite.server.handlers.produce import handle_produce

PARTITIONS = 6


async def measure(requests: int, idempotent: bool) -> tuple[float, float]:
    async with in_process_broker("kaflite-hpb-") as broker:
        broker.create_topic("bench", PARTITIONS, None)
        pq = load_payload_module(0, 9, EntityType.request)
        records = [(None, b"x" * 100, []) for _ in range(10)]
        batch = build_record_batch(records)

        def produce(p: int, records_: bytes) -> Any:
            return pq.ProduceRequest(transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=5),
                                     topic_data=(pq.TopicProduceData(name="bench", partition_data=(
                                         pq.PartitionProduceData(index=p, records=records_),)),))

        if idempotent:  # request i goes to partition i % PARTITIONS: its sequence is 10 * (i // PARTITIONS)
            produces = [produce(i % PARTITIONS, build_record_batch(
                records, producer_id=1, producer_epoch=0, base_sequence=10 * (i // PARTITIONS)))
                for i in range(500 + requests)]
        else:
            produces = [produce(p, batch) for p in range(PARTITIONS)]
        fq = load_payload_module(1, 12, EntityType.request)

        def fetch(offset: int) -> Any:
            return fq.FetchRequest(
                max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
                session_epoch=-1, forgotten_topics_data=(), rack_id="",
                topics=(fq.FetchTopic(topic="bench", partitions=tuple(
                    fq.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=offset,
                                      log_start_offset=-1, partition_max_bytes=16384)
                    for p in range(PARTITIONS))),))

        produce_ctx = RequestContext(broker, RequestHeader(0, 9, 1, "bench"))
        fetch_ctx = RequestContext(broker, RequestHeader(1, 12, 1, "bench"))
        n = len(produces)
        for i in range(500):  # warm-up
            await handle_produce(produce_ctx, produces[i % n])
        t0 = time.process_time()
        for i in range(500, 500 + requests):
            await handle_produce(produce_ctx, produces[i % n])
        t1 = time.process_time()
        # every request was appended (an error would be measured as a cheap success)
        assert broker.log_manager is not None
        appended = sum(broker.log_manager.get("bench", p).log_end_offset for p in range(PARTITIONS))  # type: ignore[union-attr]
        assert appended == 10 * (500 + requests), appended
        fetches = max(1, requests // 10)
        written = 10 * (500 + requests) // PARTITIONS
        for i in range(fetches):
            await handle_fetch(fetch_ctx, fetch((i * 10) % max(1, written - 10)))
        t2 = time.process_time()
        return 1e6 * (t1 - t0) / requests, 1e6 * (t2 - t1) / fetches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--idempotent", action="store_true")
    args = parser.parse_args()
    produce_us, fetch_us = asyncio.run(measure(args.requests, args.idempotent))
    print(f"produce {produce_us:.1f} us/request  fetch ({PARTITIONS} partitions) {fetch_us:.1f} us/request")


if __name__ == "__main__":
    main()
