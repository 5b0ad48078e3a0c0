"""`kaflite certs`: the files it writes serve an SSL listener that a client with its client certificate
reaches, with that certificate's subject as principal."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Producer

from kaflite.server.embedded import EmbeddedBroker


def test_kaflite_certs_makes_a_working_tls_setup(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "kaflite", "certs", str(tmp_path / "tls"), "--client", "app1"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert "ssl.keystore.location=" in out
    d = tmp_path / "tls"
    assert os.stat(d / "broker.keystore.pem").st_mode & 0o077 == 0 and os.stat(d / "ca.key").st_mode & 0o077 == 0
    again = subprocess.run([sys.executable, "-m", "kaflite", "certs", str(d)], capture_output=True, text=True,
                           timeout=60)
    assert again.returncode != 0 and "already exist" in again.stderr
    overrides = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
                 "ssl.keystore.location": str(d / "broker.keystore.pem"), "ssl.truststore.type": "PEM",
                 "ssl.truststore.location": str(d / "ca.pem"), "ssl.client.auth": "required"}
    with EmbeddedBroker(overrides=overrides) as b:
        port = {li.name: li.port for li in b.server.bound}["SSL"]
        p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
                      "ssl.ca.location": str(d / "ca.pem"), "ssl.certificate.location": str(d / "app1.pem"),
                      "ssl.key.location": str(d / "app1.key")})
        assert p.list_topics(timeout=10).brokers
        # librdkafka may drop its bootstrap connection after Metadata: a produce holds a broker connection
        p.produce("certs-cli", b"x")
        assert p.flush(20) == 0

        def principals() -> set[str]:
            return {c.session.principal for c in b.server._connections  # noqa: SLF001
                    if c.session.listener_name == "SSL"}

        deadline = time.monotonic() + 10  # librdkafka may be between its bootstrap and its broker connection
        while not b.call(principals) and time.monotonic() < deadline:
            p.poll(0.1)
        assert b.call(principals) == {"User:CN=app1,O=kaflite"}
