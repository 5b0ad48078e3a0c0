"""kaflite.server.stopping.cancel_until_done (its rules): a task that swallows its cancellation, as Python
3.11's wait_for does when the awaited future completes in the turn of the cancellation, is cancelled again
until it is done; its outcome is never raised to the stopper."""

from __future__ import annotations

import asyncio
import sys

from kaflite.server.stopping import cancel_until_done


def test_a_swallowed_cancellation_is_sent_again() -> None:
    async def scenario() -> tuple[int, float]:
        loop = asyncio.get_running_loop()
        read = loop.create_future()
        turns = 0

        async def worker() -> None:
            nonlocal turns
            while True:  # a loop that takes a failed read for a lost connection and goes on
                turns += 1
                try:
                    await asyncio.wait_for(read if turns == 1 else loop.create_future(), 30)
                except EOFError:
                    pass

        task = asyncio.ensure_future(worker())
        await asyncio.sleep(0)
        started = loop.time()
        read.set_exception(EOFError())  # completes in the turn of the first cancellation: swallowed
        await asyncio.wait_for(cancel_until_done(task, every_s=0.05), 3)
        assert task.cancelled()
        return turns, loop.time() - started

    turns, took = asyncio.run(scenario())
    assert took < 1.0
    if sys.version_info < (3, 12):  # 3.12's wait_for delivers the first cancellation
        assert turns == 2  # the first cancellation was swallowed, the second one ended the task


def test_the_outcome_of_the_task_is_not_raised() -> None:
    async def scenario() -> None:
        async def failing() -> None:
            raise ValueError("a stopping task's failure")

        task = asyncio.ensure_future(failing())
        await asyncio.sleep(0)
        await cancel_until_done(task)
        assert isinstance(task.exception(), ValueError)

    asyncio.run(scenario())
