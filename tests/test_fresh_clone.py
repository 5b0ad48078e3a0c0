"""A fresh `git clone` of the repository, alone in an empty directory, collects the whole suite without an
error, and no test module reads a file outside the repository while it is imported or collected.

Collection runs with the venv's python and PYTHONPATH pointing at the clone's src (the venv's editable
install may point elsewhere; PYTHONPATH wins), under an audit hook that records every file opened for
reading outside the clone and the Python installation. A test that reads `../shared/...` fails here even
on a machine that has that directory: the clone has nothing beside it, and the hook names the path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import fresh_clone

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

# Runs pytest's collection in the clone with an audit hook on `open`. Reads are allowed inside the clone,
# the Python installation (venv, base interpreter) and the system's own directories (libraries, locale,
# certificates, /proc, /dev), plus installed distributions' metadata (pytest scans every sys.path entry
# for plugin entry points); any other read is printed and fails the run.
COLLECT = textwrap.dedent(
    """
    import os, sys, sysconfig
    root = os.path.realpath(sys.argv[1])
    script = os.path.realpath(__file__)
    allowed = {root, os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix),
               os.path.realpath(sys.exec_prefix), "/usr", "/lib", "/lib64", "/etc", "/proc", "/sys", "/dev",
               "/run", "/var/lib", "/opt/java", *(os.path.realpath(p) for p in sysconfig.get_paths().values())}
    outside = []

    def hook(event, args):
        if event != "open" or not args:
            return
        path, mode, flags = (list(args) + [None, None])[:3]
        if isinstance(path, int) or path is None:
            return
        if isinstance(mode, str) and any(c in mode for c in "wax+"):
            return
        if isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR):
            return
        full = os.path.realpath(os.fsdecode(path))
        if full == script or ".dist-info/" in full or ".egg-info/" in full:
            return  # this script; installed distributions' metadata (pytest's plugin entry points)
        if not any(full == a or full.startswith(a.rstrip("/") + "/") for a in allowed):
            outside.append(full)

    sys.addaudithook(hook)
    import pytest
    code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *sys.argv[2:]])
    for path in dict.fromkeys(outside):
        print("READ OUTSIDE THE REPOSITORY:", path)
    sys.exit(code or (3 if outside else 0))
    """
)


def _collect(tmp_path: Path, clone: Path, *paths: str) -> subprocess.CompletedProcess[str]:
    """pytest's collection in the clone under the audit hook: the whole suite, or only `paths`."""
    script = tmp_path / "collect.py"
    script.write_text(COLLECT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "KAFLITE_"))}
    env["PYTHONPATH"] = str(clone / "src")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run([sys.executable, str(script), str(clone), *paths], cwd=clone, env=env,
                          capture_output=True, text=True, timeout=600)


def test_fresh_clone_collects_the_whole_suite(tmp_path: Path) -> None:
    clone = fresh_clone(tmp_path)
    proc = _collect(tmp_path, clone)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "READ OUTSIDE" not in proc.stdout
    assert "error" not in proc.stdout.splitlines()[-1].lower(), proc.stdout[-2000:]
    assert " tests collected" in proc.stdout.splitlines()[-1] or " collected" in proc.stdout


def test_a_test_reading_outside_the_repository_fails_the_check(tmp_path: Path) -> None:
    """The check can fail: a module that reads a file next to the clone at import is reported, even when
    that file exists. Only that module is collected (the hook and the conftest files are the same as for the
    whole suite, whose collection the test above already pays for)."""
    clone = fresh_clone(tmp_path)
    (clone.parent.parent / "vectors.json").write_text("[]")
    (clone / "tests" / "test_reads_outside.py").write_text(
        "from pathlib import Path\n"
        "DATA = (Path(__file__).resolve().parents[3] / 'vectors.json').read_text()\n"
        "def test_x():\n    assert DATA == '[]'\n"
    )
    proc = _collect(tmp_path, clone, "tests/test_reads_outside.py")
    assert proc.returncode != 0
    assert f"READ OUTSIDE THE REPOSITORY: {(tmp_path / 'vectors.json').resolve()}" in proc.stdout
