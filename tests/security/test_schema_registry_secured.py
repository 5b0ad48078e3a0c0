"""The schema registry as a client of secured listeners: its Kafka clients (the `_schemas` store's admin
client, producer and consumers, and the writer election's group) take the security settings given, so a
registry runs against SASL_SSL (SCRAM over TLS) and SSL with a client certificate; wrong credentials stop
it at start with the client's error, within its timeout."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from seckit import SCRAM_USERS, Certs, Secured

from helpers import stop_process
from registry_helpers import ORDER_V1, ORDER_V2, RunningRegistry

pytestmark = pytest.mark.timeout(120)


def sasl_ssl(certs: Certs, user: str = "carol", password: str | None = None) -> dict[str, Any]:
    return {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": user,
            "sasl.password": SCRAM_USERS[user] if password is None else password,
            "ssl.ca.location": str(certs.ca_file)}


def test_registry_over_sasl_ssl_and_mtls(secured: Secured, certs: Certs) -> None:
    topic = f"_schemas_sasl_{uuid.uuid4().hex[:6]}"
    first = RunningRegistry(secured.addr("SASL_SSL"), topic, client_config=sasl_ssl(certs), elect_writer=True)
    try:
        client = first.client()
        v1 = client.register_schema("orders-value", Schema(json.dumps(ORDER_V1), "AVRO"))
        v2 = client.register_schema("orders-value", Schema(json.dumps(ORDER_V2), "AVRO"))
        assert (v1, v2) == (1, 2)
        assert first.service.election is not None and first.service.election.is_writer
    finally:
        first.stop()
    # the same topic read over the MTLS listener (a client certificate), every schema and id replayed
    mtls = {"security.protocol": "SSL", "ssl.ca.location": str(certs.ca_file),
            "ssl.certificate.location": str(certs.client_cert), "ssl.key.location": str(certs.client_key)}
    second = RunningRegistry(secured.addr("MTLS"), topic, client_config=mtls)
    try:
        latest = second.client().get_latest_version("orders-value")
        assert (latest.version, latest.schema_id) == (2, 2)
        assert json.loads(latest.schema.schema_str) == ORDER_V2
    finally:
        second.stop()


def test_wrong_password_stops_the_registry_at_start(secured: Secured, certs: Certs) -> None:
    from kaflite.schema_registry.service import RegistryService
    from kaflite.schema_registry.store import StoreError

    service = RegistryService(secured.addr("SASL_SSL"), topic=f"_schemas_bad_{uuid.uuid4().hex[:6]}",
                              client_config=sasl_ssl(certs, password="wrong"), timeout=30.0)
    t0 = time.monotonic()
    with pytest.raises(StoreError, match="refused the registry's client: .*SASL authentication error"):
        asyncio.run(service.start("127.0.0.1", 0))
    elapsed = time.monotonic() - t0
    print(f"wrong password refused after {elapsed:.2f} s")
    assert elapsed < 15  # the registry's timeout is 30 s: it did not wait it out


def test_cli_registry_with_command_config_and_client_properties(secured: Secured, certs: Certs,
                                                                tmp_path: Path) -> None:
    """`kaflite schema-registry --command-config` takes a Java client properties file (SCRAM-SHA-512 over
    TLS, JAAS and a PEM trust store); `-X` takes librdkafka's keys, and a refused login exits 1 with the
    client's reason."""
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                     f'username="dave" password="{SCRAM_USERS["dave"]}";\n'
                     f"ssl.truststore.type=PEM\nssl.truststore.location={certs.ca_file}\n")
    topic = f"_schemas_cli_{uuid.uuid4().hex[:6]}"
    base = [sys.executable, "-m", "kaflite", "schema-registry", "-b", secured.addr("SASL_SSL"),
            "--listen", "http://127.0.0.1:0", "--topic", topic]
    proc = subprocess.Popen([*base, "--command-config", str(props)], stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline().decode()
        while line.startswith("%"):  # librdkafka's own log lines (its default logger writes to stderr)
            line = proc.stderr.readline().decode()
        assert line.startswith("schema registry on http://127.0.0.1:"), line
        client = SchemaRegistryClient({"url": line.split()[3]})
        assert client.register_schema("orders-value", Schema(json.dumps(ORDER_V1), "AVRO")) == 1
    finally:
        stop_process(proc, signal.SIGTERM)
    assert proc.returncode == 0
    # -X with librdkafka's own keys reaches the same topic; a wrong password is refused at once
    x = ["-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", "sasl.username=carol",
         "-X", f"ssl.ca.location={certs.ca_file}"]
    t0 = time.monotonic()
    bad = subprocess.run([*base, *x, "-X", "sasl.password=wrong", "--timeout", "60"], capture_output=True,
                         text=True, timeout=90)
    assert bad.returncode == 1 and "refused the registry's client" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr
    assert time.monotonic() - t0 < 40  # well before its 60 s timeout (the rest: starting Python, loaded)
    usage = subprocess.run([*base, "-X", "security.protocol"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2 and "-X: expected KEY=VALUE" in usage.stderr
    good = RunningRegistry(secured.addr("SASL_SSL"), topic, client_config=sasl_ssl(certs))
    try:  # what the CLI registered over SCRAM-SHA-512 is there for a SCRAM-SHA-256 client
        assert good.client().get_latest_version("orders-value").schema_id == 1
    finally:
        good.stop()


def _serve_sasl_ssl_only(certs: Certs, tmp_path: Path, registry_keys: dict[str, str]) -> list[str]:
    from seckit import KEY_PASSWORD, PLAIN_USERS, jaas_plain

    from helpers import free_port

    port, registry_port = free_port(), free_port()
    settings = {
        "listeners": f"SASL_SSL://127.0.0.1:{port}", "security.inter.broker.protocol": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN", "log.dirs": str(tmp_path / "data"),
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker_keystore),
        "ssl.key.password": KEY_PASSWORD, "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca_file), "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas_plain(PLAIN_USERS),
        "schema.registry.listener": f"http://127.0.0.1:{registry_port}",
        **registry_keys,
    }
    cmd = [sys.executable, "-m", "kaflite", "serve"]
    for key, value in settings.items():
        cmd += ["-o", f"{key}={value}"]
    return cmd + [f"--registry-port={registry_port}"]  # split off below: the port the test asks


def test_serve_co_hosts_the_registry_on_a_sasl_ssl_only_broker(certs: Certs, tmp_path: Path) -> None:
    """`kaflite serve` with only a SASL_SSL listener: the co-hosted registry reaches it with the
    schema.registry.kafkastore.* client properties (Java names: JAAS, a PEM trust store), as Confluent's
    registry does with kafkastore.*."""
    import urllib.request

    from helpers import wait_listening

    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";'
    *cmd, port_arg = _serve_sasl_ssl_only(certs, tmp_path, {
        "schema.registry.kafkastore.security.protocol": "SASL_SSL",
        "schema.registry.kafkastore.sasl.mechanism": "PLAIN",
        "schema.registry.kafkastore.sasl.jaas.config": jaas,
        "schema.registry.kafkastore.ssl.truststore.type": "PEM",
        "schema.registry.kafkastore.ssl.truststore.location": str(certs.ca_file)})
    registry_port = int(port_arg.split("=")[1])
    log_path = tmp_path / "serve.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_listening(proc, registry_port, lambda: log_path.read_text(errors="replace"), 60, "schema registry")
        url = f"http://127.0.0.1:{registry_port}"
        body = json.dumps({"schema": json.dumps(ORDER_V1)}).encode()
        request = urllib.request.Request(f"{url}/subjects/orders-value/versions", data=body, method="POST",
                                         headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert json.loads(answer.read())["id"] == 1
        with urllib.request.urlopen(f"{url}/subjects", timeout=30) as answer:
            assert json.loads(answer.read()) == ["orders-value"]
    finally:
        stop_process(proc, signal.SIGTERM)
    assert proc.returncode == 0, log_path.read_text(errors="replace")[-3000:]


def test_serve_without_a_listener_for_the_registry_exits_1_naming_the_key(certs: Certs, tmp_path: Path) -> None:
    *cmd, _port = _serve_sasl_ssl_only(certs, tmp_path, {})
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "schema.registry.listener needs a PLAINTEXT listener" in proc.stderr
    assert "schema.registry.kafkastore.security.protocol" in proc.stderr
