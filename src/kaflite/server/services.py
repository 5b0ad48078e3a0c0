"""`BrokerServices`: the per-broker services and the state handlers keep between requests, each in a
typed slot (`Slot[T]`) declared, with its name, by the module that owns it, instead of the former untyped
`broker.extensions` dictionary. Every slot is listed in docs/architecture.md ("What a handler can use").

A slot is declared where the service is (not here) because the services import what reaches them:
`coordinators/groups.py` declares `GROUP_SERVICE: Slot[GroupService]`, and a module naming every service
type here would import them all while they import it (an import circle, tests/test_layers.py).

Rules:
- one value per slot per broker; `get(slot)` is that value or None, typed as the slot's type (mypy);
- `start(slot, make, start)` makes a service once: it is registered before `start` runs, so that a call
  made while it starts (a metadata listener, a replayed record) finds this one instead of making a
  second, and it is unregistered again when `start` raises, so that the next use tries again;
- `pop(slot)` takes a service out (the broker stops it); nothing else removes one;
- `spawn(coroutine, name=)` runs a background job nobody awaits (a share-group membership write, a
  share-state initialization, a transaction's markers) as a task held here until it is done (the event
  loop keeps only weak references to tasks: one held by nobody may be collected mid-run), an exception
  it ends with logged (nobody else retrieves it); `close_spawned()`, at the broker's stop, cancels every
  one still running and returns them for the broker to await, and a task spawned after it is cancelled
  before it runs (nothing starts writing while the broker stops);
- this module imports nothing of kaflite: every layer of the server may use it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar, cast

__all__ = ["BrokerServices", "Slot"]

T = TypeVar("T")

log = logging.getLogger("kaflite.server")


class Slot(Generic[T]):
    """A named place for one per-broker value of type T (identity is the key: two slots never share)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Slot({self.name!r})"


class BrokerServices:
    __slots__ = ("_closed", "_spawned", "_values")

    def __init__(self) -> None:
        self._values: dict[Slot[Any], Any] = {}
        self._spawned: set[asyncio.Task[Any]] = set()  # running until done (see the rules)
        self._closed = False

    def get(self, slot: Slot[T]) -> T | None:
        return cast("T | None", self._values.get(slot))  # set only through a Slot[T]: a T

    def get_or_make(self, slot: Slot[T], make: Callable[[], T]) -> T:
        """The slot's value, made by `make()` on first use (state with nothing to start: a cache, a lock)."""
        if slot in self._values:
            return cast(T, self._values[slot])
        value = self._values[slot] = make()
        return value

    def start(self, slot: Slot[T], make: Callable[[], T], start: Callable[[T], object]) -> T:
        """The slot's service, made and started on first use (the order: see the rules)."""
        if slot in self._values:
            return cast(T, self._values[slot])
        service = self._values[slot] = make()
        try:
            start(service)
        except BaseException:
            if self._values.get(slot) is service:
                del self._values[slot]
            raise
        return service

    def set(self, slot: Slot[T], value: T) -> None:
        self._values[slot] = value

    def pop(self, slot: Slot[T]) -> T | None:
        return cast("T | None", self._values.pop(slot, None))

    def names(self) -> list[str]:
        """The slots holding a value (for a reader of a broker's state: tests, logs)."""
        return sorted(s.name for s in self._values)

    # --- background jobs ----------------------------------------------------------------------------
    def spawn(self, coroutine: Coroutine[Any, Any, T], *, name: str) -> asyncio.Task[T]:
        """Run `coroutine` as a task held until done, its failure logged (see the rules); the task, which a
        caller may await (a test) but need not."""
        task = asyncio.get_running_loop().create_task(coroutine, name=name)
        if self._closed:
            task.cancel()  # never started: the coroutine is closed by the cancellation, nothing runs
        self._spawned.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._spawned.discard(task)
        if task.cancelled():
            return
        error = task.exception()  # retrieved here: asyncio would otherwise log it only when collected
        if error is not None:
            log.error("background task %s failed", task.get_name(), exc_info=error)

    def spawned(self) -> list[asyncio.Task[Any]]:
        """The spawned tasks still running (for a reader of a broker's state: tests, logs)."""
        return list(self._spawned)

    def close_spawned(self) -> list[asyncio.Task[Any]]:
        """At the broker's stop: no task spawned from now on runs, every one running is cancelled; those
        tasks, for the caller to await until done (a task may swallow a cancellation:
        kaflite.server.stopping.cancel_until_done)."""
        self._closed = True
        running = list(self._spawned)
        for task in running:
            task.cancel()
        return running
