"""CI runs the whole suite, so a missing external tool must fail it there instead of skipping quietly:
every skip on ZooKeeper/Java, kcat, chromium, ruff or mypy goes through helpers.require, which fails
under KAFLITE_REQUIRE_ALL=1 (set by .ci/run)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import helpers
from helpers import REPO, REQUIRE_ALL_ENV, missing_module, missing_program, require

_TOOLS = re.compile(r"java|zookeeper|kcat|chrom|ruff|mypy|selenium", re.IGNORECASE)
_SKIP = re.compile(r"pytest\.skip\(|skipif\(|importorskip\(")


def test_require_skips_without_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRE_ALL_ENV, raising=False)
    require(None)
    with pytest.raises(pytest.skip.Exception):
        require("kcat not installed")


def test_require_fails_under_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_ALL_ENV, "1")
    require(None)
    with pytest.raises(pytest.fail.Exception, match="kcat not installed"):
        require("kcat not installed")


def test_missing_finders() -> None:
    assert missing_program("sh") is None
    assert missing_program("no-such-program-kaflite") is not None
    assert missing_module("json") is None
    assert missing_module("no_such_module_kaflite") is not None
    assert missing_module("no_such_package_kaflite.sub") is not None


def test_no_skip_on_a_tool_bypasses_require() -> None:
    """A skip whose statement (or the 3 lines before it: a condition computed just above) names one of the
    tools is a skip .ci/run cannot turn into a failure."""
    offenders = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        if path == Path(helpers.__file__).resolve() or path == Path(__file__).resolve():
            continue
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if _SKIP.search(line) and _TOOLS.search("\n".join(lines[max(0, i - 3) : i + 2])):
                offenders.append(f"{path.relative_to(REPO)}:{i + 1}: {line.strip()}")
    assert not offenders, "route these through helpers.require:\n" + "\n".join(offenders)


def test_ci_sets_the_variable() -> None:
    assert f"{REQUIRE_ALL_ENV}=1" in (REPO / ".ci" / "run").read_text()
