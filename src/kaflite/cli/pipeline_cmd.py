"""`kaflite pipeline demo`: the Spark data pipeline end to end, in one command (see kaflite.spark.demo)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from kaflite.cli.common import EXIT_USAGE, fail, handle_errors

__all__ = ["embedded_broker", "register"]

pipeline_app = typer.Typer(
    help="The Spark data pipeline (PySpark source and sink for kaflite topics).", no_args_is_help=True
)


@pipeline_app.command("demo")
@handle_errors
def demo_command(
    bootstrap_server: Annotated[
        str | None,
        typer.Option("--bootstrap-server", help="Use this broker instead of an embedded kaflite broker."),
    ] = None,
    events: Annotated[int, typer.Option(help="How many events the generator produces.")] = 2000,
    users: Annotated[int, typer.Option(help="How many distinct keys (users).")] = 20,
    rate: Annotated[float, typer.Option(help="Events per second.")] = 200.0,
    partitions: Annotated[int, typer.Option(help="Partitions of the input and output topics.")] = 3,
    out: Annotated[
        str | None, typer.Option(help="Directory for Parquet and the checkpoint (default: a temp dir).")
    ] = None,
) -> None:
    """Embedded broker, keyed event generator, Spark streaming job (per-user 5 s window totals) to Parquet and a topic.

    Checks the totals against what the generator sent and prints what it did."""
    for name, value in (("--events", events), ("--users", users), ("--partitions", partitions)):
        if value <= 0:
            fail(f"{name} must be a positive integer, got {value}", EXIT_USAGE)
    if rate <= 0:
        fail(f"--rate must be positive, got {rate}", EXIT_USAGE)
    try:
        from kaflite.spark.demo import print_report, run_demo
    except ImportError as err:
        fail(f"the pipeline needs the spark extra (pip install 'kaflite[spark]'): {err}")
    from rich.console import Console

    console = Console(stderr=True, highlight=False)

    def progress(message: str) -> None:
        console.print(f"[dim]{message}[/]")

    report = run_demo(bootstrap_server, events, users, rate, partitions, out, progress, broker=embedded_broker)
    print_report(report)
    if report.mismatches:
        fail(f"{report.mismatches} (user, window) totals differ from what the generator sent")


@contextmanager
def embedded_broker(data_dir: Path) -> Iterator[str]:
    """An embedded kaflite broker for the demo (the spark package never imports the broker itself)."""
    from kaflite.server.embedded import EmbeddedBroker

    with EmbeddedBroker(data_dir=data_dir) as broker:
        yield broker.bootstrap


def register(app: typer.Typer) -> None:
    app.add_typer(pipeline_app, name="pipeline")
