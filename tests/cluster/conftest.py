"""Fixtures for the cluster tests: a real standalone ZooKeeper (Debian's jars, started from Java).

`zookeeper` is one server for the whole session (a JVM start costs about a second on this machine);
each test that uses `zk_connect` gets its own chroot under it, so tests never see each other's znodes.
Tests that stop or kill ZooKeeper itself use `zookeeper_private`. Every fixture is skipped, with the
reason, only where Java or ZooKeeper's jars are missing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kaflite.cluster.zkserver import ZooKeeperServer, missing_reason


def _require_zookeeper() -> None:
    reason = missing_reason()
    if reason is not None:
        pytest.skip(f"ZooKeeper cannot run here: {reason}")


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    _require_zookeeper()
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zookeeper_private(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """A ZooKeeper of this test alone (for tests that stop, kill or restart it)."""
    _require_zookeeper()
    server = ZooKeeperServer(tmp_path / "zookeeper")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zk_connect(zookeeper: ZooKeeperServer) -> str:
    """`zookeeper.connect` for this test: the shared server with a chroot of its own."""
    return f"{zookeeper.connect}/kaflite-test-{uuid.uuid4().hex[:12]}"
