"""`kaflite serve`: load server.properties (+ flags), validate it, and run the broker in the foreground.

Precedence: Kafka's defaults < `--dev` profile < `--config` file < `--override KEY=VALUE` < the
shortcut flags `--port` / `--log-dir` / `--host`. Configuration errors print the ConfigError line and exit
with code 2 before anything is bound; `--print-config` shows the effective configuration and exits.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from kaflite.cli.common import EXIT_FAILURE, EXIT_USAGE, fail, handle_errors, parse_key_values
from kaflite.server.config import DEV_PROFILE_WARNING, BrokerConfig, ConfigError, Listener
from kaflite.server.config.broker_config import REGISTRY_CLIENT_PREFIX

if TYPE_CHECKING:
    from kaflite.cli.schema_registry_cmd import CoHosted

__all__ = ["build_config", "register"]


def build_config(
    config: Path | None = None,
    overrides: list[str] | None = None,
    dev: bool = False,
    port: int | None = None,
    host: str | None = None,
    log_dir: Path | None = None,
) -> BrokerConfig:
    """The broker configuration `kaflite serve` would run with (raises CliFailure with exit code 2)."""
    pairs = parse_key_values(overrides, "--override")
    try:
        cfg = BrokerConfig.load(config, overrides=pairs, dev=dev)
        shortcuts: dict[str, str] = {}
        if port is not None or host is not None:
            shortcuts["listeners"] = _replace_client_listener(cfg, port, host)
        if log_dir is not None:
            shortcuts["log.dirs"] = str(log_dir)
        return cfg.with_overrides(shortcuts) if shortcuts else cfg
    except ConfigError as err:
        fail(err.message, EXIT_USAGE)


def _replace_client_listener(cfg: BrokerConfig, port: int | None, host: str | None) -> str:
    """`listeners` with the first client listener's port and/or host replaced (--port / --host)."""
    first = cfg.client_listeners[0]
    out = []
    for li in cfg.listeners:
        if li == first:
            li = Listener(
                li.name, host if host is not None else li.host, port if port is not None else li.port
            )
        out.append(str(li))
    return ",".join(out)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)


@handle_errors
def serve(
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="A Kafka server.properties file.", dir_okay=False)
    ] = None,
    override: Annotated[
        list[str] | None,
        typer.Option(
            "--override",
            "-o",
            metavar="KEY=VALUE",
            help="Set a configuration key (repeatable); wins over the file.",
        ),
    ] = None,
    dev: Annotated[
        bool,
        typer.Option("--dev", help="Dev profile: 100 ms initial rebalance delay, 1 MiB segments. Not durable."),
    ] = False,
    port: Annotated[
        int | None,
        typer.Option(
            "--port", "-p", min=0, max=65535, help="Port of the client listener (0 picks a free one)."
        ),
    ] = None,
    host: Annotated[str | None, typer.Option("--host", help="Host/interface of the client listener.")] = None,
    log_dir: Annotated[Path | None, typer.Option("--log-dir", help="Data directory (sets log.dirs).")] = None,
    print_config: Annotated[
        bool,
        typer.Option(
            "--print-config",
            help="Print the effective configuration as a server.properties file (grouped by source) and exit.",
        ),
    ] = False,
) -> None:
    """Run a kaflite broker in the foreground until Ctrl-C / SIGTERM."""
    cfg = build_config(config, override, dev, port, host, log_dir)
    err_console = Console(stderr=True, highlight=False)
    if print_config:
        typer.echo(cfg.to_properties(), nl=False)
        return
    if dev:
        err_console.print(
            Panel(escape(DEV_PROFILE_WARNING), title="kaflite --dev", border_style="yellow", style="yellow")
        )
    try:
        from kaflite.server.app import KafkaServer, run_broker
    except ImportError as err:
        fail(f"the kaflite broker cannot be started: {err}", EXIT_FAILURE)
    listeners = ", ".join(str(li) for li in cfg.client_listeners)
    err_console.print(
        f"kaflite: starting broker {cfg.broker_id} on {escape(listeners)}, data in {escape(str(cfg.log_dir))}"
    )
    registry = _co_hosted_registry(cfg)

    def started(server: KafkaServer) -> None:
        bound = ", ".join(f"{li} (advertised {server.broker.advertised_for(li.name)})" for li in server.bound)
        err_console.print(f"kaflite: broker {cfg.broker_id} listening on {escape(bound)}", soft_wrap=True)
        if registry is not None:
            # the first listener of the protocol the registry's client speaks (PLAINTEXT unless
            # schema.registry.kafkastore.security.protocol says otherwise)
            usable = [li for li in server.bound if (li.security_protocol or "PLAINTEXT") == registry.protocol]
            if not usable:
                err_console.print(f"kaflite: schema.registry.listener needs a {registry.protocol} listener to reach "
                                  f"the broker (the registry's client speaks {registry.protocol}: "
                                  f"{REGISTRY_CLIENT_PREFIX}security.protocol); listeners are "
                                  f"{escape(', '.join(str(li) for li in server.bound))}", soft_wrap=True)
                registry.failed = True
                os.kill(os.getpid(), signal.SIGTERM)
                return
            host = usable[0].host if usable[0].host not in ("", "0.0.0.0", "::") else "127.0.0.1"
            registry.start(f"{host}:{usable[0].port}", lambda line: err_console.print(escape(line), soft_wrap=True))

    try:
        run_broker(cfg, started, registry.stop if registry is not None else None)
        if registry is not None and registry.failed:
            raise typer.Exit(EXIT_FAILURE)
    except KeyboardInterrupt:
        pass
    except ConfigError as err:  # a rule only the broker can check (e.g. the data directory's contents)
        fail(err.message, EXIT_USAGE)
    except OSError as err:  # the port is taken, the data directory is not writable, ...
        fail(f"cannot start the broker: {startup_error(err, cfg)}")


def _co_hosted_registry(cfg: BrokerConfig) -> CoHosted | None:
    """The schema registry to serve beside the broker (schema.registry.listener), if any."""
    listener = cfg.get("schema.registry.listener")
    if not listener:
        return None
    from kaflite.cli.kafka_flags import Refused, java_client_properties
    from kaflite.cli.schema_registry_cmd import CoHosted

    properties = cfg.registry_client_properties()
    try:
        client = java_client_properties(properties, f"{REGISTRY_CLIENT_PREFIX}*", security_only=False)
    except Refused as err:
        fail(err.message, EXIT_USAGE)
    return CoHosted(str(listener), client, properties.get("security.protocol", "PLAINTEXT").upper())


def startup_error(err: OSError, cfg: BrokerConfig) -> str:
    """An OSError of the broker's start-up, blaming the key that caused it: the metrics listener or the
    client listeners for an address in use (the address is in asyncio's message), log.dirs for a data
    directory that is a file, else the OS's reason with the file."""
    import errno
    import re

    text = " ".join(str(err.strerror or err).split())
    if err.errno == errno.EADDRINUSE or "address already in use" in text.lower():
        m = re.search(r"\('([^']*)', (\d+)", text)
        metrics = cfg.get("metrics.listener")
        if m and metrics and re.search(rf":{m.group(2)}/?$", str(metrics)):
            return f"metrics.listener={metrics}: {m.group(1)}:{m.group(2)} is already in use"
        where = f"{m.group(1)}:{m.group(2)} " if m else ""
        listeners = ",".join(str(li) for li in cfg.client_listeners)
        return f"listeners={listeners}: {where}is already in use".replace(": is", ": the address is")
    filename = getattr(err, "filename", None)
    if filename is not None and err.errno in (errno.EEXIST, errno.ENOTDIR):
        path = Path(filename)
        try:
            inside = path.resolve() == Path(cfg.log_dir).resolve() or Path(cfg.log_dir).resolve() in path.resolve().parents
        except OSError:
            inside = False
        if inside or not path.is_dir():
            return f"log.dirs={cfg.log_dir}: {filename} exists and is not a directory"
    return text + (f" ({filename})" if filename else "")
