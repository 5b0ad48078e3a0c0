"""docs/cli.md's `console-cluster` examples run, in order, against a real three-broker cluster started by
`kaflite cluster up`, and print what the page shows (they need ZooKeeper, so test_docs_examples.py, whose
single broker could not run them, leaves these blocks out).

Compared as test_docs_examples.py compares (its `normalize` and `matches`), and besides: the broker ids in
`Leader`, `Replicas`, `Isr` and `Controller` by count only, since placement starts at a random broker (as
Kafka's does) and any broker may win the controller election.
"""

from __future__ import annotations

import importlib.util
import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from helpers import REPO, missing_zookeeper, require, stop_process

require(missing_zookeeper(), module_level=True)

DOC = REPO / "docs" / "cli.md"


def _docs_examples() -> Any:
    spec = importlib.util.spec_from_file_location("kaflite_docs_examples", Path(__file__).with_name("test_docs_examples.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cluster_examples(text: str) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for block in re.findall(r"^```console-cluster\n(.*?)^```", text, re.S | re.M):
        for line in block.splitlines():
            if line.startswith("$ "):
                out.append((line[2:], []))
            elif out:
                out[-1][1].append(line)
    return out


def ids_by_count(line: str) -> str:
    line = re.sub(r"\b(Leader|Controller): \d+", r"\1: <id>", line)
    return re.sub(r"\b(Replicas|Isr): ([\d,]+)", lambda m: f"{m[1]}: <{len(m[2].split(','))} ids>", line)


def test_cluster_examples_are_found() -> None:
    commands = [c for c, _ in cluster_examples(DOC.read_text())]
    assert any(c.startswith("kaflite cluster status") for c in commands)
    assert any(c.startswith("kaflite leader-election") for c in commands)
    assert any(c.startswith("kaflite topics describe") for c in commands)
    assert {a for c in commands for a in re.findall(r"^kaflite reassign-partitions --(\w+)", c)} == {
        "generate", "execute", "verify", "cancel", "list"}
    assert ids_by_count("\tLeader: 2\tReplicas: 2,0,1\tIsr: 2,0") == "\tLeader: <id>\tReplicas: <3 ids>\tIsr: <2 ids>"


def test_documented_cluster_examples(tmp_path: Path) -> None:
    docs = _docs_examples()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kaflite", "cluster", "up", "--brokers", "3", "--data-dir", str(tmp_path / "c")],
        stdout=subprocess.PIPE, stderr=open(tmp_path / "up.err", "w"), stdin=subprocess.DEVNULL, text=True,
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready, "cluster up printed nothing within 120 s"
        first = proc.stdout.readline()
        assert first.startswith("bootstrap servers: "), first
        bootstrap = first.split(": ", 1)[1].strip()
        deadline = time.monotonic() + 60  # every broker registered before the examples run
        line = ""
        while time.monotonic() < deadline and "0=up 1=up 2=up; controller: " not in line:
            if select.select([proc.stdout], [], [], 1)[0]:
                line = proc.stdout.readline()
        assert "0=up 1=up 2=up; controller: " in line, line
        env_bootstrap = bootstrap
        for command, expected in cluster_examples(DOC.read_text()):
            if command.startswith("export KAFLITE_BOOTSTRAP="):
                continue  # the page's addresses: the test passes the real ones the same way
            out = docs._run(command, tmp_path, env_bootstrap)
            actual = [ids_by_count(docs.normalize(ln, bootstrap)) for ln in out.splitlines() if ln.strip()]
            want = [ln.strip() if ln.strip() == "..." else ids_by_count(docs.normalize(ln, bootstrap))
                    for ln in expected if ln.strip()]
            assert docs.matches(want, actual), f"$ {command}\n--- docs/cli.md shows:\n" + "\n".join(want) + \
                "\n--- it printed:\n" + "\n".join(actual)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
    finally:
        # a failure above: stop the cluster as Ctrl-C would, then by pid
        stop_process(proc, signal.SIGINT, timeout=60)
        for pid in map(int, re.findall(r"\(pid (\d+),", (tmp_path / "up.err").read_text())):
            try:  # gone already when `cluster up` stopped it (the normal case); never a reused pid
                if str(tmp_path) in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
                    os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, FileNotFoundError):
                pass
