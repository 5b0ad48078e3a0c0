"""`kaflite cluster info`: brokers, controller, cluster id and the API versions each broker serves.

What `rpk cluster info` and `kafka-broker-api-versions.sh` print, through any Kafka cluster's own answers:
DescribeCluster (confluent-kafka's AdminClient) for the cluster id, the controller and the brokers, and an
ApiVersions request sent to each broker for the versions it serves. ApiVersions goes over a plain socket
in its version 0, which every broker answers (a broker that does not know the version a client asks for
answers in version 0 too), so the table is the broker's own.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from typing import Annotated

import typer

from kaflite.cli.common import (
    DEFAULT_BOOTSTRAP,
    Bootstrap,
    admin_client,
    admin_result,
    fail,
    handle_errors,
)

__all__ = ["ApiRange", "api_versions", "api_versions_lines", "register"]

cluster_app = typer.Typer(
    help="A local cluster (up), its health (status), brokers, controller, cluster id and API versions "
    "(like rpk cluster info and kafka-broker-api-versions.sh).",
    no_args_is_help=True,
)

_API_VERSIONS = 18
_REQUEST_HEADER = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_CORRELATION_ID = 12


@dataclass(frozen=True)
class ApiRange:
    api_key: int
    min_version: int
    max_version: int


def register(app: typer.Typer) -> None:
    from kaflite.cli import cluster_up, leader_election_cmd, reassign_cmd

    cluster_up.register_commands(cluster_app)
    app.add_typer(cluster_app, name="cluster")
    leader_election_cmd.register(app)
    reassign_cmd.register(app)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        out += chunk
    return bytes(out)


def api_versions(host: str, port: int, timeout: float = 10.0, client_id: str = "kaflite-cli") -> list[ApiRange]:
    """The API ranges a broker serves, from an ApiVersions v0 request (Kafka's request header v1)."""
    cid = client_id.encode()
    body = _REQUEST_HEADER.pack(_API_VERSIONS, 0, _CORRELATION_ID, len(cid)) + cid
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
        frame = _recv_exactly(sock, size)
    correlation, error, count = struct.unpack_from(">ihi", frame, 0)
    if correlation != _CORRELATION_ID:
        raise ConnectionError(f"ApiVersions answer with correlation id {correlation}, expected {_CORRELATION_ID}")
    if error:
        from kaflite.protocol.errors import ErrorCode

        try:
            name = ErrorCode(error).name.upper()
        except ValueError:
            name = str(error)
        raise ConnectionError(f"ApiVersions answered error {error} ({name})")
    return [ApiRange(*struct.unpack_from(">hhh", frame, 10 + 6 * i)) for i in range(count)]


def _api_name(key: int) -> tuple[str, int | None]:
    """Kafka's name of an API key and the newest version kaflite's protocol library knows (None: unknown)."""
    from kaflite.protocol.messages import newest_known_version, request_schema

    try:
        newest = newest_known_version(key)
        schema = request_schema(key, newest)
    except Exception:
        return f"UNKNOWN_{key}", None
    if schema is None:
        return f"UNKNOWN_{key}", None
    return schema.__name__.removesuffix("Request"), newest


def api_versions_lines(address: str, node_id: int, rack: str | None, ranges: list[ApiRange]) -> list[str]:
    """kafka-broker-api-versions.sh's block for one broker; `usable` is the newest version both the broker
    and this client's protocol library speak."""
    lines = [f"{address} (id: {node_id} rack: {rack if rack else 'null'}) -> ("]
    entries = []
    for r in sorted(ranges, key=lambda r: r.api_key):
        name, newest = _api_name(r.api_key)
        if newest is None or newest < r.min_version:
            usable = "UNSUPPORTED"
        else:
            usable = f"usable: {min(newest, r.max_version)}"
        entries.append(f"\t{name}({r.api_key}): {r.min_version} to {r.max_version} [{usable}]")
    lines += [e + ("," if i < len(entries) - 1 else "") for i, e in enumerate(entries)]
    lines.append(")")
    return lines


@cluster_app.command("info")
@handle_errors
def info(
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    show_api_versions: Annotated[
        bool,
        typer.Option("--api-versions/--no-api-versions", help="Also print each broker's API versions."),
    ] = True,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1, help="Seconds to wait for each answer.")] = 15.0,
) -> None:
    """The cluster id, its brokers (* marks the controller) and the API versions each broker serves."""
    admin = admin_client(bootstrap_server)
    desc = admin_result(admin.describe_cluster(request_timeout=timeout), timeout, "describing the cluster")
    controller = desc.controller.id if desc.controller is not None else None
    nodes = sorted(desc.nodes or [], key=lambda n: n.id)
    typer.echo("CLUSTER\n=======")
    typer.echo(desc.cluster_id or "(none)")
    typer.echo("")
    typer.echo("BROKERS\n=======")
    rows = [("ID", "HOST", "PORT", "RACK")]
    rows += [
        (f"{n.id}{'*' if n.id == controller else ''}", n.host, str(n.port), n.rack or "-") for n in nodes
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        typer.echo("  ".join(v.ljust(widths[i]) for i, v in enumerate(r[:-1])) + "  " + r[-1])
    typer.echo("")
    typer.echo(
        f"CONTROLLER: {controller}" if controller is not None and controller >= 0 else "CONTROLLER: none"
    )
    if not show_api_versions:
        return
    for n in nodes:
        typer.echo("")
        try:
            ranges = api_versions(n.host, n.port, timeout)
        except (OSError, struct.error) as err:
            fail(f"asking broker {n.id} at {n.host}:{n.port} for its API versions: {err}")
        for line in api_versions_lines(f"{n.host}:{n.port}", n.id, n.rack, ranges):
            typer.echo(line)
