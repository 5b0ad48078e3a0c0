"""The zookeeper.* keys: validated with clear messages, Kafka's defaults, and no ZooKeeper without them."""

from __future__ import annotations

import pytest

from kaflite.cluster.zkconfig import ZooKeeperSettings, zookeeper_settings
from kaflite.server.config import BrokerConfig, ConfigError


def test_without_zookeeper_connect_there_is_no_zookeeper() -> None:
    assert zookeeper_settings(BrokerConfig.load()) is None
    assert zookeeper_settings(BrokerConfig.load(dev=True)) is None


def test_settings_with_kafkas_defaults() -> None:
    cfg = BrokerConfig.load(overrides={"zookeeper.connect": "127.0.0.1:2181,zk2/kafka/prod"})
    assert zookeeper_settings(cfg) == ZooKeeperSettings(
        "127.0.0.1:2181,zk2/kafka/prod", (("127.0.0.1", 2181), ("zk2", 2181)), "/kafka/prod", 18000, 18000
    )
    dev = BrokerConfig.load(overrides={"zookeeper.connect": "zk:2181"}, dev=True)
    s = zookeeper_settings(dev)
    assert s is not None and (s.session_timeout_ms, s.connection_timeout_ms) == (6000, 6000)
    explicit = cfg.with_overrides(
        {"zookeeper.connection.timeout.ms": "2500", "zookeeper.session.timeout.ms": "9000"}
    )
    s = zookeeper_settings(explicit)
    assert s is not None and (s.session_timeout_ms, s.connection_timeout_ms) == (9000, 2500)


@pytest.mark.parametrize("bad", ["zk:notaport", "zk:2181/kafka/", "zk:2181//x", "zk:2181/a/../b", "zk:0"])
def test_bad_connect_string_is_one_clear_error(bad: str) -> None:
    with pytest.raises(ConfigError) as e:
        BrokerConfig.load(overrides={"zookeeper.connect": bad})
    assert e.value.key == "zookeeper.connect"
    assert "host:port[,host:port...][/chroot]" in str(e.value) and bad in str(e.value)


def test_timeouts_must_be_positive() -> None:
    for key in ("zookeeper.session.timeout.ms", "zookeeper.connection.timeout.ms"):
        with pytest.raises(ConfigError, match=key):
            BrokerConfig.load(overrides={key: "0"})
