"""Ctrl-C stops every long-running command the same way whatever SIGINT disposition it inherits.

Python installs its KeyboardInterrupt handler only when SIGINT is not ignored at start-up, so a command
started from a non-interactive shell's background job, under nohup or by some CI runners would ignore
Ctrl-C unless it installs its own handler. Each test sets the child's inherited disposition explicitly.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from helpers import REPO, free_port


@pytest.mark.parametrize("inherited", ["default", "ignored"])
def test_ctrl_c_stops_a_follower(kaflite_exe, cli, cli_bootstrap: str, topic_name: str, inherited: str,
                                 inherit_sigint) -> None:
    assert cli("topics", "create", topic_name, "-p", "1", "-b", cli_bootstrap).exit_code == 0
    producer = Producer({"bootstrap.servers": cli_bootstrap})
    producer.produce(topic_name, b"r1")
    assert producer.flush(20) == 0
    follower = subprocess.Popen(
        [str(kaflite_exe), "consume", topic_name, "--from-beginning", "--follow", "-b", cli_bootstrap],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=inherit_sigint(inherited),
    )
    try:
        assert follower.stdout is not None
        assert follower.stdout.readline().strip() == "r1"  # blocks until printed; then it waits for more
        follower.send_signal(signal.SIGINT)
        _, err = follower.communicate(timeout=30)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate(timeout=5)
    assert follower.returncode == 0, err
    assert "Processed a total of 1 messages" in err and "Traceback" not in err


@pytest.mark.parametrize("inherited", ["default", "ignored"])
def test_ctrl_c_stops_serve(tmp_path: Path, kaflite_exe: Path, inherited: str, inherit_sigint) -> None:
    import socket

    port = free_port()
    proc = subprocess.Popen(
        [str(kaflite_exe), "serve", "--dev", "--port", str(port), "--log-dir", str(tmp_path / "data")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=inherit_sigint(inherited),
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        assert proc.poll() is None, proc.communicate(timeout=5)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=5)
    assert proc.returncode == 0, err
    assert "Traceback" not in err


def test_the_ctrl_c_test_passes_in_a_run_started_with_sigint_ignored(tmp_path: Path, inherit_sigint) -> None:
    """The acceptance case of issue 12: pytest itself started with SIGINT ignored (`trap "" INT`)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
         "tests/cli/test_console.py::test_ctrl_c_in_produce_still_delivers_what_was_read",
         f"--basetemp={tmp_path / 'run'}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        preexec_fn=inherit_sigint("ignored"),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "2 passed" in proc.stdout
