"""Security keys (Kafka's listener security protocol map; SASL, SSL and authorizer keys go here).

This subsystem owns these keys; `kaflite.server.config.broker_config` assembles every subsystem's table
into `BROKER_CONFIGS`, as Kafka assembles KafkaConfig from the ConfigDefs of its subsystems.
"""

from __future__ import annotations

from kaflite.server.config.definitions import (
    ConfigKey,
    _k,
)

__all__ = ["KEYS", "NOT_READ"]

KEYS: list[ConfigKey] = [
    _k(
        "listener.security.protocol.map",
        "string",
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "Listener name to security protocol; kaflite serves PLAINTEXT only (controller listeners not "
        "named here are PLAINTEXT while the map is at its default).",
    ),
]

# Keys validated but not read (yet), and why (marked applies=False; tests/config/test_keys_read.py).
NOT_READ: dict[str, str] = {}
