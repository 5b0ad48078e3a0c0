"""Every network command against a closed port: one clear line, exit code 1, bounded time."""

from __future__ import annotations

import time

import pytest

from helpers import free_port

COMMANDS = [
    ["topics", "list"],
    ["topics", "describe", "t"],
    ["topics", "create", "t"],
    ["topics", "delete", "t"],
    ["topics", "alter", "t", "--partitions", "2"],
    ["produce", "t"],
    ["consume", "t"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(a) for a in COMMANDS])
def test_unreachable_broker_fails_fast(args: list[str], run_kaflite) -> None:
    address = f"127.0.0.1:{free_port()}"
    start = time.monotonic()
    proc = run_kaflite(*args, "--bootstrap-server", address, input="x\n", timeout=30)
    elapsed = time.monotonic() - start
    assert proc.returncode == 1, proc.stderr
    assert f"cannot connect to a Kafka broker at {address}" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert elapsed < 15


def test_malformed_bootstrap_is_usage_error(run_kaflite) -> None:
    proc = run_kaflite("topics", "list", "--bootstrap-server", "nohostport")
    assert proc.returncode == 2
    assert "--bootstrap-server: expected host:port, got 'nohostport'" in proc.stderr


def test_silent_server_is_bounded_by_timeout(run_kaflite) -> None:
    """A port that accepts connections but never answers (not a Kafka broker): the wait is bounded."""
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        address = f"127.0.0.1:{server.getsockname()[1]}"
        start = time.monotonic()
        proc = run_kaflite("topics", "list", "--timeout", "2", "--bootstrap-server", address, timeout=30)
        elapsed = time.monotonic() - start
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and proc.stderr.startswith("error: ")
    assert elapsed < 10
