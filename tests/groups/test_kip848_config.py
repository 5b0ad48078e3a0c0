"""The KIP-848 group keys come from the broker configuration: the coordinator serving a librdkafka
`group.protocol=consumer` member runs with the configured values; bad values are refused naming the key."""

from __future__ import annotations

import time

import confluent_kafka as ck
import pytest

from kaflite.server.config import BrokerConfig, ConfigError
from kaflite.server.coordinators.groups import GROUP_SERVICE
from kaflite.server.embedded import EmbeddedBroker


@pytest.mark.parametrize("key", ["group.consumer.session.timeout.ms", "group.consumer.heartbeat.interval.ms",
                                 "group.consumer.max.size"])
def test_bad_values_name_the_key(key: str) -> None:
    with pytest.raises(ConfigError) as err:
        BrokerConfig.load(None, overrides={key: "0"})
    assert key in str(err.value) and ">= 1" in str(err.value)


def test_defaults_are_kafkas() -> None:
    cfg = BrokerConfig.load(None)
    assert cfg["group.consumer.session.timeout.ms"] == 45000
    assert cfg["group.consumer.heartbeat.interval.ms"] == 5000
    assert cfg["group.consumer.max.size"] == 2**31 - 1


def test_configured_heartbeat_interval_reaches_the_member() -> None:
    overrides = {"group.consumer.heartbeat.interval.ms": "1234", "group.consumer.session.timeout.ms": "9000"}
    with EmbeddedBroker(overrides=overrides) as b:
        p = ck.Producer({"bootstrap.servers": b.bootstrap})
        p.produce("hb", b"x")
        assert p.flush(10) == 0
        c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g848", "group.protocol": "consumer",
                         "auto.offset.reset": "earliest"})
        c.subscribe(["hb"])
        deadline = time.monotonic() + 20
        got = None
        while got is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got = m.value()
        assert got == b"x"

        def member_settings() -> tuple[int, int]:
            service = b.server.broker.services.get(GROUP_SERVICE)
            manager = service.shard("g848").consumer
            assert "g848" in manager.groups  # the member is in a KIP-848 group
            return manager.heartbeat_interval_ms, manager.session_timeout_ms

        try:
            assert b.call(member_settings) == (1234, 9000)
        finally:
            c.close()
