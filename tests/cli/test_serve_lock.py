"""Two brokers on one data directory: the second refuses to start (Kafka's `.lock`), exit 1 and one line
naming the directory; the first keeps serving."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers import free_port


def _serve(data: Path, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kaflite", "serve", "--port", str(port), "--log-dir", str(data)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_second_broker_on_the_same_data_dir_refuses(tmp_path: Path) -> None:
    import socket

    data = tmp_path / "data"
    first_port = free_port()
    first = _serve(data, first_port)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", first_port), 0.2).close()
                break
            except OSError:
                assert first.poll() is None, first.communicate()
                time.sleep(0.1)
        second = _serve(data, free_port())
        out, err = second.communicate(timeout=60)
        assert second.returncode == 1, (out, err)
        assert "another kaflite broker is using this data directory" in err
        assert str(data) in err and "Traceback" not in err
        assert first.poll() is None  # the first broker is undisturbed
        socket.create_connection(("127.0.0.1", first_port), 1).close()
    finally:
        os.kill(first.pid, signal.SIGTERM)
        first.communicate(timeout=30)
