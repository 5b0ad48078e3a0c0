"""Replication keys (Kafka's ReplicationConfigs).

This subsystem owns these keys; `kaflite.server.config.broker_config` assembles every subsystem's table
into `BROKER_CONFIGS`, as Kafka assembles KafkaConfig from the ConfigDefs of its subsystems.
"""

from __future__ import annotations

from kaflite.server.config.definitions import (
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
    _k("min.insync.replicas", "int", 1, "Replicas that must acknowledge an acks=all produce.", AtLeast(1)),
    _k(
        "unclean.leader.election.enable",
        "boolean",
        False,
        "Allow an out-of-sync replica to become leader.",
        applies=False,
    ),
    _k("num.replica.fetchers", "int", 1, "Replica fetcher threads.", AtLeast(1), applies=False),
    _k("replica.lag.time.max.ms", "long", 30000, "A follower this far behind leaves the ISR.", AtLeast(0)),
    _k(
        "auto.leader.rebalance.enable",
        "boolean",
        True,
        "Move leadership back to preferred replicas (cluster mode: the controller checks every 300 s).",
    ),
    _k(
        "controlled.shutdown.enable",
        "boolean",
        True,
        "Hand over leadership before shutdown (cluster mode: the controller moves it to an in-sync replica).",
    ),
]

# Keys validated but not read (yet), and why (marked applies=False; tests/config/test_keys_read.py).
NOT_READ: dict[str, str] = {
    "replica.lag.time.max.ms": "one broker: the ISR is the leader alone",
}
