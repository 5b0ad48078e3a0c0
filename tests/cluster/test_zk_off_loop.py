"""A broker in a cluster keeps serving while ZooKeeper does not answer: its own ZooKeeper calls wait off
the event loop. In-process, on a broker that is not started, with its ZooKeeper client replaced by a fake
whose calls block until the test releases them (as kazoo holds a request while ZooKeeper is unreachable);
each blocked call gives up after a few seconds, so a call made on the loop shows as a late timer rather
than a hung test."""

from __future__ import annotations

import asyncio
import datetime
import threading
import time
from collections.abc import Awaitable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.static.primitive import i8

from kaflite.cluster.zk_metadata import ZK_WRITE_THREADS, ZkMetadata
from kaflite.cluster.zkdata import LeaderAndIsr, ProducerIdsBlock
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.messages import RequestHeader
from kaflite.server.broker import REPLICA_FETCHERS, Broker
from kaflite.server.config import BrokerConfig
from kaflite.server.context import RequestContext
from kaflite.server.handlers.find_coordinator import handle_find_coordinator
from kaflite.server.handlers.init_producer_id import handle_init_producer_id
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

    # producer id blocks: the first (claimed at start) at once, the next ones once released
    def allocate_producer_ids(self, broker_id: int) -> ProducerIdsBlock:
        claims = len(self.entered("allocate_producer_ids"))
        if claims == 0:
            with self.lock:
                self.calls.append(("allocate_producer_ids", threading.current_thread().name))
        else:
            self._block("allocate_producer_ids")
        return ProducerIdsBlock(broker_id, 1000 * claims)


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


async def timer_lateness(during: Awaitable[Any], every_s: float = 0.02) -> tuple[Any, float]:
    """`during`'s result and how late, at worst, a timer ticking every `every_s` fired meanwhile."""
    worst = 0.0
    done = False

    async def tick() -> None:
        nonlocal worst
        while not done:
            t0 = time.monotonic()
            await asyncio.sleep(every_s)
            worst = max(worst, time.monotonic() - t0 - every_s)

    ticker = asyncio.ensure_future(tick())
    await asyncio.sleep(0)  # the ticker is waiting on its first timer
    try:
        result = await during
    finally:
        done = True
    await ticker
    return result, worst


def test_init_producer_id_never_waits_for_zookeeper(broker: Broker) -> None:
    """A broker claims its next block of producer ids ahead, in its ZooKeeper write threads; when its block
    is used up while that claim waits for ZooKeeper, InitProducerId answers COORDINATOR_LOAD_IN_PROGRESS at
    once (clients retry) and the event loop goes on, instead of waiting for ZooKeeper on the loop."""
    zk = zk_of(broker)
    broker.producer_ids.claim_first_block()  # at start, ZooKeeper answering: ids 0-999
    request = InitProducerIdRequest(transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60),
                                    producer_id=-1, producer_epoch=-1)

    async def run() -> None:
        ctx = RequestContext(broker, RequestHeader(22, 4, 1, "test"))

        async def init_producer_ids(n: int) -> list[tuple[int, int]]:
            out = []
            for _ in range(n):
                r = await handle_init_producer_id(ctx, request)
                out.append((int(r.error_code), int(r.producer_id)))
            return out

        answers, late = await timer_lateness(init_producer_ids(1000))
        assert answers == [(0, pid) for pid in range(1000)]
        # the claim of the next block started at the 901st id, in a ZooKeeper write thread, and waits
        await wait_for("the next block's claim", lambda: len(zk.entered("allocate_producer_ids")) == 2)
        assert zk.entered("allocate_producer_ids")[1].startswith("zk-write-1")
        answers, late = await timer_lateness(init_producer_ids(3))
        assert answers == [(ErrorCode.coordinator_load_in_progress.value, -1)] * 3
        assert late < 0.5, f"a timer fired {late:.2f} s late: the loop waited for ZooKeeper"
        assert len(zk.entered("allocate_producer_ids")) == 2  # one claim in flight, not one per request
        zk.release.set()  # ZooKeeper answers: the block claimed ahead is handed out
        await wait_for("the next block", lambda: broker.producer_ids._ready is not None)  # noqa: SLF001
        assert await init_producer_ids(2) == [(0, 1000), (0, 1001)]

    asyncio.run(run())


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
            fetchers = broker.services.pop(REPLICA_FETCHERS)
            if fetchers is not None:
                await fetchers.stop()
            for task in broker._tasks:  # noqa: SLF001 - the ISR expiration timer
                task.cancel()
            default.shutdown(wait=False)

    asyncio.run(run())


def test_find_coordinator_creates_the_internal_topics_off_the_loop(broker: Broker, caplog: pytest.LogCaptureFixture
                                                                   ) -> None:
    """The first FindCoordinator of a new cluster asks for `__consumer_offsets` (`__transaction_state`): the
    creation writes ZooKeeper, so it runs in the admin thread and the answer is COORDINATOR_NOT_AVAILABLE
    at once, as Kafka answers while the topic is created; one creation at a time per topic, started again
    by a later FindCoordinator once refused (fewer brokers alive than its replication factor)."""
    zk = zk_of(broker)
    writer = broker.metadata_writer
    created: list[tuple[str, int, int | None, str]] = []

    def create_topic(name: str, num_partitions: int, replication_factor: int | None, configs: Any,
                     assignment: Any = None, *, validate_only: bool = False) -> Any:
        zk._block("create_topic")  # noqa: SLF001 - the topic znodes' writes, waiting for ZooKeeper
        created.append((name, num_partitions, replication_factor, threading.current_thread().name))
        raise KafkaError(ErrorCode.invalid_replication_factor,
                         f"Replication factor: {replication_factor} larger than available brokers: 1.")

    writer.create_topic = create_topic  # type: ignore[method-assign]

    async def run() -> None:
        ctx = RequestContext(broker, RequestHeader(10, 4, 1, "test"))

        async def find(key_type: int) -> int:
            r = await handle_find_coordinator(ctx, FindCoordinatorRequest(key_type=i8(key_type),
                                                                          coordinator_keys=("k",)))
            return int(r.coordinators[0].error_code)

        try:
            code, late = await timer_lateness(find(0))
            assert code == ErrorCode.coordinator_not_available.value
            assert late < 0.5, f"a timer fired {late:.2f} s late: the loop waited for ZooKeeper"
            await wait_for("the creation in the admin thread", lambda: zk.entered("create_topic"))
            assert zk.entered("create_topic") == ["zk-admin-1_0"]
            # asked again while ZooKeeper does not answer: at once, and no second creation of the topic
            codes, late = await timer_lateness(asyncio.gather(find(0), find(1), find(0), find(1)))
            assert codes == [ErrorCode.coordinator_not_available.value] * 4 and late < 0.5
            zk.release.set()
            await wait_for("both creations", lambda: len(created) == 2 and not broker._internal_creating)  # noqa: SLF001
            assert [(n, rf) for n, _, rf, _ in created] == [("__consumer_offsets", 3), ("__transaction_state", 3)]
            assert "cannot create internal topic __consumer_offsets yet: 0 broker(s) alive, " \
                   "offsets.topic.replication.factor=3" in caplog.text
            assert await find(0) == ErrorCode.coordinator_not_available.value  # refused: asked again
            await wait_for("the creation asked again", lambda: len(created) == 3)
            assert created[2][0] == "__consumer_offsets"
        finally:
            for task in [*broker._tasks, *broker._internal_creating.values()]:  # noqa: SLF001
                task.cancel()

    asyncio.run(run())
