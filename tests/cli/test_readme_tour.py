"""The README's quick tour runs as written (against a broker on a free port instead of 9092), so the
first commands a user copies cannot rot."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO
from kaflite.server.embedded import EmbeddedBroker

README = (REPO / "README.md").read_text()
TOUR = README.split("## Quick tour", 1)[1].split("\n## ", 1)[0]
BASH, PYTHON = (re.search(rf"```{lang}\n(.*?)```", TOUR, re.S).group(1) for lang in ("bash", "python"))  # type: ignore[union-attr]


def test_quick_tour(tmp_path: Path) -> None:
    lines = [ln for ln in BASH.splitlines() if ln.strip() and not ln.startswith(". ")]
    if shutil.which("kcat") is None:
        lines = [ln for ln in lines if "kcat" not in ln]
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    with EmbeddedBroker(data_dir=tmp_path / "data") as b:
        env["KAFLITE_BOOTSTRAP"] = b.bootstrap
        outputs = []
        for line in lines:
            cmd = line.replace("127.0.0.1:9092", b.bootstrap)
            out = subprocess.run(["bash", "-c", cmd], env=env, capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, (cmd, out.stdout, out.stderr)
            outputs.append(out.stdout)
        joined = "\n".join(outputs)
        assert "k1\thello" in joined and "k2\tworld" in joined
        assert "Topic: orders\tPartition: 0\tLeader: 0" in joined
        if shutil.which("kcat") is not None:
            assert "k3 from kcat" in joined
        code = PYTHON.replace("127.0.0.1:9092", b.bootstrap) + "\nassert msg is not None and msg.error() is None\n"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("command", ["./run.sh serve", "./run.sh test"])
def test_readme_opens_with_the_two_commands(command: str) -> None:
    head = README.split("## ", 1)[0]
    assert command in head
