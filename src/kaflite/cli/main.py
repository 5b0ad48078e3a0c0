"""The `kaflite` Typer application: our own commands plus the ones other packages contribute.

A command's module is imported when that command runs or its help is shown, not before (issue 28, start-up):
`kaflite serve` imports the broker, not the console, the admin tools or the schema registry's client.
`COMMAND_MODULES` says which module registers which command, so that `kaflite serve` finds its module by
name; `kaflite --help`, an unknown command (its error lists every command) and anything that walks the
root's commands import them all, in the order below, which is the order the help lists them in.

Each module exposes `register(app: typer.Typer) -> None`. The optional ones (`OPTIONAL_COMMAND_MODULES`,
written elsewhere) are imported under a guard so that a module that is missing (or fails to import) removes
only its own commands, never the whole CLI.
"""

from __future__ import annotations

import importlib
import logging
import re
import sys
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin

import typer
from typer.core import TyperGroup

from kaflite.cli import kafka_flags
from kaflite.cli.common import EXIT_FAILURE, EXIT_USAGE, command_client_properties, print_error
from kaflite.version import __version__

log = logging.getLogger("kaflite.cli")

# The modules that register commands, in the order `kaflite --help` lists their commands (Typer's order:
# the plain commands of every module, then the groups), each with the names it registers
# (tests/cli/test_lazy_commands.py checks these names against what each `register` adds).
OWN_COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "kaflite.cli.serve": ("serve",),
    "kaflite.cli.topics": ("topics", "configs"),
    "kaflite.cli.offsets_cmd": ("get-offsets",),
    "kaflite.cli.console": ("produce", "consume"),
    "kaflite.cli.cluster_cmd": ("cluster", "leader-election", "reassign-partitions"),
    "kaflite.cli.records_cmd": ("delete-records",),
    "kaflite.cli.dump_log": ("dump-log",),
}
# Commands contributed by other packages; each optional.
CONTRIBUTED_COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "kaflite.cli.assign_cmd": ("assign", "partition"),
    "kaflite.cli.groups_cmd": ("groups",),
    "kaflite.cli.pipeline_cmd": ("pipeline",),
    "kaflite.cli.console_cmd": ("console",),
    "kaflite.cli.transactions_cmd": ("transactions",),
    "kaflite.cli.certs_cmd": ("certs",),
    "kaflite.cli.users_cmd": ("users",),
    "kaflite.cli.acls_cmd": ("acls",),
    "kaflite.cli.schema_registry_cmd": ("schema-registry",),
    "kaflite.cli.schemas_cmd": ("schemas",),
    "kaflite.cli.faults_cmd": ("faults",),
    "kaflite.cli.share_groups_cmd": ("share-groups",),
}
OPTIONAL_COMMAND_MODULES = tuple(CONTRIBUTED_COMMAND_MODULES)
COMMAND_MODULES: dict[str, str] = {
    command: module
    for module, commands in (OWN_COMMAND_MODULES | CONTRIBUTED_COMMAND_MODULES).items()
    for command in commands
}


class _Loaded:
    """The Click commands one module registered, converted as Typer converts a root's commands."""

    def __init__(self, commands: list[tuple[str, Any]], groups: list[tuple[str, Any]]) -> None:
        self.commands = commands
        self.groups = groups


# module name -> its commands, or None when an optional module is missing or broken; filled on first use
# and kept for the process (every `app()` / CliRunner.invoke builds a new root group, not new commands)
_LOADED: dict[str, _Loaded | None] = {}


def _load(module_name: str) -> _Loaded | None:
    """Import `module_name` and convert the commands its `register` adds (once per process)."""
    if module_name in _LOADED:
        return _LOADED[module_name]
    # registered on a Typer of its own, then converted with the root's settings: the root `app` stays
    # without commands, so that building it (every `app()`) costs no import
    scratch = typer.Typer()
    if module_name in CONTRIBUTED_COMMAND_MODULES:
        try:
            importlib.import_module(module_name).register(scratch)
        except ModuleNotFoundError as err:
            if err.name != module_name:  # the module exists but one of its imports is missing
                log.warning("commands of %s unavailable: %s", module_name, err)
            _LOADED[module_name] = None
            return None
        except Exception as err:  # a broken contributed module must not break `kaflite serve`
            log.warning("commands of %s unavailable: %s", module_name, err)
            _LOADED[module_name] = None
            return None
    else:
        importlib.import_module(module_name).register(scratch)
    from typer.main import get_command_from_info, get_group_from_info

    commands: list[tuple[str, Any]] = []
    groups: list[tuple[str, Any]] = []
    for command_info in scratch.registered_commands:
        command = get_command_from_info(
            command_info,
            pretty_exceptions_short=app.pretty_exceptions_short,
            rich_markup_mode=app.rich_markup_mode,
        )
        if command.name:
            commands.append((command.name, command))
    for group_info in scratch.registered_groups:
        group = get_group_from_info(
            group_info,
            pretty_exceptions_short=app.pretty_exceptions_short,
            rich_markup_mode=app.rich_markup_mode,
            suggest_commands=app.suggest_commands,
        )
        if group.name:
            groups.append((group.name, group))
        else:  # `add_typer` without a name: its commands join the root's, as Typer does
            groups.extend(group.commands.items())
    _LOADED[module_name] = loaded = _Loaded(commands, groups)
    return loaded


# --- coercion without pydantic ---------------------------------------------------------------------------
# Typer 0.29 coerces a parameter's value with a pydantic TypeAdapter, which it builds (importing pydantic:
# docs/performance.md, "The CLI's start-up") for every parameter of the command that runs, whether given or
# not. `LightCoercion` stands in for it: the values whose coercion is plain (left out; a str for a str; a
# list of str for a list of str; an integer written canonically, within the parameter's min and max; a
# path written as Path writes it, for a Path) get what typer's coercion gives, without pydantic (the two
# are compared in tests/cli/test_lazy_commands.py); any other value goes to typer's own, built then, with
# its messages.
_NOT_LIGHT = object()
_INTEGER = re.compile(r"-?[1-9][0-9]{0,17}|0")


def _light_value(param: Any, value: Any, ctx: Any) -> Any:
    """`value` coerced as typer would coerce it for `param`, or _NOT_LIGHT when that is not plain."""
    descriptor = param.type_descriptor
    info = descriptor.parameter_info
    annotation = descriptor.annotation
    if info.parser is not None or descriptor.file_annotation is not None:
        return _NOT_LIGHT
    if param.multiple or param.nargs == -1:
        plain_list = get_origin(annotation) is list and get_args(annotation) == (str,)
        if plain_list and isinstance(value, (list, tuple)) and all(type(v) is str for v in value):
            return list(value)
        return _NOT_LIGHT
    if (
        annotation is int
        and not info.clamp
        and (type(value) is int or type(value) is str and _INTEGER.fullmatch(value))
    ):
        number = int(value)  # a default is an int already
        if (info.min is None or number >= info.min) and (info.max is None or number <= info.max):
            return number
        return _NOT_LIGHT
    if annotation is Path and info.path_type is None:
        # a default is a Path already; a str only when Path writes it back the same (typer's messages show
        # the value as given)
        path = value if isinstance(value, Path) else None
        if type(value) is str and value and str(Path(value)) == value:
            path = Path(value)
        if path is None:
            return _NOT_LIGHT
        from typer._param_types import coerce_cli_path

        # what typer's path adapter does once pydantic made the Path: the same checks and messages
        return coerce_cli_path(path, info, path_type=Path, param=param, ctx=ctx)
    if annotation is str and type(value) is str:
        return value
    return _NOT_LIGHT


class LightCoercion:
    """A parameter's coercion: the plain values here, the others by typer's own (see above)."""

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None:  # typer's RuntimeParam.coerce says the same of a value left out
            return () if param.multiple or param.nargs == -1 else None
        light = _light_value(param, value, ctx)
        if light is not _NOT_LIGHT:
            return light
        from typer._coercion import build_runtime_param

        param._runtime_param = typers = build_runtime_param(param.type_descriptor)
        return typers.coerce(value, param=param, ctx=ctx)


def _coerce_lightly() -> None:
    """Every typer parameter (ours, the root's, the --help options typer makes on demand) gets a
    LightCoercion where this typer builds its coercion on first use (another typer keeps its own)."""
    from typer import core

    parameter = getattr(core, "_TyperParameter", None)
    built = getattr(parameter, "get_runtime_param", None)
    if parameter is None or built is None or getattr(built, "_kaflite", False):
        return

    def get_runtime_param(self: Any) -> Any:
        if self._runtime_param is None:
            self._runtime_param = LightCoercion()
        return self._runtime_param

    get_runtime_param._kaflite = True  # type: ignore[attr-defined]
    parameter.get_runtime_param = get_runtime_param


class Registered(Mapping[str, bool]):
    """Whether each optional module registered its commands (asking imports the module, once)."""

    def __getitem__(self, module_name: str) -> bool:
        if module_name not in CONTRIBUTED_COMMAND_MODULES:
            raise KeyError(module_name)
        return _load(module_name) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(CONTRIBUTED_COMMAND_MODULES)

    def __len__(self) -> int:
        return len(CONTRIBUTED_COMMAND_MODULES)


REGISTERED = Registered()


class LazyCommands(MutableMapping[str, Any]):
    """The root group's `commands`: a command's module is imported when the command is looked up;
    iterating (the help's list, an unknown command's error, shell completion) imports every module.
    Commands added with `add_command` are kept beside them, after them in the order."""

    def __init__(self, added: MutableMapping[str, Any]) -> None:
        self.added = dict(added)

    def _module_commands(self, module_names: Sequence[str]) -> dict[str, Any]:
        loaded = [x for x in (_load(name) for name in module_names) if x is not None]
        return {name: cmd for x in loaded for name, cmd in x.commands} | {
            name: cmd for x in loaded for name, cmd in x.groups
        }

    def _all(self) -> dict[str, Any]:
        return self._module_commands([*OWN_COMMAND_MODULES, *CONTRIBUTED_COMMAND_MODULES]) | self.added

    def __getitem__(self, name: str) -> Any:
        if name in self.added:
            return self.added[name]
        module_name = COMMAND_MODULES.get(name)
        if module_name is not None:
            found = self._module_commands([module_name])
            if name in found:
                return found[name]
        # a name of no module's table (or one its module no longer registers): every module, then the name
        return self._all()[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self.added[name] = command

    def __delitem__(self, name: str) -> None:
        del self.added[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


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
    (Typer would draw a Rich box with a usage banner); --help output is unchanged. Its commands are
    `LazyCommands`: a command's module is imported when the command is looked up."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = LazyCommands(self.commands)

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

    def _main(
        self,
        args: list[str],
        prog_name: str | None,
        complete_var: str | None,
        standalone_mode: bool,
        **extra: Any,
    ) -> Any:
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


def _join_wrapped_lines_when_help_renders() -> None:
    """`_join_wrapped_lines` patches typer.rich_utils, whose import brings rich's Markdown and markdown-it
    (tens of ms of CPU, docs/performance.md): it runs when a help is rendered (every help, a command's,
    a group's, or the one a group without its subcommand shows, goes through `format_help`), not when the
    CLI is imported to run a command."""
    from typer.core import TyperCommand

    for cls in (TyperCommand, TyperGroup):
        render = cls.format_help
        if getattr(render, "_kaflite", False):
            continue

        def format_help(self: Any, ctx: Any, formatter: Any, _render: Any = render) -> None:
            _join_wrapped_lines()
            _render(self, ctx, formatter)

        format_help._kaflite = True  # type: ignore[attr-defined]
        cls.format_help = format_help  # type: ignore[method-assign]


_hide_flag_types()
_join_wrapped_lines_when_help_renders()
_coerce_lightly()

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
