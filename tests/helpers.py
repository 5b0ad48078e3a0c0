"""Helpers importable from every test module (`from helpers import ...`; pytest's pythonpath has tests/)."""

from __future__ import annotations

import json
import socket
from functools import cache
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
VECTORS = REPO / "tests" / "data" / "kafka-reference-cases.json"


@cache
def load_vectors() -> list[dict[str, Any]]:
    return json.loads(VECTORS.read_text())


def vectors_of_kind(prefix: str) -> list[dict[str, Any]]:
    """Every reference case whose kind starts with `prefix` (for pytest.mark.parametrize)."""
    return [c for c in load_vectors() if c["kind"].startswith(prefix)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
