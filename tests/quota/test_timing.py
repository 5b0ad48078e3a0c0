"""server/quota/timing.py: a handler's time on the event loop counts its own steps, not its waits."""

from __future__ import annotations

import asyncio
import time

import pytest

from kaflite.server.quota.timing import LoopTimer, timed


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_steps_are_counted_waits_are_not() -> None:
    timer = LoopTimer()
    seen: list[int] = []

    async def handler() -> str:
        _busy(0.02)
        await asyncio.sleep(0.2)  # a purgatory wait: not the handler's time
        seen.append(timer.elapsed_ns())  # asked from inside: the steps so far
        _busy(0.02)
        await asyncio.to_thread(time.sleep, 0.1)  # a worker thread's time: not the loop's
        return "answer"

    async def main() -> str:
        other = asyncio.create_task(asyncio.to_thread(time.sleep, 0))
        result = await timed(timer, handler())
        await other
        return str(result)

    assert asyncio.run(main()) == "answer"
    assert 0.018 <= timer.elapsed_ns() / 1e9 < 0.1, timer.elapsed_ns()
    assert 0.018 <= seen[0] / 1e9 < 0.06


def test_errors_and_cancellation_reach_the_handler() -> None:
    timer = LoopTimer()
    cleaned: list[str] = []

    async def failing() -> None:
        await asyncio.sleep(0)
        raise ValueError("bad request")

    async def waiting() -> None:
        try:
            await asyncio.sleep(10)
        finally:
            cleaned.append("finally ran")

    async def main() -> None:
        with pytest.raises(ValueError, match="bad request"):
            await timed(timer, failing())
        task = asyncio.ensure_future(timed(LoopTimer(), waiting()))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert cleaned == ["finally ran"]
