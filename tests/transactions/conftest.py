"""A real kaflite broker for the transaction tests (short timed-out-transaction scan)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

TXN_OVERRIDES = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
    "group.min.session.timeout.ms": "1000",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from kaflite.server.embedded import EmbeddedBroker

    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("txn"), overrides=TXN_OVERRIDES, dev=True) as b:
        yield b


@pytest.fixture
def topic_factory(broker: object) -> Callable[[int], str]:
    import confluent_kafka.admin as cka

    admin = cka.AdminClient({"bootstrap.servers": broker.bootstrap})  # type: ignore[attr-defined]

    def make(partitions: int = 1) -> str:
        name = f"t-{uuid.uuid4().hex[:8]}"
        admin.create_topics([cka.NewTopic(name, partitions, 1)])[name].result(15)
        return name

    return make
