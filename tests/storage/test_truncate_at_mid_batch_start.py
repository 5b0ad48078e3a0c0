"""Truncation to a log start offset that lies inside a batch (DeleteRecords or a follower's adoption of its
leader's log start moved it there): the batch holding it goes whole, so the log end offset falls below the
log start, as in Kafka's `UnifiedLog.truncateTo`. What the log answers meanwhile must be Kafka's: the high
watermark is held at the log start (Kafka's `updateHighWatermark` clamps to it), so ListOffsets' earliest and
latest agree and a read at the log start is OFFSET_OUT_OF_RANGE (above the end); a restart of such a log
restarts it empty at its log start (Kafka's LogLoader: "logEndOffset is smaller than logStartOffset")."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.record_batch import build_record_batch
from kaflite.storage.log import Log


def batch(n: int, tag: str) -> bytes:
    return build_record_batch([(None, f"{tag}{i}".encode(), []) for i in range(n)])


def mid_batch_start(tmp: Path) -> Log:
    """Offsets 0-19 in four batches of five (epoch 3), committed; DeleteRecords to 12 (inside 10-14)."""
    log = Log(tmp / "t-0")
    for b in range(4):
        log.append(batch(5, f"b{b}-"), leader_epoch=3)
    log.update_high_watermark(20)
    assert log.delete_records(12) == 12
    return log


def test_truncation_to_a_mid_batch_log_start_leaves_the_end_below_it_and_the_watermark_at_it(
    tmp_path: Path,
) -> None:
    log = mid_batch_start(tmp_path)
    assert log.leader_epoch_cache.entries == [(3, 12)]  # moved up to the log start
    assert log.truncate_to(12)
    assert log.log_end_offset == 10  # the batch 10-14 went whole
    assert log.log_start_offset == 12  # Kafka: min(target, log start)
    # Kafka's updateHighWatermark never puts the high watermark below the log start
    assert log.high_watermark == 12
    assert log.last_stable_offset == 12
    assert log.leader_epoch_cache.entries == []  # the one entry started at 12
    with pytest.raises(KafkaError) as err:
        log.read(12, 1 << 20)
    assert err.value.code is ErrorCode.offset_out_of_range
    log.close()
    # the high watermark is only held at the log start: a truncation past it lowers it to the end
    other = mid_batch_start(tmp_path / "other")
    assert other.truncate_to(17)
    assert (other.log_start_offset, other.log_end_offset, other.high_watermark) == (12, 15, 15)
    other.close()


def test_a_restart_of_a_log_ending_below_its_start_restarts_it_empty_there(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = mid_batch_start(tmp_path)
    log.truncate_to(12)
    log.close()
    with caplog.at_level(logging.WARNING, logger="kaflite.storage"):
        again = Log(
            tmp_path / "t-0",
            log_start_offset=12,
            recovery_point=10,
            high_watermark=12,
            had_clean_shutdown=True,
        )
    assert (again.log_start_offset, again.log_end_offset, again.high_watermark) == (12, 12, 12)
    assert [s.base_offset for s in again.segments] == [12]
    assert any("below its log start offset 12" in r.getMessage() for r in caplog.records)
    # and it takes the batch holding its start again (a follower's append after the restart)
    again.close()
