"""The `kaflite` Typer application: our own commands plus the ones other packages contribute.

Sub-command modules written elsewhere (`assign_cmd`, `groups_cmd`, `pipeline_cmd`) expose
`register(app: typer.Typer) -> None`; each is imported under a guard so that a module that is missing
(or fails to import) removes only its own commands, never the whole CLI.
"""

from __future__ import annotations

import importlib
import logging
from typing import Annotated

import typer

from kaflite import __version__
from kaflite.cli import console, serve, topics

log = logging.getLogger("kaflite.cli")

app = typer.Typer(
    name="kaflite",
    help="kaflite: a Kafka-compatible broker and tools. Commands speak the Kafka protocol, so they work "
    "against any Kafka cluster too.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kaflite {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print kaflite's version and exit."),
    ] = False,
) -> None:
    """kaflite: a Kafka-compatible broker and tools."""


serve.register(app)
topics.register(app)
console.register(app)

# Commands contributed by other packages; each optional.
OPTIONAL_COMMAND_MODULES = ("kaflite.cli.assign_cmd", "kaflite.cli.groups_cmd", "kaflite.cli.pipeline_cmd")
REGISTERED: dict[str, bool] = {}
for _name in OPTIONAL_COMMAND_MODULES:
    try:
        importlib.import_module(_name).register(app)
        REGISTERED[_name] = True
    except ModuleNotFoundError as _err:
        if _err.name != _name:  # the module exists but one of its imports is missing
            log.warning("commands of %s unavailable: %s", _name, _err)
        REGISTERED[_name] = False
    except Exception as _err:  # a broken contributed module must not break `kaflite serve`
        log.warning("commands of %s unavailable: %s", _name, _err)
        REGISTERED[_name] = False
