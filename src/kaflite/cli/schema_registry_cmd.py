"""`kaflite schema-registry`: Confluent Schema Registry's REST API, stored in the cluster's `_schemas` topic.

    kaflite schema-registry -b 127.0.0.1:9092                         # http://127.0.0.1:8081
    kaflite schema-registry -b broker:9092 --listen http://0.0.0.0:8081

A plain Kafka client of the cluster (kaflite's or Apache Kafka's): it replays `_schemas` at start and writes
every change there. Run one instance per cluster for now (docs/schema-registry.md: the multi-instance plan).
"""

from __future__ import annotations

import asyncio
import signal
from typing import TYPE_CHECKING, Annotated

import typer

from kaflite.cli.common import DEFAULT_BOOTSTRAP, EXIT_USAGE, Bootstrap, check_reachable, fail, handle_errors

if TYPE_CHECKING:
    from kaflite.schema_registry.service import RegistryService

__all__ = ["register"]


@handle_errors
def schema_registry_command(
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    listen: Annotated[str, typer.Option("--listen", "-l",
        help="Where to serve the REST API (http://host:port; port 0 picks a free one).")] = "http://127.0.0.1:8081",
    topic: Annotated[str, typer.Option("--topic", help="The topic holding the schemas.")] = "_schemas",
    timeout: Annotated[float, typer.Option("--timeout", min=0.5,
        help="Seconds to wait for the cluster (replay at start, each write).")] = 10.0,
) -> None:
    """Serve a schema registry (Confluent's REST API) on the cluster's _schemas topic."""
    from kaflite.schema_registry.service import RegistryService, parse_listener

    try:
        host, port = parse_listener(listen)
    except ValueError as err:
        fail(str(err), EXIT_USAGE)
    check_reachable(bootstrap_server)
    asyncio.run(_run(RegistryService(bootstrap_server, topic=topic, timeout=timeout), host, port))


async def _run(service: RegistryService, host: str, port: int) -> None:
    bound = await service.start(host, port)
    typer.echo(f"schema registry on http://{host}:{bound} (topic {service.store.topic}, "
               f"{service.state.applied} records replayed, next id {service.state.max_id + 1})", err=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await service.stop()


def register(app: typer.Typer) -> None:
    app.command("schema-registry")(schema_registry_command)
