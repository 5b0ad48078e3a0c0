"""What parked (long-polled) fetches cost the broker per append, in-process (no socket, no client).

    PYTHONPATH=src .venv/bin/python bench/fetch_purgatory_bench.py [--fetches 20] [--partitions 10] [--appends 2000]

`--fetches` consumer Fetch requests park, each naming every partition of the topic at its log end, with a
min_bytes they never reach (1 GiB) and a max_wait longer than the run; then `--appends` batches (10 records
x 100 B) are appended round-robin over the partitions, the loop turning after each so the woken fetches run.
Prints, over the append phase: Log.read calls per append, microseconds of process CPU per append, and how
long the loop took. Each append wakes every parked fetch: before the DelayedFetch (server/delayed_fetch.py)
each woken fetch re-read every partition it names; with it, each compares offsets and positions and reads
nothing. Runs on any source tree (it uses only the handler and Log.read), so two trees can be compared by
PYTHONPATH. The fetches are cancelled at the end (tests/server/test_fetch_purgatory.py checks answers).
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
from kaflite.storage.log import Log

MIN_BYTES = 1 << 30  # never reached: each partition counts at most its partition_max_bytes (1 MiB)


async def measure(fetches: int, partitions: int, appends: int) -> dict[str, float]:
    async with in_process_broker("kaflite-fpb-") as broker:
        reads = 0
        real_read = Log.read

        def counting(self: Log, *args: Any, **kwargs: Any) -> Any:
            nonlocal reads
            reads += 1
            return real_read(self, *args, **kwargs)

        Log.read = counting  # type: ignore[method-assign]
        try:
            broker.create_topic("bench", partitions, None)
            replicas = broker.replica_manager
            small = build_record_batch([(None, b"x" * 100, []) for _ in range(10)])
            for p in range(partitions):  # something behind each fetch offset, as a consumer mid-stream has
                replicas.append_records("bench", p, small, 1)
            fq = load_payload_module(1, 12, EntityType.request)
            request = fq.FetchRequest(
                max_wait=datetime.timedelta(seconds=120), min_bytes=MIN_BYTES, max_bytes=50 << 20, isolation_level=0,
                session_id=0, session_epoch=-1, topics=(fq.FetchTopic(topic="bench", partitions=tuple(
                    fq.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                                      log_start_offset=-1, partition_max_bytes=1 << 20) for p in range(partitions))),),
                forgotten_topics_data=(), rack_id="")
            tasks = [asyncio.ensure_future(handle_fetch(RequestContext(broker, RequestHeader(1, 12, i, "b")), request))
                     for i in range(fetches)]
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            parked_reads = reads
            reads = 0
            cpu0, wall0 = time.process_time(), time.perf_counter()
            for i in range(appends):
                replicas.append_records("bench", i % partitions, small, 1)
                await asyncio.sleep(0)
            cpu = time.process_time() - cpu0
            wall = time.perf_counter() - wall0
            phase_reads = reads
            assert not any(t.done() for t in tasks), "a fetch answered before min_bytes"
            for t in tasks:  # min_bytes is out of reach (partition_max_bytes caps each partition): cancel them
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            return {"parked_reads": parked_reads, "reads_per_append": phase_reads / appends,
                    "cpu_us_per_append": cpu / appends * 1e6, "wall_s": wall}
        finally:
            Log.read = real_read  # type: ignore[method-assign]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fetches", type=int, default=20)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--appends", type=int, default=2000)
    args = ap.parse_args()
    out = asyncio.run(measure(args.fetches, args.partitions, args.appends))
    print(f"{args.fetches} parked fetches x {args.partitions} partitions, {args.appends} appends: "
          f"first pass {out['parked_reads']:.0f} reads; per append {out['reads_per_append']:.1f} Log.read calls, "
          f"{out['cpu_us_per_append']:.0f} us CPU; append phase {out['wall_s']:.2f} s")


if __name__ == "__main__":
    main()
