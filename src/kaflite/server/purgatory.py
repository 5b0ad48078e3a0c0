"""Delayed operations (Kafka's "purgatory"): requests that wait for an event or a timeout.

Rules:
- a waiter watches one or more keys (e.g. `("fetch", topic, partition)` for a long-polling Fetch,
  `("join", group_id)` for a JoinGroup waiting for the rebalance) and is woken by `complete(key)` or by
  its timeout, whichever comes first; waking never carries data, the waiter re-checks its condition
  (Kafka's `tryComplete`), so a spurious wake-up is harmless;
- `complete(key)` wakes every current waiter of the key immediately (an append wakes fetchers in the same
  loop iteration), and is cheap when nobody waits; `idle` says nobody waits on any key, so a path run per
  partition (an append, a high watermark move) builds no keys then (a producer to 10,000 partitions with
  nobody waiting paid two tuples and two calls per partition for nothing);
- a waiter whose check spans several loop turns registers first (`watch`; `wait` is a watch and its
  wait): a completion during its check makes its wait return at once;
- all of it runs on the broker's event loop thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterable
from typing import Any

__all__ = ["Purgatory", "Watch"]


class Purgatory:
    def __init__(self) -> None:
        self._watchers: dict[Hashable, set[asyncio.Future[bool]]] = {}

    def watching(self, key: Hashable) -> int:
        return len(self._watchers.get(key, ()))

    @property
    def idle(self) -> bool:
        """Nobody waits on any key: every `complete` would wake nobody (module rules)."""
        return not self._watchers

    async def wait(self, keys: Iterable[Hashable], timeout_ms: float) -> bool:
        """Wait until one of `keys` is completed (True) or `timeout_ms` passes (False)."""
        if timeout_ms <= 0:
            return False
        watch = self.watch(keys)
        try:
            return await watch.wait(timeout_ms)
        finally:
            watch.close()

    def watch(self, keys: Iterable[Hashable]) -> Watch:
        """Watch `keys` from now on: a `complete` of one of them before `Watch.wait` is not missed (a waiter
        whose check spans several loop turns registers before it starts). Close it when done."""
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for key in keys:
            self._watchers.setdefault(key, set()).add(fut)
        return Watch(self, keys, fut)

    def _unwatch(self, keys: list[Hashable], fut: asyncio.Future[bool]) -> None:
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


class Watch:
    """Keys watched since `Purgatory.watch`."""

    __slots__ = ("_purgatory", "_keys", "_fut")

    def __init__(self, purgatory: Purgatory, keys: list[Hashable], fut: asyncio.Future[bool]) -> None:
        self._purgatory = purgatory
        self._keys = keys
        self._fut = fut

    @property
    def completed(self) -> bool:
        """A key was completed since the watch began."""
        return self._fut.done()

    async def wait(self, timeout_ms: float) -> bool:
        """True at once when a key was completed since the watch began, else when one is, or False after
        `timeout_ms`."""
        if self._fut.done():
            return self._fut.result()
        if timeout_ms <= 0:
            return False
        handle = asyncio.get_running_loop().call_later(timeout_ms / 1000.0, _resolve, self._fut)
        try:
            return await self._fut
        finally:
            handle.cancel()

    def close(self) -> None:
        self._purgatory._unwatch(self._keys, self._fut)


def _resolve(fut: asyncio.Future[bool]) -> None:
    if not fut.done():
        fut.set_result(False)
