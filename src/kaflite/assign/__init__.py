"""kaflite.assign: Kafka's partitioners and assignors as pure, stdlib-only Python.

Hashing (exact to org.apache.kafka.common.utils.Utils): `murmur2`, `to_positive`, `utils_abs`,
`partition_for_key`, `java_string_hashcode`. Partitioners: `kaflite.assign.partitioners`.
Assignors by Kafka's names: `get_assignor("range" | "roundrobin" | "sticky" | "cooperative-sticky" |
"uniform" | "server-range" | "zookeeper")`; the broker's KIP-848 assignors by `group.remote.assignor`
name: `get_server_assignor("uniform" | "range")`. `assign_group()` runs a client assignor as a group
leader does (only subscribed, existing topics).
"""

from __future__ import annotations

from kaflite.assign.murmur2 import java_string_hashcode, murmur2, partition_for_key, to_positive, utils_abs
from kaflite.assign.registry import (
    assign_group,
    assignor_names,
    get_assignor,
    get_server_assignor,
    register_assignor,
)
from kaflite.assign.types import PartitionAssignorError, Subscription, TopicPartition

__all__ = [
    "murmur2",
    "to_positive",
    "utils_abs",
    "partition_for_key",
    "java_string_hashcode",
    "get_assignor",
    "assign_group",
    "get_server_assignor",
    "assignor_names",
    "register_assignor",
    "Subscription",
    "TopicPartition",
    "PartitionAssignorError",
]
