"""The coordinator reads Kafka's configuration keys; bad values are refused naming the key."""

from __future__ import annotations

import pytest

from kaflite.coordinator import CoordinatorConfig


def test_kafka_keys_and_defaults() -> None:
    cfg = CoordinatorConfig.from_properties({"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": 3,
                                             "unrelated.key": "x"})
    assert cfg.group_initial_rebalance_delay_ms == 0 and cfg.offsets_topic_num_partitions == 3
    assert cfg.group_min_session_timeout_ms == 6000 and cfg.group_max_session_timeout_ms == 1_800_000
    assert cfg.offsets_retention_minutes == 10080 and cfg.offset_metadata_max_bytes == 4096


def test_broker_config_object_is_accepted() -> None:
    from kaflite.server.config import BrokerConfig

    cfg = CoordinatorConfig.from_properties(BrokerConfig.load(None, overrides={"group.max.size": "7"}, dev=True))
    assert cfg.group_max_size == 7 and cfg.group_initial_rebalance_delay_ms == 100  # the dev profile


@pytest.mark.parametrize(("key", "value", "message"), [
    ("group.max.size", "many", "group.max.size must be an integer"),
    ("offsets.topic.num.partitions", "0", "offsets.topic.num.partitions must be >= 1"),
    ("group.min.session.timeout.ms", "9999999", "group.min.session.timeout.ms must be <="),
])
def test_bad_values_name_the_key(key: str, value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CoordinatorConfig.from_properties({key: value})
