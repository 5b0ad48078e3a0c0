"""Shared by tests/schema_registry: a RegistryService on its own event loop thread (as `kaflite schema-registry`
runs it), and the Avro schemas the client scenarios register. (A module of its own at the top of tests/,
since `schema_registry` is also python-schema-registry-client's package name.)"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient

from kaflite.schema_registry.service import RegistryService

ORDER_V1 = {"type": "record", "name": "Order", "namespace": "shop",
            "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}]}
ORDER_V2 = {**ORDER_V1, "fields": ORDER_V1["fields"] + [{"name": "qty", "type": "int", "default": 1}]}
ORDER_BAD = {**ORDER_V1, "fields": ORDER_V1["fields"] + [{"name": "price", "type": "double"}]}


class RunningRegistry:
    """A RegistryService on its own event loop thread, as `kaflite schema-registry` runs it."""

    def __init__(self, bootstrap: str, topic: str, **options: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.service = RegistryService(bootstrap, topic=topic, timeout=10.0, **options)
        port = asyncio.run_coroutine_threadsafe(self.service.start("127.0.0.1", 0), self.loop).result(30)
        self.url = f"http://127.0.0.1:{port}"

    def client(self) -> SchemaRegistryClient:
        return SchemaRegistryClient({"url": self.url})

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.service.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
