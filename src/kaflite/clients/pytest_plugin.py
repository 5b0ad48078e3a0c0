"""pytest plugin (registered through the `pytest11` entry point): a kaflite broker fixture.

    def test_my_pipeline(kaflite_broker):
        producer = confluent_kafka.Producer({"bootstrap.servers": kaflite_broker.bootstrap})

`kaflite_broker` is an in-process `EmbeddedBroker` on an ephemeral loopback port with a temporary data
directory, started once per test module and stopped afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def kaflite_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from kaflite.server.embedded import EmbeddedBroker

    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("kaflite-data")) as broker:
        yield broker
