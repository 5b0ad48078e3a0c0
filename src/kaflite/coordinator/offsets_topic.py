"""Where a group lives: its partition of the internal topic `__consumer_offsets`.

Kafka's rule (GroupCoordinatorService.partitionFor): `Utils.abs(groupId.hashCode()) % numPartitions`,
with Java's String.hashCode (signed 32-bit over UTF-16 code units) and Kafka's `Utils.abs`, which maps
Integer.MIN_VALUE to 0 instead of overflowing. Group "test" therefore lives in partition 48 of 50.
"""

from __future__ import annotations

OFFSETS_TOPIC = "__consumer_offsets"
DEFAULT_OFFSETS_TOPIC_PARTITIONS = 50

_INT_MIN = -(2**31)

try:  # the assignment package owns Java's String.hashCode; fall back to a local copy until it lands
    from kaflite.assign import java_string_hashcode, utils_abs  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on what the assign package exports at the time

    def java_string_hashcode(s: str) -> int:
        """Java's String.hashCode: h = 31*h + c over UTF-16 code units, as a signed 32-bit int."""
        h = 0
        data = s.encode("utf-16-be")
        for i in range(0, len(data), 2):
            h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
        return h - 0x100000000 if h & 0x80000000 else h

    def utils_abs(x: int) -> int:
        """Kafka's Utils.abs: like Math.abs but Integer.MIN_VALUE -> 0 (Math.abs would stay negative)."""
        return 0 if x == _INT_MIN else abs(x)


def partition_for(group_id: str, num_partitions: int = DEFAULT_OFFSETS_TOPIC_PARTITIONS) -> int:
    """The `__consumer_offsets` partition that stores (and whose leader coordinates) `group_id`."""
    if num_partitions <= 0:
        raise ValueError(f"offsets.topic.num.partitions must be >= 1, got {num_partitions}")
    return utils_abs(java_string_hashcode(group_id)) % num_partitions


__all__ = [
    "DEFAULT_OFFSETS_TOPIC_PARTITIONS",
    "OFFSETS_TOPIC",
    "java_string_hashcode",
    "partition_for",
    "utils_abs",
]
