"""kaflite.assign is pure and stdlib-only: importing it (and running an assignor) pulls in nothing else."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import sys
before = set(sys.modules)
import kaflite.assign
from kaflite.assign import get_assignor, Subscription
from kaflite.assign import partitioners, simulate, server, sticky, userdata, zookeeper  # noqa: F401
get_assignor("cooperative-sticky").assign({"t": 3}, {"a": Subscription(["t"])})
stdlib = set(sys.stdlib_module_names)
extra = sorted({m.split(".")[0] for m in set(sys.modules) - before} - stdlib - {"kaflite"})
print(",".join(extra))
"""


def test_kaflite_assign_imports_only_the_standard_library() -> None:
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == ""
