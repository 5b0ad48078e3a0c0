"""`kaflite serve` configuration handling (no broker needed: --print-config and the error paths)."""

from __future__ import annotations

from pathlib import Path


def _config(output: str) -> dict[str, tuple[str, str]]:
    """--print-config output -> {key: (value, source)}; unset keys are commented out as `#key=`."""
    out = {}
    source = ""
    for line in output.splitlines():
        if line.startswith("# source: "):
            source = line.removeprefix("# source: ")
        elif line.startswith("#") and line.endswith("=") and " " not in line:
            out[line[1:-1]] = ("<unset>", source)
        elif not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key] = (value, source)
    return out


def test_print_config_defaults(cli) -> None:
    result = cli("serve", "--print-config")
    assert result.exit_code == 0
    cfg = _config(result.output)
    assert cfg["num.partitions"] == ("1", "default")
    assert cfg["listeners"] == ("PLAINTEXT://127.0.0.1:9092", "default")
    assert cfg["group.initial.rebalance.delay.ms"] == ("3000", "default")
    assert cfg["auto.create.topics.enable"] == ("true", "default")


def test_file_override_and_shortcuts(cli, tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("num.partitions=3\nlog.retention.hours=24\nlisteners=PLAINTEXT://127.0.0.1:9092\n")
    result = cli(
        "serve",
        "--config",
        str(props),
        "--override",
        "num.partitions=4",
        "-o",
        "auto.create.topics.enable=false",
        "--port",
        "19092",
        "--log-dir",
        str(tmp_path / "d"),
        "--print-config",
    )
    assert result.exit_code == 0, result.output
    cfg = _config(result.output)
    assert cfg["num.partitions"] == ("4", "override")
    assert cfg["log.retention.hours"] == ("24", "file")
    assert cfg["auto.create.topics.enable"] == ("false", "override")
    assert cfg["listeners"] == ("PLAINTEXT://127.0.0.1:19092", "override")
    assert cfg["log.dirs"] == (str(tmp_path / "d"), "override")


def test_dev_profile_in_print_config(cli) -> None:
    cfg = _config(cli("serve", "--dev", "--print-config").output)
    assert cfg["group.initial.rebalance.delay.ms"] == ("100", "dev-profile")


def test_bad_value_exits_2_with_the_config_error(run_kaflite) -> None:
    proc = run_kaflite("serve", "--override", "log.retention.hours=abc")
    assert proc.returncode == 2
    assert "log.retention.hours: expected an int >= -1, got 'abc'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unknown_key_exits_2_with_close_matches(run_kaflite) -> None:
    proc = run_kaflite("serve", "-o", "num.partition=3")
    assert proc.returncode == 2
    assert "num.partition: unknown broker configuration key; did you mean num.partitions" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_file_line_is_named(cli, tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("# kafka\nnum.partitions=two\n")
    result = cli("serve", "-c", str(props))
    assert result.exit_code == 2
    assert f"{props}:2: num.partitions: expected an int >= 1, got 'two'" in result.output


def test_every_bad_file_line_is_named_at_once(cli, tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("# kafka\nnum.partitions=two\nlog.retention.hour=1\n")
    result = cli("serve", "-c", str(props))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error: 2 configuration errors:",
        f"  {props}:2: num.partitions: expected an int >= 1, got 'two'",
        f"  {props}:3: log.retention.hour: unknown broker configuration key; did you mean log.retention.hours, "
        "log.retention.ms, log.retention.minutes?",
    ]


def test_missing_file_and_malformed_override(cli, tmp_path: Path) -> None:
    result = cli("serve", "-c", str(tmp_path / "nope.properties"))
    assert result.exit_code == 2 and "cannot read configuration file" in result.output
    result = cli("serve", "-o", "num.partitions")
    assert result.exit_code == 2 and "--override: expected KEY=VALUE, got 'num.partitions'" in result.output


def test_print_config_round_trips(cli, tmp_path: Path) -> None:
    printed = cli(
        "serve", "--dev", "-o", "log.retention.minutes=5", "--log-dir", str(tmp_path), "--print-config"
    )
    props = tmp_path / "printed.properties"
    props.write_text(printed.output)
    again = cli("serve", "-c", str(props), "--print-config")
    assert again.exit_code == 0, again.output
    first, second = _config(printed.output), _config(again.output)
    assert {k: v for k, (v, _) in first.items()} == {k: v for k, (v, _) in second.items()}
    assert first["log.retention.minutes"] == ("5", "override") and second["log.retention.minutes"] == (
        "5",
        "file",
    )
    assert first["log.retention.ms"] == ("<unset>", "default")
