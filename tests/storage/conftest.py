"""Fixtures of the storage tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from kaflite.storage.index import _IndexFile
from storage.storage_util import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def index_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every index file read, by path (the lazy-open tests: what a load or a first use reads)."""
    reads: list[Path] = []
    real = _IndexFile._read_entries

    def counting(self: _IndexFile) -> list[tuple[int, int]]:
        reads.append(self.path)
        return real(self)

    monkeypatch.setattr(_IndexFile, "_read_entries", counting)
    return reads
