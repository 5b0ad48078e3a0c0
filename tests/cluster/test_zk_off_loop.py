"""A broker in a cluster keeps serving while ZooKeeper does not answer: its own ZooKeeper calls wait off
the event loop. In-process, on a broker that is not started, with its ZooKeeper client replaced by a fake
whose calls block until the test releases them (as kazoo holds a request while ZooKeeper is unreachable);
each blocked call gives up after a few seconds, so a call made on the loop shows as a late timer rather
than a hung test."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kaflite.cluster.zk_metadata import ZK_WRITE_THREADS, ZkMetadata
from kaflite.cluster.zkdata import LeaderAndIsr
from kaflite.server.broker import Broker
from kaflite.server.config import BrokerConfig
from kaflite.server.replica import PartitionState

BLOCKED_S = 3.0  # how long a blocked ZooKeeper call waits at most for the test to release it


class BlockedZk:
    """The calls a broker makes to ZooKeeper, each blocking until `release` is set (at most BLOCKED_S)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.calls: list[tuple[str, str]] = []  # (call, thread name), at entry
        self.done: list[str] = []

    def _block(self, call: str) -> None:
        with self.lock:
            self.calls.append((call, threading.current_thread().name))
        self.release.wait(BLOCKED_S)

    def entered(self, call: str) -> list[str]:
        with self.lock:
            return [thread for c, thread in self.calls if c == call]

    # ISR change (ZkIsrWriter)
    def get_partition_states(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], LeaderAndIsr]:
        self._block("get_partition_states")
        return {tp: LeaderAndIsr(1, 0, (1, 2, 3), 1, 0) for tp in tps}

    def update_partition_states(self, states: dict[tuple[str, int], LeaderAndIsr], guard: Any
                                ) -> tuple[dict[tuple[str, int], LeaderAndIsr], set[tuple[str, int]]]:
        return {tp: replace(s, zk_version=s.zk_version + 1) for tp, s in states.items()}, set()

    def propagate_isr_changes(self, tps: list[tuple[str, int]]) -> None:
        with self.lock:
            self.done.extend(f"{t}-{p}" for t, p in tps)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    """A cluster broker, not started, whose ZooKeeper client is a BlockedZk."""
    config = BrokerConfig.load(overrides={
        "log.dirs": str(tmp_path), "listeners": "PLAINTEXT://127.0.0.1:0", "broker.id": "1",
        "zookeeper.connect": "127.0.0.1:1",  # never connected
    })
    b = Broker(config)
    writer = b.metadata_writer
    assert isinstance(writer, ZkMetadata)
    real = writer.zk
    writer.zk = BlockedZk()  # type: ignore[assignment]
    try:
        yield b
    finally:
        writer.zk.release.set()  # type: ignore[attr-defined]
        writer.zk = real
        writer.close()


def zk_of(broker: Broker) -> BlockedZk:
    zk = broker.metadata_writer.zk  # type: ignore[union-attr]
    assert isinstance(zk, BlockedZk)
    return zk


async def wait_for(what: str, cond: Any, timeout: float = 2.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def test_isr_writes_wait_for_zookeeper_in_their_own_bounded_pool(broker: Broker) -> None:
    """Leaders' ISR changes blocked in ZooKeeper hold the writer's ZK_WRITE_THREADS threads only: asyncio's
    default executor (group loads, the storage housekeeping, to_thread reads) still runs its work."""
    zk = zk_of(broker)
    writer = broker.metadata_writer
    assert isinstance(writer, ZkMetadata)
    state = PartitionState(1, 0, 0, (1, 2, 3), (1, 2, 3))
    partitions = 2 * ZK_WRITE_THREADS + 1  # a dead follower: every partition this broker leads shrinks

    async def run() -> None:
        loop = asyncio.get_running_loop()
        default = ThreadPoolExecutor(max_workers=ZK_WRITE_THREADS, thread_name_prefix="default")
        loop.set_default_executor(default)  # as small as the ZooKeeper pool: starved at once if shared
        broker._start_replication(writer)  # noqa: SLF001 - wires the ISR writer as at start-up
        try:
            isr_writer = broker.replica_manager.isr_writer
            assert isr_writer is not None
            writes = [asyncio.ensure_future(isr_writer(f"t{i}", 0, state, (1, 2))) for i in range(partitions)]
            await wait_for("the ZooKeeper pool busy", lambda: len(zk.entered("get_partition_states")) >= ZK_WRITE_THREADS)
            await asyncio.sleep(0.1)
            blocked = zk.entered("get_partition_states")
            t0 = time.monotonic()
            assert await asyncio.wait_for(asyncio.to_thread(threading.current_thread), 2.0) is not None
            assert time.monotonic() - t0 < 1.0, "asyncio's default executor waited for ZooKeeper"
            assert len(blocked) == ZK_WRITE_THREADS  # bounded: the other writes wait their turn
            assert all(name.startswith("zk-write-1") for name in blocked), blocked
            zk.release.set()
            results = await asyncio.wait_for(asyncio.gather(*writes), 10)
            assert all(r is not None and r.isr == (1, 2) and r.partition_epoch == 1 for r in results)
            assert len(zk.done) == partitions  # every change written and notified once ZooKeeper answered
        finally:
            fetchers = broker.extensions.pop("replica_fetchers", None)
            if fetchers is not None:
                await fetchers.stop()
            for task in broker._tasks:  # noqa: SLF001 - the ISR expiration timer
                task.cancel()
            default.shutdown(wait=False)

    asyncio.run(run())
