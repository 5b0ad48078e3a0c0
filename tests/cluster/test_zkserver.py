"""The ZooKeeper launcher (cluster.zkserver): a real standalone server, loopback only, stopped by pid."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from helpers import missing_zookeeper, require
from kaflite.cluster.zkserver import ZooKeeperServer, ZooKeeperStartError, missing_reason, zookeeper_handshake


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie has exited: it only waits for its parent's wait(), which stop() does
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def test_shared_server_answers_a_client_handshake(zookeeper: ZooKeeperServer) -> None:
    assert zookeeper.host == "127.0.0.1"
    assert zookeeper_handshake(zookeeper.host, zookeeper.port, timeout_s=5)
    cfg = (zookeeper.directory / "zoo.cfg").read_text()
    assert "clientPortAddress=127.0.0.1" in cfg and "admin.enableServer=false" in cfg


def test_four_letter_words_are_refused(zookeeper: ZooKeeperServer) -> None:
    # "ruok" would answer "imok" when allowed; ZooKeeper answers that it is not in the whitelist
    with socket.create_connection((zookeeper.host, zookeeper.port), timeout=5) as s:
        s.sendall(b"ruok")
        s.settimeout(5)
        answer = b""
        while True:
            chunk = s.recv(100)
            if not chunk:
                break
            answer += chunk
    assert b"imok" not in answer


def test_start_and_stop_by_pid(zookeeper_private: ZooKeeperServer) -> None:
    pid = zookeeper_private.pid
    assert pid is not None and _alive(pid)
    zookeeper_private.stop()
    assert not _alive(pid)
    assert not zookeeper_handshake("127.0.0.1", zookeeper_private.port, timeout_s=1)
    # data survive a restart on the same directory and port
    zookeeper_private.start()
    assert zookeeper_handshake("127.0.0.1", zookeeper_private.port, timeout_s=5)


def test_missing_jars_are_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require(missing_zookeeper())
    monkeypatch.setenv("KAFLITE_ZOOKEEPER_CLASSPATH", str(tmp_path / "nothing.jar"))
    server = ZooKeeperServer(tmp_path / "zk")
    with pytest.raises(ZooKeeperStartError) as e:
        server.start(timeout_s=30)
    assert "zookeeper.log" in str(e.value)
    assert server.proc is None


def test_missing_reason_names_java(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    reason = missing_reason()
    assert reason is not None and "Java not found" in reason
