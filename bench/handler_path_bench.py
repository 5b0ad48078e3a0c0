"""CPU cost of the Produce and Fetch handler paths, in-process (no socket, no client): what the broker
spends per request between the decoded request and the encoded answer (ReplicaManager, Partition, Log).

    PYTHONPATH=src .venv/bin/python bench/handler_path_bench.py --requests 20000

Produce: acks=-1, one partition per request (10 records x 100 B), over 6 partitions; Fetch: 6 partitions
of 16 KiB each, read_uncommitted. Prints microseconds of process CPU time per request. Run two source
trees alternately (PYTHONPATH) on the same machine to compare them: the whole-broker bench
(bench/broker_bench.py) cannot resolve a few percent on a loaded machine.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import shutil
import tempfile
import time
from typing import Any

from kio.index import load_payload_module
from kio.static.constants import EntityType

from kaflite.protocol.messages import RequestHeader
from kaflite.protocol.record_batch import build_record_batch
from kaflite.server.broker import Broker
from kaflite.server.context import RequestContext
from kaflite.server.embedded import load_broker_config
from kaflite.server.handlers.fetch import handle_fetch
from kaflite.server.handlers.produce import handle_produce

PARTITIONS = 6


async def measure(requests: int) -> tuple[float, float]:
    data = tempfile.mkdtemp(prefix="kaflite-hpb-")
    broker = Broker(load_broker_config({"log.dirs": data, "listeners": "PLAINTEXT://127.0.0.1:0"}, True))
    await broker.start()
    try:
        broker.create_topic("bench", PARTITIONS, None)
        pq = load_payload_module(0, 9, EntityType.request)
        batch = build_record_batch([(None, b"x" * 100, []) for _ in range(10)])
        produces = [pq.ProduceRequest(transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=5),
                                      topic_data=(pq.TopicProduceData(name="bench", partition_data=(
                                          pq.PartitionProduceData(index=p, records=batch),)),))
                    for p in range(PARTITIONS)]
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
        for i in range(500):  # warm-up
            await handle_produce(produce_ctx, produces[i % PARTITIONS])
        t0 = time.process_time()
        for i in range(requests):
            await handle_produce(produce_ctx, produces[i % PARTITIONS])
        t1 = time.process_time()
        fetches = max(1, requests // 10)
        written = 10 * (500 + requests) // PARTITIONS
        for i in range(fetches):
            await handle_fetch(fetch_ctx, fetch((i * 10) % max(1, written - 10)))
        t2 = time.process_time()
        return 1e6 * (t1 - t0) / requests, 1e6 * (t2 - t1) / fetches
    finally:
        await broker.stop()
        shutil.rmtree(data, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20000)
    args = parser.parse_args()
    produce_us, fetch_us = asyncio.run(measure(args.requests))
    print(f"produce {produce_us:.1f} us/request  fetch ({PARTITIONS} partitions) {fetch_us:.1f} us/request")


if __name__ == "__main__":
    main()
