"""`kaflite certs DIR`: a development CA, a broker certificate and client certificates in PEM, and the
broker keys that use them, so TLS can be tried in one command. Not for production (docs/security.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kaflite.cli.common import fail

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    app.command("certs")(certs)


def certs(
    directory: Annotated[Path, typer.Argument(help="Where to write the PEM files (created if missing).")],
    host: Annotated[list[str] | None, typer.Option("--host", help="A host name or address of the broker "
                                                   "(repeatable; default 127.0.0.1 and localhost).")] = None,
    client: Annotated[list[str] | None, typer.Option("--client", help="A client certificate's common name "
                                                     "(repeatable; default: client).")] = None,
    days: Annotated[int, typer.Option(help="Validity of the broker and client certificates.")] = 825,
    force: Annotated[bool, typer.Option(help="Overwrite existing files.")] = False,
) -> None:
    """Create a development CA, a broker certificate and client certificates (PEM) for TLS listeners."""
    from kaflite.server.security.certs import issue, make_ca, write_private

    hosts = tuple(host or ["127.0.0.1", "localhost"])
    clients = client or ["client"]
    directory.mkdir(parents=True, exist_ok=True)
    names = ["ca.pem", "ca.key", "broker.keystore.pem", *(f"{c}.pem" for c in clients), *(f"{c}.key" for c in clients)]
    existing = [n for n in names if (directory / n).exists()]
    if existing and not force:
        fail(f"{directory}: {', '.join(existing)} already exist (--force overwrites them)")
    ca = make_ca("CN=kaflite development CA")
    (directory / "ca.pem").write_text(ca.cert_pem)
    write_private(directory / "ca.key", ca.key_pem)
    broker = issue(ca, f"CN={hosts[0]},O=kaflite", hosts=hosts, days=days)
    write_private(directory / "broker.keystore.pem", broker.keystore_pem())
    for name in clients:
        issued = issue(ca, f"CN={name},O=kaflite", days=days)
        (directory / f"{name}.pem").write_text(issued.cert_pem)
        write_private(directory / f"{name}.key", issued.key_pem)
    d = directory.resolve()
    typer.echo(f"wrote {', '.join(names)} to {d} (development only: the CA key is not encrypted)")
    typer.echo("broker (server.properties):")
    typer.echo(f"  listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093\n"
               f"  ssl.keystore.type=PEM\n  ssl.keystore.location={d / 'broker.keystore.pem'}\n"
               f"  ssl.truststore.type=PEM\n  ssl.truststore.location={d / 'ca.pem'}\n"
               f"  ssl.client.auth=requested")
    first = clients[0]
    typer.echo("client (librdkafka / confluent-kafka):")
    typer.echo(f"  security.protocol=SSL\n  ssl.ca.location={d / 'ca.pem'}\n"
               f"  ssl.certificate.location={d / f'{first}.pem'}\n  ssl.key.location={d / f'{first}.key'}")
