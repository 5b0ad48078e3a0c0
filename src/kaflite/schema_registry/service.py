"""A running registry: the state, the `_schemas` store replaying into it, the REST API and its HTTP server.

    service = RegistryService("127.0.0.1:9092")
    port = await service.start("127.0.0.1", 8081)   # replays _schemas (in a thread), then listens
    ...
    await service.stop()
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any
from urllib.parse import urlsplit

from kaflite.schema_registry.api import Registry
from kaflite.schema_registry.election import WriterElection, forwarder
from kaflite.schema_registry.http import RegistryServer
from kaflite.schema_registry.model import State
from kaflite.schema_registry.store import TOPIC, KafkaStore


def parse_listener(listener: str) -> tuple[str, int]:
    """`http://host:port` (Confluent's `listeners` spelling) -> (host, port); https is not served."""
    url = urlsplit(listener if "://" in listener else f"http://{listener}")
    if url.scheme != "http" or url.hostname is None or url.port is None:
        raise ValueError(f"listener {listener!r}: expected http://host:port")
    return url.hostname, url.port


class RegistryService:
    """`elect_writer`: run as one of several instances over the topic (election.py): a consumer group
    elects the writer, and the others forward writes to it at `advertised` (default http://host:port as
    listened, 127.0.0.1 for a wildcard host)."""

    def __init__(self, bootstrap: str, topic: str = TOPIC, client_config: dict[str, Any] | None = None,
                 timeout: float = 10.0, elect_writer: bool = False, advertised: str | None = None) -> None:
        self.state = State()
        lock = threading.RLock()
        self.store = KafkaStore(bootstrap, self.state, lock, topic, client_config, timeout)
        self.registry = Registry(self.state, self.store, lock)
        self.server = RegistryServer(self.registry)
        self.port = 0
        self.timeout = timeout
        self.elect_writer = elect_writer
        self.advertised = advertised
        self.election: WriterElection | None = None

    async def start(self, host: str, port: int) -> int:
        await asyncio.to_thread(self.store.start)  # replay blocks on the broker: never on the loop
        try:
            self.port = await self.server.start(host, port)
            if self.elect_writer:
                shown = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
                url = self.advertised or f"http://{shown}:{self.port}"
                self.election = WriterElection(self.store.config, self.store.topic, url, self.timeout)
                await asyncio.to_thread(self.election.start)
                self.registry.forward = forwarder(self.election, self.store.catch_up, self.timeout)
        except BaseException:
            await self.server.stop()
            await asyncio.to_thread(self.store.stop)
            raise
        return self.port

    async def stop(self) -> None:
        if self.election is not None:
            await asyncio.to_thread(self.election.stop)
        await self.server.stop()
        await asyncio.to_thread(self.store.stop)
