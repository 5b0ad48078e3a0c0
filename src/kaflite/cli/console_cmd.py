"""`kaflite console`: the web console for any Kafka-compatible cluster (kaflite.console).

    kaflite console -b 127.0.0.1:9092                  # http://127.0.0.1:8080, read-only
    kaflite console -b broker:9092 --allow-writes --hide-values --port 9000
    kaflite console -b 127.0.0.1:9092 --schema-registry http://127.0.0.1:8081   # and the Schemas pages

It is its own process and a plain Kafka client: it never touches a broker's files, so it works against
Apache Kafka too. It binds 127.0.0.1 unless told otherwise (it has no login: exposing it is a choice).
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Annotated

import typer

from kaflite.cli.common import DEFAULT_BOOTSTRAP, EXIT_USAGE, Bootstrap, check_reachable, fail, handle_errors

__all__ = ["register"]


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@handle_errors
def console_command(
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    host: Annotated[str, typer.Option("--host", help="Address to bind (default loopback only).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", min=0, max=65535, help="HTTP port.")] = 8080,
    allow_writes: Annotated[bool, typer.Option("--allow-writes",
        help="Allow producing (and re-producing) records from the pages; read-only without it.")] = False,
    hide_values: Annotated[bool, typer.Option("--hide-values",
        help="Never show or export message values and header values (sizes only).")] = False,
    sample_interval: Annotated[float, typer.Option("--sample-interval", min=0.2,
        help="Seconds between samples of offsets and lag (rates, lag charts).")] = 5.0,
    timeout: Annotated[float, typer.Option("--timeout", min=0.5, help="Seconds to wait for the cluster per request.")] = 10.0,
    schema_registry: Annotated[str | None, typer.Option("--schema-registry", envvar="KAFLITE_SCHEMA_REGISTRY",
        help="A schema registry (http://host:port, Confluent's REST API) to show on the Schemas pages.")] = None,
) -> None:
    """Serve the web console: cluster, topics, messages, consumer groups and lag, the assignment lab."""
    try:
        import uvicorn

        from kaflite.console.app import ConsoleSettings, create_app
    except ImportError as err:
        fail(f"the console needs its web stack ({err.name} is missing): pip install 'kaflite[console]'", EXIT_USAGE)
    if schema_registry and not schema_registry.startswith(("http://", "https://")):
        fail(f"--schema-registry must be http://host:port, got {schema_registry!r}", EXIT_USAGE)
    check_reachable(bootstrap_server)
    if not _is_loopback(host):
        typer.echo(f"warning: binding {host}: the console has no login; anyone who reaches this address sees "
                   f"the cluster{' and can produce to it' if allow_writes else ''}", err=True)
    # bound here, before the line that says where the console is: a busy port is one error line, never
    # the success line followed by uvicorn's own error (and --port 0 prints the port it got)
    sock = _listen(host, port)
    port = sock.getsockname()[1]
    app = create_app(ConsoleSettings(bootstrap_server, allow_writes=allow_writes, hide_values=hide_values,
                                     sample_interval=sample_interval, timeout=timeout,
                                     schema_registry=schema_registry or None))
    mode = "writes enabled" if allow_writes else "read-only"
    shown = "http://" + (f"[{host}]" if ":" in host else host) + f":{port}"
    extra = (", values hidden" if hide_values else "") + (f", schemas from {schema_registry}" if schema_registry else "")
    typer.echo(f"kaflite console on {shown} for {bootstrap_server} ({mode}{extra})")
    try:
        uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False)).run(sockets=[sock])
    finally:
        sock.close()


def _listen(host: str, port: int) -> socket.socket:
    try:
        family, kind, proto, _name, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as err:
        fail(f"--host: cannot resolve {host!r}: {err.strerror or err}", EXIT_USAGE)
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        sock.bind(address)
        sock.listen(128)
    except OSError as err:
        sock.close()
        fail(f"--port: cannot listen on {host}:{port}: {err.strerror or err}")
    return sock


def register(app: typer.Typer) -> None:
    app.command("console")(console_command)
