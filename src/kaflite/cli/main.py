"""The `kaflite` Typer application: our own commands plus the ones other packages contribute.

Sub-command modules written elsewhere (`assign_cmd`, `groups_cmd`, `pipeline_cmd`) expose
`register(app: typer.Typer) -> None`; each is imported under a guard so that a module that is missing
(or fails to import) removes only its own commands, never the whole CLI.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from kaflite.cli import cluster_cmd, console, dump_log, kafka_flags, offsets_cmd, records_cmd, serve, topics
from kaflite.cli.common import EXIT_FAILURE, EXIT_USAGE, command_client_properties, print_error
from kaflite.version import __version__

log = logging.getLogger("kaflite.cli")


def usage_message(err: Any) -> str:
    """One line for a Click/Typer usage error: what was wrong, and what is allowed where Click knows it."""
    ctx = getattr(err, "ctx", None)
    message = " ".join(str(err.format_message()).split())
    command = getattr(ctx, "command", None)
    name = type(err).__name__
    if name == "NoSuchOption" and not getattr(err, "possibilities", None) and command is not None:
        allowed = sorted(
            {opt for param in command.params for opt in param.opts if opt.startswith("--")} | {"--help"}
        )
        message += f" (allowed: {', '.join(allowed)})"
    elif command is not None and hasattr(command, "list_commands") and "No such command" in message:
        message += f" (commands: {', '.join(command.list_commands(ctx))})"
    if ctx is not None and not message.endswith(")"):
        message += f" (see `{ctx.command_path} --help`)"
    return message


class KafliteGroup(TyperGroup):
    """The root command: usage errors become one `error: ...` line and exit 2, like every other error
    (Typer would draw a Rich box with a usage banner); --help output is unchanged."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        # Kafka's spellings (`topics --create ...`) become kaflite's before Click parses (kafka_flags)
        words = list(sys.argv[1:] if args is None else args)
        try:
            translation = kafka_flags.translate(words)
        except kafka_flags.Refused as err:
            print_error(err.message)
            if not standalone_mode:
                raise
            sys.exit(EXIT_USAGE)
        for note in translation.notes:
            print(f"note: {note}", file=sys.stderr)
        with command_client_properties(translation.client_properties):
            return self._main(translation.argv, prog_name, complete_var, standalone_mode, **extra)

    def _main(self, args: list[str], prog_name: str | None, complete_var: str | None, standalone_mode: bool,
              **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:  # typer >= 0.26 vendors Click
            from typer._click.exceptions import ClickException, NoArgsIsHelpError
        except ImportError:  # pragma: no cover - older typer on click
            from click.exceptions import ClickException, NoArgsIsHelpError  # type: ignore[no-redef,assignment]

        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except NoArgsIsHelpError as err:  # `kaflite topics`: the help (already printed by Rich, if used)
            if err.format_message().strip():
                err.show()
            sys.exit(err.exit_code)
        except ClickException as err:
            print_error(usage_message(err))
            sys.exit(err.exit_code)
        except typer.Abort:
            print_error("aborted")
            sys.exit(EXIT_FAILURE)
        # typer returns the command's return value or, for typer.Exit / Ctrl-C, the exit code
        sys.exit(rv if isinstance(rv, int) else 0)


def _hide_flag_types() -> None:
    """Typer 0.29's help shows `<bool>` beside every flag (--dev, --from-beginning, --help), as if it took a
    value: a flag's type column stays empty, as in Click's and Kafka's own help."""
    from typer.core import TyperOption

    shown = TyperOption.display_type_rich
    if getattr(shown, "_kaflite", False):
        return

    def display_type_rich(self: Any, ctx: Any) -> str | None:
        if getattr(self, "is_flag", False) and not getattr(self, "count", False) and self.metavar is None:
            return None
        return shown(self, ctx)

    display_type_rich._kaflite = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


def _join_wrapped_lines() -> None:
    """Typer 0.29's rich help keeps a docstring's line breaks inside a paragraph in two places (a command's
    row in its group's command list; the paragraphs after the first of a command's own help), so a sentence
    wrapped at the source's line length broke mid-sentence on screen. Each paragraph becomes one line for
    Rich to wrap at the terminal's width, as Typer already does for a command's first paragraph and for
    option help; a paragraph starting with \\b (Click's "keep as written" marker) stays as written."""
    import inspect

    from typer import rich_utils

    if getattr(rich_utils._fix_linebreaks, "_kaflite", False):
        return

    def join(paragraph: str) -> str:
        return paragraph if paragraph.startswith("\b") else " ".join(paragraph.split())

    command_help = rich_utils._make_command_help

    def make_command_help(*, help_text: str, markup_mode: Any) -> Any:
        first, *rest = inspect.cleandoc(help_text).split("\n\n")
        return command_help(help_text="\n\n".join([join(first), *rest]), markup_mode=markup_mode)

    def fix_linebreaks(paragraphs: list[str], markup_mode: Any) -> str:
        return "\n\n".join(join(p) for p in paragraphs)

    fix_linebreaks._kaflite = True  # type: ignore[attr-defined]
    rich_utils._make_command_help = make_command_help
    rich_utils._fix_linebreaks = fix_linebreaks


_hide_flag_types()
_join_wrapped_lines()

app = typer.Typer(
    name="kaflite",
    cls=KafliteGroup,
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
offsets_cmd.register(app)
console.register(app)
cluster_cmd.register(app)
records_cmd.register(app)
dump_log.register(app)

# Commands contributed by other packages; each optional.
OPTIONAL_COMMAND_MODULES = ("kaflite.cli.assign_cmd", "kaflite.cli.groups_cmd", "kaflite.cli.pipeline_cmd",
                            "kaflite.cli.console_cmd", "kaflite.cli.transactions_cmd",
                            "kaflite.cli.certs_cmd", "kaflite.cli.users_cmd",
                            "kaflite.cli.acls_cmd", "kaflite.cli.schema_registry_cmd",
                            "kaflite.cli.schemas_cmd", "kaflite.cli.faults_cmd", "kaflite.cli.share_groups_cmd")
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
