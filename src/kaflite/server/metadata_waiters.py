"""Requests waiting for this broker's metadata image to show a change (Kafka's DelayedCreatePartitions).

Rules:
- `wait(condition, timeout_s)` answers True as soon as `condition(image)` holds for the current image or
  for an image published later, False once `timeout_s` passed without it; never both, never later than
  the timeout plus one loop turn.
- A condition is checked once per published image, on the event loop, and dropped with its waiter
  (answered or timed out): nothing is kept for a request that is gone.
- A condition that raises counts as not met (the image may show a half-made change).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kaflite.cluster.metadata import MetadataImage

__all__ = ["MetadataWaiters", "topic_has_leaders"]

Condition = Callable[["MetadataImage"], bool]


def _holds(condition: Condition, image: MetadataImage) -> bool:
    try:
        return bool(condition(image))
    except Exception:  # noqa: BLE001 - a half-made change reads as not there yet
        return False


def topic_has_leaders(name: str, partitions: int) -> Condition:
    """The topic is in the image with at least `partitions` partitions, each with a leader: what a client
    needs to produce to it or configure it through this broker (Kafka answers CreateTopics then)."""

    def condition(image: MetadataImage) -> bool:
        topic = image.topics.get(name)
        return (topic is not None and topic.num_partitions >= partitions
                and all(p.leader >= 0 for p in topic.partitions[:partitions]))

    return condition


class MetadataWaiters:
    """Futures answered when a published image meets their condition; subscribe `on_image` to the writer."""

    def __init__(self, current: Callable[[], MetadataImage]) -> None:
        self._current = current
        self._waiting: dict[asyncio.Future[bool], Condition] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def on_image(self, _old: MetadataImage | None, new: MetadataImage) -> None:
        for fut, condition in list(self._waiting.items()):
            if not fut.done() and _holds(condition, new):
                fut.set_result(True)

    async def wait(self, condition: Condition, timeout_s: float) -> bool:
        if _holds(condition, self._current()):
            return True
        if timeout_s <= 0:
            return False
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting[fut] = condition
        try:
            return await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            return False
        finally:
            self._waiting.pop(fut, None)
