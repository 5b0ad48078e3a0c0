"""One embedded broker for the quota tests, with a short quota window (2 samples of 1 s) so a throttle is
a fraction of a second and the rate settles within a few seconds."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "server"))  # kwire

from kaflite.server.embedded import EmbeddedBroker  # noqa: E402


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    overrides = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("kaflite"), overrides=overrides) as b:
        yield b
