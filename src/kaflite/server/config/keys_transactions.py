"""Producer id and transaction keys (Kafka's TransactionLogConfigs / TransactionStateManagerConfigs).

This subsystem owns these keys; `kaflite.server.config.broker_config` assembles every subsystem's table
into `BROKER_CONFIGS`, as Kafka assembles KafkaConfig from the ConfigDefs of its subsystems.
"""

from __future__ import annotations

from kaflite.server.config.definitions import (
    CLUSTER_WIDE,
    AtLeast,
    ConfigKey,
    _k,
)

__all__ = ["KEYS", "NOT_READ"]

KEYS: list[ConfigKey] = [
    _k(
        "producer.id.expiration.ms",
        "int",
        86400000,
        "Idle time after which a producer id's deduplication state is dropped.",
        AtLeast(1),
        mode=CLUSTER_WIDE,
    ),
    _k(
        "producer.id.expiration.check.interval.ms",
        "int",
        600000,
        "How often the broker forgets producer ids idle past producer.id.expiration.ms (an internal key in "
        "Kafka).",
        AtLeast(1),
    ),
    _k(
        "transaction.partition.verification.enable",
        "boolean",
        True,
        "Refuse (INVALID_TXN_STATE) a transactional produce to a partition not added to the producer's ongoing "
        "transaction, when this broker coordinates its transactional id (KIP-890); false appends unverified.",
        mode=CLUSTER_WIDE,
    ),
    _k(
        "transaction.state.log.load.buffer.size",
        "int",
        5242880,
        "Bytes read at a time when a __transaction_state partition is loaded (a soft limit: a larger batch "
        "is read whole).",
        AtLeast(1),
    ),
    _k(
        "transactional.id.expiration.ms",
        "int",
        604800000,
        "Idle time after which a transactional id expires.",
        AtLeast(1),
    ),
    _k(
        "transaction.max.timeout.ms",
        "int",
        900000,
        "Largest transaction timeout a producer may ask for.",
        AtLeast(1),
    ),
    _k("transaction.state.log.num.partitions", "int", 50, "Partitions of __transaction_state.", AtLeast(1)),
    _k(
        "transaction.state.log.replication.factor",
        "short",
        3,
        "Replication factor of __transaction_state in a cluster (created on the first transactional "
        "FindCoordinator / InitProducerId; refused, COORDINATOR_NOT_AVAILABLE, while fewer brokers are "
        "alive). A single node (no zookeeper.connect) creates it with 1 replica whatever this says.",
        AtLeast(1),
        differs="single node: __transaction_state always has 1 replica (Kafka would refuse to create it "
        "until transaction.state.log.replication.factor brokers are alive).",
    ),
    _k(
        "transaction.state.log.segment.bytes",
        "int",
        104857600,
        "segment.bytes of __transaction_state.",
        AtLeast(1),
    ),
    _k(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "int",
        10000,
        "How often the transaction coordinator aborts transactions older than their timeout.",
        AtLeast(1),
    ),
    _k(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        "int",
        3600000,
        "How often the transaction coordinator removes transactional ids idle past their expiration.",
        AtLeast(1),
    ),
    _k(
        "transaction.state.log.min.isr",
        "int",
        1,
        "min.insync.replicas of __transaction_state.",
        AtLeast(1),
        kafka_default=2,
    ),
]

# Keys validated but not read (yet), and why (marked applies=False; tests/config/test_keys_read.py).
NOT_READ: dict[str, str] = {}
