"""ZooKeeper keys (Kafka's ZkConfigs): the cluster mode's connection to ZooKeeper; new zookeeper.* keys go here.

This subsystem owns these keys; `kaflite.server.config.broker_config` assembles every subsystem's table
into `BROKER_CONFIGS`, as Kafka assembles KafkaConfig from the ConfigDefs of its subsystems.
"""

from __future__ import annotations

from kaflite.cluster.zkconfig import CONNECT_SYNTAX, valid_connect
from kaflite.server.config.definitions import (
    AtLeast,
    ConfigKey,
    Custom,
    _k,
)

__all__ = ["KEYS", "NOT_READ"]

KEYS: list[ConfigKey] = [
    _k(
        "zookeeper.connect",
        "string",
        None,
        "ZooKeeper of the cluster: host:port[,host:port...][/chroot] (the chroot is created when "
        "missing). Unset: kaflite is a single node and needs no ZooKeeper.",
        Custom(valid_connect, CONNECT_SYNTAX),
    ),
    _k(
        "zookeeper.connection.timeout.ms",
        "int",
        None,
        "How long to wait for the ZooKeeper connection at start-up; unset means zookeeper.session.timeout.ms.",
        AtLeast(1),
    ),
    _k(
        "zookeeper.session.timeout.ms",
        "int",
        18000,
        "ZooKeeper session timeout: how long after a broker stops answering it counts as dead (its "
        "registration and leadership move). 6000 in the dev profile.",
        AtLeast(1),
    ),
]

# Keys validated but not read (yet), and why (marked applies=False; tests/config/test_keys_read.py).
NOT_READ: dict[str, str] = {}
