"""The pipeline demo end to end on the shared SparkSession: every event read once, per-(user, window)
totals equal to what the generator sent, updates in Parquet and in the output topic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark


def test_pipeline_demo(spark: Any, kafka: Any, tmp_path: Path) -> None:
    from kaflite.spark.demo import run_demo

    messages: list[str] = []
    report = run_demo(
        bootstrap=kafka.bootstrap,
        events=300,
        users=5,
        rate=150,
        out_dir=str(tmp_path),
        progress=messages.append,
        spark=spark,
    )
    assert report.events_produced == report.events_read == 300
    assert report.mismatches == 0 and report.windows >= 5
    assert spark.read.parquet(report.parquet_dir).count() == report.output_records
    out = kafka.read_all(report.output_topic)
    assert len(out) == report.output_records
    assert {m.key().decode() for m in out} == {f"user-{i:02d}" for i in range(5)}
    assert any("generator" in m for m in messages)
