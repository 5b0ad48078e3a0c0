"""Helpers shared by every `kaflite` sub-command module: the `--bootstrap-server` option, one-line fatal
errors with a fixed exit code, a bounded reachability check, and confluent-kafka client settings that keep
librdkafka's own logging off the terminal.

Exit codes: 0 success, 1 a runtime failure (broker unreachable, topic missing, request refused),
2 bad usage or configuration (unknown key, invalid value, malformed KEY=VALUE).

Command modules import these from here, never from the `kaflite.cli` package, whose `main()` imports the
command modules (importing the package from them would be an import circle).
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

__all__ = [
    "CLUSTER_ENV",
    "DEFAULT_BOOTSTRAP",
    "Bootstrap",
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "CliFailure",
    "check_reachable",
    "client_config",
    "command_client_properties",
    "describe_exception",
    "error_name",
    "fail",
    "handle_errors",
    "one_topic",
    "print_error",
    "read_cluster_env",
    "running_cluster_bootstrap",
    "topics_given",
    "parse_key_values",
]

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
# `kaflite cluster up` (default --data-dir) writes its bootstrap here while it runs; client commands given
# no bootstrap use it (see running_cluster_bootstrap).
CLUSTER_ENV = Path("kaflite-cluster") / "cluster.env"


def read_cluster_env(path: Path) -> tuple[str, int] | None:
    """(bootstrap, pid of `cluster up`) from a cluster.env file, None when absent or malformed."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    values = {}
    for line in text.splitlines():
        key, sep, value = line.removeprefix("export ").partition("=")
        if sep and not key.startswith("#"):
            values[key.strip()] = value.strip()
    bootstrap, pid = values.get("KAFLITE_BOOTSTRAP"), values.get("KAFLITE_CLUSTER_PID", "")
    return (bootstrap, int(pid)) if bootstrap and pid.isdigit() else None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def running_cluster_bootstrap(path: Path = CLUSTER_ENV) -> str | None:
    """The bootstrap of the `kaflite cluster up` that wrote `path`, if it is still running (its pid alive and
    one of its brokers accepting TCP); None otherwise (a file left by a killed `cluster up` is ignored)."""
    found = read_cluster_env(path)
    if found is None or not _pid_alive(found[1]):
        return None
    for server in found[0].split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=0.5).close()
            return found[0]
        except (OSError, ValueError):
            continue
    return None


def _bootstrap_default(ctx: typer.Context, param: typer.CallbackParam, value: str) -> str:
    """No --bootstrap-server and no KAFLITE_BOOTSTRAP: a running `cluster up` of this directory, said on
    stderr, before Kafka's default 127.0.0.1:9092."""
    source = ctx.get_parameter_source(param.name or "")
    if source is not None and source.name == "DEFAULT" and not ctx.resilient_parsing:
        found = running_cluster_bootstrap()
        if found is not None:
            typer.echo(f"note: using the cluster started by `kaflite cluster up` ({CLUSTER_ENV}): {found}",
                       err=True)
            return found
    return value


# The `--bootstrap-server` option every client command takes: `bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP`.
Bootstrap = Annotated[
    str,
    typer.Option(
        "--bootstrap-server",
        "-b",
        envvar="KAFLITE_BOOTSTRAP",
        callback=_bootstrap_default,
        help="host:port of a broker (comma-separated list allowed); default: KAFLITE_BOOTSTRAP, else the "
        "brokers of a `kaflite cluster up` running from this directory, else 127.0.0.1:9092.",
    ),
]
EXIT_FAILURE = 1
EXIT_USAGE = 2

# librdkafka logs connection failures to stderr by default; the CLI reports one line of its own instead.
_LIBRDKAFKA_LOG = logging.getLogger("kaflite.cli.librdkafka")
_LIBRDKAFKA_LOG.addHandler(logging.NullHandler())
_LIBRDKAFKA_LOG.propagate = False


# librdkafka settings from `--command-config` / `--producer.config` / `--consumer.config` FILE (read by
# kaflite.cli.kafka_flags), given to every client of the command being run.
_COMMAND_CLIENT_PROPERTIES: ContextVar[dict[str, str] | None] = ContextVar("kaflite_command_client_properties",
                                                                            default=None)


@contextmanager
def command_client_properties(props: dict[str, str]) -> Iterator[None]:
    """Within the block, `client_config` adds `props` to every client's settings."""
    token = _COMMAND_CLIENT_PROPERTIES.set(dict(props))
    try:
        yield
    finally:
        _COMMAND_CLIENT_PROPERTIES.reset(token)


class CliFailure(Exception):
    """Raised inside commands; `main()` prints the message as one line and exits with `code`."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def error_name(code: Any) -> str:
    """Kafka's name of an error code (`NOT_COORDINATOR`) from an int or a kio ErrorCode. The protocol is
    imported on first use so that `kaflite --help` and commands that never meet an error code start
    without kio's schemas."""
    from kaflite.protocol.errors import error_name as name

    return name(int(code.value if hasattr(code, "value") else code))


def fail(message: str, code: int = EXIT_FAILURE) -> NoReturn:
    raise CliFailure(message, code)


def parse_key_values(pairs: list[str] | None, option: str, allow_empty_value: bool = True) -> dict[str, str]:
    """Parse repeated `--option KEY=VALUE` arguments; a malformed one is a usage error naming the option."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip() or (not value and not allow_empty_value):
            fail(f"{option}: expected KEY=VALUE, got {pair!r}", EXIT_USAGE)
        out[key.strip()] = value
    return out


def one_topic(positional: str | None, option: str | None, what: str = "TOPIC") -> str:
    """The topic given either as the positional argument (ours) or with --topic (Kafka's tools, kcat)."""
    if positional is not None and option is not None and positional != option:
        fail(f"give the topic once, as {what} or --topic (got {positional!r} and {option!r})", EXIT_USAGE)
    topic = option if option is not None else positional
    if not topic:
        fail(f"missing the topic: give it as {what} or --topic {what}", EXIT_USAGE)
    return topic


def topics_given(positional: list[str] | None, option: list[str] | None) -> list[str]:
    """Topics given as positional arguments and/or repeated --topic options, in order, without repeats."""
    return list(dict.fromkeys([*(positional or []), *(option or [])]))


def _split_host_port(server: str) -> tuple[str, int]:
    server = server.strip()
    if "://" in server:
        server = server.split("://", 1)[1]
    host, sep, port = server.rpartition(":")
    if not sep or not port.isdigit():
        fail(f"--bootstrap-server: expected host:port, got {server!r}", EXIT_USAGE)
    return host.strip("[]") or "127.0.0.1", int(port)


def check_reachable(bootstrap: str, timeout: float = 3.0) -> None:
    """Fail with one clear line, within `timeout` seconds, unless some bootstrap server accepts TCP.

    librdkafka would otherwise retry forever in the background; this check bounds the wait and names
    the address that was tried.
    """
    servers = [s for s in bootstrap.split(",") if s.strip()]
    if not servers:
        fail("--bootstrap-server: expected host:port, got ''", EXIT_USAGE)
    deadline = time.monotonic() + timeout
    reasons = []
    for server in servers:
        host, port = _split_host_port(server)
        try:
            left = max(0.1, deadline - time.monotonic())
            socket.create_connection((host, port), timeout=left).close()
            return
        except OSError as err:
            reasons.append(f"{host}:{port} ({err.strerror or err})")
    fail(
        f"cannot connect to a Kafka broker at {', '.join(reasons)}; is it running? "
        "(start one with `kaflite serve`, or pass --bootstrap-server)"
    )


class ClientErrors:
    """Collects librdkafka's asynchronous errors (error_cb) so that loops can stop on fatal ones."""

    def __init__(self) -> None:
        self.errors: list[Any] = []

    def __call__(self, err: Any) -> None:
        self.errors.append(err)

    def fatal(self) -> str | None:
        from confluent_kafka import KafkaError

        for err in self.errors:
            if err.fatal() or err.code() in (KafkaError._ALL_BROKERS_DOWN, KafkaError._AUTHENTICATION):
                return str(err.str())
        return None


def client_config(
    bootstrap: str, errors: Callable[[Any], None] | None = None, **extra: Any
) -> dict[str, Any]:
    """confluent-kafka settings shared by the CLI's clients (quiet, bounded connection attempts)."""
    cfg: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "client.id": "kaflite-cli",
        "logger": _LIBRDKAFKA_LOG,
        "socket.connection.setup.timeout.ms": 5000,
    }
    if errors is not None:
        cfg["error_cb"] = errors
    cfg.update(_COMMAND_CLIENT_PROPERTIES.get() or {})
    cfg.update(extra)
    return cfg


def admin_client(bootstrap: str) -> Any:
    """A confluent-kafka AdminClient for `bootstrap`, after checking that something listens there."""
    from confluent_kafka.admin import AdminClient

    check_reachable(bootstrap)
    return AdminClient(client_config(bootstrap))


def admin_result(future: Any, timeout: float, what: str) -> Any:
    """Wait for an admin future; a timeout or a Kafka error becomes a one-line failure naming `what`."""
    import concurrent.futures

    try:
        return future.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        fail(f"{what}: no answer from the broker within {timeout:g} s")
    except Exception as err:
        fail(f"{what}: {describe_exception(err)}")


def handle_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a command: a CliFailure (or any unexpected error) becomes one line on stderr and an exit
    code, never a traceback. Typer reads the wrapped function's signature through `__wrapped__`."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except CliFailure as err:
            print_error(err.message)
            raise typer.Exit(err.code) from None
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as err:
            if type(err).__module__.startswith(("click", "typer")) or os.environ.get("KAFLITE_DEBUG"):
                raise
            print_error(describe_exception(err))
            raise typer.Exit(EXIT_FAILURE) from None

    return wrapper


def describe_exception(err: BaseException) -> str:
    """One line for an exception, never its class name: librdkafka's error text (with Kafka's error name)
    for confluent-kafka errors, the OS's reason for OSError, the message otherwise."""
    from confluent_kafka import KafkaException

    if isinstance(err, KafkaException) and err.args:
        inner = err.args[0]
        text = inner.str() if hasattr(inner, "str") else str(inner)
        name = inner.name() if hasattr(inner, "name") else ""
        return f"{text} ({name})" if name and name not in text else text
    if isinstance(err, OSError) and err.strerror:
        return err.strerror + (f": {err.filename}" if err.filename else "")
    text = " ".join(str(err).split())
    return text or "unexpected failure (set KAFLITE_DEBUG=1 for details)"


def print_error(message: str) -> None:
    try:
        from rich.console import Console
        from rich.markup import escape

        Console(stderr=True, highlight=False, soft_wrap=True).print(f"[bold red]error:[/] {escape(message)}")
    except Exception:  # pragma: no cover - rich is a dependency; never fail while reporting a failure
        print(f"error: {message}", file=sys.stderr)
