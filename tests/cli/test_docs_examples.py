"""Every `console` example of docs/cli.md runs, in order, against a real broker, and prints what the page
shows.

A runnable example is a ```console block: `$ command` lines, each followed by the output it prints
(stdout and stderr together). Values that change from run to run are compared by shape: the broker's
address (the page shows 127.0.0.1:9092), 13-digit timestamps, 22-character ids (topic id, cluster id),
CRCs, temporary directories; runs of spaces are compared as one space. A line `...` stands for any
number of lines. The `kaflite pipeline demo` example needs Spark and runs in its own test.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from helpers import REPO, spark_tmp_env
from kaflite.server.embedded import EmbeddedBroker

DOC = REPO / "docs" / "cli.md"


def examples(text: str) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) for every `$ ` line of every ```console block, in page order."""
    out: list[tuple[str, list[str]]] = []
    for indent, block in re.findall(r"^( *)```console\n(.*?)^\1```", text, re.S | re.M):
        for line in block.splitlines():
            line = line.removeprefix(indent)  # a block inside a list item is indented
            if line.startswith("$ "):
                out.append((line[2:], []))
            elif out:
                out[-1][1].append(line)
    return out


def normalize(line: str, bootstrap: str) -> str:
    line = line.replace(bootstrap, "127.0.0.1:9092").replace(bootstrap.rsplit(":", 1)[1], "9092")
    line = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:9092", line)  # e.g. the demo's embedded broker
    line = re.sub(r"\b\d{13}\b", "<ms>", line)
    line = re.sub(r"(?<![\w-])[A-Za-z0-9_-]{22}(?![\w-])", "<id>", line)
    line = re.sub(r"crc: \d+", "crc: <crc>", line)
    line = re.sub(r"/tmp/kaflite-[\w-]+", "/tmp/kaflite-<dir>", line)
    return " ".join(line.split())


def matches(expected: list[str], actual: list[str]) -> bool:
    """`expected` equals `actual` line by line, a `...` line matching any run of lines (also none)."""
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(matches(expected[1:], actual[i:]) for i in range(len(actual) + 1))
    return bool(actual) and expected[0] == actual[0] and matches(expected[1:], actual[1:])


def _run(command: str, cwd: Path, bootstrap: str, timeout: float = 120,
         extra_env: dict[str, str] | None = None) -> str:
    env = dict(
        os.environ,
        **(extra_env or {}),
        KAFLITE_BOOTSTRAP=bootstrap,
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        COLUMNS="100",
        NO_COLOR="1",
    )
    env.pop("FORCE_COLOR", None)
    # Python's bytecode cache on: with PYTHONDONTWRITEBYTECODE (set in some environments) every example
    # compiled kaflite again, ~3 s a command on a loaded 2-core machine (helpers.newcomer_env does the same)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return proc.stdout


def without_watchdog(lines: list[str]) -> list[str]:
    """The lines without the loop watchdog's warnings (server/loop_watchdog.py): a loaded machine makes an
    embedded broker's loop late whatever the command does; a "blocked" warning carries the stack sample on
    the indented lines after it."""
    out: list[str] = []
    in_stack = code_next = False
    for ln in lines:
        if "event loop blocked for more than" in ln:
            in_stack = True
            continue
        # the sample is traceback-shaped: `  File "...", line N, in f` lines, each with its source line
        # indented by four after it; any other line ends it (an indented one too: a centred table title)
        if in_stack and ln.startswith('  File "'):
            code_next = True
            continue
        if in_stack and code_next and ln.startswith("    "):
            code_next = False
            continue
        in_stack = code_next = False
        if "event loop stalled: timers ran" not in ln:
            out.append(ln)
    return out


def _check(command: str, expected: list[str], cwd: Path, bootstrap: str, timeout: float = 120,
           tmp: Path | None = None) -> None:
    """`tmp`: the command's temporary files (TMPDIR, Spark's) go there, shown as /tmp in its output."""
    out = _run(command, cwd, bootstrap, timeout, spark_tmp_env(tmp) if tmp is not None else None)
    if tmp is not None:
        out = out.replace(str(tmp), "/tmp")
    printed = without_watchdog(out.splitlines())
    actual = [normalize(ln, bootstrap) for ln in printed]
    want = [ln if ln.strip() == "..." else normalize(ln, bootstrap) for ln in expected]
    actual = [ln for ln in actual if ln]
    want = [ln.strip() if ln.strip() == "..." else ln for ln in want if ln.strip()]
    assert matches(want, actual), f"$ {command}\n--- docs/cli.md shows:\n" + "\n".join(want) + \
        "\n--- it printed:\n" + "\n".join(actual)


def test_examples_are_found() -> None:
    found = examples(DOC.read_text())
    commands = {m for c, _ in found for m in re.findall(r"\bkaflite ([a-z-]+)", c)}
    assert any("--partitions 1000000" in c for c, _ in found)  # indented blocks (in a list item) count too
    assert {"serve", "topics", "configs", "produce", "consume", "groups", "cluster", "delete-records",
            "dump-log", "assign", "partition", "pipeline", "console"} <= commands
    assert matches(["a", "...", "d"], ["a", "b", "c", "d"]) and not matches(["a", "d"], ["a", "b", "d"])
    noisy = ["x", "12:00 WARNING event loop blocked for more than 100 ms; the loop thread is at:",
             '  File "a.py", line 1, in f', "    g()", "y",
             "12:00 WARNING event loop stalled: timers ran 308 ms late (a call blocked the loop)", "z"]
    assert without_watchdog(noisy) == ["x", "y", "z"]
    # an indented line after the sample is the command's own (the demo's centred table title was dropped)
    titled = noisy[:4] + ["          kaflite pipeline demo", "\u250c\u2500\u2510"]
    assert without_watchdog(titled) == ["x", "          kaflite pipeline demo", "\u250c\u2500\u2510"]


def test_documented_examples_print_what_the_page_shows(tmp_path: Path) -> None:
    found = [(c, e) for c, e in examples(DOC.read_text()) if "kaflite pipeline" not in c]
    with EmbeddedBroker(data_dir=tmp_path / "kaflite-data") as broker:
        for command, expected in found:
            _check(command, expected, tmp_path, broker.bootstrap)


@pytest.mark.spark
@pytest.mark.slow
def test_documented_pipeline_demo(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    for command, expected in examples(DOC.read_text()):
        if "kaflite pipeline" in command:
            # its work directory (no --out) and Spark's temporary files in a directory removed after, not
            # left in /tmp; a short path, so the demo's lines wrap where the page's do
            tmp = Path(tempfile.mkdtemp(prefix="kt-"))
            try:
                _check(command, expected, tmp_path, "127.0.0.1:9092", timeout=600, tmp=tmp)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
