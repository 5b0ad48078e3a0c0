"""Shared fixtures. Reusable helpers live in tests/helpers.py (`from helpers import ...`)."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import load_vectors


@pytest.fixture
def vectors() -> list[dict[str, Any]]:
    return load_vectors()
