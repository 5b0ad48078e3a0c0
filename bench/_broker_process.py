"""A kaflite broker in a process of its own, as deployed, for the benches: started on a free loopback port
with its data in a directory the caller gives, waited for, read from /proc while it runs, stopped by its pid.

    with BrokerProcess(data_dir, overrides={"auto.create.topics.enable": "false"}) as broker:
        ...  # broker.bootstrap, broker.pid, broker.cpu(), broker.rss_mib()

Rules:
- the command is `python -m kaflite serve --host 127.0.0.1 --port P --log-dir DIR` (the CLI's broker, as a
  user runs it), or `python -m kaflite.server --override listeners=... --override log.dirs=...` (the bare
  entry point, without the CLI's imports) for a bench measured that way since its first figures; the
  caller's arguments follow, then its `--override key=value`s (last wins, as on any command line);
- the broker's stdout and stderr go to one log file: the caller's (kept), or a temporary one beside the
  data directory, removed once the caller has stopped or killed the broker, and kept when something went
  wrong: a start that failed or a strict stop that had to kill (the error names it and shows its tail),
  a broker that had exited by itself (a line on stderr names it);
- every wait is bounded: the start waits for the port to accept a connection (a broker that exits or
  does not listen in time is killed, and the error carries its log's tail), a stop waits `grace` seconds
  after SIGTERM (the broker's clean stop), then SIGKILL and a reap;
- a process is only ever signalled by its own pid (never by name), and reaped.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from _timing import proc_cpu, proc_cpu_seconds

LOG_TAIL = 3000  # characters of the broker's log an error shows


def free_port() -> int:
    """A loopback port free now (the kernel's pick; another process may take it before the broker binds)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 20) -> None:
    """Return once 127.0.0.1:`port` accepts a connection; RuntimeError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port}")


def stop_process(proc: subprocess.Popen[bytes], grace: float = 30.0) -> bool:
    """SIGTERM (the broker's clean stop), then SIGKILL if it has not exited after `grace` seconds; reaped
    either way. False when it had to be killed."""
    proc.send_signal(signal.SIGTERM)  # a no-op once the process has been reaped
    try:
        proc.wait(grace)
        return True
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        return False


# -- what the kernel says about a process (/proc/<pid>) -------------------------------------------------------
def _status_kib(pid: int, key: str) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key):
                return float(line.split()[1])
    raise RuntimeError(f"no {key[:-1]} for pid {pid}")


def rss_mib(pid: int) -> float:
    """The process's resident memory now (VmRSS), in MiB."""
    return _status_kib(pid, "VmRSS:") / 1024


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident memory (VmHWM), in MiB; nan when the kernel does not say."""
    try:
        return _status_kib(pid, "VmHWM:") / 1024
    except RuntimeError:
        return float("nan")


def minor_faults(pid: int) -> int:
    """The process's minor page faults so far (/proc/<pid>/stat): a page it touched for the first time."""
    with open(f"/proc/{pid}/stat") as f:
        # the command name may hold spaces and parentheses: the fields start after its last ")"
        return int(f.read().rsplit(")", 1)[1].split()[7])


def switches(pid: int) -> tuple[int, int]:
    """(voluntary, involuntary) context switches of the process's live threads."""
    vol = invol = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            text = (task / "status").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        for line in text.splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                vol += int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                invol += int(line.split()[1])
    return vol, invol


# -- the broker -----------------------------------------------------------------------------------------------
class BrokerProcess:
    """One broker process on `data_dir`. `overrides`: broker configuration (`--override key=value`);
    `args`: more arguments after the command's own (`--dev`); `env`: variables over this process's
    environment (PYTHONPATH: which tree runs); `python_args`: arguments of the interpreter before `-m`
    (`-m cProfile -o FILE`); `server_module`: `python -m kaflite.server` instead of `kaflite serve`;
    `log_path`/`log_mode`: the caller's log file and how it is opened ("ab" appends); `port`: a port
    chosen by the caller (a free one otherwise)."""

    def __init__(
        self,
        data_dir: Path,
        *,
        overrides: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        python_args: Sequence[str] = (),
        server_module: bool = False,
        log_path: Path | None = None,
        log_mode: str = "wb",
        port: int | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port if port is not None else free_port()
        self.overrides = dict(overrides or {})
        self.args, self.env, self.python_args = tuple(args), env, tuple(python_args)
        self.server_module = server_module
        self.owns_log = log_path is None
        self.log_path = log_path
        self.log_mode = log_mode
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0.0  # time.perf_counter() just before the Popen
        self._ended = False  # stopped or killed by this object

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "the broker has not been started"
        return self.proc.pid

    def command(self) -> list[str]:
        if self.server_module:
            cmd = [
                sys.executable,
                *self.python_args,
                "-m",
                "kaflite.server",
                *self.args,
                "--override",
                f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "--override",
                f"log.dirs={self.data_dir}",
            ]
        else:
            cmd = [
                sys.executable,
                *self.python_args,
                "-m",
                "kaflite",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--log-dir",
                str(self.data_dir),
                *self.args,
            ]
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def start(self, wait: float | None = 60) -> BrokerProcess:
        """Popen the broker; then, unless `wait` is None (the caller times the start itself), return once
        its port accepts a connection, within `wait` seconds."""
        if self.proc is not None:
            raise RuntimeError("the broker has been started already")
        if self.log_path is None:
            fd, name = tempfile.mkstemp(
                prefix=f"{self.data_dir.name}-broker-", suffix=".log", dir=self.data_dir.parent
            )
            os.close(fd)
            self.log_path = Path(name)
        env = dict(os.environ, **self.env) if self.env is not None else None
        with open(self.log_path, self.log_mode) as out:  # the child keeps its own descriptor
            self.started = time.perf_counter()
            self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT, env=env)
        if wait is not None:
            try:
                self.wait_listening(wait)
            except BaseException:
                self._kill()  # its log is kept: the error names it
                self._ended = True
                raise
        return self

    def wait_listening(self, timeout: float = 60) -> None:
        """Return once the broker's port accepts a connection; RuntimeError, with its log's tail, when it
        exits first or does not listen within `timeout` s."""
        proc = self.proc
        assert proc is not None, "the broker has not been started"
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the broker exited ({proc.returncode}) before listening; {self._tail()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the broker did not listen within {timeout:.0f} s; {self._tail()}"
                    ) from None
                time.sleep(0.05)

    def log(self) -> str:
        """The broker's output so far."""
        try:
            return self.log_path.read_text(errors="replace") if self.log_path is not None else ""
        except FileNotFoundError:
            return ""

    def _tail(self) -> str:
        return f"its log ({self.log_path}) ends:\n{self.log()[-LOG_TAIL:]}"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace: float = 60, strict: bool = True) -> float:
        """SIGTERM and wait up to `grace` s: the seconds the clean stop took (0.0 when it was stopped
        already). After `grace` s it is killed, and `strict` raises RuntimeError (with its log's tail)."""
        if self.proc is None or self._ended:
            return 0.0
        self._ended = True
        if self.proc.poll() is not None:  # it exited by itself: something went wrong, its log is kept
            print(
                f"the broker (pid {self.proc.pid}) had exited by itself ({self.proc.returncode}); its log: "
                f"{self.log_path}",
                file=sys.stderr,
            )
            return 0.0
        t0 = time.perf_counter()
        clean = stop_process(self.proc, grace)
        took = time.perf_counter() - t0
        if not clean and strict:
            raise RuntimeError(f"the broker did not stop within {grace:.0f} s of SIGTERM; {self._tail()}")
        self._drop_log()
        return took

    def kill(self) -> None:
        """SIGKILL (no clean stop, as a crash) and reap; its log is removed if it is the temporary one."""
        self._kill()
        self._ended = True
        self._drop_log()

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def _drop_log(self) -> None:
        if self.owns_log and self.log_path is not None:
            self.log_path.unlink(missing_ok=True)

    # what the kernel says about the broker
    def cpu(self) -> tuple[float, float]:
        """(user, system) CPU seconds of the broker so far, all its threads."""
        return proc_cpu(self.pid)

    def cpu_seconds(self) -> float:
        return proc_cpu_seconds(self.pid)

    def rss_mib(self) -> float:
        return rss_mib(self.pid)

    def peak_rss_mib(self) -> float:
        return peak_rss_mib(self.pid)

    def minor_faults(self) -> int:
        return minor_faults(self.pid)

    def switches(self) -> tuple[int, int]:
        return switches(self.pid)

    def __enter__(self) -> BrokerProcess:
        return self.start() if self.proc is None else self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.stop()
        else:  # the bench failed: the broker must not outlive it, and a second error would hide the first
            self.stop(strict=False)
