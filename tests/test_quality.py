"""The engineering standards as tests: the code is ruff-clean and the package is mypy-clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers import missing_module, require

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_clean() -> None:
    require(missing_module("ruff"))
    out = _run("ruff", "check", "src", "tests", "bench", "examples")
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.timeout(600)
def test_mypy_clean() -> None:
    require(missing_module("mypy"))
    out = _run("mypy", "--no-error-summary", "src/kaflite")
    assert out.returncode == 0, out.stdout + out.stderr
