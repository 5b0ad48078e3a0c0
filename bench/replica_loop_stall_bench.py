"""Does a cluster broker's replica work stall its event loop? The loop's longest stall, measured by a probe
on the loop, for the three pieces of work issue 25's cluster measurements found on it, each run twice in
the same process: as before (the baseline: the work in one loop turn) and as now (docs/replication.md,
"What runs off the event loop"):
- `image`: ReplicaManager.on_image with `--partitions` new replicas (a follower of each): before, every
  log opened (directory, files) in on_image; now in a worker thread, OPEN_SLICE per call, each slice
  attached on the loop;
- `fetchers`: ReplicaFetcherManager.on_image following those partitions: before, all added (and logged)
  in on_image; now FOLLOW_SLICE per loop turn;
- `fetch`: the leader answering one follower Fetch v12 of `--partitions` partitions with a batch each (a
  real broker, in-process, leading them with a follower published as a cluster writer would): before, read
  and reported in one turn; now FOLLOWER_READ_SLICE per turn.
The probe wakes every millisecond and records its lateness; a stall is the longest lateness over the work
(plus the work's own duration, to compare). In-process, no ZooKeeper: seconds, not minutes (the cluster
benches, bench/follower_truncation_bench.py, take minutes at 1,000 partitions).

    .venv/bin/python bench/replica_loop_stall_bench.py                  # 1,000 partitions
    .venv/bin/python bench/replica_loop_stall_bench.py --partitions 200
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import logging
import os
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kaflite.cluster.metadata import BrokerRegistration, Endpoint, PartitionRegistration, TopicImage
from kaflite.protocol.messages import RequestHeader
from kaflite.protocol.record_batch import build_record_batch
from kaflite.server.broker import Broker
from kaflite.server.context import RequestContext
from kaflite.server.embedded import load_broker_config
from kaflite.server.handlers import fetch as fetch_handler
from kaflite.server.purgatory import Purgatory
from kaflite.server.replica import ReplicaManager, TopicSettings
from kaflite.server.replica import fetcher as fetcher_module
from kaflite.server.replica.fetcher import FetcherConfig, ReplicaFetcher, ReplicaFetcherManager
from kaflite.storage import LogManager
from kaflite.storage.config import LogConfig

ME, LEADER = 1, 2


async def longest_stall(work: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """(the probe's longest lateness, the work's duration), in ms."""
    stop = False
    late = 0.0

    async def probe() -> None:
        nonlocal late
        while not stop:
            t0 = time.perf_counter()
            await asyncio.sleep(0.001)
            late = max(late, time.perf_counter() - t0 - 0.001)

    task = asyncio.ensure_future(probe())
    await asyncio.sleep(0.02)
    late = 0.0
    started = time.perf_counter()
    await work()
    took = time.perf_counter() - started
    await asyncio.sleep(0.005)
    stop = True
    await task
    return late * 1000, took * 1000


def follower_topic(name: str, n: int) -> TopicImage:
    regs = tuple(PartitionRegistration((LEADER, ME), (LEADER, ME), LEADER, 0, 0) for _ in range(n))
    return TopicImage(name, uuid.uuid4(), regs, {})


async def image_and_fetchers(root: Path, n: int, before: bool) -> tuple[tuple[float, float], tuple[float, float]]:
    manager = LogManager([root / ("before" if before else "after")])
    rm = ReplicaManager(ME, manager, Purgatory(), lambda: int(time.time() * 1000),
                        lambda _t: TopicSettings(LogConfig(), 1, None))
    rm.open_logs_off_loop = not before
    new = rm.image.evolve(topics={"t": follower_topic("t", n)})

    async def apply_image() -> None:
        rm.on_image(rm.image, new)
        while rm._opener is not None and not rm._opener.done():
            await asyncio.sleep(0.001)

    image = await longest_stall(apply_image)
    fetchers = ReplicaFetcherManager(ME, rm, FetcherConfig(), lambda: new)
    saved = fetcher_module.FOLLOW_SLICE
    fetcher_module.FOLLOW_SLICE = 10 * n if before else saved

    async def follow() -> None:
        fetchers.on_image(None, new)
        while fetchers._adding is not None and not fetchers._adding.done():
            await asyncio.sleep(0.001)

    try:
        follow_stall = await longest_stall(follow)
    finally:
        fetcher_module.FOLLOW_SLICE = saved
    await fetchers.stop()
    await rm.stop()
    manager.close()
    return image, follow_stall


async def follower_fetch(root: Path, n: int) -> tuple[tuple[float, float], tuple[float, float]]:
    cfg = load_broker_config({"log.dirs": str(root / "leader"), "listeners": "PLAINTEXT://127.0.0.1:0"}, True)
    broker = Broker(cfg)
    await broker.start()
    try:
        broker.create_topic("big", n, None)
        writer = broker.metadata_writer
        image = writer.image
        old = image.topics["big"]
        me = broker.node_id
        parts = tuple(PartitionRegistration((me, LEADER), (me, LEADER), me, 1, 0) for _ in old.partitions)
        brokers = dict(image.brokers)
        brokers[LEADER] = BrokerRegistration(LEADER, (Endpoint("PLAINTEXT", "other", 9093),))
        topics = dict(image.topics)
        topics["big"] = TopicImage("big", old.topic_id, parts, old.configs)
        writer._publish(image.evolve(topics=topics, brokers=brokers), persist=False)  # type: ignore[attr-defined]
        batch = build_record_batch([(None, b"x" * 100, []) for _ in range(10)])
        for p in range(n):
            broker.replica_manager.append_records("big", p, batch, 1)
        from kio.index import load_payload_module
        from kio.static.constants import EntityType

        q = load_payload_module(1, 12, EntityType.request)

        def request(offset: int) -> Any:
            return q.FetchRequest(
                replica_id=LEADER, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=64 << 20,
                isolation_level=0, session_id=0, session_epoch=-1, topics=(q.FetchTopic(topic="big", partitions=tuple(
                    q.FetchPartition(partition=p, current_leader_epoch=1, fetch_offset=offset, last_fetched_epoch=-1,
                                     log_start_offset=0, partition_max_bytes=1 << 20) for p in range(n))),),
                forgotten_topics_data=(), rack_id="")

        async def one_fetch() -> None:
            await fetch_handler.handle_fetch(RequestContext(broker, RequestHeader(1, 12, 1, "bench")), request(0))

        saved = fetch_handler.FOLLOWER_READ_SLICE
        results = []
        for before in (True, False):
            fetch_handler.FOLLOWER_READ_SLICE = 10 * n if before else saved
            try:
                await longest_stall(one_fetch)  # warm: the segments' files open, the caches filled
                runs = [await longest_stall(one_fetch) for _ in range(5)]
            finally:
                fetch_handler.FOLLOWER_READ_SLICE = saved
            results.append((sorted(r[0] for r in runs)[2], sorted(r[1] for r in runs)[2]))
        return results[0], results[1]
    finally:
        await broker.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--data-dir", type=Path, default=None, help="where the logs go (default: a temporary "
                    "directory under the current one: a real disk, not /tmp's tmpfs)")
    args = ap.parse_args()
    n = args.partitions
    logging.basicConfig(level=logging.INFO, filename=os.devnull)  # the "following" lines formatted, as a broker
    ReplicaFetcher._run = _idle  # type: ignore[method-assign]  # the fetchers connect to nobody here
    load_start = Path("/proc/loadavg").read_text().split()[:3]
    with tempfile.TemporaryDirectory(prefix="replica-stall-", dir=args.data_dir or Path.cwd()) as d:
        root = Path(d)

        async def run() -> dict[str, tuple[tuple[float, float], tuple[float, float]]]:
            b_image, b_follow = await image_and_fetchers(root, n, before=True)
            a_image, a_follow = await image_and_fetchers(root, n, before=False)
            b_fetch, a_fetch = await follower_fetch(root, n)
            return {"image": (b_image, a_image), "fetchers": (b_follow, a_follow), "fetch": (b_fetch, a_fetch)}

        got = asyncio.run(run())
    load_end = Path("/proc/loadavg").read_text().split()[:3]
    print(f"{n} partitions; load average {' '.join(load_start)} at the start, {' '.join(load_end)} at the end")
    print(f"{'work':9} {'before: stall ms':>17} {'work ms':>8}   {'after: stall ms':>16} {'work ms':>8}")
    print("-" * 66)
    for name, ((b_stall, b_took), (a_stall, a_took)) in got.items():
        print(f"{name:9} {b_stall:17.1f} {b_took:8.1f}   {a_stall:16.1f} {a_took:8.1f}")
    print("(stall: the probe's longest lateness on the loop while the work ran; fetch: the median of 5 "
          "fetches' stalls and times)")
    return 0


async def _idle(self: ReplicaFetcher) -> None:
    await asyncio.Event().wait()


if __name__ == "__main__":
    raise SystemExit(main())
