"""The README run as a newcomer runs it, in a fresh clone: `./run.sh serve`, the quick tour's shell lines
and Python, `kaflite groups describe billing`, and the console start. Every command must exit 0, print what
the tour shows, and leave `git status` clean (the data directory is ignored). This is CI's first-hour smoke.

The clone is `helpers.fresh_clone`, its `.venv` set up as `./run.sh setup` leaves it but without pip
(`helpers.set_up_clone_venv`: the tests' interpreter on the clone's src), and each command runs in
`helpers.Terminal`, a newcomer's shell (no kaflite variable, the venv active only after the README's
`. .venv/bin/activate`). Ports: the broker listens on a free port (`--port 0`) instead of 9092, given to the
commands as KAFLITE_BOOTSTRAP (the default they would use) and in place of 127.0.0.1:9092; the console
on `--port 0`. The README's cluster section runs the same way in tests/cluster/test_cluster_cli.py (it needs
ZooKeeper); `./run.sh test` is this suite.
"""

from __future__ import annotations

import re
import select
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from helpers import (
    REPO,
    Terminal,
    fresh_clone,
    missing_program,
    newcomer_env,
    readme_blocks,
    require,
    set_up_clone_venv,
    stop_process,
    wait_until,
)

README = (REPO / "README.md").read_text()


def _commands(block: str) -> list[str]:
    """The block's command lines (a line that is only a comment is prose)."""
    return [ln for ln in block.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def _without_comment(line: str) -> str:
    return line.split("  #", 1)[0].rstrip()


def _first_line(proc: subprocess.Popen[str], pattern: str, timeout: float = 60) -> re.Match[str]:
    """The first stdout line of `proc` matching `pattern` (its lines before it are skipped)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if select.select([proc.stdout], [], [], 0.5)[0]:
            line = proc.stdout.readline()
            m = re.search(pattern, line)
            if m:
                return m
            if not line and proc.poll() is not None:
                break
    raise AssertionError(f"no line matching {pattern!r} within {timeout} s (exit {proc.poll()})")


def _own_editable_installs() -> dict[str, str]:
    """The .pth files of the tests' own venv: what `./run.sh` in the clone must leave alone."""
    import sysconfig

    site = Path(sysconfig.get_paths()["purelib"])
    return {p.name: p.read_text() for p in site.glob("__editable__.kaflite*.pth")}


def test_readme_in_a_fresh_clone(tmp_path: Path) -> None:
    require(missing_program("git"))
    own_before = _own_editable_installs()
    clone = fresh_clone(tmp_path)
    set_up_clone_venv(clone)
    terminal = Terminal(clone, newcomer_env())
    opening = _commands(README.split("## ", 1)[0].split("```bash\n", 1)[1].split("```", 1)[0])
    serve_line = next(ln for ln in opening if ln.startswith("./run.sh serve"))
    serve_err = tmp_path / "serve.err"  # a file: the broker's log lines never fill a pipe
    with open(serve_err, "w") as err:
        serve = terminal.start(f"{_without_comment(serve_line)} --dev --port 0", stderr=err)
    console: subprocess.Popen[str] | None = None
    try:
        def listening() -> str | None:
            assert serve.poll() is None, serve_err.read_text()[-2000:]
            return next(iter(re.findall(r"listening on PLAINTEXT://(127\.0\.0\.1:\d+)", serve_err.read_text())), None)

        bootstrap = wait_until("`./run.sh serve` saying where it listens", listening, timeout=60,
                               context=lambda: serve_err.read_text()[-2000:])
        terminal.env["KAFLITE_BOOTSTRAP"] = bootstrap

        tour = README.split("## Quick tour", 1)[1].split("\n## ", 1)[0]
        lines = _commands(readme_blocks("Quick tour")[0])
        assert lines[0] == ". .venv/bin/activate"
        has_kcat = missing_program("kcat") is None
        outputs = [terminal.run(ln.replace("127.0.0.1:9092", bootstrap)).stdout
                   for ln in lines if has_kcat or "kcat" not in ln]
        joined = "\n".join(outputs)
        assert "k1\thello" in joined and "k2\tworld" in joined
        assert "Topic: orders\tPartition: 0\tLeader: 0" in joined
        assert "k3 from kcat" in joined or not has_kcat

        code = readme_blocks("Quick tour", "python")[0].replace("127.0.0.1:9092", bootstrap)
        script = tmp_path / "tour.py"  # beside the clone, not in it
        script.write_text(code + "\nassert msg is not None and msg.error() is None, msg\n")
        terminal.run(f".venv/bin/python {script}")
        described = re.search(r"`(kaflite groups describe \w+)`", tour)
        assert described, "the tour no longer says which command shows the group"
        shown = terminal.run(described.group(1)).stdout
        assert re.search(r"^billing\s+orders\s+\d", shown, re.M), shown

        console_line = _commands(readme_blocks("Command line")[0])[0]
        assert console_line.startswith("kaflite console")
        console = terminal.start(f"{_without_comment(console_line)} --port 0", stderr=subprocess.PIPE)
        url = _first_line(console, r"^kaflite console on (http://127\.0\.0\.1:\d+) for ").group(1)
        with urllib.request.urlopen(url + "/", timeout=30) as page:
            assert "kaflite console" in page.read().decode()
        console.send_signal(signal.SIGINT)  # Ctrl-C: 130 (128 + SIGINT), as the other clients
        _, console_err = console.communicate(timeout=30)
        assert console.returncode in (0, 130) and console_err == "", (console.returncode, console_err)

        serve.send_signal(signal.SIGINT)
        assert serve.wait(30) == 0, serve_err.read_text()[-2000:]
        status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True)
        assert status.stdout == "", f"the README left files git does not ignore:\n{status.stdout}"
    finally:
        for proc in (console, serve):
            if proc is not None:
                stop_process(proc, signal.SIGINT, timeout=30)
    # the clone's `.venv/bin/python` is the tests' own interpreter: a pip run by run.sh there would have
    # repointed the tests' venv at this temporary clone
    assert _own_editable_installs() == own_before
    require(missing_program("kcat"))  # the kcat lines were left out: say so (fails under KAFLITE_REQUIRE_ALL)


@pytest.mark.parametrize("command", ["./run.sh serve", "./run.sh test"])
def test_readme_opens_with_the_two_commands(command: str) -> None:
    head = README.split("## ", 1)[0]
    assert command in head
