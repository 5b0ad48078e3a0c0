"""`./run.sh serve` starts without pip once set up: it reinstalls only when pyproject.toml changed, the
venv's editable install does not point at this checkout (a file read), or, with a C compiler here, the
compiled fetch decoder's source changed since an install last tried to build it (checked here with a fake
venv whose python and kaflite only record how they were called)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import REPO


def _fake_venv(
    tmp_path: Path, editable_src: Path, stamp: str | None, decoder_built: bool = True
) -> tuple[Path, Path]:
    venv, log = tmp_path / "venv", tmp_path / "calls.log"
    (venv / "bin").mkdir(parents=True)
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (site / "__editable__.kaflite-0.1.0.pth").write_text(f"{editable_src}\n")
    for name in ("python", "kaflite"):
        exe = venv / "bin" / name
        exe.write_text(f'#!/bin/sh\necho "{name} $*" >> "{log}"\n')
        exe.chmod(0o755)
    if stamp is not None:
        (venv / stamp).touch()
    if decoder_built:
        (venv / _decoder_stamp()).touch()
    return venv, log


def _decoder_stamp() -> str:
    digest = hashlib.sha1((REPO / "src" / "kaflite" / "spark" / "_decode.c").read_bytes()).hexdigest()[:12]
    return f".kaflite-decoder-{digest}"


def _stamp(kind: str) -> str:
    digest = hashlib.sha1((REPO / "pyproject.toml").read_bytes()).hexdigest()[:12]
    return f".kaflite-{kind}-{digest}"


def _serve(venv: Path) -> list[str]:
    proc = subprocess.run(
        [str(REPO / "run.sh"), "serve", "--print-config"],
        env=dict(os.environ, KAFLITE_VENV=str(venv)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    log = venv.parent / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize("kind", ["base", "test"])
def test_set_up_checkout_starts_without_pip(tmp_path: Path, kind: str) -> None:
    venv, _ = _fake_venv(tmp_path, REPO.resolve() / "src", _stamp(kind))
    assert _serve(venv) == ["kaflite serve --print-config"]


def test_editable_install_of_another_checkout_is_repointed(tmp_path: Path) -> None:
    venv, _ = _fake_venv(tmp_path, tmp_path / "elsewhere" / "src", _stamp("base"))
    assert _serve(venv) == ["python -m pip install -q --no-deps -e .", "kaflite serve --print-config"]


def test_changed_pyproject_installs_again(tmp_path: Path) -> None:
    venv, _ = _fake_venv(tmp_path, REPO.resolve() / "src", ".kaflite-base-000000000000")
    calls = _serve(venv)
    assert calls[-2:] == ["python -m pip install -q -e .", "kaflite serve --print-config"]


def test_changed_decoder_source_is_built_again_once(tmp_path: Path) -> None:
    venv, _ = _fake_venv(tmp_path, REPO.resolve() / "src", _stamp("base"), decoder_built=False)
    if shutil.which("gcc") or shutil.which("cc"):
        assert _serve(venv) == ["python -m pip install -q --no-deps -e .", "kaflite serve --print-config"]
        assert (venv / _decoder_stamp()).exists()
        # tried once for this source: a failed (optional) build is not retried on every start
        (tmp_path / "calls.log").unlink()
        assert _serve(venv) == ["kaflite serve --print-config"]
    else:
        assert _serve(venv) == ["kaflite serve --print-config"]  # no compiler: the pure decoder, no pip
