"""Helpers importable from every test module (`from helpers import ...`; pytest's pythonpath has tests/)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import pytest

REPO = Path(__file__).resolve().parents[1]
VECTORS = REPO / "tests" / "data" / "kafka-reference-cases.json"
T = TypeVar("T")


@cache
def load_vectors() -> list[dict[str, Any]]:
    return json.loads(VECTORS.read_text())


def vectors_of_kind(prefix: str) -> list[dict[str, Any]]:
    """Every reference case whose kind starts with `prefix` (for pytest.mark.parametrize)."""
    return [c for c in load_vectors() if c["kind"].startswith(prefix)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_broker_process(cmd: list[str], port: int, log_path: Path, timeout_s: float = 30) -> subprocess.Popen[bytes]:
    """Start a broker process (its output appended to `log_path`) and return once `port` accepts a
    connection; a broker that exits or does not listen within `timeout_s` fails with its log's tail."""
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_listening(proc, port, lambda: log_path.read_text(errors="replace"), timeout_s)
    except RuntimeError:
        stop_process(proc, signal.SIGKILL, timeout=10)
        raise
    return proc


def wait_listening(
    proc: subprocess.Popen[Any], port: int, log: Callable[[], str], timeout_s: float = 30, name: str = "broker"
) -> None:
    """Return once 127.0.0.1:`port` accepts a connection; a `proc` (called `name`) that exits first, or
    does not listen within `timeout_s`, fails with a RuntimeError carrying the tail of its `log()`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited ({proc.returncode}): {log()[-2000:]}") from None
            time.sleep(0.05)
    raise RuntimeError(f"{name} did not listen on 127.0.0.1:{port} within {timeout_s:.0f} s: {log()[-2000:]}")


def wait_until(
    what: str,
    fn: Callable[[], T | None],
    timeout: float = 30.0,
    interval: float = 0.05,
    context: Callable[[], object] | None = None,
) -> T:
    """Poll `fn` every `interval` s until it returns something truthy, and return that. After `timeout` s
    fail with an AssertionError naming `what` (and what `context()` says then, e.g. the state seen last),
    so a test that waits on a cluster never hangs and never fails without saying what it waited for."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(interval)
    extra = f" ({context()})" if context is not None else ""
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}{extra}")


def stop_process(proc: subprocess.Popen[Any], sig: int = signal.SIGTERM, timeout: float = 20.0) -> None:
    """Stop `proc` if it still runs: `sig` first (the clean shutdown under test elsewhere), SIGKILL if it
    has not exited within `timeout` s, so a failed test never leaves a broker or a cluster behind."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def poll_values(consumer: Any, count: int, timeout: float = 30.0, poll_s: float = 0.5) -> list[bytes]:
    """The values a confluent-kafka `consumer` (already assigned or subscribed) polls, until `count` have
    arrived or `timeout` s have passed (records with an error are skipped): the caller asserts on the list,
    so a short one fails there with what did arrive."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        m = consumer.poll(poll_s)
        if m is not None and m.error() is None:
            got.append(m.value())
    return got


# -- missing test dependencies --------------------------------------------------------------------
# Outside CI a test whose external tool is missing (ZooKeeper/Java, kcat, chromium, ruff, mypy) is skipped
# with the reason; CI sets KAFLITE_REQUIRE_ALL=1 (.ci/run), under which the same absence is a failure, so
# a CI run that silently tested less than the whole suite cannot pass. Every such condition in tests/
# goes through `require` (tests/test_helpers_require.py checks that none bypasses it).
REQUIRE_ALL_ENV = "KAFLITE_REQUIRE_ALL"


def require_all() -> bool:
    return os.environ.get(REQUIRE_ALL_ENV, "") not in ("", "0")


def require(missing: str | None, *, module_level: bool = False) -> None:
    """`missing`: why a dependency of this test is absent (None when present). Skips, or fails when
    KAFLITE_REQUIRE_ALL is set."""
    if missing is None:
        return
    if require_all():
        pytest.fail(f"{missing} ({REQUIRE_ALL_ENV}=1: a missing test dependency is an error)", pytrace=False)
    pytest.skip(missing, allow_module_level=module_level)


def missing_program(*names: str) -> str | None:
    """None when one of `names` is on PATH, else why not."""
    if any(shutil.which(n) for n in names):
        return None
    return f"{' / '.join(names)} not installed"


def missing_module(name: str) -> str | None:
    try:
        found = importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        found = False
    return None if found else f"Python module {name} not installed"


def missing_zookeeper() -> str | None:
    from kaflite.cluster.zkserver import missing_reason

    reason = missing_reason()
    return None if reason is None else f"ZooKeeper cannot run here: {reason}"
