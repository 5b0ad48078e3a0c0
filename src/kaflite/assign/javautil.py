"""Java semantics the reference algorithms depend on: String.hashCode, Kafka's TopicPartition.hashCode,
and the iteration order of java.util.HashMap / HashSet.

Why this exists: Kafka's sticky assignors iterate HashMaps keyed by member ids and HashSets of
TopicPartitions, so "which member is served first" (and thus the order inside each assignment) is
decided by Java's bucket layout. Reproducing Kafka exactly means reproducing that layout.

Rules of java.util.HashMap (JDK 8..17) reproduced here:
- bucket index = spread(hashCode) & (capacity - 1), spread(h) = h ^ (h >>> 16);
- iteration walks buckets in index order, and inside a bucket keeps insertion order (a resize splits a
  bucket preserving relative order, a removed-then-reinserted key goes to the tail);
- capacity starts at 16 (or tableSizeFor(n) for `new HashMap(n)`), doubles when size > 0.75 * capacity,
  and never shrinks. (Tree bins of >= 8 colliding keys are not modelled: they need pathological keys.)
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_MASK32 = 0xFFFFFFFF


def to_int32(x: int) -> int:
    """Wrap an arbitrary Python int to a signed 32-bit Java int."""
    x &= _MASK32
    return x - 0x100000000 if x & 0x80000000 else x


def java_string_hashcode(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units (signed 32-bit)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & _MASK32
    return to_int32(h)


def table_size_for(cap: int) -> int:
    """HashMap.tableSizeFor: the smallest power of two >= cap (at least 1)."""
    n = 1
    while n < cap:
        n <<= 1
    return n


def _spread(h: int) -> int:
    h &= _MASK32
    return h ^ (h >> 16)


class JavaHashMap(Generic[K, V]):
    """A dict whose iteration order is java.util.HashMap's for the same operations.

    Python's dict keeps insertion order with "overwrite keeps position, delete+insert goes last", which
    is exactly the order Java keeps inside one bucket; iteration sorts stably by bucket index.
    """

    __slots__ = ("_d", "_cap", "_hash", "_order")

    def __init__(self, hash_fn: Callable[[K], int], initial_capacity: int | None = None) -> None:
        self._d: dict[K, V] = {}
        # `new HashMap()` allocates 16 buckets on first put; `new HashMap(n)` allocates tableSizeFor(n).
        self._cap = 16 if initial_capacity is None else table_size_for(initial_capacity)
        self._hash = hash_fn
        self._order: list[K] | None = None

    @classmethod
    def copy_of(cls, hash_fn: Callable[[K], int], items: Iterable[tuple[K, V]]) -> JavaHashMap[K, V]:
        """`new HashMap<>(otherMap)` (JDK 17 sizing: tableSizeFor(size / 0.75 + 1)); items in source order."""
        pairs = list(items)
        m: JavaHashMap[K, V] = cls(hash_fn, None)
        if pairs:
            m._cap = max(1, table_size_for(int(len(pairs) / 0.75 + 1.0)))
        for k, v in pairs:
            m[k] = v
        return m

    def __setitem__(self, key: K, value: V) -> None:
        if key not in self._d:
            self._order = None
            self._d[key] = value
            while len(self._d) > self._cap * 0.75:
                self._cap <<= 1
        else:
            self._d[key] = value

    def __getitem__(self, key: K) -> V:
        return self._d[key]

    def get(self, key: K, default: V | None = None) -> V | None:
        return self._d.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._d

    def __delitem__(self, key: K) -> None:
        del self._d[key]
        self._order = None

    def pop(self, key: K) -> V:
        self._order = None
        return self._d.pop(key)

    def __len__(self) -> int:
        return len(self._d)

    def keys(self) -> list[K]:
        if self._order is None:
            mask = self._cap - 1
            h = self._hash
            self._order = sorted(self._d, key=lambda k: _spread(h(k)) & mask)
        return list(self._order)

    def __iter__(self) -> Iterator[K]:
        return iter(self.keys())

    def items(self) -> list[tuple[K, V]]:
        d = self._d
        return [(k, d[k]) for k in self.keys()]

    def values(self) -> list[V]:
        d = self._d
        return [d[k] for k in self.keys()]

    def as_dict(self) -> dict[K, V]:
        """A plain dict in Java iteration order."""
        return dict(self.items())


class JavaHashSet(Generic[K]):
    """java.util.HashSet (a HashMap with dummy values) with Java's iteration order."""

    __slots__ = ("_m",)

    def __init__(self, hash_fn: Callable[[K], int], initial_capacity: int | None = None) -> None:
        self._m: JavaHashMap[K, bool] = JavaHashMap(hash_fn, initial_capacity)

    def add(self, key: K) -> None:
        self._m[key] = True

    def discard(self, key: K) -> None:
        if key in self._m:
            del self._m[key]

    def __contains__(self, key: object) -> bool:
        return key in self._m

    def __len__(self) -> int:
        return len(self._m)

    def __iter__(self) -> Iterator[K]:
        return iter(self._m.keys())

    def first(self) -> K:
        return self._m.keys()[0]
