"""The application shell: help, version, entry point, optional command modules, error style."""

from __future__ import annotations

import importlib
import sys
import types

import pytest
from typer.testing import CliRunner

import kaflite


def test_help_lists_commands(cli) -> None:
    result = cli("--help")
    assert result.exit_code == 0
    for command in ("serve", "topics", "configs", "produce", "consume"):
        assert command in result.output
    topics = cli("topics", "--help")
    for sub in ("create", "list", "describe", "delete", "alter"):
        assert sub in topics.output


def test_version(cli) -> None:
    result = cli("--version")
    assert result.exit_code == 0 and result.output.strip() == f"kaflite {kaflite.__version__}"


def test_console_script_entry_point(run_kaflite) -> None:
    proc = run_kaflite("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"kaflite {kaflite.__version__}"


def test_unknown_command_is_usage_error(run_kaflite) -> None:
    proc = run_kaflite("frobnicate")
    assert proc.returncode == 2
    assert "frobnicate" in proc.stderr and "Traceback" not in proc.stderr


def _reload_main_with(
    monkeypatch: pytest.MonkeyPatch, name: str, module: types.ModuleType | None
) -> types.ModuleType:
    if module is None:
        monkeypatch.setitem(sys.modules, name, None)  # type: ignore[arg-type]  # import raises ImportError
    else:
        monkeypatch.setitem(sys.modules, name, module)
    import kaflite.cli.main as main

    return importlib.reload(main)


def test_optional_module_registers_its_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("kaflite.cli.groups_cmd")

    def register(app) -> None:
        @app.command("fake-groups")
        def fake_groups() -> None:
            print("fake groups ran")

    fake.register = register  # type: ignore[attr-defined]
    try:
        main = _reload_main_with(monkeypatch, "kaflite.cli.groups_cmd", fake)
        result = CliRunner().invoke(main.app, ["fake-groups"])
        assert result.exit_code == 0 and "fake groups ran" in result.output
        assert main.REGISTERED["kaflite.cli.groups_cmd"] is True
    finally:
        monkeypatch.undo()
        importlib.reload(importlib.import_module("kaflite.cli.main"))


def test_broken_optional_module_does_not_break_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = types.ModuleType("kaflite.cli.pipeline_cmd")

    def register(app) -> None:
        raise RuntimeError("boom")

    broken.register = register  # type: ignore[attr-defined]
    try:
        main = _reload_main_with(monkeypatch, "kaflite.cli.pipeline_cmd", broken)
        assert main.REGISTERED["kaflite.cli.pipeline_cmd"] is False
        result = CliRunner().invoke(main.app, ["--help"])
        assert result.exit_code == 0 and "serve" in result.output
        main = _reload_main_with(monkeypatch, "kaflite.cli.assign_cmd", None)
        assert main.REGISTERED["kaflite.cli.assign_cmd"] is False
        assert CliRunner().invoke(main.app, ["topics", "--help"]).exit_code == 0
    finally:
        monkeypatch.undo()
        importlib.reload(importlib.import_module("kaflite.cli.main"))
