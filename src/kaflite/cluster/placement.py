"""Replica placement: which brokers hold the replicas of each new partition (S-33).

Rules:
- brokers are taken sorted by id;
- `assign_replicas_round_robin` is the textbook rule of the source posts: partition i on broker
  i mod n, its j-th replica on broker (i + j) mod n;
- `assign_replicas` is Kafka's rack-unaware algorithm (`AdminUtils.assignReplicasToBrokersRackUnaware`):
  a start index and a replica shift, random unless fixed, spread leaders evenly, and the shift grows by
  one every n partitions so followers do not always follow the same leader;
- the first replica is the preferred leader; a replication factor above the number of brokers is
  INVALID_REPLICATION_FACTOR, a partition count below one INVALID_PARTITIONS.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from kaflite.protocol.errors import ErrorCode, KafkaError

__all__ = ["assign_replicas", "assign_replicas_round_robin"]


def _check(n_partitions: int, replication_factor: int, brokers: list[int]) -> None:
    if n_partitions <= 0:
        raise KafkaError(ErrorCode.invalid_partitions, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise KafkaError(ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise KafkaError(
            ErrorCode.invalid_replication_factor,
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.",
        )


def assign_replicas_round_robin(
    n_partitions: int, replication_factor: int, brokers: Iterable[int]
) -> dict[int, list[int]]:
    ids = sorted(brokers)
    _check(n_partitions, replication_factor, ids)
    n = len(ids)
    return {i: [ids[(i + j) % n] for j in range(replication_factor)] for i in range(n_partitions)}


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_replicas(
    n_partitions: int,
    replication_factor: int,
    brokers: Iterable[int],
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Kafka's rack-unaware placement; pass `fixed_start_index` >= 0 for a deterministic result."""
    ids = sorted(brokers)
    _check(n_partitions, replication_factor, ids)
    n = len(ids)
    rnd = rng or random.Random()
    start = fixed_start_index if fixed_start_index >= 0 else rnd.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rnd.randrange(n)
    partition = max(0, start_partition_id)
    out: dict[int, list[int]] = {}
    for _ in range(n_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        replicas = [ids[first]]
        for j in range(replication_factor - 1):
            replicas.append(ids[_replica_index(first, shift, j, n)])
        out[partition] = replicas
        partition += 1
    return out
