"""Replication keys (Kafka's ReplicationConfigs).

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
        "inter.broker.listener.name",
        "string",
        None,
        "Listener used between brokers (this broker's address in the cluster); unset means the first "
        "PLAINTEXT client listener.",
    ),
    _k("default.replication.factor", "int", 1, "Replication factor of auto-created topics.", AtLeast(1)),
    _k("min.insync.replicas", "int", 1, "Replicas that must acknowledge an acks=all produce.", AtLeast(1),
       mode=CLUSTER_WIDE),
    _k(
        "unclean.leader.election.enable",
        "boolean",
        False,
        "Allow an out-of-sync replica to become leader: in a cluster the controller elects one when no "
        "in-sync replica is alive (a topic's override wins); a single node has no other replica.",
        mode=CLUSTER_WIDE,
    ),
    _k("num.replica.fetchers", "int", 1, "Replica fetcher tasks per source broker (in a cluster).",
       AtLeast(1), mode=CLUSTER_WIDE),
    _k("replica.lag.time.max.ms", "long", 30000, "A follower not caught up for this long leaves the ISR.",
       AtLeast(0)),
    _k("replica.fetch.max.bytes", "int", 1048576, "Bytes a follower fetches per partition and request.",
       AtLeast(0)),
    _k("replica.fetch.response.max.bytes", "int", 10485760, "Bytes a follower fetches per request.", AtLeast(0)),
    _k("replica.fetch.wait.max.ms", "int", 500, "How long a follower's fetch waits for data at the leader.",
       AtLeast(0)),
    _k("replica.fetch.min.bytes", "int", 1, "Bytes a follower's fetch waits for at the leader.", AtLeast(1)),
    _k("replica.fetch.backoff.ms", "int", 1000, "A follower's pause after a failed fetch.", AtLeast(0)),
    _k("replica.socket.timeout.ms", "int", 30000, "A follower's network timeout towards its leader.",
       AtLeast(1)),
    _k(
        "auto.leader.rebalance.enable",
        "boolean",
        True,
        "Move leadership back to preferred replicas (cluster mode: the controller checks every "
        "leader.imbalance.check.interval.seconds).",
    ),
    _k(
        "leader.imbalance.check.interval.seconds",
        "long",
        300,
        "How often the controller checks for leaders away from their preferred replica (cluster mode, with "
        "auto.leader.rebalance.enable).",
        AtLeast(1),
    ),
    _k(
        "leader.imbalance.per.broker.percentage",
        "int",
        10,
        "Share of the partitions a broker prefers but does not lead above which the check moves them back "
        "(cluster mode; as in Kafka, any int: 0 or less moves every one back, 100 or more none).",
    ),
    _k(
        "controlled.shutdown.enable",
        "boolean",
        True,
        "Hand over leadership before shutdown (cluster mode: the controller moves it to an in-sync replica).",
    ),
]

# Keys validated but not read (yet), and why (marked applies=False; tests/config/test_keys_read.py).
NOT_READ: dict[str, str] = {}
