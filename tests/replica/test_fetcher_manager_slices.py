"""ReplicaFetcherManager.on_image without sockets (fetcher.py's rules): the partitions that leave a fetcher
leave it in on_image itself, the ones that arrive are added FOLLOW_SLICE per loop turn, the loop running
between two slices, each checked again against the ReplicaManager when its slice runs."""

from __future__ import annotations

import asyncio

import pytest

from kaflite.server.replica import Partition, PartitionState
from kaflite.server.replica.fetcher import FOLLOW_SLICE, FetcherConfig, ReplicaFetcher, ReplicaFetcherManager

ME, LEADER, OTHER = 1, 2, 3


class Replicas:
    """The ReplicaManager as the fetcher manager reads it: its hosted partitions."""

    def __init__(self) -> None:
        self.partitions: dict[tuple[str, int], Partition] = {}

    def host(self, n: int, leader: int = LEADER, epoch: int = 0) -> None:
        for p in range(n):
            part = self.partitions.get(("t", p))
            if part is None:
                part = self.partitions[("t", p)] = Partition("t", p, ME, log=object())  # type: ignore[arg-type]
            part.apply_state(PartitionState(leader, epoch, epoch, (LEADER, OTHER, ME), (LEADER, OTHER, ME)))


@pytest.fixture(autouse=True)
def idle_fetchers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fetchers that never connect: only their partition tables are looked at."""
    async def idle(self: ReplicaFetcher) -> None:
        await asyncio.Event().wait()

    monkeypatch.setattr(ReplicaFetcher, "_run", idle)


def followed(manager: ReplicaFetcherManager) -> dict[tuple[str, int], tuple[int, int]]:
    """Partition -> (leader, leader epoch) as the fetchers hold them."""
    return {tp: (f.leader_id, st.leader_epoch) for f in manager.fetchers.values() for tp, st in f.partitions.items()}


async def drained(manager: ReplicaFetcherManager) -> None:
    while manager._adding is not None and not manager._adding.done():
        await asyncio.sleep(0)


def test_new_partitions_are_followed_a_slice_per_loop_turn() -> None:
    n = 3 * FOLLOW_SLICE + 7
    replicas = Replicas()
    replicas.host(n)

    async def scenario() -> list[int]:
        manager = ReplicaFetcherManager(ME, replicas, FetcherConfig(), lambda: None)  # type: ignore[arg-type]
        seen: list[int] = []  # what another task sees on each of its turns: the loop runs between slices
        stop = False

        async def watcher() -> None:
            while not stop:
                seen.append(len(followed(manager)))
                await asyncio.sleep(0)

        task = asyncio.ensure_future(watcher())
        await asyncio.sleep(0)
        manager.on_image(None, None)  # type: ignore[arg-type]
        assert len(followed(manager)) == FOLLOW_SLICE  # the first slice at once
        await drained(manager)
        await asyncio.sleep(0)
        stop = True
        await task
        assert followed(manager) == {("t", p): (LEADER, 0) for p in range(n)}
        await manager.stop()
        return seen

    seen = asyncio.run(scenario())
    for count in (FOLLOW_SLICE, 2 * FOLLOW_SLICE, 3 * FOLLOW_SLICE):
        assert count in seen, seen


def test_a_leader_change_leaves_the_old_fetcher_in_on_image_itself() -> None:
    """No fetcher may append for a leader or epoch the image replaced: departures are not sliced."""
    n = 2 * FOLLOW_SLICE + 1
    replicas = Replicas()
    replicas.host(n, LEADER, 0)

    async def scenario() -> None:
        manager = ReplicaFetcherManager(ME, replicas, FetcherConfig(), lambda: None)  # type: ignore[arg-type]
        manager.on_image(None, None)  # type: ignore[arg-type]
        await drained(manager)
        replicas.host(n, OTHER, 1)
        manager.on_image(None, None)  # type: ignore[arg-type]
        # at once: nothing follows the old leader, the first slice follows the new one
        assert set(followed(manager).values()) == {(OTHER, 1)} and len(followed(manager)) == FOLLOW_SLICE
        await drained(manager)
        assert followed(manager) == {("t", p): (OTHER, 1) for p in range(n)}
        await manager.stop()

    asyncio.run(scenario())


def test_an_image_between_two_slices_is_what_the_next_slice_follows() -> None:
    n = 3 * FOLLOW_SLICE
    replicas = Replicas()
    replicas.host(n, LEADER, 0)

    async def scenario() -> None:
        manager = ReplicaFetcherManager(ME, replicas, FetcherConfig(), lambda: None)  # type: ignore[arg-type]
        manager.on_image(None, None)  # type: ignore[arg-type]
        assert len(followed(manager)) == FOLLOW_SLICE
        # before the next slice: the last partition is gone, this broker now leads the one before it,
        # and the rest moved to another leader
        del replicas.partitions[("t", n - 1)]
        replicas.partitions[("t", n - 2)].state = PartitionState(ME, 1, 1, (LEADER, OTHER, ME), (LEADER, OTHER, ME))
        replicas.host(n - 2, OTHER, 1)
        manager.on_image(None, None)  # type: ignore[arg-type]
        await drained(manager)
        assert followed(manager) == {("t", p): (OTHER, 1) for p in range(n - 2)}
        assert set(manager._assigned) == set(followed(manager))
        await manager.stop()
        assert not manager.fetchers

    asyncio.run(scenario())


def test_stop_ends_the_slices_still_to_come() -> None:
    replicas = Replicas()
    replicas.host(3 * FOLLOW_SLICE)

    async def scenario() -> None:
        manager = ReplicaFetcherManager(ME, replicas, FetcherConfig(), lambda: None)  # type: ignore[arg-type]
        manager.on_image(None, None)  # type: ignore[arg-type]
        await manager.stop()
        await asyncio.sleep(0)
        assert not manager.fetchers and not manager._assigned

    asyncio.run(scenario())
