"""A kaflite broker in a subprocess for the hardening tests: start, RSS, log, SIGTERM or kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helpers import free_port, wait_listening


def rss_mib(pid: int) -> float:
    """Resident set size of a process (VmRSS), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


class BrokerProcess:
    def __init__(
        self,
        data_dir: Path,
        overrides: dict[str, str] | None = None,
        log_path: Path | None = None,
        preexec_fn: Callable[[], Any] | None = None,
        port: int | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.overrides = {"log.flush.interval.messages": "1", **(overrides or {})}
        self.log_path = log_path or self.data_dir.parent / f"broker-{self.port}.log"
        self.preexec_fn = preexec_fn
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 60) -> BrokerProcess:
        cmd = [sys.executable, "-m", "kaflite.server",
               "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
               "--override", f"log.dirs={self.data_dir}"]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        out = open(self.log_path, "ab")  # noqa: SIM115 - the child keeps it
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, preexec_fn=self.preexec_fn)
        out.close()
        try:
            wait_listening(self.proc, self.port, self.log, timeout)
        except RuntimeError:
            self.kill()
            raise
        return self

    def wait_warmed(self, timeout: float = 30) -> None:
        """Until the broker has loaded its protocol schemas (SCHEMA_WARM_UP_DELAY_S after it listens) and
        frozen its start-up heap: what a test measuring the broker's memory takes as its baseline."""
        deadline = time.monotonic() + timeout
        while "start-up heap frozen" not in self.log():
            if time.monotonic() > deadline or not self.alive():
                raise RuntimeError(f"the broker did not finish its start-up within {timeout} s:\n{self.log()[-3000:]}")
            time.sleep(0.05)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def rss(self) -> float:
        return rss_mib(self.pid)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM and wait; returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()
