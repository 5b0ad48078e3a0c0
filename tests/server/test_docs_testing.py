"""docs/testing.md's recipes are real: every ```python block of the page, in page order, is written into
one test module and run by a pytest of its own (with kaflite's plugin, as a user's project runs them);
each recipe's tests must pass, and the page must still hold the recipes this test expects."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from helpers import REPO, missing_zookeeper, require

DOC = REPO / "docs" / "testing.md"


def blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def test_recipes_are_found() -> None:
    code = "\n".join(blocks(DOC.read_text()))
    for name in ("test_round_trip", "test_producer_retries_not_leader_without_duplicates",
                 "test_consumer_rides_out_slow_fetches", "test_acks_all_producer_survives_a_dead_leader",
                 "test_move_a_leader", "test_why_did_my_group_rebalance"):
        assert f"def {name}(" in code


def test_every_recipe_passes(tmp_path: Path) -> None:
    require(missing_zookeeper())  # the cluster recipes start a ZooKeeper
    module = tmp_path / "test_recipes.py"
    module.write_text("\n\n".join(blocks(DOC.read_text())))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", str(module)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=280)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "6 passed" in run.stdout, run.stdout[-2000:]
