"""How long a request's handler ran on the event loop: Kafka's request-handler thread time, which the
request quota (`request_percentage`) counts.

Rules (tests/quota/test_timing.py):
- `LoopTimer.run(coro)` awaits `coro` and adds up the time of each of its steps on the loop (from a resume
  to its next suspension), not the time it waits (a purgatory, a worker thread, another request's steps);
- `elapsed_ns()` may be asked from inside the coroutine: the steps so far plus the current one up to now.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Generator
from typing import Any, TypeVar

__all__ = ["LoopTimer", "timed"]

T = TypeVar("T")


class LoopTimer:
    def __init__(self) -> None:
        self._done_ns = 0
        self._step_start: int | None = None

    def elapsed_ns(self) -> int:
        running = time.perf_counter_ns() - self._step_start if self._step_start is not None else 0
        return self._done_ns + running

    def run(self, awaitable: Awaitable[T]) -> Generator[Any, Any, T]:
        """`await` it (through `timed`): drives `awaitable` as asyncio would, one step per resume."""
        coro: Any = awaitable.__await__()
        send: Any = None
        error: BaseException | None = None
        while True:
            self._step_start = time.perf_counter_ns()
            try:
                yielded = coro.throw(error) if error is not None else coro.send(send)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            finally:
                self._done_ns += time.perf_counter_ns() - self._step_start
                self._step_start = None
            try:
                send, error = (yield yielded), None
            except BaseException as e:  # a cancellation (or a future's error) goes into the coroutine
                send, error = None, e


class _Timed:
    def __init__(self, timer: LoopTimer, coro: Awaitable[Any]) -> None:
        self.timer, self.coro = timer, coro

    def __await__(self) -> Generator[Any, Any, Any]:
        return self.timer.run(self.coro)


def timed(timer: LoopTimer, coro: Awaitable[T]) -> Any:
    """An awaitable of `coro`'s result whose steps `timer` counts."""
    return _Timed(timer, coro)
