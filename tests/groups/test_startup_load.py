"""The group coordinator replays `__consumer_offsets` when the broker starts (as Kafka does), not on the
first group request; a broker that never had a group does not create the topic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest

from kaflite.server.coordinators.groups import GROUP_SERVICE
from kaflite.server.embedded import EmbeddedBroker


def _groups_loaded(b: EmbeddedBroker) -> Any:
    def probe() -> Any:
        broker = b.server.broker
        service = broker.services.get(GROUP_SERVICE)
        return None if service is None else sorted(service.groups())

    return b.call(probe)


def test_groups_loaded_at_start_up(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with EmbeddedBroker(data_dir=data) as b:
        assert _groups_loaded(b) is None  # no __consumer_offsets yet: nothing loaded, nothing created
        assert b.call(lambda: "__consumer_offsets" in b.server.broker.metadata.topics) is False
        p = ck.Producer({"bootstrap.servers": b.bootstrap})
        p.produce("orders", b"x")
        assert p.flush(10) == 0
        c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "test"})
        c.commit(offsets=[ck.TopicPartition("orders", 0, 1)], asynchronous=False)
        c.close()
    with EmbeddedBroker(data_dir=data) as b:
        # no client has said anything yet: the coordinator is already loaded from disk
        assert _groups_loaded(b) == ["test"]
        c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "test"})
        (tp,) = c.committed([ck.TopicPartition("orders", 0)], timeout=10)
        c.close()
        assert tp.offset == 1


def test_offsets_topic_compression_codec(tmp_path: Path) -> None:
    """offsets.topic.compression.codec=3: commits are stored as lz4 batches and replayed after a restart."""
    from kaflite.protocol.record_batch import iter_batches
    from kaflite.server.config import BrokerConfig, ConfigError

    with pytest.raises(ConfigError, match="offsets.topic.compression.codec"):
        BrokerConfig.load(None, overrides={"offsets.topic.compression.codec": "5"})
    data = tmp_path / "data"
    overrides = {"offsets.topic.compression.codec": "3"}
    with EmbeddedBroker(data_dir=data, overrides=overrides) as b:
        p = ck.Producer({"bootstrap.servers": b.bootstrap})
        p.produce("orders", b"x")
        assert p.flush(10) == 0
        c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "test"})
        c.commit(offsets=[ck.TopicPartition("orders", 0, 5)], asynchronous=False)
        c.close()

        def codecs() -> set[int]:
            lg = b.server.broker.log_manager.get("__consumer_offsets", 48)  # group "test" lives in 48
            info = lg.read(lg.log_start_offset, 1 << 20)
            return {v.compression for v in iter_batches(b"".join(bytes(x) for x in info.records))}

        assert b.call(codecs) == {3}
    with EmbeddedBroker(data_dir=data, overrides=overrides) as b:
        c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "test"})
        (tp,) = c.committed([ck.TopicPartition("orders", 0)], timeout=10)
        c.close()
        assert tp.offset == 5
