"""docs/protocol.md's version table says what ApiVersions really advertises (broker-core rows)."""

from __future__ import annotations

import re

from helpers import REPO
from kaflite.server.handlers import load_registry

MINE = ("produce", "fetch", "list_offsets", "offset_for_leader_epoch", "metadata", "api_versions", "admin",
        "init_producer_id")


def test_version_table_matches_registry() -> None:
    text = (REPO / "docs" / "protocol.md").read_text()
    rows = re.findall(r"^\| *(\d+) \| [^|]+ \| (\d+)(?:-(\d+))? \| `handlers/(\w+)\.py`", text, re.M)
    documented = {int(k): (int(lo), int(hi or lo)) for k, lo, hi, mod in rows if mod in MINE}
    served = {}
    for mod in MINE:
        registry = load_registry([f"kaflite.server.handlers.{mod}"])
        served.update({k: (lo, hi) for k, lo, hi in registry.ranges()})
    assert documented == served


def test_compatibility_table_is_every_api_served() -> None:
    """docs/compatibility.md lists every API the broker advertises, with the exact version range."""
    text = (REPO / "docs" / "compatibility.md").read_text()
    section = text.split("## APIs and versions served", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| *(\d+) \| (\w+) \| (\d+)(?:-(\d+))? \|", section, re.M)
    documented = {int(k): (int(lo), int(hi or lo)) for k, _name, lo, hi in rows}
    served = {k: (lo, hi) for k, lo, hi in load_registry().ranges()}
    assert documented == served
