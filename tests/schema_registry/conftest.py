"""Fixtures of tests/schema_registry: the module's registry (registry_helpers.RunningRegistry) over the
module's kaflite broker, on a topic of its own."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from registry_helpers import RunningRegistry


@pytest.fixture(scope="module")
def topic_name() -> str:
    return f"_schemas_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def registry(kaflite_broker: Any, topic_name: str) -> Iterator[RunningRegistry]:
    running = RunningRegistry(kaflite_broker.bootstrap, topic_name)
    yield running
    running.stop()

