"""MetadataWaiters (server/metadata_waiters.py): a request waiting for this broker's image to show a change
is answered at the first image that shows it, or at its timeout; nothing is kept for it afterwards."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

from kaflite.cluster.metadata import PartitionRegistration, TopicImage
from kaflite.server.metadata_waiters import MetadataWaiters, topic_has_leaders


def _image(**topics: tuple[int, ...]) -> Any:
    """An image with `name=(leader of p0, leader of p1, ...)` per topic (-1: no leader)."""
    return SimpleNamespace(topics={
        name: TopicImage(name, uuid.uuid4(), tuple(PartitionRegistration((1,), (1,), leader) for leader in leaders))
        for name, leaders in topics.items()})


def test_topic_has_leaders_needs_every_wanted_partition_led() -> None:
    ready = topic_has_leaders("t", 2)
    assert not ready(_image())
    assert not ready(_image(t=(1,)))  # one partition of two
    assert not ready(_image(t=(1, -1)))  # the second without a leader
    assert ready(_image(t=(1, 2)))
    assert ready(_image(t=(1, 2, -1)))  # a CreatePartitions to 2 asks about the first 2 only


def test_answered_at_the_first_image_that_shows_it_and_forgotten() -> None:
    async def run() -> None:
        current = [_image()]
        waiters = MetadataWaiters(lambda: current[0])
        task = asyncio.ensure_future(waiters.wait(topic_has_leaders("t", 1), 5.0))
        await asyncio.sleep(0)
        assert len(waiters) == 1
        waiters.on_image(None, _image(t=(-1,)))  # created, no leader yet
        await asyncio.sleep(0)
        assert not task.done()
        current[0] = _image(t=(3,))
        waiters.on_image(None, current[0])
        assert await asyncio.wait_for(task, 1.0) is True
        assert len(waiters) == 0

    asyncio.run(run())


def test_times_out_false_and_already_true_answers_at_once() -> None:
    async def run() -> None:
        waiters = MetadataWaiters(lambda: _image(u=(1,)))
        loop = asyncio.get_running_loop()
        start = loop.time()
        assert await waiters.wait(topic_has_leaders("t", 1), 0.05) is False
        assert 0.04 <= loop.time() - start < 1.0 and len(waiters) == 0
        assert await waiters.wait(topic_has_leaders("u", 1), 0.0) is True  # true now: no wait at all
        assert await waiters.wait(topic_has_leaders("t", 1), 0.0) is False

    asyncio.run(run())


def test_a_condition_that_raises_is_not_met() -> None:
    async def run() -> None:
        waiters = MetadataWaiters(lambda: _image())

        def broken(_image: Any) -> bool:
            raise KeyError("half-made")

        assert await waiters.wait(broken, 0.01) is False

    asyncio.run(run())
