"""Replica placement: which brokers hold the replicas of each new partition (S-33).

Rules:
- brokers are taken sorted by id;
- `assign_replicas_round_robin` is the textbook rule of the source posts: partition i on broker
  i mod n, its j-th replica on broker (i + j) mod n;
- `assign_replicas` is Kafka's rack-unaware algorithm (`AdminUtils.assignReplicasToBrokersRackUnaware`):
  a start index and a replica shift, random unless fixed, spread leaders evenly, and the shift grows by
  one every n partitions so followers do not always follow the same leader;
- `assign_replicas_rack_aware` is Kafka's rack-aware variant (`assignReplicasToBrokersRackAware`): the
  brokers are first listed alternating racks (racks sorted by name, brokers by id within a rack), then
  the same start index and shift walk that list (the shift in steps of the number of racks), and a
  follower is skipped while its rack already holds a replica of the partition and some rack holds none,
  or while its broker already does and some broker holds none: each partition spans
  min(replication factor, racks) racks;
- `assign_replicas_to_brokers` chooses as Kafka does: no broker with a rack -> rack-unaware; every broker
  with one -> rack-aware; some with and some without -> refused (Kafka's "Not all brokers have rack
  information");
- the first replica is the preferred leader; a replication factor above the number of brokers is
  INVALID_REPLICATION_FACTOR, a partition count below one INVALID_PARTITIONS.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping

from kaflite.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "assign_replicas",
    "assign_replicas_rack_aware",
    "assign_replicas_round_robin",
    "assign_replicas_to_brokers",
    "rack_alternated_brokers",
]


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


def rack_alternated_brokers(racks: Mapping[int, str]) -> list[int]:
    """Brokers listed one rack after the other (racks sorted, brokers sorted within a rack), e.g.
    {0: r1, 1: r3, 2: r3, 3: r2, 4: r2, 5: r1} -> [0, 3, 1, 5, 4, 2] (Kafka's getRackAlternatedBrokerList)."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(racks.items()):
        by_rack.setdefault(rack, []).append(broker)
    queues = [iter(by_rack[r]) for r in sorted(by_rack)]
    out: list[int] = []
    i = 0
    while len(out) < len(racks):
        nxt = next(queues[i], None)
        if nxt is not None:
            out.append(nxt)
        i = (i + 1) % len(queues)
    return out


def assign_replicas_rack_aware(
    n_partitions: int,
    replication_factor: int,
    racks: Mapping[int, str],
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Kafka's rack-aware placement; `racks` maps every broker id to its rack."""
    arranged = rack_alternated_brokers(racks)
    _check(n_partitions, replication_factor, arranged)
    n = len(arranged)
    n_racks = len(set(racks.values()))
    rnd = rng or random.Random()
    start = fixed_start_index if fixed_start_index >= 0 else rnd.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rnd.randrange(n)
    partition = max(0, start_partition_id)
    out: dict[int, list[int]] = {}
    for _ in range(n_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {racks[leader]}
        brokers_used = {leader}
        k = 0
        for _j in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, shift * n_racks, k, n)] if n > 1 else arranged[0]
                k += 1
                rack = racks[broker]
                # skip a rack already holding a replica while some rack holds none, and a broker
                # already holding one while some broker holds none
                if (rack not in racks_used or len(racks_used) == n_racks) and (
                    broker not in brokers_used or len(brokers_used) == n
                ):
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
        out[partition] = replicas
        partition += 1
    return out


def assign_replicas_to_brokers(
    n_partitions: int,
    replication_factor: int,
    brokers: Mapping[int, str | None],
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Kafka's assignReplicasToBrokers: rack-aware when every broker has a rack, unaware when none has."""
    with_rack = {b: r for b, r in brokers.items() if r is not None}
    if not with_rack:
        return assign_replicas(
            n_partitions, replication_factor, brokers, fixed_start_index, start_partition_id, rng
        )
    if len(with_rack) != len(brokers):
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            "Not all brokers have rack information for replica rack aware assignment "
            f"(without broker.rack: {sorted(b for b in brokers if brokers[b] is None)}).",
        )
    return assign_replicas_rack_aware(
        n_partitions, replication_factor, with_rack, fixed_start_index, start_partition_id, rng
    )
