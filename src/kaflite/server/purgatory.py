"""Delayed operations (Kafka's "purgatory"): requests that wait for an event or a timeout.

Rules:
- a waiter watches one or more keys (e.g. `("fetch", topic, partition)` for a long-polling Fetch,
  `("join", group_id)` for a JoinGroup waiting for the rebalance) and is woken by `complete(key)` or by
  its timeout, whichever comes first; waking never carries data, the waiter re-checks its condition
  (Kafka's `tryComplete`), so a spurious wake-up is harmless;
- `complete(key)` wakes every current waiter of the key immediately (an append wakes fetchers in the same
  loop iteration), and is cheap when nobody waits;
- all of it runs on the broker's event loop thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterable
from typing import Any

__all__ = ["Purgatory"]


class Purgatory:
    def __init__(self) -> None:
        self._watchers: dict[Hashable, set[asyncio.Future[bool]]] = {}

    def watching(self, key: Hashable) -> int:
        return len(self._watchers.get(key, ()))

    async def wait(self, keys: Iterable[Hashable], timeout_ms: float) -> bool:
        """Wait until one of `keys` is completed (True) or `timeout_ms` passes (False)."""
        if timeout_ms <= 0:
            return False
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        keys = list(keys)
        for key in keys:
            self._watchers.setdefault(key, set()).add(fut)
        handle = loop.call_later(timeout_ms / 1000.0, _resolve, fut)
        try:
            return await fut
        finally:
            handle.cancel()
            for key in keys:
                waiters = self._watchers.get(key)
                if waiters is not None:
                    waiters.discard(fut)
                    if not waiters:
                        del self._watchers[key]

    def sizes(self) -> dict[str, int]:
        """Waiting requests by kind (the first element of their keys: "fetch", "join", ...), each counted
        once however many keys it watches (Kafka's PurgatorySize, read by the metrics at scrape time)."""
        by_kind: dict[str, set[asyncio.Future[bool]]] = {}
        for key, waiters in self._watchers.items():
            kind = str(key[0]) if isinstance(key, tuple) and key else str(key)
            by_kind.setdefault(kind, set()).update(waiters)
        return {kind: len(futs) for kind, futs in by_kind.items()}

    def complete(self, key: Hashable) -> int:
        """Wake every waiter of `key`; returns how many were woken."""
        waiters = self._watchers.pop(key, None)
        if not waiters:
            return 0
        for fut in waiters:
            if not fut.done():
                fut.set_result(True)
        return len(waiters)

    def schedule(self, delay_ms: float, callback: Callable[..., Any], *args: Any) -> asyncio.TimerHandle:
        """Run `callback(*args)` on the loop after `delay_ms` (e.g. a JoinGroup's rebalance delay)."""
        return asyncio.get_running_loop().call_later(delay_ms / 1000.0, callback, *args)


def _resolve(fut: asyncio.Future[bool]) -> None:
    if not fut.done():
        fut.set_result(False)
