"""One error style everywhere: a single `error: ...` line naming what was wrong and what is allowed, exit
2 for usage errors, 1 for runtime failures; never a Rich box, an exception name or a traceback."""

from __future__ import annotations

import re

import pytest

# Words that would show a leaked exception or Typer's Rich error box.
LEAKS = re.compile(r"Traceback|Error:|Exception|╭|│|ValueError|KeyError|TypeError")


def _one_error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: "), stderr
    assert not LEAKS.search(lines[0]), stderr
    return lines[0]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["topics", "create", "t", "--partitionz", "3"], "No such option: --partitionz"),
        (["topics", "create", "t", "--bogus"], "(allowed: --bootstrap-server, --config, --help"),
        (["topics", "creat", "t"], "No such command 'creat'"),
        (["topics", "creat", "t"], "commands: create, list, describe"),
        (["topics", "create"], "missing the topic: give it as TOPIC or --topic TOPIC"),
        (["topics", "create", "a", "--topic", "b"], "give the topic once, as TOPIC or --topic"),
        (["consume", "t", "--offset", "soon"], "--offset: expected earliest (beginning, start, oldest), latest"),
        (["consume", "t", "-e", "--follow"], "--follow and --exit-at-end contradict each other"),
        (["consume", "t", "--property", "print.key=yes"], "--property print.key: expected true or false"),
        (["topics", "create", "t", "--partitions", "many"], "'--partitions'"),
        (["frobnicate"], "No such command 'frobnicate'"),
        (["produce", "t", "--acks", "2"], "--acks: expected 0, 1, all or -1, got '2'"),
    ],
)
def test_usage_errors_are_one_line_exit_2(run_kaflite, cli_bootstrap: str, args: list[str], expected: str) -> None:
    proc = run_kaflite(*args, "--bootstrap-server", cli_bootstrap, input="")
    assert proc.returncode == 2, proc.stderr
    assert expected in _one_error_line(proc.stderr)
    assert proc.stdout == ""


def test_option_without_its_value_is_one_line(run_kaflite) -> None:
    proc = run_kaflite("topics", "create", "t", "--partitions")
    assert proc.returncode == 2, proc.stderr
    assert "'--partitions' requires an argument" in _one_error_line(proc.stderr)
    assert proc.stdout == ""


def test_too_many_partitions_says_what_is_allowed(run_kaflite, cli_bootstrap: str, topic_name: str) -> None:
    proc = run_kaflite("topics", "create", topic_name, "--partitions", "1000000", "-b", cli_bootstrap)
    assert proc.returncode == 2
    line = _one_error_line(proc.stderr)
    assert line == (
        "error: --partitions: expected 1..100000, or -1 (or leave it out) for the broker's num.partitions; "
        "got 1000000"
    )
    zero = run_kaflite("topics", "create", topic_name, "--replication-factor", "0", "-b", cli_bootstrap)
    assert zero.returncode == 2 and "expected 1..32767, or -1" in _one_error_line(zero.stderr)


def test_minus_one_means_the_broker_default(run_kaflite, cli_bootstrap: str, topic_name: str) -> None:
    """-1 is what CreateTopics takes for "the broker's default": the same as leaving the option out."""
    proc = run_kaflite("topics", "create", topic_name, "-p", "-1", "-r", "-1", "-b", cli_bootstrap)
    assert proc.returncode == 0, proc.stderr
    described = run_kaflite("topics", "describe", topic_name, "-b", cli_bootstrap)
    assert "\tPartitionCount: 1\tReplicationFactor: 1\t" in described.stdout  # the test broker's defaults


def test_runtime_errors_are_one_line_exit_1(run_kaflite, cli_bootstrap: str, topic_name: str) -> None:
    missing = run_kaflite("topics", "describe", topic_name, "-b", cli_bootstrap)
    assert missing.returncode == 1
    assert _one_error_line(missing.stderr) == f"error: Topic '{topic_name}' does not exist as expected"
    too_many = run_kaflite("topics", "create", topic_name, "--partitions", "20000", "-b", cli_bootstrap)
    assert too_many.returncode == 1 and "INVALID_PARTITIONS" in _one_error_line(too_many.stderr)


def test_help_is_not_an_error(run_kaflite) -> None:
    proc = run_kaflite("topics", "create", "--help")
    assert proc.returncode == 0 and "--partitions" in proc.stdout and proc.stderr == ""
