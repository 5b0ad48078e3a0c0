"""Log.position_of (log.py's rules): where an offset lies as (segment base, byte position of its batch),
what a parked fetch compares (server/delayed_fetch.py), found without reading records and remembered until
a truncation makes it stale."""

from __future__ import annotations

from pathlib import Path

from kaflite.protocol.record_batch import build_record_batch
from kaflite.storage.config import LogConfig
from kaflite.storage.log import Log

BATCH = build_record_batch([(None, b"y" * 50, []) for _ in range(2)])  # two offsets per batch


def test_positions_of_the_end_of_batches_and_of_a_rolled_segment(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig())
    try:
        assert log.position_of(0) == (0, 0)  # empty: the log end, at the active segment's end
        for _ in range(3):
            log.append(BATCH)
        n = len(BATCH)
        assert log.position_of(6) == (0, 3 * n)  # the log end offset: free
        assert log.position_of(99) == (0, 3 * n)  # beyond it: the end too
        assert log.position_of(0) == (0, 0)
        assert log.position_of(2) == (0, n) and log.position_of(3) == (0, n)  # an offset inside a batch
        assert log.position_of(5) == (0, 2 * n)
        log.roll()
        log.append(BATCH)
        assert log.position_of(6) == (6, 0) and log.position_of(8) == (6, n)
        assert log.position_of(4) == (0, 2 * n)
        # remembered, until a truncation: then offset 4 is found again, in the log as it is now
        log.truncate_to(4)
        assert log.log_end_offset == 4 and log.position_of(4) == (0, 2 * n)
        log.append(BATCH)
        log.append(BATCH)
        assert log.position_of(6) == (0, 3 * n) and log.position_of(8) == (0, 4 * n)
    finally:
        log.close()
