"""Fixtures for the CLI tests: a real broker on loopback and a way to run `kaflite ...`.

`cli_bootstrap` is kaflite's own broker (the `kaflite_broker` fixture, an EmbeddedBroker). Set
KAFLITE_CLI_PEER=tansu to run the same tests against the Tansu peer broker instead (/work/shared/peers),
which checks that the commands work against "any Kafka".
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

TANSU = Path(__file__).resolve().parents[2].parent / "shared" / "peers" / "tansu.sh"
KAFLITE = Path(sys.executable).with_name("kaflite")


@pytest.fixture(scope="module")
def cli_bootstrap(request: pytest.FixtureRequest) -> Iterator[str]:
    if os.environ.get("KAFLITE_CLI_PEER") == "tansu":
        out = subprocess.run(
            [str(TANSU), "start"], capture_output=True, text=True, timeout=60, check=True
        ).stdout
        m = re.search(r"BOOTSTRAP=(\S+) PID=(\d+)", out)
        assert m, out
        try:
            yield m.group(1)
        finally:
            subprocess.run([str(TANSU), "stop", m.group(2)], timeout=10)
    else:
        yield request.getfixturevalue("kaflite_broker").bootstrap


@pytest.fixture
def topic_name() -> str:
    return f"cli-{uuid.uuid4().hex[:10]}"


class Cli:
    """Runs the Typer app in-process (fast) and returns Click's Result."""

    def __init__(self) -> None:
        self.runner = CliRunner()

    def __call__(self, *args: str, input: str | None = None) -> Any:
        from kaflite.cli.main import app

        return self.runner.invoke(app, list(args), input=input, catch_exceptions=False)


@pytest.fixture
def cli() -> Cli:
    return Cli()


def _run_kaflite(
    *args: str, input: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KAFLITE), *args], input=input, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def kaflite_exe() -> Path:
    """Path of the installed `kaflite` console script."""
    return KAFLITE


@pytest.fixture
def run_kaflite() -> Any:
    """Runs the installed `kaflite` console script in a subprocess (bounded by `timeout`)."""
    return _run_kaflite


def _inherit_sigint(disposition: str) -> Callable[[], None]:
    """A Popen preexec_fn giving the child SIGINT's default disposition or SIG_IGN ("default" / "ignored"),
    whatever this test process inherited: a child started from a non-interactive shell's background job,
    nohup or some CI runners starts with SIGINT ignored."""
    value = {"default": signal.SIG_DFL, "ignored": signal.SIG_IGN}[disposition]

    def preexec() -> None:
        signal.signal(signal.SIGINT, value)

    return preexec


@pytest.fixture
def inherit_sigint() -> Callable[[str], Callable[[], None]]:
    return _inherit_sigint
