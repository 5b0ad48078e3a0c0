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
- this module imports nothing of kaflite: every layer of the server may use it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

__all__ = ["BrokerServices", "Slot"]

T = TypeVar("T")


class Slot(Generic[T]):
    """A named place for one per-broker value of type T (identity is the key: two slots never share)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Slot({self.name!r})"


class BrokerServices:
    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: dict[Slot[Any], Any] = {}

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
