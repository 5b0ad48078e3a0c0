"""Fixtures for the console tests: a real kaflite broker with known data (`console_cluster`: topics with
records of fixed timestamps, a classic group `billing` and a KIP-848 group `audit`, both live) and the
console served over real HTTP (`console`, read-only; `console_rw`, with --allow-writes)."""

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

from console_harness import ConsoleCluster, ConsoleServer, make_cluster  # noqa: E402


@pytest.fixture(scope="module")
def console_cluster(kaflite_broker: Any) -> Iterator[ConsoleCluster]:
    with make_cluster(kaflite_broker.bootstrap) as cl:
        yield cl


@pytest.fixture(scope="module")
def console(console_cluster: ConsoleCluster) -> Iterator[ConsoleServer]:
    """Read-only console over the module's cluster, sampling every 0.5 s."""
    srv = ConsoleServer(console_cluster.bootstrap, sample_interval=0.5).start()
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
