"""Shared fixtures. Reusable helpers live in tests/helpers.py (`from helpers import ...`)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings

from helpers import load_vectors

# Hypothesis's default 200 ms deadline per example fails property tests on a loaded 2-core machine (CI,
# or helpers beside a run) whatever the code does: no deadline; a test that bounds its time says so itself.
settings.register_profile("kaflite", deadline=None)
settings.load_profile("kaflite")


@pytest.fixture
def vectors() -> list[dict[str, Any]]:
    return load_vectors()
