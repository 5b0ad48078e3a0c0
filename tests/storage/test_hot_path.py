"""The hot path of append (one batch, no producer id) and the general path must have identical effects:
same bytes on disk, same indexes, same results."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kaflite.protocol.record_batch import build_record_batch
from kaflite.storage import Log, LogConfig
from kaflite.storage.log_validator import fast_path_limit, fast_single_batch

NOW = 1_700_000_000_000


@pytest.mark.parametrize("ts_type", ["CreateTime", "LogAppendTime"])
def test_fast_and_general_paths_write_the_same_bytes(tmp_path: Path, ts_type: str) -> None:
    rng = random.Random(3)
    raws = [build_record_batch([(b"k", b"x" * rng.randint(0, 3000), [])] * rng.randint(1, 4),
                               timestamp_ms=NOW + i) for i in range(50)]
    cfg = LogConfig(segment_bytes=20_000, index_interval_bytes=2000, message_timestamp_type=ts_type)
    assert fast_single_batch(memoryview(raws[0]), fast_path_limit(cfg)) is not None
    logs = {name: Log(tmp_path / f"{name}-0", cfg, now_ms=lambda: NOW + 99) for name in ("fast", "slow")}
    logs["slow"]._fast_limit = 0  # noqa: SLF001 - force the general path
    results = {name: [lg.append(r, leader_epoch=i // 10) for i, r in enumerate(raws)] for name, lg in logs.items()}
    assert results["fast"] == results["slow"]
    for lg in logs.values():
        lg.close()
    assert logs["fast"].log_end_offset > 50 and len(logs["fast"].segments) > 3
    names = sorted(p.name for p in (tmp_path / "fast-0").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "slow-0").iterdir())
    for name in names:
        if name.endswith((".log", ".index", ".timeindex", "leader-epoch-checkpoint")):
            assert (tmp_path / "fast-0" / name).read_bytes() == (tmp_path / "slow-0" / name).read_bytes(), name


def test_timestamp_bounds_disable_the_hot_path() -> None:
    cfg = LogConfig()
    assert fast_path_limit(cfg) == cfg.max_message_bytes
    assert fast_path_limit(cfg.replace(message_timestamp_before_max_ms=1000)) == 0
    assert fast_path_limit(cfg.replace(cleanup_policy="compact")) == 0
    lat = cfg.replace(message_timestamp_type="LogAppendTime", message_timestamp_before_max_ms=1000)
    assert fast_path_limit(lat) > 0  # bounds only apply to CreateTime
