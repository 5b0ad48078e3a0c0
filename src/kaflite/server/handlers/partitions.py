"""The loop every partition-addressed API shares (Produce, ListOffsets, OffsetForLeaderEpoch,
DeleteRecords): for each topic and each of its partitions, the handler's answer, or its error answer.

Rules:
- a `KafkaError` raised while answering one partition becomes that partition's error (its code and
  message), and the other partitions are answered normally; which error a partition gets for being
  unknown, not led here or fenced is decided by `ReplicaManager.get_partition`, never here;
- an `OSError` (an unreadable or full disk) becomes KAFKA_STORAGE_ERROR for that partition, logged once;
- results keep the request's order, grouped by topic as requested.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from kaflite.protocol.errors import ErrorCode, KafkaError

__all__ = ["per_partition"]

log = logging.getLogger("kaflite.server")
T = TypeVar("T")


def per_partition(
    topics: Iterable[Any],
    answer: Callable[[str, Any], T],
    error: Callable[[str, Any, ErrorCode, str | None], T],
    *,
    name: str = "name",
    partitions: str = "partitions",
) -> list[tuple[str, list[T]]]:
    """[(topic, [answer(topic, p) or error(topic, p, code, message) for each p])] over a request's topics,
    whose name and partition list are the attributes `name` and `partitions`."""
    out: list[tuple[str, list[T]]] = []
    for t in topics:
        topic = getattr(t, name)
        results: list[T] = []
        for p in getattr(t, partitions):
            try:
                results.append(answer(topic, p))
            except KafkaError as e:
                results.append(error(topic, p, e.code, e.message or None))
            except OSError as e:
                log.error("%s: I/O error on %s: %s", getattr(answer, "__name__", "request"), topic, e)
                results.append(error(topic, p, ErrorCode.kafka_storage_error, str(e)))
        out.append((topic, results))
    return out
