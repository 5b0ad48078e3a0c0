"""Kafka's hashing primitives (org.apache.kafka.common.utils.Utils): murmur2, toPositive, abs.

Rules (SPEC S-5, S-22):
- murmur2 is Kafka's variant: seed 0x9747b28c, m = 0x5bd1e995, r = 24, 4-byte little-endian blocks,
  a tail of 1..3 bytes that falls through (3 -> 2 -> 1), all arithmetic on signed 32-bit ints;
- toPositive(x) = x & 0x7fffffff (NOT abs: abs(MIN_VALUE) would stay negative in Java);
- Utils.abs(MIN_VALUE) == 0 (used for the __consumer_offsets partition of a group).
"""

from __future__ import annotations

from kaflite.assign.javautil import java_string_hashcode, to_int32

__all__ = ["murmur2", "to_positive", "utils_abs", "partition_for_key", "java_string_hashcode"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 of `data`, as the signed 32-bit int Java returns."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length // 4
    for i in range(n4):
        i4 = i * 4
        k = data[i4] | (data[i4 + 1] << 8) | (data[i4 + 2] << 16) | (data[i4 + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> _R  # unsigned shift: k is kept in [0, 2^32)
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = length % 4
    base = length & ~3
    # Fall-through on purpose, as in Java's switch without breaks.
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return to_int32(h)


def to_positive(x: int) -> int:
    """Utils.toPositive: clears the sign bit of a 32-bit int."""
    return x & 0x7FFFFFFF


def utils_abs(x: int) -> int:
    """Utils.abs: Math.abs except that Integer.MIN_VALUE maps to 0."""
    x = to_int32(x)
    return 0 if x == -0x80000000 else abs(x)


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """BuiltInPartitioner.partitionForKey: toPositive(murmur2(key)) % n, over ALL partitions."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions
