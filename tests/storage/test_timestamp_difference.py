"""message.timestamp.difference.max.ms (deprecated in Kafka 3.6, honoured until 4.0): a CreateTime further
than this from the broker's clock is INVALID_TIMESTAMP, on each side whose before/after.max.ms key is at
its default (Kafka 3.8's LogConfig.getMessageTimestampBefore/AfterMaxMs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.config import BrokerConfig
from kaflite.server.logconfig import log_config_for
from kaflite.storage import Log, LogConfig
from storage.storage_util import ManualClock, batch


def _refused(log: Log, ts: int) -> bool:
    try:
        log.append(batch(1, ts=ts))
    except KafkaError as e:
        assert e.code == ErrorCode.invalid_timestamp
        return True
    return False


def test_difference_bounds_both_sides(tmp_path: Path, clock: ManualClock) -> None:
    log = Log(tmp_path / "t-0", LogConfig(message_timestamp_difference_max_ms=1000), now_ms=clock)
    assert not _refused(log, clock.ms - 999) and not _refused(log, clock.ms + 999)
    assert _refused(log, clock.ms - 2000) and _refused(log, clock.ms + 2000)


def test_before_and_after_win_over_difference(tmp_path: Path, clock: ManualClock) -> None:
    cfg = LogConfig(message_timestamp_difference_max_ms=1000, message_timestamp_before_max_ms=5000)
    log = Log(tmp_path / "t-0", cfg, now_ms=clock)
    assert not _refused(log, clock.ms - 2000)  # before.max.ms is set: it decides the past
    assert _refused(log, clock.ms + 2000)  # after.max.ms is at its default: difference decides the future


def test_log_append_time_ignores_it(tmp_path: Path, clock: ManualClock) -> None:
    cfg = LogConfig(message_timestamp_difference_max_ms=1000, message_timestamp_type="LogAppendTime")
    log = Log(tmp_path / "t-0", cfg, now_ms=clock)
    assert not _refused(log, clock.ms - 10_000)


@pytest.mark.parametrize(("overrides", "topic"), [
    ({"log.message.timestamp.difference.max.ms": 1000}, {}),
    ({}, {"message.timestamp.difference.max.ms": "1000"}),
])
def test_broker_and_topic_keys_reach_the_log(overrides: dict[str, int], topic: dict[str, str]) -> None:
    cfg = log_config_for(BrokerConfig.load(overrides=overrides), topic)
    assert cfg.timestamp_before_max_ms == cfg.timestamp_after_max_ms == 1000
