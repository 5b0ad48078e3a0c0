"""Where a group lives: its partition of the internal topic `__consumer_offsets`.

Kafka's rule (GroupCoordinatorService.partitionFor): `Utils.abs(groupId.hashCode()) % numPartitions`,
with Java's String.hashCode (signed 32-bit over UTF-16 code units) and Kafka's `Utils.abs`, which maps
Integer.MIN_VALUE to 0 instead of overflowing. Group "test" therefore lives in partition 48 of 50.
"""

from __future__ import annotations

# Java's String.hashCode and Kafka's Utils.abs live with the other Java semantics in kaflite.assign
# (pure, stdlib only), so the partitioners and the coordinator hash exactly alike.
from kaflite.assign import java_string_hashcode, utils_abs

OFFSETS_TOPIC = "__consumer_offsets"
DEFAULT_OFFSETS_TOPIC_PARTITIONS = 50


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
