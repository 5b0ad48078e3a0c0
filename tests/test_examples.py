"""examples/spark_quickstart.py talks to the broker the CLI talks to: KAFLITE_BOOTSTRAP, as every kaflite
command reads it (issue 32: it read BOOTSTRAP, so a user who had exported KAFLITE_BOOTSTRAP for the CLI got
127.0.0.1:9092); BOOTSTRAP still works when KAFLITE_BOOTSTRAP is unset.

The script runs in this process against a recorder standing in for pyspark and kaflite.spark (no JVM: a
SparkSession takes ~20 s to start), which notes every `.option(key, value)` the script sets; the script
itself runs against a real broker in the Spark tier (`kaflite pipeline demo`, tests/spark).
"""

from __future__ import annotations

import runpy
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

import pytest

from helpers import REPO

QUICKSTART = REPO / "examples" / "spark_quickstart.py"


class _Recorder:
    """Any attribute, call or chain of them; `option(key, value)` is noted."""

    def __init__(self, options: list[tuple[str, str]]) -> None:
        self._options = options

    def __getattr__(self, name: str) -> Any:
        if name == "option":
            return lambda key, value: (self._options.append((key, value)), self)[1]
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> _Recorder:
        return self


def _bootstraps(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str]) -> set[str]:
    options: list[tuple[str, str]] = []
    recorder = _Recorder(options)
    pyspark = types.ModuleType("pyspark")
    pyspark_sql = types.ModuleType("pyspark.sql")
    pyspark_sql.SparkSession = recorder  # type: ignore[attr-defined]
    kaflite_spark = types.ModuleType("kaflite.spark")
    kaflite_spark.register = recorder  # type: ignore[attr-defined]
    for name, module in (("pyspark", pyspark), ("pyspark.sql", pyspark_sql), ("kaflite.spark", kaflite_spark)):
        monkeypatch.setitem(sys.modules, name, module)
    for key in ("KAFLITE_BOOTSTRAP", "BOOTSTRAP"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    for key in ("PYSPARK_PYTHON", "SPARK_LOCAL_IP"):  # the script sets them by setdefault: restored after
        monkeypatch.setenv(key, "x")
    monkeypatch.setattr(tempfile, "mkdtemp", lambda **kw: str(tmp_path))
    runpy.run_path(str(QUICKSTART), run_name="__main__")
    assert options, "the recorder saw no option: the script no longer sets them on the reader/writer"
    return {value for key, value in options if key == "kafka.bootstrap.servers"}


def test_quickstart_reads_kaflite_bootstrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert _bootstraps(monkeypatch, tmp_path, {"KAFLITE_BOOTSTRAP": "127.0.0.1:19092"}) == {"127.0.0.1:19092"}
    both = {"KAFLITE_BOOTSTRAP": "127.0.0.1:19092", "BOOTSTRAP": "127.0.0.1:29092"}
    assert _bootstraps(monkeypatch, tmp_path, both) == {"127.0.0.1:19092"}
    assert _bootstraps(monkeypatch, tmp_path, {"BOOTSTRAP": "127.0.0.1:29092"}) == {"127.0.0.1:29092"}
    assert _bootstraps(monkeypatch, tmp_path, {}) == {"127.0.0.1:9092"}


def test_examples_and_readme_name_kaflite_bootstrap() -> None:
    readme_line = next(ln for ln in (REPO / "README.md").read_text().splitlines() if "spark_quickstart.py" in ln)
    assert "KAFLITE_BOOTSTRAP=host:port" in readme_line
    assert "KAFLITE_BOOTSTRAP=host:port" in QUICKSTART.read_text()
