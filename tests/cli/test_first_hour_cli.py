"""A newcomer's first commands: what kaflite's CLI start-up costs and leaves behind, and what its error and
note lines say (issue 32's smaller frictions)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import missing_module, require

_PROBE = """
import sys
from kaflite.cli import main
sys.argv = ["kaflite", "--version"]
try:
    main()
except SystemExit:
    pass
import kio.static.primitive  # what every wire command imports
print(sorted(m for m, v in sys.modules.items() if m.split(".")[0] == "hypothesis" and v is not None))
"""


def test_cli_start_up_neither_imports_hypothesis_nor_creates_its_directory(tmp_path: Path) -> None:
    require(missing_module("hypothesis"))  # with the test extras installed, as in the issue
    env = {k: v for k, v in os.environ.items() if k != "KAFLITE_CLI_HYPOTHESIS"}
    out = subprocess.run([sys.executable, "-c", _PROBE], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "[]"
    assert not (tmp_path / ".hypothesis").exists()


def test_hypothesis_can_be_let_in(tmp_path: Path) -> None:
    """KAFLITE_CLI_HYPOTHESIS=1 restores kio's behaviour (what the first test would see without the fix)."""
    require(missing_module("hypothesis"))
    out = subprocess.run([sys.executable, "-c", _PROBE], cwd=tmp_path, capture_output=True, text=True,
                         env=dict(os.environ, KAFLITE_CLI_HYPOTHESIS="1"), timeout=120)
    assert out.returncode == 0, out.stderr
    assert "'hypothesis'" in out.stdout.splitlines()[-1]


def test_produce_to_a_missing_topic_says_it_was_auto_created(cli, cli_bootstrap: str, topic_name: str) -> None:
    typo = f"{topic_name}-typo"
    first = cli("produce", typo, "-b", cli_bootstrap, input="v\n")
    assert first.exit_code == 0, first.output
    assert first.stderr.splitlines()[0] == (f"note: topic {typo!r} did not exist; the broker created it with 1 partition(s) "
                                    "(auto.create.topics.enable)")
    again = cli("produce", typo, "-b", cli_bootstrap, input="v\n")
    assert again.exit_code == 0 and "note:" not in again.stderr


def test_assign_html_without_the_console_extra_says_so_first(cli, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("kaflite.console.report", "kaflite.console.render"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(sys.modules, "jinja2", None)  # not installed
    result = cli("assign", "--topic", "t:3", "--member", "a:t", "--html", str(tmp_path / "lab.html"))
    assert result.exit_code == 2
    assert result.stdout == ""  # said before any table
    assert result.stderr.strip() == ("error: --html needs the console extra (jinja2 is missing): "
                                     "pip install 'kaflite[console]'")


@pytest.mark.parametrize("command", [[], ["serve"], ["consume"], ["groups", "describe"]])
def test_help_shows_no_type_beside_a_flag(cli, command: list[str]) -> None:
    shown = cli(*command, "--help")
    assert shown.exit_code == 0
    assert "--help" in shown.stdout and "<bool>" not in shown.stdout


def test_help_paragraphs_are_not_broken_mid_sentence(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """A docstring wrapped at the source's line length is one paragraph on screen: in the command list and
    in a command's later paragraphs, Typer's rich help kept its line breaks ("until Ctrl-C," then
    "--max-messages, ..." on a line of its own)."""
    monkeypatch.setenv("COLUMNS", "400")  # wide enough that a line break can only come from the text
    listed = cli("--help").stdout
    rows = [ln for ln in listed.split("─ Commands ─")[1].splitlines() if ln.startswith("│")]
    assert rows and not [ln for ln in rows if ln[2] == " "], "\n".join(rows)  # no continuation row
    assert "until Ctrl-C, --max-messages, --timeout-ms, or the end of the topic with -e." in listed
    consume = cli("consume", "--help").stdout
    assert ("print.timestamp, print.partition, print.offset, print.headers (true/false), key.separator"
            in consume), consume


def test_start_up_errors_blame_the_key_that_caused_them(tmp_path: Path) -> None:
    import errno

    from kaflite.cli.serve import build_config, startup_error

    cfg = build_config(None, ["metrics.listener=http://127.0.0.1:9404"], True, 9092, None, tmp_path / "data")
    in_use = "error while attempting to bind on address ('127.0.0.1', {}): address already in use"
    assert startup_error(OSError(errno.EADDRINUSE, in_use.format(9404)), cfg) == (
        "metrics.listener=http://127.0.0.1:9404: 127.0.0.1:9404 is already in use")
    assert startup_error(OSError(errno.EADDRINUSE, in_use.format(9092)), cfg) == (
        "listeners=PLAINTEXT://127.0.0.1:9092: 127.0.0.1:9092 is already in use")
    afile = tmp_path / "afile"
    afile.write_text("")
    cfg = build_config(None, [], True, 0, None, afile)
    assert startup_error(FileExistsError(errno.EEXIST, "File exists", str(afile)), cfg) == (
        f"log.dirs={afile}: {afile} exists and is not a directory")


def test_serve_with_log_dirs_a_file_names_log_dirs(tmp_path: Path, kaflite_exe: Path) -> None:
    (tmp_path / "afile").write_text("")
    out = subprocess.run([str(kaflite_exe), "serve", "--dev", "--port", "0", "--log-dir", "afile"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stderr.splitlines()[-1] == ("error: cannot start the broker: log.dirs=afile: afile exists and is "
                                           "not a directory")


def test_serve_on_a_port_in_use_names_listeners_and_creates_no_data_directory(tmp_path: Path,
                                                                             kaflite_exe: Path) -> None:
    """The broker binds before it opens log.dirs (tests/server/test_listeners.py has the metrics port and an
    existing directory): a failed start leaves no initialised `newdata/` behind."""
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        out = subprocess.run([str(kaflite_exe), "serve", "--dev", "--port", str(port), "--log-dir", "newdata"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stderr.splitlines()[-1] == (f"error: cannot start the broker: listeners=PLAINTEXT://127.0.0.1:{port}: "
                                           f"127.0.0.1:{port} is already in use")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [
    ["reassign-partitions", "--execute", "--reassignment-json-file"],
    ["leader-election", "--election-type", "preferred", "--path-to-json-file"],
])
def test_a_one_line_json_error_names_its_column(cli, tmp_path: Path, command: list[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"version":1,"partitions":[{"topic":"t","partition":0} {"topic":"u"}]}')
    result = cli(*command, str(bad), "-b", "127.0.0.1:1")
    assert result.exit_code == 2
    assert "(Expecting ',' delimiter at line 1 column 56)" in result.stderr, result.stderr
