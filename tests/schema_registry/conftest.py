"""Shared by the tests of the registry as its clients use it: a RegistryService on its own event loop thread
(as `kaflite schema-registry` runs it) over the module's kaflite broker, on a topic of its own."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from kaflite.schema_registry.service import RegistryService


class RunningRegistry:
    """A RegistryService on its own event loop thread, as `kaflite schema-registry` runs it."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.service = RegistryService(bootstrap, topic=topic, timeout=10.0)
        port = asyncio.run_coroutine_threadsafe(self.service.start("127.0.0.1", 0), self.loop).result(30)
        self.url = f"http://127.0.0.1:{port}"

    def client(self) -> SchemaRegistryClient:
        return SchemaRegistryClient({"url": self.url})

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.service.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def topic_name() -> str:
    return f"_schemas_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def registry(kaflite_broker: Any, topic_name: str) -> Iterator[RunningRegistry]:
    running = RunningRegistry(kaflite_broker.bootstrap, topic_name)
    yield running
    running.stop()

