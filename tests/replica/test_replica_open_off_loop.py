"""A cluster broker's new replicas open their logs in a worker thread, not on the event loop
(ReplicaManager's rules, `open_logs_off_loop`): the partition is not served until its log is open, and
the images applied meanwhile (the partition removed, re-created, its leader epoch bumped, an image applied
twice) leave it as the last image says. Without sockets: a real LogManager, a recording wrapper around it."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from helpers import longest_loop_turn
from kaflite.cluster.metadata import MetadataImage, PartitionRegistration, TopicImage
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.purgatory import Purgatory
from kaflite.server.replica import ReplicaManager, TopicSettings, replica_manager
from kaflite.server.replica.replica_manager import OPEN_SLICE
from kaflite.storage import LogManager
from kaflite.storage.config import LogConfig

ME, LEADER = 1, 2


def settings(topic: TopicImage) -> TopicSettings:
    return TopicSettings(LogConfig(), 1, None)


def topic(name: str, n: int, *, leader: int = LEADER, epoch: int = 0, replicas: tuple[int, ...] = (LEADER, ME),
          topic_id: uuid.UUID | None = None) -> TopicImage:
    regs = tuple(PartitionRegistration(replicas, replicas, leader, epoch, epoch) for _ in range(n))
    return TopicImage(name, topic_id or uuid.uuid5(uuid.NAMESPACE_DNS, name), regs, {})


class RecordingManager:
    """A LogManager whose get_or_create records the calling thread and, when `gate` is set, waits for it."""

    def __init__(self, inner: LogManager) -> None:
        self.inner = inner
        self.created: list[tuple[tuple[str, int], int]] = []  # (partition, thread id)
        self.gate: threading.Event | None = None
        self.entered = threading.Event()

    def get_or_create(self, topic: str, partition: int, config: Any = None) -> Any:
        self.created.append(((topic, partition), threading.get_ident()))
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(10)
        return self.inner.get_or_create(topic, partition, config)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def env(tmp_path: Path) -> Any:
    inner = LogManager([tmp_path])
    manager = RecordingManager(inner)
    rm = ReplicaManager(ME, manager, Purgatory(), lambda: 0, settings)
    rm.open_logs_off_loop = True
    yield rm, manager
    inner.close(clean=False)  # no checkpoints nor marker: a quicker teardown


def publish(rm: ReplicaManager, *topics: TopicImage) -> MetadataImage:
    new = rm.image.evolve(topics={t.name: t for t in topics})
    rm.on_image(rm.image, new)
    return new


async def drained(rm: ReplicaManager) -> None:
    deadline = time.monotonic() + 20
    while rm._opener is not None and not rm._opener.done():
        assert time.monotonic() < deadline, "the logs were not opened within 20 s"
        await asyncio.sleep(0.005)


def code_of(rm: ReplicaManager, t: str, p: int, **kw: Any) -> ErrorCode:
    try:
        rm.get_partition(t, p, **kw)
    except KafkaError as e:
        return e.code
    return ErrorCode.none


def test_new_replicas_open_in_a_worker_thread_and_are_not_served_until_open(env: Any) -> None:
    rm, manager = env
    opened_slices: list[int] = []
    rm.opened_listeners.append(lambda: opened_slices.append(len(rm.partitions)))

    async def scenario() -> None:
        loop_thread = threading.get_ident()
        publish(rm, topic("t", 3 * OPEN_SLICE + 5))
        # nothing opened on the loop: not hosted yet, and requests are told to look elsewhere (retriable)
        assert not rm.partitions and not manager.created
        assert rm.opening("t", 0)
        assert code_of(rm, "t", 0, require_leader=False) is ErrorCode.not_leader_or_follower
        await drained(rm)
        assert {tp for tp, _thread in manager.created} == {("t", p) for p in range(3 * OPEN_SLICE + 5)}
        assert all(thread != loop_thread for _tp, thread in manager.created)
        # one worker call per slice, each slice attached (and the listeners told) when its call returned
        assert opened_slices == [OPEN_SLICE, 2 * OPEN_SLICE, 3 * OPEN_SLICE, 3 * OPEN_SLICE + 5]
        part = rm.get_partition("t", 7, require_leader=False)
        assert part.log is not None and part.state.leader == LEADER and not rm.opening("t", 7)

    asyncio.run(scenario())


def test_the_leader_epoch_bumped_while_opening_is_the_state_applied(env: Any) -> None:
    rm, manager = env

    async def scenario() -> None:
        manager.gate = threading.Event()
        publish(rm, topic("t", 2, leader=LEADER, epoch=0))
        assert await asyncio.to_thread(manager.entered.wait, 10)  # the first open is in flight
        publish(rm, topic("t", 2, leader=ME, epoch=1))  # this broker elected meanwhile
        publish(rm, topic("t", 2, leader=ME, epoch=2))
        manager.gate.set()
        await drained(rm)
        for p in (0, 1):
            part = rm.get_partition("t", p)  # leads: served as leader
            assert (part.state.leader, part.leader_epoch) == (ME, 2)
            assert part.log is not None
            # became leader once, at the newest epoch: its epoch starts at the (empty) log's end
            assert part.log.leader_epoch_cache.entries == [(2, 0)]
        assert sorted(tp for tp, _t in manager.created) == [("t", 0), ("t", 1)]  # each opened once

    asyncio.run(scenario())


def test_an_image_applied_twice_opens_each_log_once(env: Any) -> None:
    rm, manager = env

    async def scenario() -> None:
        t = topic("t", 40)
        new = publish(rm, t)
        rm.on_image(new, new)  # the same image again (the same TopicImage: skipped)
        publish(rm, topic("t", 40))  # an equal image, other objects: every partition is queued already
        await drained(rm)
        assert sorted(tp for tp, _t in manager.created) == [("t", p) for p in range(40)]
        assert len(rm.partitions) == 40

    asyncio.run(scenario())


def test_a_partition_removed_while_queued_is_never_opened(env: Any) -> None:
    rm, manager = env

    async def scenario() -> None:
        publish(rm, topic("t", 3))
        publish(rm)  # deleted before the opener ran
        await drained(rm)
        await asyncio.sleep(0.05)
        assert not manager.created and not rm.partitions and not rm.opening("t", 0)
        assert manager.inner.get("t", 0) is None

    asyncio.run(scenario())


def test_a_partition_removed_while_opening_has_its_new_log_deleted(env: Any, tmp_path: Path) -> None:
    rm, manager = env

    async def scenario() -> None:
        manager.gate = threading.Event()
        publish(rm, topic("t", 1), topic("u", 1))
        assert await asyncio.to_thread(manager.entered.wait, 10)
        publish(rm, topic("u", 1))  # t deleted while its log is being opened
        manager.gate.set()
        await drained(rm)
        assert ("t", 0) not in rm.partitions and ("u", 0) in rm.partitions
        assert manager.inner.get("t", 0) is None  # left the log table
        deadline = time.monotonic() + 10
        while (tmp_path / "t-0").exists():  # its directory renamed for deletion, in a worker thread
            assert time.monotonic() < deadline, "t-0 not renamed"
            await asyncio.sleep(0.01)
        assert code_of(rm, "t", 0) is ErrorCode.unknown_topic_or_partition

    asyncio.run(scenario())


def test_a_partition_moved_away_and_back_while_opening_is_hosted_once(env: Any) -> None:
    rm, manager = env

    async def scenario() -> None:
        manager.gate = threading.Event()
        publish(rm, topic("t", 1))
        assert await asyncio.to_thread(manager.entered.wait, 10)
        publish(rm)  # deleted ...
        publish(rm, topic("t", 1, epoch=3, topic_id=uuid.uuid4()))  # ... and created again, while opening
        manager.gate.set()
        await drained(rm)
        part = rm.get_partition("t", 0, require_leader=False)
        assert part.leader_epoch == 3 and part.log is not None and part.log.log_end_offset == 0
        assert manager.inner.get("t", 0) is part.log

    asyncio.run(scenario())


def test_internal_topics_open_on_the_loop_for_the_coordinators(env: Any) -> None:
    """The group and transaction coordinators, subscribed after the ReplicaManager, replay a partition this
    broker leads in the same image's notification: its log must be open by then."""
    rm, manager = env

    async def scenario() -> None:
        publish(rm, topic("__consumer_offsets", 2, leader=ME))
        assert rm.get_partition("__consumer_offsets", 1).log is not None
        assert [tp for tp, _t in manager.created] == [("__consumer_offsets", 0), ("__consumer_offsets", 1)]

    asyncio.run(scenario())


def test_the_loop_is_not_held_while_many_new_replicas_open(env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop thread's longest turn while 20 slices of new logs open is under half of opening them on the
    loop (measured in the same test, same manager): at most 10 slices' worth. A turn is measured in the loop
    thread's CPU time (`time.thread_time`), not wall time, so a loaded machine's preemptions (the process
    waiting for a core) count in neither. The structural bound is the first test's: no log opened on the
    loop's thread, one worker call per slice."""
    rm, manager = env
    monkeypatch.setattr(replica_manager, "OPEN_SLICE", 8)  # 20 slices of fewer logs: a quicker test
    n = 20 * 8

    async def scenario() -> None:
        async def inline() -> None:
            rm.open_logs_off_loop = False
            publish(rm, topic("inline", n))
            rm.open_logs_off_loop = True

        async def off_loop() -> None:
            publish(rm, topic("inline", n), topic("queued", n))
            await drained(rm)

        inline_s = await longest_loop_turn(inline)
        off_s = await longest_loop_turn(off_loop)
        assert len(rm.partitions) == 2 * n
        loop_thread = threading.get_ident()
        assert all(thread != loop_thread for tp, thread in manager.created if tp[0] == "queued")
        assert off_s < inline_s / 2, f"longest turn {off_s * 1000:.1f} ms of CPU off the loop vs " \
                                     f"{inline_s * 1000:.1f} ms inline"

    asyncio.run(scenario())
