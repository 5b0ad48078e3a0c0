"""Stopping a task that may swallow its cancellation.

Rules:
- `cancel_until_done(task)` returns only once `task` is done: it cancels it, and cancels it again every
  `every_s` for as long as it still runs (a cancellation the task swallowed is sent again);
- it never raises what the task raised or its CancelledError (the task's outcome is retrieved, so asyncio
  logs no "exception was never retrieved"); a cancellation of the caller itself still propagates.

Why: on Python 3.11, `asyncio.wait_for(fut, t)` cancelled in the loop turn where `fut` completes returns
`fut`'s result (or raises its exception) instead of CancelledError (CPython gh-86296, fixed in 3.12 by the
rewrite on asyncio.timeout). A replica fetcher cancelled while its leader closed the connection (every broker
of a cluster stopping at once) got the EOFError of its `wait_for(readexactly)`, took it for a connection
failure, and fetched on: `task.cancel(); await task` then waited forever, and the broker never exited on
SIGTERM (tests/replica/test_fetcher_stop.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["cancel_until_done"]


async def cancel_until_done(task: asyncio.Future[Any], every_s: float = 0.1) -> None:
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=every_s)
    if not task.cancelled():
        task.exception()  # retrieved: a stopping task's failure is no news
