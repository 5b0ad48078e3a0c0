"""`kaflite assign` / `kaflite partition` through Typer's CliRunner (the seeds' examples as one-liners)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from kaflite.assign import partition_for_key
from kaflite.cli import assign_cmd

runner = CliRunner()


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    a = typer.Typer()
    assign_cmd.register(a)
    return a


E3 = ["--topic", "t0:1", "--topic", "t1:2", "--topic", "t2:3",
      "--member", "C0:t0", "--member", "C1:t0,t1", "--member", "C2:t0,t1,t2"]


def run_json(app: typer.Typer, *args: str) -> list[dict]:
    res = runner.invoke(app, ["assign", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_e3_e4_one_liner_sticky_and_roundrobin_then_leave(app: typer.Typer) -> None:
    out = run_json(app, *E3, "--strategy", "sticky", "--strategy", "roundrobin", "--then-leave", "C0")
    sticky, rr = out
    assert sticky["assignment"] == {"C0": ["t0-0"], "C1": ["t1-0", "t1-1"], "C2": ["t2-0", "t2-1", "t2-2"]}
    assert sticky["after"]["rounds"][-1] == {"C1": ["t1-0", "t1-1", "t0-0"], "C2": ["t2-0", "t2-1", "t2-2"]}
    assert sticky["after"]["moves"] == [["t0-0", "C0", "C1"]]
    assert rr["assignment"] == {"C0": ["t0-0"], "C1": ["t1-0"], "C2": ["t1-1", "t2-0", "t2-1", "t2-2"]}
    assert rr["after"]["rounds"][-1] == {"C1": ["t0-0", "t1-1"], "C2": ["t1-0", "t2-0", "t2-1", "t2-2"]}


def test_table_output_names_moves_and_balance(app: typer.Typer) -> None:
    res = runner.invoke(app, ["assign", *E3, "-s", "sticky", "--then-leave", "C0", "--seed-notation"])
    assert res.exit_code == 0, res.output
    assert "t1p0, t1p1, t0p0" in res.output
    assert "t0p0: C0 -> C1" in res.output
    assert "balance: min 3, max 3, spread 0" in res.output


def test_cooperative_join_shows_revoke_then_follow_up(app: typer.Typer) -> None:
    topics = [x for i in range(4) for x in ("-t", f"t{i}:2")]
    out = run_json(app, *topics, "-m", "C0:t0,t1,t2,t3", "-m", "C2:t0,t1,t2,t3", "-s", "cooperative-sticky",
                   "--then-join", "C1:t0,t1,t2,t3")
    rounds = out[0]["after"]["rounds"]
    assert len(rounds) == 2
    assert rounds[0]["C1"] == []  # first round only revokes
    owned_before = out[0]["assignment"]
    handed = {p for p in rounds[1]["C1"]}
    assert handed and all(p not in rounds[0]["C0"] + rounds[0]["C2"] for p in handed)
    assert {p for ps in owned_before.values() for p in ps} == {p for ps in rounds[1].values() for p in ps}


def test_group_from_json_file_with_racks(app: typer.Typer, tmp_path: Path) -> None:
    f = tmp_path / "group.json"
    f.write_text(json.dumps({
        "topics": {"t0": 3, "t1": 3},
        "members": {"C0": {"topics": ["t0", "t1"], "rack": "a"}, "C1": ["t0", "t1"]},
        "partition_racks": {f"t{t}-{p}": ["a" if p == 2 else "b"] for t in range(2) for p in range(3)},
    }))
    out = run_json(app, "--file", str(f), "-s", "range")
    # KIP-881: C0 (rack a) gets the partitions replicated on rack a; C1 (no rack) takes the rest
    assert out[0]["assignment"] == {"C0": ["t0-2", "t1-2"], "C1": ["t0-0", "t0-1", "t1-0", "t1-1"]}


@pytest.mark.parametrize(("args", "message"), [
    (["--topic", "t0", "--member", "C0:t0"], "NAME:PARTITIONS"),
    (["--topic", "t0:0", "--member", "C0:t0"], "NAME:PARTITIONS"),
    (["--topic", "t0:2", "--member", "C0"], "NAME:TOPIC"),
    (["--topic", "t0:2", "--member", "C0:t9"], "unknown topic"),
    (["--topic", "t0:2", "--member", "C0:t0", "-s", "fancy"], "allowed"),
    (["--topic", "t0:2", "--member", "C0:t0", "--then-leave", "C7"], "no such member"),
    ([], "--topic"),
])
def test_bad_input_is_a_clear_usage_error(app: typer.Typer, args: list[str], message: str) -> None:
    res = runner.invoke(app, ["assign", *args])
    assert res.exit_code == 2
    assert message in res.output
    assert "Traceback" not in res.output


def test_bad_file(app: typer.Typer, tmp_path: Path) -> None:
    f = tmp_path / "g.json"
    f.write_text("{not json")
    res = runner.invoke(app, ["assign", "--file", str(f)])
    assert res.exit_code == 2 and "not valid JSON" in res.output
    f.write_text(json.dumps({"topics": {"t": 0}, "members": {}}))
    res = runner.invoke(app, ["assign", "--file", str(f)])
    assert res.exit_code == 2 and "partition count" in res.output


def test_partition_command(app: typer.Typer) -> None:
    res = runner.invoke(app, ["partition", "hello", "-n", "12", "-c", "java", "-c", "librdkafka-murmur2"])
    assert res.exit_code == 0, res.output
    p = partition_for_key(b"hello", 12)
    assert res.output.count(f"│ {p:>9} │") + res.output.count(f" {p} ") >= 2
    res = runner.invoke(app, ["partition", "--diff", "java", "librdkafka-murmur2", "-n", "7", "--keys", "500"])
    assert res.exit_code == 0 and res.output.startswith("0 of 500 keys")
    res = runner.invoke(app, ["partition", "--diff", "java", "librdkafka", "-n", "7", "--keys", "500"])
    assert res.exit_code == 0 and "of 500 keys" in res.output and not res.output.startswith("0 of")


def test_partition_bad_input(app: typer.Typer) -> None:
    res = runner.invoke(app, ["partition", "k", "-n", "3", "-c", "nope"])
    assert res.exit_code == 2 and "allowed" in res.output
    res = runner.invoke(app, ["partition", "zz", "--hex", "-n", "3"])
    assert res.exit_code == 2 and "not hex" in res.output
    res = runner.invoke(app, ["partition", "k", "-n", "0"])
    assert res.exit_code == 2


def test_registered_in_main_app() -> None:
    from kaflite.cli.main import app as main_app

    res = runner.invoke(main_app, ["partition", "abc", "-n", "10", "-c", "java"])
    assert res.exit_code == 0, res.output
    assert str(partition_for_key(b"abc", 10)) in res.output
