"""Shared by tests/schema_registry: a RegistryService on its own event loop thread (as `kaflite schema-registry`
runs it), the Avro schemas the client scenarios register, and the verdict-table helpers of the
compatibility tests. (A module of its own at the top of tests/, since `schema_registry` is also
python-schema-registry-client's package name.)"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from kaflite.schema_registry.service import RegistryService

ORDER_V1 = {"type": "record", "name": "Order", "namespace": "shop",
            "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}]}
ORDER_V2 = {**ORDER_V1, "fields": ORDER_V1["fields"] + [{"name": "qty", "type": "int", "default": 1}]}
ORDER_BAD = {**ORDER_V1, "fields": ORDER_V1["fields"] + [{"name": "price", "type": "double"}]}


class RunningRegistry:
    """A RegistryService on its own event loop thread, as `kaflite schema-registry` runs it."""

    def __init__(self, bootstrap: str, topic: str, timeout: float = 10.0, **options: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.service = RegistryService(bootstrap, topic=topic, timeout=timeout, **options)
        port = asyncio.run_coroutine_threadsafe(self.service.start("127.0.0.1", 0), self.loop).result(30)
        self.url = f"http://127.0.0.1:{port}"

    def client(self) -> SchemaRegistryClient:
        return SchemaRegistryClient({"url": self.url})

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.service.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


# The compatibility verdict tables (test_avro_compat, test_json_compat, test_protobuf_compat): each case is
# (name, old, new, BACKWARD verdict, FORWARD verdict) for one schema format.
ALL_LEVELS = ("BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE", "NONE")
Parse = Callable[[Any], Any]
Check = Callable[[str, Any, Sequence[Any]], list[str]]


def expected_verdict(level: str, backward: bool, forward: bool) -> bool:
    """Whether a change is compatible at `level` against one earlier version (Confluent: FULL is both
    directions, NONE accepts everything; a transitive level equals its plain one for a single version)."""
    return {"BACKWARD": backward, "FORWARD": forward, "FULL": backward and forward,
            "NONE": True}[level.removesuffix("_TRANSITIVE")]


def case_params(cases: Sequence[tuple[str, Any, Any, bool, bool]]) -> list[Any]:
    """The table's cases as pytest params (old, new, backward, forward), each named by its case name."""
    return [pytest.param(old, new, backward, forward, id=name) for name, old, new, backward, forward in cases]


def assert_verdict(check: Check, parse: Parse, level: str, old: Any, new: Any, backward: bool,
                   forward: bool) -> None:
    """Registering `new` after `old` at `level` is compatible exactly when the table says so."""
    problems = check(level, parse(new), [parse(old)])
    assert (problems == []) is expected_verdict(level, backward, forward), problems
