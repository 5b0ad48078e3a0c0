"""The ZooKeeper settings of a broker (Kafka's zookeeper.* keys), resolved from its typed configuration.

Rules:
- without `zookeeper.connect` there is no ZooKeeper: the broker is the single-node kaflite it always was
  (`zookeeper_settings` returns None);
- `zookeeper.connect` is "host:port[,host:port...][/chroot]" (ZooKeeper's syntax, port 2181 when left
  out); the chroot is created at first connection, as Kafka does;
- `zookeeper.session.timeout.ms` defaults to Kafka's 18000 (the dev profile: 6000, so a dead broker is
  noticed in seconds); `zookeeper.connection.timeout.ms` unset means the session timeout, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kaflite.cluster.zkdata import parse_connect

__all__ = ["CONNECT_SYNTAX", "ZooKeeperSettings", "valid_connect", "zookeeper_settings"]

CONNECT_SYNTAX = "host:port[,host:port...][/chroot] (a chroot such as /kafka: no trailing '/', no empty, '.' or '..' segment)"


@dataclass(frozen=True)
class ZooKeeperSettings:
    connect: str
    hosts: tuple[tuple[str, int], ...]
    chroot: str | None
    session_timeout_ms: int
    connection_timeout_ms: int


def valid_connect(value: str) -> bool:
    try:
        parse_connect(value)
    except ValueError:
        return False
    return True


def zookeeper_settings(config: Mapping[str, Any]) -> ZooKeeperSettings | None:
    """The broker's ZooKeeper settings, or None when `zookeeper.connect` is unset (single node)."""
    connect = config.get("zookeeper.connect")
    if not connect:
        return None
    hosts, chroot = parse_connect(str(connect))
    session = int(config.get("zookeeper.session.timeout.ms") or 18000)
    connection = config.get("zookeeper.connection.timeout.ms")
    return ZooKeeperSettings(
        connect=str(connect),
        hosts=tuple(hosts),
        chroot=chroot,
        session_timeout_ms=session,
        connection_timeout_ms=int(connection) if connection is not None else session,
    )
