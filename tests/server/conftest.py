"""Fixtures for the broker tests: one embedded broker per module, a raw wire client."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from kaflite.server.embedded import EmbeddedBroker  # noqa: E402


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("kaflite")) as b:
        yield b
