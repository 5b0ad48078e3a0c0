"""docs/protocol.md's version table says what ApiVersions really advertises (broker-core rows)."""

from __future__ import annotations

import re

from helpers import REPO
from kaflite.server.handlers import load_registry

MINE = ("produce", "fetch", "list_offsets", "metadata", "api_versions", "admin", "init_producer_id")


def test_version_table_matches_registry() -> None:
    text = (REPO / "docs" / "protocol.md").read_text()
    rows = re.findall(r"^\| *(\d+) \| [^|]+ \| (\d+)(?:-(\d+))? \| `handlers/(\w+)\.py`", text, re.M)
    documented = {int(k): (int(lo), int(hi or lo)) for k, lo, hi, mod in rows if mod in MINE}
    served = {}
    for mod in MINE:
        registry = load_registry([f"kaflite.server.handlers.{mod}"])
        served.update({k: (lo, hi) for k, lo, hi in registry.ranges()})
    assert documented == served
