"""Every client listener is bound with its security protocol and advertised as itself; KRaft controller
listeners (`controller.listener.names`) are neither bound nor advertised; `kaflite serve` prints the
addresses it really bound."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from kio.schema.metadata.v12.request import MetadataRequest
from kwire import WireClient

from kaflite.server.config import BrokerConfig
from kaflite.server.embedded import EmbeddedBroker


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _metadata_brokers(bootstrap: str) -> list[tuple[int, str, int]]:
    with WireClient(bootstrap) as c:
        r = c.request(MetadataRequest(topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    return [(b.node_id, b.host, b.port) for b in r.brokers]


def test_controller_listener_first_binds_and_advertises_the_plaintext_port(tmp_path: Path) -> None:
    plain, controller = _free_ports(2)
    overrides = {
        "listeners": f"CONTROLLER://127.0.0.1:{controller},PLAINTEXT://127.0.0.1:{plain}",
        "controller.listener.names": "CONTROLLER",
    }
    cfg = BrokerConfig.load(overrides=overrides)
    assert [(li.name, li.port, li.security_protocol) for li in cfg.client_listeners] == [("PLAINTEXT", plain, "PLAINTEXT")]
    with EmbeddedBroker(data_dir=tmp_path, overrides=overrides) as broker:
        assert broker.port == plain
        assert [(li.name, li.port) for li in broker.server.bound] == [("PLAINTEXT", plain)]
        assert not _listening(controller)
        assert _metadata_brokers(f"127.0.0.1:{plain}") == [(0, "127.0.0.1", plain)]


def test_two_client_listeners_each_answer_with_their_own_address(tmp_path: Path) -> None:
    internal, external = _free_ports(2)
    overrides = {
        "listeners": f"INTERNAL://127.0.0.1:{internal},EXTERNAL://127.0.0.1:{external}",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "advertised.listeners": f"INTERNAL://127.0.0.1:{internal},EXTERNAL://localhost:{external}",
        "inter.broker.listener.name": "INTERNAL",
    }
    with EmbeddedBroker(data_dir=tmp_path, overrides=overrides) as broker:
        assert sorted(li.port for li in broker.server.bound) == sorted([internal, external])
        assert _metadata_brokers(f"127.0.0.1:{internal}") == [(0, "127.0.0.1", internal)]
        assert _metadata_brokers(f"127.0.0.1:{external}") == [(0, "localhost", external)]
        assert str(broker.server.broker.advertised) == f"INTERNAL://127.0.0.1:{internal}"
        sessions = {li.name: li.security_protocol for li in broker.server.bound}
        assert sessions == {"INTERNAL": "PLAINTEXT", "EXTERNAL": "PLAINTEXT"}


def test_kaflite_serve_says_what_it_binds(tmp_path: Path) -> None:
    plain, controller = _free_ports(2)
    env = dict(os.environ)
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "kaflite", "serve", "--log-dir", str(tmp_path / "data"),
            "-o", f"listeners=CONTROLLER://127.0.0.1:{controller},PLAINTEXT://127.0.0.1:{plain}",
            "-o", "controller.listener.names=CONTROLLER",
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 60
        assert proc.stderr is not None
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("kaflite: broker"):
                break
        said = lines[-1] if lines else ""
        assert said.strip() == (
            f"kaflite: broker 0 listening on PLAINTEXT://127.0.0.1:{plain} (advertised PLAINTEXT://127.0.0.1:{plain})"
        ), "".join(lines)
        assert _listening(plain) and not _listening(controller)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def test_the_registration_before_binding_already_names_the_advertised_listeners(tmp_path: Path) -> None:
    """A broker registers itself (in a cluster: in ZooKeeper) before its sockets are bound; that first
    registration names `advertised.listeners`, not the listener's own address (clients given that address
    bypassed whatever the advertised one routes through, e.g. a proxy or NAT, until the bind re-registered)."""
    import asyncio

    from kaflite.server.broker import Broker
    from kaflite.server.config import Listener
    from kaflite.server.embedded import load_broker_config

    cfg = load_broker_config({"log.dirs": str(tmp_path), "listeners": "PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
                              "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
                              "advertised.listeners": "PLAINTEXT://proxy.example:19092"}, True)
    broker = Broker(cfg)
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(broker.start())
        reg = broker.metadata.brokers[broker.node_id]
        assert [(e.listener, e.host, e.port) for e in reg.endpoints] == [
            ("PLAINTEXT", "proxy.example", 19092), ("OTHER", "127.0.0.1", 0)]
        broker.set_bound_listeners([Listener("PLAINTEXT", "127.0.0.1", 5001, "PLAINTEXT"),
                                    Listener("OTHER", "127.0.0.1", 5002, "PLAINTEXT")])
        reg = broker.metadata.brokers[broker.node_id]
        assert [(e.listener, e.host, e.port) for e in reg.endpoints] == [
            ("PLAINTEXT", "proxy.example", 19092), ("OTHER", "127.0.0.1", 5002)]
    finally:
        loop.run_until_complete(broker.stop())
        loop.close()


def _start_fails(cfg: BrokerConfig) -> OSError:
    import asyncio
    import errno

    from kaflite.server.app import KafkaServer, new_event_loop

    loop = new_event_loop()
    try:
        server = KafkaServer(cfg)
        try:
            loop.run_until_complete(server.start())
        except OSError as e:
            assert e.errno == errno.EADDRINUSE, e
            return e
        loop.run_until_complete(server.stop())
        raise AssertionError("the broker started on an address in use")
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def test_an_address_in_use_stops_start_up_before_the_data_directory_is_touched(tmp_path: Path) -> None:
    """Every socket is bound before the broker opens its data directories (issue 32): a port in use, of a
    client listener or of metrics.listener, leaves no initialised directory behind (meta.properties,
    .lock, checkpoints) where there was none, and an existing directory as it was."""
    from kaflite.server.embedded import load_broker_config

    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "notes.txt").write_text("mine")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        for where in (tmp_path / "new", existing):
            err = _start_fails(load_broker_config({"log.dirs": str(where), "listeners": f"PLAINTEXT://127.0.0.1:{port}"},
                                                  True))
            assert f"('127.0.0.1', {port})" in str(err)
        err = _start_fails(load_broker_config({"log.dirs": str(tmp_path / "new"), "listeners": "PLAINTEXT://127.0.0.1:0",
                                               "metrics.listener": f"http://127.0.0.1:{port}"}, True))
        assert f"('127.0.0.1', {port})" in str(err)
    assert not (tmp_path / "new").exists()
    assert sorted(p.name for p in existing.iterdir()) == ["notes.txt"]
