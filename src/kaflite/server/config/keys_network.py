"""Listener and socket keys (Kafka's SocketServerConfigs).

This subsystem owns these keys; `kaflite.server.config.broker_config` assembles every subsystem's table
into `BROKER_CONFIGS`, as Kafka assembles KafkaConfig from the ConfigDefs of its subsystems.
"""

from __future__ import annotations

import ipaddress

from kaflite.server.config.definitions import (
    CLUSTER_WIDE,
    INT_MAX,
    PER_BROKER,
    AtLeast,
    ConfigKey,
    Custom,
    _k,
    _listeners_validator,
)

__all__ = ["KEYS", "NOT_READ", "parse_per_ip_overrides"]


def parse_per_ip_overrides(text: str) -> dict[str, int] | None:
    """`max.connections.per.ip.overrides` ("ip:count,..."; the last colon splits, so IPv6 addresses work) as
    {normalised address: count}, or None when an entry is not an IP address and a count >= 0."""
    out: dict[str, int] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        host, _, count = entry.rpartition(":")
        try:
            address = ipaddress.ip_address(host.strip().strip("[]"))
            limit = int(count.strip())
        except ValueError:
            return None
        if limit < 0:
            return None
        mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
        out[(mapped or address).compressed] = limit  # spelt as connection.py spells the peer
    return out

KEYS: list[ConfigKey] = [
    _k(
        "listeners",
        "string",
        "PLAINTEXT://127.0.0.1:9092",
        "Comma-separated NAME://host:port addresses to listen on; port 0 picks a free port; an empty host "
        "means every interface.",
        _listeners_validator("listeners"),
        kafka_default="PLAINTEXT://:9092",
        differs="Kafka listens on every interface by default; kaflite on loopback only.",
        mode=PER_BROKER,
    ),
    _k(
        "advertised.listeners",
        "string",
        None,
        "Addresses given to clients in Metadata; unset means the addresses actually bound by listeners.",
        _listeners_validator("advertised.listeners"),
        mode=PER_BROKER,
    ),
    _k(
        "socket.request.max.bytes",
        "int",
        104857600,
        "Largest request frame accepted; a longer length prefix closes the connection.",
        AtLeast(1),
    ),
    _k(
        "socket.send.buffer.bytes",
        "int",
        102400,
        "SO_SNDBUF of client sockets; -1 keeps the OS default.",
        AtLeast(-1),
    ),
    _k(
        "socket.receive.buffer.bytes",
        "int",
        102400,
        "SO_RCVBUF of client sockets; -1 keeps the OS default.",
        AtLeast(-1),
    ),
    _k("socket.listen.backlog.size", "int", 50, "Listen backlog of the server socket.", AtLeast(1)),
    _k(
        "queued.max.requests",
        "int",
        500,
        "Requests read ahead per connection before reading pauses (backpressure).",
        AtLeast(1),
    ),
    _k(
        "queued.max.request.bytes",
        "long",
        -1,
        "Request bytes read ahead over all connections before reading pauses; -1 (Kafka: unbounded) "
        "means 100 MiB in kaflite.",
        AtLeast(-1),
        differs="Kafka's -1 is unbounded; kaflite bounds it at 100 MiB (a Python broker cannot afford no bound).",
    ),
    _k("connections.max.idle.ms", "long", 600000, "Close connections idle for this long.", AtLeast(0)),
    _k("max.connections", "int", INT_MAX, "Maximum concurrent client connections.", AtLeast(0),
       mode=CLUSTER_WIDE),
    _k("max.connections.per.ip", "int", INT_MAX,
       "Maximum concurrent client connections from one IP address; one more is closed at once.", AtLeast(0),
       mode=CLUSTER_WIDE),
    _k("max.connections.per.ip.overrides", "string", "",
       "Comma-separated ip:count pairs, each address's limit instead of max.connections.per.ip.",
       Custom(lambda v: parse_per_ip_overrides(v) is not None, "ip:count,... (IP addresses, counts >= 0)"),
       differs="Kafka also takes host names (resolved at start-up); kaflite takes IP addresses only.",
       mode=CLUSTER_WIDE),
    _k("num.network.threads", "int", 3, "Network threads.", AtLeast(1), applies=False, mode=CLUSTER_WIDE),
]

# Keys validated but not read (yet), and why (marked applies=False; tests/config/test_keys_read.py).
NOT_READ: dict[str, str] = {}
