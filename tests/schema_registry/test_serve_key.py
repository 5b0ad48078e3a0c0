"""`kaflite serve` with schema.registry.listener serves the registry from the broker process; a restart of
the broker keeps every schema and id (replayed from its _schemas topic); the key is off by default."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from helpers import free_port, start_broker_process, stop_process, wait_listening
from kaflite.server.config import BROKER_CONFIGS


def _serve(data: Path, port: int, registry_port: int, log_path: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "kaflite", "serve", "-o", f"listeners=PLAINTEXT://127.0.0.1:{port}",
           "-o", f"log.dirs={data}", "-o", f"schema.registry.listener=http://127.0.0.1:{registry_port}"]
    proc = start_broker_process(cmd, port, log_path, 30)
    wait_listening(proc, registry_port, lambda: log_path.read_text(errors="replace"), 30, "schema registry")
    return proc


def _call(url: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="POST" if body is not None else "GET",
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(request, timeout=15) as answer:
        return json.loads(answer.read())


def test_the_key_is_off_by_default() -> None:
    assert BROKER_CONFIGS["schema.registry.listener"].default is None


def test_broker_serves_the_registry_and_a_restart_keeps_schemas_and_ids(tmp_path: Path) -> None:
    port, registry_port = free_port(), free_port()
    data, log_path = tmp_path / "data", tmp_path / "broker.log"
    url = f"http://127.0.0.1:{registry_port}"
    user = json.dumps({"type": "record", "name": "User", "fields": [{"name": "n", "type": "string"}]})
    proc = _serve(data, port, registry_port, log_path)
    try:
        assert _call(f"{url}/subjects/users-value/versions", {"schema": user})["id"] == 1
        assert _call(f"{url}/subjects/other-value/versions", {"schema": '"long"'})["id"] == 2
    finally:
        stop_process(proc, signal.SIGTERM)
    assert proc.returncode == 0, log_path.read_text()[-2000:]
    proc = _serve(data, port, registry_port, log_path)
    try:
        assert _call(f"{url}/subjects") == ["other-value", "users-value"]
        assert json.loads(_call(f"{url}/schemas/ids/1")["schema"]) == json.loads(user)
        assert _call(f"{url}/subjects/third-value/versions", {"schema": '"int"'})["id"] == 3
        try:
            _call(f"{url}/subjects/nope/versions")
            raise AssertionError("expected 404")
        except urllib.error.HTTPError as err:
            assert err.code == 404 and json.loads(err.read())["error_code"] == 40401
    finally:
        stop_process(proc, signal.SIGTERM)
    assert proc.returncode == 0


def test_a_registry_that_cannot_start_stops_the_broker_with_exit_1(tmp_path: Path) -> None:
    import socket

    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        cmd = [sys.executable, "-m", "kaflite", "serve", "-o", f"listeners=PLAINTEXT://127.0.0.1:{port}",
               "-o", f"log.dirs={tmp_path / 'data'}", "-o", f"schema.registry.listener=http://127.0.0.1:{busy}"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert f"schema registry on http://127.0.0.1:{busy} failed to start" in proc.stderr
