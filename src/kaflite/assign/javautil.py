"""Java semantics the reference algorithms depend on: String.hashCode, Kafka's TopicPartition.hashCode,
and the iteration order of java.util.HashMap / HashSet.

Why this exists: Kafka's assignors and the Java consumer iterate HashMaps and HashSets — the group
leader's map of member subscriptions, the set of subscribed topics and the map of partitions per topic
built from it, the sticky assignor's map of members' owned partitions, the sticky user data grouped by
topic, the HashSets of moved TopicPartitions — so "which topic comes first in a member's list" and
"which member is served first" are decided by Java's bucket layout. Reproducing Kafka exactly means
reproducing that layout, not sorting.

The model (java.util.HashMap, JDK 8..21; HashSet is a HashMap with dummy values):
- hash: `String.hashCode` (s[0]*31^(n-1) + ... over UTF-16 code units, signed 32-bit), spread as
  `h ^ (h >>> 16)`; bucket index = spread & (capacity - 1).
- capacity: `new HashMap<>()` allocates 16 buckets on the first put; `new HashMap<>(n)` tableSizeFor(n)
  (the next power of two); `new HashMap<>(map)` tableSizeFor(size / 0.75 + 1). After an insertion that
  makes size > 0.75 x capacity the table doubles; it never shrinks (removals keep the capacity).
- a bucket that already holds 8 keys when `put` adds a 9th (7 when `computeIfAbsent` adds an 8th) is
  "treeified" — but while the table has fewer than 64 buckets Java doubles the table instead
  (HashMap.treeifyBin); that resize is modelled.
- iteration: buckets in index order; inside a bucket, the order nodes were linked in. `put` (and
  `putIfAbsent`, `HashSet.add`, `Collectors.toMap`) appends a new key at the bucket's tail, but
  `computeIfAbsent` (and so `Collectors.groupingBy` and Kafka's CollectionUtils.groupPartitionsByTopic)
  links it at the bucket's head: keys that share a bucket come out in reverse insertion order there.
  A resize splits each bucket into two (index and index + old capacity) keeping the keys' relative
  order, so the whole order is "sort by (bucket index at the current capacity, link position)", where
  a tail insertion takes a position after every key so far and a head insertion one before. Overwriting
  a key keeps its place; removing it and inserting it again gives it a new position.
- when the table grows: `put` doubles it right after an insertion that makes size > 0.75 x capacity;
  `computeIfAbsent` checks that condition when it is called — before inserting, and also when the key is
  already there — so a map filled by computeIfAbsent stays one key "too full" (with the smaller table's
  order) until the next call of any kind.
- not modelled: tree bins (9+ keys in one bucket of a table of 64+ buckets: iteration then follows
  the red-black tree's insertion links). That needs 9 names whose spread hashes agree in their low
  6+ bits — crafted names (e.g. String.hashCode collisions like "Aa"/"BB"), never a sane group.
  `JavaHashMap.treeified` says when it happened, so a caller can tell the order is no longer exact.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_MASK32 = 0xFFFFFFFF
DEFAULT_CAPACITY = 16
LOAD_FACTOR = 0.75
TREEIFY_THRESHOLD = 8       # keys in one bucket before Java treeifies it ...
MIN_TREEIFY_CAPACITY = 64   # ... unless the table is smaller: then it doubles instead


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


def spread(h: int) -> int:
    """HashMap.hash: the hash code's high half folded into the low half (as an unsigned 32-bit value)."""
    h &= _MASK32
    return h ^ (h >> 16)


def bucket_index(h: int, capacity: int) -> int:
    """The bucket a key with hash code `h` lands in, in a table of `capacity` buckets."""
    return spread(h) & (capacity - 1)


class JavaHashMap(Generic[K, V]):
    """A dict whose iteration order is java.util.HashMap's for the same sequence of operations.

    Python's dict keeps insertion order with "overwrite keeps position, delete+insert goes last", which
    is exactly the order Java keeps inside one bucket; iteration sorts stably by bucket index.
    """

    __slots__ = ("_d", "_pos", "_next", "_cap", "_hash", "_order", "_bins", "treeified")

    def __init__(self, hash_fn: Callable[[K], int], initial_capacity: int | None = None) -> None:
        self._d: dict[K, V] = {}
        # Link position of each key inside its bucket: tail insertions count up, head insertions down.
        # Only needed once a head insertion happened: until then the dict's own order is the link order.
        self._pos: dict[K, int] | None = None
        self._next = 0
        # `new HashMap()` allocates 16 buckets on first put; `new HashMap(n)` allocates tableSizeFor(n).
        self._cap = DEFAULT_CAPACITY if initial_capacity is None else table_size_for(initial_capacity)
        self._hash = hash_fn
        self._order: list[K] | None = None
        # keys per bucket index at the current capacity; only tracked once a bucket could reach the
        # treeify threshold (a map of fewer keys cannot), so small maps stay cheap
        self._bins: dict[int, int] | None = None
        #: True once a bucket would be a tree bin in Java (iteration order from then on is not exact)
        self.treeified = False

    @classmethod
    def copy_of(cls, hash_fn: Callable[[K], int], items: Iterable[tuple[K, V]]) -> JavaHashMap[K, V]:
        """`new HashMap<>(otherMap)` (sizing: tableSizeFor(size / 0.75 + 1)); items in source order."""
        pairs = list(items)
        m: JavaHashMap[K, V] = cls(hash_fn, None)
        if pairs:
            m._cap = max(1, table_size_for(int(len(pairs) / LOAD_FACTOR + 1.0)))
        for k, v in pairs:
            m[k] = v
        return m

    @property
    def capacity(self) -> int:
        return self._cap

    def _count_bins(self) -> dict[int, int]:
        mask = self._cap - 1
        h = self._hash
        bins: dict[int, int] = {}
        for k in self._d:
            i = spread(h(k)) & mask
            bins[i] = bins.get(i, 0) + 1
        return bins

    def _resize(self) -> None:
        self._cap <<= 1
        if self._bins is not None:
            self._bins = self._count_bins()

    def _link(self, key: K, value: V, head: bool, treeify_at: int) -> None:
        self._order = None
        if head and self._pos is None:
            self._pos = {k: n for n, k in enumerate(self._d, 1)}
            self._next = len(self._d)
        if self._pos is not None:
            self._next += 1
            self._pos[key] = -self._next if head else self._next
        bins = self._bins
        if bins is None and len(self._d) >= treeify_at:
            bins = self._bins = self._count_bins()
        self._d[key] = value
        if bins is None:
            return
        i = spread(self._hash(key)) & (self._cap - 1)
        before = bins.get(i, 0)
        bins[i] = before + 1
        if before >= treeify_at:
            if self._cap < MIN_TREEIFY_CAPACITY:
                self._resize()  # treeifyBin on a small table: double it instead
            else:
                self.treeified = True

    def __setitem__(self, key: K, value: V) -> None:
        """HashMap.put: a new key goes to the tail of its bucket; the table grows after it if too full."""
        d = self._d
        if key in d:
            d[key] = value
            return
        if self._pos is None and self._bins is None and len(d) < TREEIFY_THRESHOLD:
            d[key] = value  # the common case, inlined: a small map with no head insertions
            self._order = None
        else:
            self._link(key, value, False, TREEIFY_THRESHOLD)
        if len(d) > self._cap * LOAD_FACTOR:
            self._resize()

    def needs_resize(self) -> bool:
        """True when the next computeIfAbsent call (of any key) grows the table."""
        return len(self._d) > self._cap * LOAD_FACTOR

    def compute_if_absent(self, key: K, factory: Callable[[], V]) -> V:
        """HashMap.computeIfAbsent: grows the table first if it is too full — on every call, even for a key
        already there — then links a new key at the head of its bucket."""
        d = self._d
        if len(d) > self._cap * LOAD_FACTOR:
            self._resize()
            self._order = None
        if key in d:
            return d[key]
        value = factory()
        self._link(key, value, True, TREEIFY_THRESHOLD - 1)
        return value

    def __getitem__(self, key: K) -> V:
        return self._d[key]

    def get(self, key: K, default: V | None = None) -> V | None:
        return self._d.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._d

    def __delitem__(self, key: K) -> None:
        del self._d[key]
        if self._pos is None and self._bins is None:
            self._order = None
        else:
            self._forget(key)

    def pop(self, key: K) -> V:
        v = self._d.pop(key)
        self._forget(key)
        return v

    def _forget(self, key: K) -> None:
        self._order = None
        if self._pos is not None:
            del self._pos[key]
        if self._bins is not None:
            i = spread(self._hash(key)) & (self._cap - 1)
            self._bins[i] -= 1

    def __len__(self) -> int:
        return len(self._d)

    def keys(self) -> list[K]:
        if self._order is None:
            mask = self._cap - 1
            h = self._hash
            pos = self._pos
            if pos is None:  # stable sort: dict order is link order
                self._order = sorted(self._d, key=lambda k: spread(h(k)) & mask)
            else:
                self._order = sorted(self._d, key=lambda k: (spread(h(k)) & mask, pos[k]))
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

    @classmethod
    def of(cls, hash_fn: Callable[[K], int], items: Iterable[K]) -> JavaHashSet[K]:
        """`new HashSet<>()` followed by add() of every item in order."""
        s: JavaHashSet[K] = cls(hash_fn)
        for k in items:
            s.add(k)
        return s

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

    @property
    def treeified(self) -> bool:
        return self._m.treeified


def hashmap_order(keys: Iterable[K], hash_fn: Callable[[K], int]) -> list[K]:
    """The iteration order of `new HashMap<>()` after putting `keys` in the given order."""
    m: JavaHashMap[K, None] = JavaHashMap(hash_fn)
    for k in keys:
        m[k] = None
    return m.keys()
