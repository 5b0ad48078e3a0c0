"""A real kaflite broker on 127.0.0.1 for the group tests (dev profile: no initial rebalance delay),
allowing the short session timeouts that keep these tests fast."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from groups.group_members import produce

GROUP_OVERRIDES = {"group.min.session.timeout.ms": "1000"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from kaflite.server.embedded import EmbeddedBroker

    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("groups"), overrides=GROUP_OVERRIDES, dev=True) as b:
        yield b


@pytest.fixture
def topic_factory(broker: object):  # noqa: ANN201
    import confluent_kafka.admin as cka

    admin = cka.AdminClient({"bootstrap.servers": broker.bootstrap})  # type: ignore[attr-defined]

    def make(partitions: int, records: int = 0) -> str:
        name = f"t-{uuid.uuid4().hex[:8]}"
        admin.create_topics([cka.NewTopic(name, partitions, 1)])[name].result(15)
        if records:
            produce(broker.bootstrap, name, records)  # type: ignore[attr-defined]
        return name

    return make

