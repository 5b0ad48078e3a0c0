"""Purgatory: a waiter wakes on completion of any of its keys or on its timeout, and leaves nothing behind."""

from __future__ import annotations

import asyncio
import time

from kaflite.server.purgatory import Purgatory


def test_complete_wakes_at_once_and_timeout_returns_false() -> None:
    async def run() -> None:
        p = Purgatory()
        t0 = time.monotonic()
        waiter = asyncio.ensure_future(p.wait([("fetch", "a", 0), ("fetch", "b", 1)], 5000))
        await asyncio.sleep(0)
        assert p.watching(("fetch", "b", 1)) == 1
        assert p.complete(("fetch", "b", 1)) == 1
        assert await waiter is True
        assert time.monotonic() - t0 < 1.0
        assert p.watching(("fetch", "a", 0)) == 0, "the other key is released too"
        t0 = time.monotonic()
        assert await p.wait([("fetch", "a", 0)], 50) is False
        assert 0.04 <= time.monotonic() - t0 < 1.0
        assert await p.wait([("fetch", "a", 0)], 0) is False
        assert p.complete(("nobody",)) == 0

    asyncio.run(run())


def test_cancelled_waiter_is_removed() -> None:
    async def run() -> None:
        p = Purgatory()
        waiter = asyncio.ensure_future(p.wait([("join", "g")], 5000))
        await asyncio.sleep(0)
        waiter.cancel()
        try:
            await waiter
        except asyncio.CancelledError:
            pass
        assert p.watching(("join", "g")) == 0

    asyncio.run(run())


def test_a_watch_sees_a_completion_made_before_its_wait() -> None:
    """`watch` registers at once: a waiter whose check spans several loop turns misses no completion made
    during it; `close` releases the keys; without a completion it times out as `wait` does."""
    async def run() -> None:
        p = Purgatory()
        watch = p.watch([("fetch", "a", 0), ("fetch", "b", 0)])
        assert p.watching(("fetch", "a", 0)) == 1 and not watch.completed
        assert p.complete(("fetch", "b", 0)) == 1  # between two slices of the check
        assert watch.completed
        t0 = time.monotonic()
        assert await watch.wait(5000) is True
        assert time.monotonic() - t0 < 1.0
        watch.close()
        assert p.watching(("fetch", "a", 0)) == 0 and p.watching(("fetch", "b", 0)) == 0
        idle = p.watch([("fetch", "a", 0)])
        assert await idle.wait(30) is False
        idle.close()
        assert p.watching(("fetch", "a", 0)) == 0

    asyncio.run(run())


def test_idle_while_nobody_waits_on_any_key() -> None:
    """`idle`: no key watched at all (a caller may then skip building keys to complete); a wait, a watch or a
    cancelled waiter each leave it as they found it."""

    async def run() -> None:
        p = Purgatory()
        assert p.idle
        waiter = asyncio.ensure_future(p.wait([("fetch", "a", 0), ("produce", "a", 0)], 5000))
        await asyncio.sleep(0)
        assert not p.idle
        assert p.complete(("produce", "a", 0)) == 1
        assert await waiter is True
        assert p.idle, "the woken waiter's other key is released too"
        watch = p.watch([("join", "g")])
        assert not p.idle
        watch.close()
        assert p.idle
        assert await p.wait([("fetch", "b", 1)], 20) is False  # a timed-out wait
        assert p.idle
        cancelled = asyncio.ensure_future(p.wait([("fetch", "c", 2)], 5000))
        await asyncio.sleep(0)
        assert not p.idle
        cancelled.cancel()
        try:
            await cancelled
        except asyncio.CancelledError:
            pass
        assert p.idle
        assert p.complete(("fetch", "c", 2)) == 0  # idle: a completion wakes nobody

    asyncio.run(run())
