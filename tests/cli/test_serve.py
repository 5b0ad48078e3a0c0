"""`kaflite serve` as a real process: start, serve the CLI's clients, stop on SIGTERM, keep data."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import free_port


def _wait_for_port(port: int, proc: subprocess.Popen[str], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(
                f"kaflite serve exited with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}"
            )
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("kaflite serve did not listen in time")


def _stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate(timeout=5)
        raise AssertionError("kaflite serve did not stop on SIGTERM") from None
    return proc.returncode, err


@pytest.fixture
def served(tmp_path: Path, kaflite_exe: Path) -> Iterator[tuple[str, Path, subprocess.Popen[str]]]:
    port = free_port()
    data = tmp_path / "data"
    proc = subprocess.Popen(
        [str(kaflite_exe), "serve", "--dev", "--port", str(port), "--log-dir", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_port(port, proc)
        yield f"127.0.0.1:{port}", data, proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=5)


def test_serve_round_trip_and_restart(run_kaflite, kaflite_exe: Path, served) -> None:
    bootstrap, data, proc = served
    assert run_kaflite("topics", "create", "served", "-p", "2", "-b", bootstrap).returncode == 0
    produced = run_kaflite("produce", "served", "-k", ":", "-b", bootstrap, input="a:1\nb:2\nc:3\n")
    assert produced.returncode == 0, produced.stderr
    code, err = _stop(proc)
    assert code == 0, err
    assert "DEV PROFILE" in err and "durability" in err
    assert "Traceback" not in err

    # the same data directory after a restart: the topic and its records are still there
    port = free_port()
    again = subprocess.Popen(
        [str(kaflite_exe), "serve", "--dev", "--port", str(port), "--log-dir", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_port(port, again)
        consumed = run_kaflite(
            "consume", "served", "--from-beginning", "--print-key", "-e", "-b", f"127.0.0.1:{port}"
        )
        assert consumed.returncode == 0, consumed.stderr
        assert sorted(consumed.stdout.splitlines()) == ["a\t1", "b\t2", "c\t3"]
    finally:
        code, err = _stop(again)
    assert code == 0, err


def test_serve_port_in_use_is_one_line(run_kaflite, served) -> None:
    bootstrap, data, _ = served
    port = bootstrap.rsplit(":", 1)[1]
    proc = run_kaflite("serve", "--port", port, "--log-dir", str(data.parent / "other"), timeout=30)
    assert proc.returncode == 1
    assert "cannot start the broker" in proc.stderr
    assert "Traceback" not in proc.stderr
