"""ReplicaFetcher.stop ends its fetcher even when the cancellation is swallowed (fetcher.py's rules): on Python
3.11 `asyncio.wait_for` cancelled in the loop turn where the awaited read fails returns that failure instead
of CancelledError, which the fetcher took for a lost connection and fetched on; `stop()` then waited
forever and a broker of a cluster stopping at once did not exit on SIGTERM (tests/cluster/
test_brokers_cluster.py::test_create_topics_places_as_kafka's teardown took 15 s per such broker)."""

from __future__ import annotations

import asyncio

import pytest

from kaflite.server.replica.fetcher import FetcherConfig, ReplicaFetcher, ReplicaFetcherManager

ME, LEADER = 1, 2


def test_stop_ends_a_fetcher_whose_read_fails_as_it_is_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[asyncio.Future[bytes]] = []  # each round's read of the leader's answer
    reading = asyncio.Event()

    async def do_work(self: ReplicaFetcher) -> bool:
        read = asyncio.get_running_loop().create_future()
        reads.append(read)
        reading.set()
        await asyncio.wait_for(read, 30)  # as BrokerConnection.request reads an answer
        return True

    monkeypatch.setattr(ReplicaFetcher, "do_work", do_work)

    async def scenario() -> float:
        manager = ReplicaFetcherManager(ME, None, FetcherConfig(backoff_ms=50), lambda: None)  # type: ignore[arg-type]
        fetcher = ReplicaFetcher(manager, LEADER, 0)
        fetcher.add(("t", 0), 0)
        await reading.wait()
        loop = asyncio.get_running_loop()
        started = loop.time()
        # the leader closes the connection in the very turn this broker stops its fetcher
        reads[0].set_exception(EOFError("0 bytes read on a total of 4 expected bytes"))
        await asyncio.wait_for(fetcher.stop(), 3)
        assert fetcher._task is None
        return loop.time() - started

    assert asyncio.run(scenario()) < 1.0
