"""Producer partitioners: which partition a record goes to (SPEC S-4..S-12).

Every partitioner here is a pure object: cluster state comes in as `PartitionMeta` lists (partition id
and whether it has a leader, in metadata order) and randomness is an injected `random_int()` callable
returning a non-negative int (Java's `Utils.toPositive(ThreadLocalRandom.nextInt())`), so tests can
replay Kafka's own mocks.

Rules:
- explicit partition wins, after validation (S-4);
- keyed record: toPositive(murmur2(key)) % numPartitions over ALL partitions (S-5);
- unkeyed record: legacy round robin over AVAILABLE partitions (S-6), KIP-480 sticky cache (S-7),
  KIP-794 uniform sticky with adaptive weights (S-8), RoundRobinPartitioner ignoring keys (S-9),
  the old Scala producer's random-until-refresh (S-10), the seeds' custom MyPartition (S-11);
- other clients' key hashing for comparison (S-12).
"""

from __future__ import annotations

import bisect
import random as _random
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kaflite.assign.javautil import java_string_hashcode, to_int32
from kaflite.assign.murmur2 import murmur2, partition_for_key, to_positive

RandomInt = Callable[[], int]


def default_random() -> int:
    """Utils.toPositive(ThreadLocalRandom.current().nextInt())."""
    return _random.getrandbits(31)


@dataclass(frozen=True, slots=True)
class PartitionMeta:
    """One partition as seen in producer metadata: its id and whether it currently has a leader."""

    partition: int
    leader: int | None = 0

    @property
    def available(self) -> bool:
        return self.leader is not None


def _metas(partitions: int | Sequence[PartitionMeta]) -> list[PartitionMeta]:
    if isinstance(partitions, int):
        if partitions < 1:
            raise ValueError(f"a topic has at least 1 partition, got {partitions}")
        return [PartitionMeta(p, 0) for p in range(partitions)]
    if not partitions:
        raise ValueError("a topic has at least 1 partition, got none")
    return list(partitions)


class InvalidRecordError(ValueError):
    """A record the producer refuses before choosing a partition (Kafka's IllegalArgumentException)."""


def validate_record(topic: str | None, partition: int | None, timestamp: int | None, num_partitions: int) -> None:
    """ProducerRecord / KafkaProducer.partition() validation with Kafka's messages (S-4)."""
    if topic is None:
        raise InvalidRecordError("Topic cannot be null.")
    if timestamp is not None and timestamp < 0:
        raise InvalidRecordError(
            f"Invalid timestamp: {timestamp}. Timestamp should always be non-negative or null."
        )
    if partition is not None and (partition < 0 or partition > num_partitions - 1):
        raise InvalidRecordError(
            f"Invalid partition given with record: {partition} is not in the range [0...{num_partitions - 1}]."
        )


class DefaultPartitioner:
    """The legacy DefaultPartitioner (Kafka <= 2.3): key hash, else per-topic round robin (S-5, S-6).

    Java starts each topic's counter at a random int; `counter_start` makes that reproducible.
    """

    def __init__(self, counter_start: Callable[[str], int] | None = None) -> None:
        self._counters: dict[str, int] = {}
        self._start = counter_start or (lambda _topic: to_int32(_random.getrandbits(32)))

    def partition(self, topic: str, key: bytes | None, partitions: int | Sequence[PartitionMeta],
                  explicit: int | None = None) -> int:
        metas = _metas(partitions)
        if explicit is not None:
            validate_record(topic, explicit, None, len(metas))
            return explicit
        if key is not None:
            return partition_for_key(key, len(metas))
        value = self._counters.get(topic)
        if value is None:
            value = self._start(topic)
        self._counters[topic] = to_int32(value + 1)  # getAndIncrement wraps like a Java int
        available = [m for m in metas if m.available]
        if available:
            return available[to_positive(value) % len(available)].partition
        return to_positive(value) % len(metas)


class RoundRobinPartitioner:
    """org.apache.kafka.clients.producer.RoundRobinPartitioner: a counter per topic from 0, keys ignored (S-9)."""

    def __init__(self) -> None:
        self._counters: dict[str, int] = {}

    def partition(self, topic: str, key: bytes | None, partitions: int | Sequence[PartitionMeta]) -> int:
        metas = _metas(partitions)
        value = self._counters.get(topic, 0)
        self._counters[topic] = to_int32(value + 1)
        available = [m for m in metas if m.available]
        if available:
            return available[to_positive(value) % len(available)].partition
        return to_positive(value) % len(metas)


class StickyPartitionCache:
    """KIP-480 (Kafka 2.4-3.2): stick to one random available partition; on a new batch pick a different one (S-7)."""

    def __init__(self, random_int: RandomInt = default_random) -> None:
        self._cache: dict[str, int] = {}
        self._random = random_int

    def partition(self, topic: str, partitions: int | Sequence[PartitionMeta]) -> int:
        cur = self._cache.get(topic)
        return cur if cur is not None else self.next_partition(topic, partitions, -1)

    def next_partition(self, topic: str, partitions: int | Sequence[PartitionMeta], prev_partition: int) -> int:
        """onNewBatch: choose a new sticky partition, different from the old one when possible."""
        metas = _metas(partitions)
        old = self._cache.get(topic)
        if old is not None and old != prev_partition:
            return old  # another thread already switched
        available = [m for m in metas if m.available]
        if not available:
            new = self._random() % len(metas)
        elif len(available) == 1:
            new = available[0].partition
        else:
            new = available[self._random() % len(available)].partition
            while new == old:
                new = available[self._random() % len(available)].partition
        self._cache[topic] = new
        return new


class BuiltInPartitioner:
    """KIP-794 uniform sticky partitioner of one topic (Kafka 3.3+, S-8).

    Rules: stick to a partition until `batch_size` bytes were produced to it AND the batch is complete
    (`enable_switch`), or unconditionally at 2 * batch_size; pick the next partition uniformly among the
    available ones, or weighted by queue sizes when load stats are set (adaptive partitioning):
    weight_i = (max queue + 1) - queue_i, chosen by a cumulative frequency table.
    """

    def __init__(self, topic: str, batch_size: int, random_int: RandomInt = default_random) -> None:
        if batch_size < 1:
            raise ValueError(f"sticky batch size must be >= 1, got {batch_size}")
        self.topic = topic
        self.sticky_batch_size = batch_size
        self._random = random_int
        self.current: int | None = None
        self.produced_bytes = 0
        self._cft: list[int] | None = None
        self._cft_ids: list[int] = []

    def next_partition(self, partitions: int | Sequence[PartitionMeta]) -> int:
        metas = _metas(partitions)
        r = self._random()
        if self._cft is None:
            available = [m for m in metas if m.available]
            if available:
                return available[r % len(available)].partition
            return r % len(metas)
        weighted = r % self._cft[-1]
        # first index whose cumulative frequency is > weighted (Arrays.binarySearch + abs(result + 1))
        return self._cft_ids[bisect.bisect_right(self._cft, weighted)]

    def partition(self, key: bytes | None, partitions: int | Sequence[PartitionMeta], ignore_keys: bool = False) -> int:
        """The partition for a record: keyed records hash (unless `partitioner.ignore.keys=true`), the rest
        go to the current sticky partition (call `update` after appending)."""
        if key is not None and not ignore_keys:
            return partition_for_key(key, len(_metas(partitions)))
        return self.peek_partition(partitions)

    def peek_partition(self, partitions: int | Sequence[PartitionMeta]) -> int:
        if self.current is None:
            self.current = self.next_partition(partitions)
            self.produced_bytes = 0
        return self.current

    def update(self, appended_bytes: int, partitions: int | Sequence[PartitionMeta], enable_switch: bool) -> bool:
        """Account appended bytes; returns True when the sticky partition switched."""
        if self.current is None:
            return False
        self.produced_bytes += appended_bytes
        if self.produced_bytes >= self.sticky_batch_size * 2:
            enable_switch = True  # never stick for too long
        if self.produced_bytes >= self.sticky_batch_size and enable_switch:
            self.current = self.next_partition(partitions)
            self.produced_bytes = 0
            return True
        return False

    def update_partition_load_stats(self, queue_sizes: Sequence[int] | None, partition_ids: Sequence[int],
                                    length: int | None = None) -> None:
        """Adaptive weights from per-partition queue sizes; only the first `length` entries are usable
        (the rest were excluded, e.g. leaders slower than partitioner.availability.timeout.ms)."""
        if queue_sizes is None:
            self._cft = None
            return
        n = len(queue_sizes) if length is None else length
        if n < 1 or len(queue_sizes) < 2:
            self._cft = None
            return
        sizes = list(queue_sizes[:n])
        max_plus_1 = max(sizes) + 1
        if all(s == sizes[0] for s in sizes) and n == len(queue_sizes):
            self._cft = None  # all equal: plain uniform choice
            return
        cft: list[int] = []
        running = 0
        for s in sizes:
            running += max_plus_1 - s
            cft.append(running)
        self._cft = cft
        self._cft_ids = list(partition_ids[:n])

    @property
    def cumulative_frequency_table(self) -> list[int] | None:
        return None if self._cft is None else list(self._cft)


def load_stats(queue_sizes: Sequence[int], partition_ids: Sequence[int], leader_latency_ms: Sequence[int],
               availability_timeout_ms: int) -> tuple[list[int], list[int], int]:
    """Queue sizes and ids with partitions whose leader is slower than the availability timeout moved out
    of the usable prefix (RecordAccumulator's partitionReady bookkeeping); returns (sizes, ids, length)."""
    keep = [i for i in range(len(queue_sizes))
            if availability_timeout_ms <= 0 or leader_latency_ms[i] <= availability_timeout_ms]
    drop = [i for i in range(len(queue_sizes)) if i not in keep]
    order = keep + drop
    return [queue_sizes[i] for i in order], [partition_ids[i] for i in order], len(keep)


class ScalaProducerPartitioner:
    """The old Scala producer (seed 003, S-10): a null key picks one random partition and keeps it
    until the next metadata refresh (topic.metadata.refresh.interval.ms, default 10 minutes)."""

    def __init__(self, refresh_interval_ms: int = 600_000, random_int: RandomInt = default_random) -> None:
        self.refresh_interval_ms = refresh_interval_ms
        self._random = random_int
        self._chosen: dict[str, tuple[int, int]] = {}

    def partition(self, topic: str, key: bytes | None, num_partitions: int, now_ms: int) -> int:
        if key is not None:
            return partition_for_key(key, num_partitions)
        hit = self._chosen.get(topic)
        if hit is None or now_ms - hit[1] >= self.refresh_interval_ms:
            hit = (self._random() % num_partitions, now_ms)
            self._chosen[topic] = hit
        return hit[0]


def java_hashcode_partition(key: str, num_partitions: int) -> int:
    """The seeds' custom MyPartition for a non-null key: Math.abs(key.hashCode() % n) (Java remainder)."""
    h = java_string_hashcode(key)
    return abs(h) % num_partitions  # |h % n| with Java's truncating %, identical to |h| mod n


class MyPartition:
    """Seed 003's custom partitioner (S-11): null key -> random partition, else abs(key.hashCode() % n)."""

    def __init__(self, random_int: RandomInt = default_random) -> None:
        self._random = random_int

    def partition(self, key: str | None, num_partitions: int) -> int:
        if key is None:
            return self._random() % num_partitions
        return java_hashcode_partition(key, num_partitions)


# --- other clients' key hashing (S-12) -------------------------------------------------------------

def fnv1a_32(data: bytes) -> int:
    """32-bit FNV-1a (unsigned), the hash of Sarama's default HashPartitioner and librdkafka's fnv1a."""
    h = 0x811C9DC5
    for b in data:
        h ^= b
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def librdkafka_consistent(key: bytes, num_partitions: int) -> int:
    """librdkafka `consistent`: CRC32(key) % n."""
    return (zlib.crc32(key) & 0xFFFFFFFF) % num_partitions


def librdkafka_murmur2(key: bytes, num_partitions: int) -> int:
    """librdkafka `murmur2` / `murmur2_random` for a non-null key: identical to the Java client."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def fnv1a_abs(data: bytes) -> int:
    """librdkafka's rd_fnv1a: FNV-1a 32 as a signed int, made non-negative (Sarama-compatible)."""
    return abs(to_int32(fnv1a_32(data))) & 0xFFFFFFFF


def librdkafka_fnv1a(key: bytes, num_partitions: int) -> int:
    """librdkafka `fnv1a` / `fnv1a_random`: |int32(FNV-1a(key))| % n — the same as Sarama."""
    return fnv1a_abs(key) % num_partitions


def sarama_hash(key: bytes, num_partitions: int) -> int:
    """Sarama's default HashPartitioner: int32(fnv1a) % n (Go remainder), negated if negative."""
    return abs(to_int32(fnv1a_32(key))) % num_partitions


@dataclass(frozen=True, slots=True)
class ClientPartitioner:
    name: str
    description: str
    keyed: Callable[[bytes, int], int]
    #: how an empty (non-null) key is treated: "hash" or "random"
    empty_key: str = "hash"


CLIENT_PARTITIONERS: dict[str, ClientPartitioner] = {
    "java": ClientPartitioner("java", "Java client default: toPositive(murmur2(key)) % n", partition_for_key),
    "librdkafka": ClientPartitioner(
        "librdkafka", "librdkafka default consistent_random: CRC32(key) % n (empty/null key: random)",
        librdkafka_consistent, empty_key="random"),
    "librdkafka-murmur2": ClientPartitioner(
        "librdkafka-murmur2", "librdkafka murmur2_random: same as Java", librdkafka_murmur2),
    "librdkafka-fnv1a": ClientPartitioner(
        "librdkafka-fnv1a", "librdkafka fnv1a_random: |int32(FNV-1a(key))| % n (= Sarama)", librdkafka_fnv1a),
    "sarama": ClientPartitioner("sarama", "Sarama default HashPartitioner: |int32(FNV-1a(key)) % n|", sarama_hash),
    "java-hashcode": ClientPartitioner(
        "java-hashcode", "seed 003 MyPartition: abs(key.hashCode() % n) (key as UTF-8 string)",
        lambda k, n: java_hashcode_partition(k.decode("utf-8", "surrogateescape"), n)),
}


def client_partition(client: str, key: bytes, num_partitions: int) -> int | None:
    """Where a keyed record lands for `client`'s default partitioner; None means "random" for that key."""
    try:
        cp = CLIENT_PARTITIONERS[client]
    except KeyError:
        raise ValueError(f"unknown client {client!r}; allowed: {', '.join(CLIENT_PARTITIONERS)}") from None
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    if not key and cp.empty_key == "random":
        return None
    return cp.keyed(key, num_partitions)
