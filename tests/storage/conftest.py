"""Fixtures of the storage tests."""

from __future__ import annotations

import pytest

from storage.storage_util import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()
