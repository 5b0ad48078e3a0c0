"""`kaflite schema-registry`: Confluent Schema Registry's REST API, stored in the cluster's `_schemas` topic.

    kaflite schema-registry -b 127.0.0.1:9092                         # http://127.0.0.1:8081
    kaflite schema-registry -b broker:9092 --listen http://0.0.0.0:8081
    kaflite schema-registry -b broker:9094 --command-config client.properties     # SASL / TLS to the cluster
    kaflite schema-registry -b broker:9094 -X security.protocol=SASL_SSL -X sasl.mechanisms=SCRAM-SHA-256 ...

A plain Kafka client of the cluster (kaflite's or Apache Kafka's): it replays `_schemas` at start and writes
every change there. Several instances on one topic need --elect-writer on each (docs/schema-registry.md).
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kaflite.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_USAGE,
    Bootstrap,
    check_reachable,
    fail,
    handle_errors,
    parse_key_values,
)
from kaflite.cli.kafka_flags import command_config as command_config_settings

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
    elect_writer: Annotated[bool, typer.Option("--elect-writer",
        help="One of several instances on the topic: a consumer group elects the writer, the others "
             "forward writes to it.")] = False,
    advertised_url: Annotated[str | None, typer.Option("--advertised-url",
        help="With --elect-writer: the URL the other instances forward writes to (default: --listen's, "
             "127.0.0.1 for a wildcard host).")] = None,
    command_config: Annotated[Path | None, typer.Option("--command-config", dir_okay=False,
        help="Client properties for reaching the cluster, as Kafka's tools read them (security.protocol, "
             "sasl.mechanism, sasl.jaas.config, PEM ssl.truststore / ssl.keystore).")] = None,
    client_property: Annotated[list[str] | None, typer.Option("--client-property", "-X", metavar="KEY=VALUE",
        help="A librdkafka property of the registry's Kafka clients (repeatable), e.g. "
             "-X security.protocol=SASL_SSL; applied after --command-config.")] = None,
) -> None:
    """Serve a schema registry (Confluent's REST API) on the cluster's _schemas topic."""
    # imported here, not at the top: the service and its schema types (protobuf parser, jsonschema) took
    # ~0.2-0.3 s of every `kaflite` command's start, and only this command and CoHosted use them
    from kaflite.schema_registry.service import RegistryService, parse_listener

    try:
        host, port = parse_listener(listen)
    except ValueError as err:
        fail(str(err), EXIT_USAGE)
    # the same settings for every client of the registry: the store's admin client, producer and
    # consumers, and the writer election's group member
    client_config = {**command_config_settings(command_config), **parse_key_values(client_property, "-X")}
    check_reachable(bootstrap_server)
    asyncio.run(_run(RegistryService(bootstrap_server, topic=topic, client_config=client_config, timeout=timeout,
                                     elect_writer=elect_writer, advertised=advertised_url), host, port))


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


class CoHosted:
    """The registry `kaflite serve` runs beside its broker when schema.registry.listener is set: started
    once the broker listens (a client of its first listener of `protocol`, with the librdkafka settings
    `client_config` from the schema.registry.kafkastore.* keys), stopped before the broker stops.
    If it cannot start, the broker stops too (exit 1): a configured registry that is not there is an error."""

    def __init__(self, listener: str, client_config: dict[str, str] | None = None,
                 protocol: str = "PLAINTEXT") -> None:
        from kaflite.schema_registry.service import parse_listener

        self.host, self.port = parse_listener(listener)
        self.client_config = dict(client_config or {})
        self.protocol = protocol
        self.task: asyncio.Task[None] | None = None
        self.service: RegistryService | None = None
        self.failed = False

    def start(self, bootstrap: str, say: Callable[[str], None]) -> None:
        self.task = asyncio.get_running_loop().create_task(self._start(bootstrap, say))

    async def _start(self, bootstrap: str, say: Callable[[str], None]) -> None:
        from kaflite.schema_registry.service import RegistryService

        service = RegistryService(bootstrap, client_config=self.client_config)
        try:
            bound = await service.start(self.host, self.port)
        except Exception as err:
            say(f"kaflite: schema registry on http://{self.host}:{self.port} failed to start: {err}")
            self.failed = True
            os.kill(os.getpid(), signal.SIGTERM)
            return
        self.service = service
        say(f"kaflite: schema registry on http://{self.host}:{bound} (topic {service.store.topic})")

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        if self.service is not None:
            await self.service.stop()


def register(app: typer.Typer) -> None:
    app.command("schema-registry")(schema_registry_command)
