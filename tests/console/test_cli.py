"""`kaflite console` as its own process, and `kaflite assign --html`."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from helpers import free_port

KAFLITE = Path(sys.executable).with_name("kaflite")


def test_console_command_serves_and_stops(kaflite_broker: Any) -> None:
    port = free_port()
    registry = f"http://127.0.0.1:{free_port()}"  # nothing there: the Schemas link shows, its page says so
    proc = subprocess.Popen([sys.executable, "-m", "kaflite", "console", "-b", kaflite_broker.bootstrap,
                             "--port", str(port), "--sample-interval", "1", "--schema-registry", registry],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        body = ""
        end = time.monotonic() + 30
        while time.monotonic() < end:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as r:
                    body = r.read().decode()
                break
            except OSError:
                assert proc.poll() is None, proc.communicate()
                time.sleep(0.2)
        assert "kaflite console" in body and "read-only" in body and 'href="/schemas"' in body
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert f"kaflite console on http://127.0.0.1:{port}" in out and f"schemas from {registry}" in out
    assert "Traceback" not in err


def test_console_command_refuses_a_registry_that_is_not_a_url() -> None:
    out = subprocess.run([sys.executable, "-m", "kaflite", "console", "--schema-registry", "127.0.0.1:8081"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "--schema-registry must be http://host:port" in out.stderr


def test_console_command_unreachable_cluster() -> None:
    port = free_port()
    out = subprocess.run([sys.executable, "-m", "kaflite", "console", "-b", f"127.0.0.1:{port}"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 1 and "cannot connect to a Kafka broker" in out.stderr and "Traceback" not in out.stderr


def test_assign_html_report(tmp_path: Path) -> None:
    out = tmp_path / "lab.html"
    res = subprocess.run([sys.executable, "-m", "kaflite", "assign", "-t", "t0:3", "-t", "t1:2", "-m", "C0:t0,t1",
                          "-m", "C1:t0,t1", "-m", "C2:t1", "--then-leave", "C0", "--then-grow", "t1:4",
                          "--html", str(out)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    for s in ("range", "roundrobin", "sticky", "cooperative-sticky", "uniform", "server-range"):
        assert f'id="run-{s}"' in page
    assert "<svg" in page and "C0 leaves, t1 grows to 4 partitions" in page and "<style>" in page
    assert "t1 grows to 4 partitions" in res.stdout and "t1-3" in res.stdout  # the text report grows too
    assert "src=\"http" not in page and "href=\"http" not in page  # offline: nothing loaded from a network


def test_console_on_a_busy_port_says_so_before_any_success_line(kaflite_broker: Any) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "kaflite", "console", "-b", kaflite_broker.bootstrap,
                              "--port", str(port)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stdout == ""  # no "kaflite console on ..." for a console that never served
    assert out.stderr.strip() == f"error: --port: cannot listen on 127.0.0.1:{port}: Address already in use"
