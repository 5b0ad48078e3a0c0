"""`kaflite <command>` imports the module of that command, not the whole CLI (issue 28, start-up): the
root group's commands are looked up by name in `kaflite.cli.main.COMMAND_MODULES`, typer's rich help
renderer is patched when a help is rendered, and the parameters of a command are coerced without pydantic
where typer's coercion would give the same value."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer

from kaflite.cli.main import CONTRIBUTED_COMMAND_MODULES, OWN_COMMAND_MODULES

SRC = Path(__file__).resolve().parents[2] / "src"
TABLE = {**OWN_COMMAND_MODULES, **CONTRIBUTED_COMMAND_MODULES}

# Runs `kaflite ARGV...` through the console script's entry point in a fresh interpreter, then writes the
# names of the modules it imported to the file named by the last argument.
PROBE = """
import json, sys
out = sys.argv.pop()
sys.argv = ["kaflite", *sys.argv[1:]]
from kaflite.cli import main
try:
    main()
except SystemExit as exit:
    code = exit.code
with open(out, "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""


def _run(tmp_path: Path, *argv: str) -> tuple[subprocess.CompletedProcess[str], int, set[str]]:
    out = tmp_path / "modules.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *argv, str(out)], capture_output=True, text=True, timeout=120, env=env
    )
    assert out.exists(), proc.stderr
    result = json.loads(out.read_text())
    return proc, result["code"], set(result["modules"])


def _other_command_modules(command: str) -> set[str]:
    from kaflite.cli.main import COMMAND_MODULES

    own = COMMAND_MODULES[command]
    return {module for module in COMMAND_MODULES.values() if module != own}


def test_serve_imports_no_other_command_module_no_help_renderer_no_pydantic(tmp_path: Path) -> None:
    proc, code, modules = _run(
        tmp_path,
        "serve",
        "--print-config",
        "--log-dir",
        str(tmp_path / "data"),
        "--port",
        "0",
        "-o",
        "num.partitions=3",
        "--host",
        "127.0.0.1",
    )
    assert code == 0, proc.stderr
    assert f"log.dirs={tmp_path / 'data'}" in proc.stdout and "num.partitions=3" in proc.stdout
    assert "kaflite.cli.serve" in modules
    assert not modules & _other_command_modules("serve"), sorted(modules & _other_command_modules("serve"))
    for heavy in ("typer.rich_utils", "rich.markdown", "markdown_it", "pydantic"):
        assert heavy not in modules, heavy


def test_a_bad_value_is_still_refused_in_typers_words(tmp_path: Path) -> None:
    """A value the light coercion does not take goes to typer's own (and its message)."""
    proc, code, _ = _run(tmp_path, "serve", "--print-config", "--port", "65536")
    assert code == 2
    assert "--port" in proc.stderr and "65535" in proc.stderr, proc.stderr
    proc, code, _ = _run(tmp_path, "serve", "--print-config", "--port", "x1")
    assert code == 2 and "--port" in proc.stderr and "integer" in proc.stderr, proc.stderr


def test_a_commands_help_imports_its_module_only(tmp_path: Path) -> None:
    proc, code, modules = _run(tmp_path, "topics", "--help")
    assert code == 0, proc.stderr
    assert "create" in proc.stdout and "kaflite.cli.topics" in modules
    assert not modules & _other_command_modules("topics"), sorted(modules & _other_command_modules("topics"))


@pytest.mark.parametrize("module_name", sorted(TABLE))
def test_the_table_names_what_each_module_registers(module_name: str) -> None:
    scratch = typer.Typer()
    importlib.import_module(module_name).register(scratch)
    names = [c.name for c in scratch.registered_commands] + [g.name for g in scratch.registered_groups]
    assert sorted(names) == sorted(TABLE[module_name])  # type: ignore[type-var]


def test_help_and_an_unknown_command_list_every_command(cli, run_kaflite) -> None:
    from kaflite.cli.main import COMMAND_MODULES

    listed = cli("--help").stdout
    assert all(f" {name} " in listed for name in COMMAND_MODULES), listed
    proc = run_kaflite("frobnicate")
    commands = proc.stderr.split("(commands: ")[1].split(")")[0].split(", ")
    assert sorted(commands) == sorted(COMMAND_MODULES), proc.stderr


def _params(tmp_path: Path) -> tuple[Any, dict[str, Any]]:
    """A command with a parameter of every kind LightCoercion takes, and its Click context."""
    from typer.main import get_command

    app = typer.Typer()

    @app.command()
    def probe(
        text: Annotated[str | None, typer.Option()] = None,
        number: Annotated[int | None, typer.Option(min=0, max=65535)] = None,
        free: Annotated[int, typer.Option()] = 7,
        clamped: Annotated[int, typer.Option(min=0, max=9, clamp=True)] = 0,
        path: Annotated[Path | None, typer.Option()] = None,
        file: Annotated[Path | None, typer.Option(dir_okay=False, exists=True)] = None,
        many: Annotated[list[str] | None, typer.Option()] = None,
        ratio: Annotated[float, typer.Option()] = 0.5,
    ) -> None:
        pass

    command = get_command(app)
    return command.make_context("probe", [], resilient_parsing=True), {p.name: p for p in command.params}


def _outcome(coerce: Any, value: Any, param: Any, ctx: Any) -> tuple[str, Any]:
    try:
        return "value", coerce(value, param=param, ctx=ctx)
    except Exception as err:  # the error a user would see: its type and message
        return type(err).__name__, getattr(err, "format_message", err.__str__)()


def test_light_coercion_gives_what_typers_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer._coercion import build_runtime_param

    from kaflite.cli.main import LightCoercion

    (tmp_path / "f.txt").write_text("x")
    monkeypatch.chdir(tmp_path)
    ctx, params = _params(tmp_path)
    values = {
        "text": [None, "abc", "", " spaced ", "-", "ünï"],
        "number": [
            80,
            70000,
            None,
            "0",
            "9092",
            "65535",
            "65536",
            "-1",
            "007",
            "+5",
            " 5",
            "5 ",
            "1_0",
            "x1",
            "",
            "9" * 30,
        ],
        "free": ["-12", "0", "12", "-0", "1e3", 7, True, 7.0],
        "clamped": ["5", "99", "-3"],
        "path": [None, "data", "/tmp/x", "a//b", "a/b/", "./a", "", "-", "~/x", Path("data"), b"data"],
        "file": ["f.txt", "missing", ".", ".//f.txt", "f.txt/"],
        "many": [None, (), ("a=b",), ("a=b", "c=d"), ("x",), "not-a-tuple", ("x", 1)],
        "ratio": ["0.25", "x"],
    }
    light = LightCoercion()
    for name, cases in values.items():
        param = params[name]
        for value in cases:
            typers = build_runtime_param(param.type_descriptor)
            expected = _outcome(typers.coerce, value, param, ctx)
            param._runtime_param = None
            got = _outcome(light.coerce, value, param, ctx)
            assert got == expected, (name, value)
            plain = value is None or any(
                n == name and type(v) is type(value) and v == value for n, v in PLAIN
            )
            assert (param._runtime_param is None) == plain, (name, value)  # typer's built only when needed


# the values LightCoercion coerces itself (the others go to typer's coercion)
PLAIN = {
    ("text", "abc"),
    ("text", ""),
    ("text", " spaced "),
    ("text", "-"),
    ("text", "ünï"),
    ("number", "0"),
    ("number", "9092"),
    ("number", "65535"),
    ("free", "-12"),
    ("free", "0"),
    ("free", "12"),
    ("free", 7),
    ("number", 80),
    ("path", Path("data")),
    ("path", "data"),
    ("path", "/tmp/x"),
    ("path", "-"),
    ("path", "~/x"),
    ("file", "f.txt"),
    ("file", "missing"),
    ("file", "."),
    ("many", ()),
    ("many", ("a=b",)),
    ("many", ("a=b", "c=d")),
    ("many", ("x",)),
}
