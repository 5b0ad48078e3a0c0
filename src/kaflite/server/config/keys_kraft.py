"""KRaft keys (Kafka's KRaftConfigs), accepted so Kafka's KRaft server.properties loads; kaflite has no KRaft controller.

This subsystem owns these keys; `kaflite.server.config.broker_config` assembles every subsystem's table
into `BROKER_CONFIGS`, as Kafka assembles KafkaConfig from the ConfigDefs of its subsystems.
"""

from __future__ import annotations

from kaflite.server.config.definitions import (
    ConfigKey,
    ListOf,
    _k,
)

__all__ = ["KEYS", "NOT_READ"]

KEYS: list[ConfigKey] = [
    _k(
        "controller.listener.names",
        "string",
        None,
        "KRaft controller listener names: kaflite has no KRaft controller, so these listeners are not "
        "bound (and not advertised).",
    ),
    _k(
        "process.roles",
        "list",
        [],
        "KRaft roles.",
        ListOf(("broker", "controller"), allow_empty=True),
        applies=False,
    ),
    _k("controller.quorum.voters", "list", [], "KRaft controller quorum.", applies=False),
    _k("controller.quorum.bootstrap.servers", "list", [], "KRaft controller quorum.", applies=False),
]

# Keys validated but not read (yet), and why (marked applies=False; tests/config/test_keys_read.py).
NOT_READ: dict[str, str] = {}
