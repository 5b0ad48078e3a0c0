"""Fixtures for the console tests: a real kaflite broker with known data (`console_cluster`: topics with
records of fixed timestamps, a classic group `billing` and a KIP-848 group `audit`, both live), a schema
registry over it with known schemas (`console_registry`), and the console served over real HTTP
(`console`, read-only, showing the registry; `console_rw`, with --allow-writes and no registry)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("jinja2")

sys.path.insert(0, str(Path(__file__).parent))

from console_harness import (  # noqa: E402
    KNOWN_IDS,
    ConsoleCluster,
    ConsoleServer,
    make_cluster,
    register_known_schemas,
)

from registry_helpers import RunningRegistry  # noqa: E402


@pytest.fixture(scope="module")
def console_cluster(kaflite_broker: Any) -> Iterator[ConsoleCluster]:
    with make_cluster(kaflite_broker.bootstrap) as cl:
        yield cl


@pytest.fixture(scope="module")
def console_registry(console_cluster: ConsoleCluster) -> Iterator[RunningRegistry]:
    """A schema registry on a topic of this module's, holding console_harness's known schemas (with the
    ids KNOWN_IDS says: the topic is new, so ids start at 1)."""
    registry = RunningRegistry(console_cluster.bootstrap, f"_schemas_{console_cluster.orders}")
    try:
        assert register_known_schemas(registry.url) == KNOWN_IDS
        yield registry
    finally:
        registry.stop()


@pytest.fixture(scope="module")
def console(console_cluster: ConsoleCluster, console_registry: RunningRegistry) -> Iterator[ConsoleServer]:
    """Read-only console over the module's cluster and registry, sampling every 0.5 s."""
    srv = ConsoleServer(console_cluster.bootstrap, sample_interval=0.5,
                        schema_registry=console_registry.url).start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def console_rw(console_cluster: ConsoleCluster) -> Iterator[ConsoleServer]:
    """A console started with --allow-writes (no sampler)."""
    srv = ConsoleServer(console_cluster.bootstrap, allow_writes=True, sample_interval=0).start()
    try:
        yield srv
    finally:
        srv.stop()
