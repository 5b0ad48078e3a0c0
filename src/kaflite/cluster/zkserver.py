"""Start and stop a real standalone Apache ZooKeeper for a local cluster (tests, `kaflite cluster up`).

Rules:
- ZooKeeper is Debian's package run from Java by us (`ZooKeeperServerMain` with a zoo.cfg we write),
  never the system service: its data, its log and its port belong to the caller's directory;
- it listens on 127.0.0.1 only, with the admin server (Jetty on 8080) and the four-letter-word
  commands turned off: nothing but the client port is opened;
- "started" means it answered a real client handshake (ConnectRequest -> ConnectResponse) on its
  port, not merely that the port accepts connections (ZooKeeper binds before it serves);
- it is stopped by its pid: SIGTERM, then SIGKILL after a bounded wait;
- where Java or the jars are missing, `missing_reason()` says which, in one line (callers skip or
  refuse with it), and nothing is started.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

__all__ = ["ZooKeeperServer", "ZooKeeperStartError", "find_classpath", "find_java", "missing_reason"]

MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
# Debian's zookeeper.jar names its dependencies in its manifest's Class-Path, so one jar is enough;
# slf4j-simple (when present) sends ZooKeeper's log lines to our log file instead of nowhere.
_ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
_SLF4J_BINDING = Path("/usr/share/java/slf4j-simple.jar")


class ZooKeeperStartError(RuntimeError):
    """ZooKeeper did not start or did not answer in time (the message names its log file)."""


def find_java() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    return shutil.which("java")


def find_classpath() -> str | None:
    """ZooKeeper's classpath: $KAFLITE_ZOOKEEPER_CLASSPATH, else Debian's jars; None when absent."""
    explicit = os.environ.get("KAFLITE_ZOOKEEPER_CLASSPATH")
    if explicit:
        return explicit
    if not _ZOOKEEPER_JAR.is_file():
        return None
    parts = [str(_ZOOKEEPER_JAR)]
    if _SLF4J_BINDING.is_file():
        parts.append(str(_SLF4J_BINDING))
    return ":".join(parts)


def missing_reason() -> str | None:
    """Why a ZooKeeper cannot be started here (one line), or None when it can."""
    if find_java() is None:
        return "Java not found (install a JRE, e.g. Debian's default-jre-headless, or set JAVA_HOME)"
    if find_classpath() is None:
        return (
            f"ZooKeeper's jars not found ({_ZOOKEEPER_JAR}: install Debian's zookeeper package, "
            "as ./run.sh does when root, or set KAFLITE_ZOOKEEPER_CLASSPATH)"
        )
    return None


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def zookeeper_handshake(host: str, port: int, timeout_s: float) -> bool:
    """True when a ZooKeeper serves on host:port: a ConnectRequest gets a ConnectResponse with a session.

    The session opened is closed at once (closeSession, op -11) so it does not linger until expiry.
    """
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            s.settimeout(timeout_s)
            # ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId, passwd (buffer), readOnly
            body = struct.pack(">iqiqi16s?", 0, 0, 4000, 0, 16, b"\0" * 16, False)
            s.sendall(struct.pack(">i", len(body)) + body)
            head = _recv_exact(s, 4)
            (size,) = struct.unpack(">i", head)
            if size < 16:
                return False
            reply = _recv_exact(s, size)
            _, _, session_id = struct.unpack(">iiq", reply[:16])
            if session_id == 0:
                return False
            close = struct.pack(">ii", 1, -11)  # RequestHeader(xid=1, type=closeSession)
            s.sendall(struct.pack(">i", len(close)) + close)
            try:
                _recv_exact(s, 4)
            except OSError:
                pass
            return True
    except (OSError, struct.error):
        return False


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


class ZooKeeperServer:
    """One standalone ZooKeeper process whose files live under `directory`.

    `tick_time_ms` bounds the session timeouts clients may negotiate (from 2 ticks; the maximum is
    set to 60 s). Use as a context manager or call start() / stop().
    """

    def __init__(
        self,
        directory: Path | str,
        port: int = 0,
        host: str = "127.0.0.1",
        tick_time_ms: int = 500,
        heap_mb: int = 256,
    ) -> None:
        self.directory = Path(directory)
        self.host = host
        self.port = port
        self.tick_time_ms = tick_time_ms
        self.heap_mb = heap_mb
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        """The `zookeeper.connect` string of this server (no chroot)."""
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.directory / "zookeeper.log"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def write_config(self) -> Path:
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        cfg = self.directory / "zoo.cfg"
        lines = [
            f"tickTime={self.tick_time_ms}",
            f"dataDir={data}",
            f"clientPort={self.port}",
            f"clientPortAddress={self.host}",
            f"minSessionTimeout={2 * self.tick_time_ms}",
            "maxSessionTimeout=60000",
            "maxClientCnxns=0",
            "admin.enableServer=false",
            "4lw.commands.whitelist=",
            # a local cluster's data is small: purge old snapshots and transaction logs hourly
            "autopurge.snapRetainCount=3",
            "autopurge.purgeInterval=1",
        ]
        cfg.write_text("\n".join(lines) + "\n")
        return cfg

    def start(self, timeout_s: float = 60.0) -> None:
        """Start ZooKeeper and wait until it answers a client handshake; ZooKeeperStartError otherwise."""
        reason = missing_reason()
        if reason is not None:
            raise ZooKeeperStartError(reason)
        java, classpath = find_java(), find_classpath()
        assert java is not None and classpath is not None
        self.directory.mkdir(parents=True, exist_ok=True)
        chosen = self.port
        # a port picked free may be taken before ZooKeeper binds it: try a few
        for _attempt in range(3):
            self.port = chosen or _free_port(self.host)
            cfg = self.write_config()
            cmd = [
                java,
                f"-Xmx{self.heap_mb}m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",  # start fast; a local ZooKeeper never gets hot
                "-Dzookeeper.admin.enableServer=false",
                "-Dzookeeper.4lw.commands.whitelist=",
                "-cp",
                classpath,
                MAIN_CLASS,
                str(cfg),
            ]
            log = open(self.log_path, "ab")
            try:
                self.proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.directory,
                    start_new_session=True,  # a Ctrl-C meant for the caller does not reach it: stop() does
                )
            finally:
                log.close()
            if self._wait_ready(timeout_s):
                return
            self.stop()
            if chosen:
                break
        raise ZooKeeperStartError(
            f"ZooKeeper did not answer on {self.host}:{self.port} within {timeout_s:.0f}s (see {self.log_path})"
        )

    def _wait_ready(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                return False
            if zookeeper_handshake(self.host, self.port, timeout_s=2.0):
                return True
            time.sleep(0.1)
        return False

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM, then SIGKILL when it has not exited within `timeout_s`."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout_s)
        self.proc = None

    def kill(self) -> None:
        """SIGKILL (a crash, for fault tests)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def __enter__(self) -> ZooKeeperServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
