"""`kaflite share-groups` (kafka-share-groups.sh's flags) against an embedded broker and confluent-kafka's
ShareConsumer: list, describe (offsets, members, state), reset-offsets (refused while the group has
members, dry run, execute: the records come back), delete-offsets, delete; usage errors name the flag."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator

import confluent_kafka as ck
import pytest
from typer.testing import CliRunner

from groups.test_share_clients import _produce, _started, _topic
from kaflite.cli.main import app
from kaflite.cli.share_groups_cmd import parse_datetime
from kaflite.server.embedded import EmbeddedBroker

runner = CliRunner()


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    # heartbeats every 0.5 s: a new group's partitions are assigned at the heartbeat after their share state
    # is initialized (the join only starts that)
    with EmbeddedBroker(overrides={"group.share.heartbeat.interval.ms": "500"}) as b:
        yield b


def cli(b: EmbeddedBroker, *args: str) -> tuple[int, str]:
    res = runner.invoke(app, ["share-groups", "--bootstrap-server", b.bootstrap, *args])
    assert "Traceback" not in res.output
    return res.exit_code, res.output


def rows(out: str, first: str) -> list[list[str]]:
    return [ln.split() for ln in out.splitlines() if ln.split()[:1] == [first]]


def consume(c: ck.ShareConsumer, n: int) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(got) < n:
        got += [m.value() for m in c.poll(0.3) if m.error() is None]
    return got


def test_share_groups_commands_end_to_end(broker: EmbeddedBroker) -> None:
    _topic(broker, "sgc-t")
    (c,) = _started(broker, "sgc-t", "sgc-g", 1, **{"client.id": "sgc-client"})
    _produce(broker, "sgc-t", [b"v%d" % i for i in range(5)])
    assert len(consume(c, 5)) == 5
    assert list(c.poll(0.5)) == []  # the records are implicitly accepted by this poll
    code, out = cli(broker, "--list")
    assert code == 0 and "sgc-g" in out.split()
    code, out = cli(broker, "--list", "--state")
    assert code == 0 and rows(out, "GROUP") == [["GROUP", "STATE"]] and ["sgc-g", "Stable"] in rows(out, "sgc-g")
    code, out = cli(broker, "--list", "--state", "empty")
    assert code == 0 and "sgc-g" not in out
    code, out = cli(broker, "--describe", "--group", "sgc-g")
    assert code == 0 and rows(out, "GROUP") == [["GROUP", "TOPIC", "PARTITION", "START-OFFSET"]]
    assert rows(out, "sgc-g") == [["sgc-g", "sgc-t", "0", "5"]]
    code, out = cli(broker, "--describe", "--group", "sgc-g", "--members")
    (member,) = rows(out, "sgc-g")
    assert code == 0 and member[2:] == ["/127.0.0.1", "sgc-client", "1", "sgc-t:0"]
    code, out = cli(broker, "--describe", "--group", "sgc-g", "--state", "--verbose")
    (state,) = rows(out, "sgc-g")
    assert code == 0 and state[-4] == "Stable" and state[-1] == "1"  # ... STATE GROUP-EPOCH ASSIGNMENT-EPOCH #MEMBERS
    code, out = cli(broker, "--reset-offsets", "--group", "sgc-g", "--topic", "sgc-t", "--to-earliest", "--execute")
    assert code == 1 and "Share group 'sgc-g' is not empty." in out
    c.close()  # the member leaves: the group is empty
    code, out = cli(broker, "--reset-offsets", "--group", "sgc-g", "--topic", "sgc-t", "--to-earliest", "--dry-run")
    assert code == 0 and rows(out, "sgc-g") == [["sgc-g", "sgc-t", "0", "0"]]
    assert rows(cli(broker, "--describe", "--group", "sgc-g")[1], "sgc-g") == [["sgc-g", "sgc-t", "0", "5"]]
    code, out = cli(broker, "--reset-offsets", "--group", "sgc-g", "--all-topics", "--to-earliest", "--execute")
    assert code == 0 and rows(out, "GROUP") == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]]
    code, out = cli(broker, "--describe", "--group", "sgc-g")
    assert "Share group 'sgc-g' has no active members." in out and rows(out, "sgc-g")[-1] == ["sgc-g", "sgc-t", "0", "0"]
    again = ck.ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "sgc-g"})
    again.subscribe(["sgc-t"])
    assert sorted(consume(again, 5)) == [b"v%d" % i for i in range(5)]  # accepted before, delivered again
    again.close()
    future = (datetime.datetime.now() + datetime.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S.000")
    code, out = cli(broker, "--reset-offsets", "--group", "sgc-g", "--topic", "sgc-t:0", "--to-datetime", future,
                    "--execute")
    assert code == 0 and "Warn: Partition 0 from topic sgc-t is empty. Falling back to latest known offset." in out
    assert rows(out, "sgc-g") == [["sgc-g", "sgc-t", "0", "5"]]
    code, out = cli(broker, "--delete-offsets", "--group", "sgc-g", "--topic", "sgc-t", "--topic", "nope")
    assert code == 1 and rows(out, "sgc-t") == [["sgc-t", "Successful"]] and rows(out, "nope")[0][:2] == ["nope", "Error:"]
    code, out = cli(broker, "--describe", "--group", "sgc-g")
    assert code == 0 and rows(out, "sgc-g") == []
    code, out = cli(broker, "--delete", "--group", "sgc-g", "--group", "not-a-group")
    assert code == 1 and "* Group 'not-a-group' could not be deleted due to: Group 'not-a-group' is not a share group." \
        in out and "These share groups were deleted successfully: 'sgc-g'" in out
    code, out = cli(broker, "--describe", "--group", "sgc-g")
    assert code == 1 and "Error: Share group 'sgc-g' does not exist." in out


@pytest.mark.parametrize(("args", "says"), [
    ([], "exactly one action: --list, --describe, --delete, --reset-offsets, --delete-offsets"),
    (["--list", "--describe"], "(got --list, --describe)"),
    (["--describe"], "Option --describe takes one of these options: --all-groups, --group"),
    (["--describe", "--group", "g", "--members", "--state"], "at most one of these options: --members, --offsets"),
    (["--list", "--members"], "Option --list does not take --members (it takes: --state)"),
    (["--delete"], "Option --delete takes the options --group or --all-groups"),
    (["--delete-offsets", "--group", "g"], "Option --delete-offsets takes the following options: --group"),
    (["--reset-offsets", "--group", "g", "--topic", "t", "--to-earliest"], "--execute or --dry-run"),
    (["--reset-offsets", "--group", "g", "--to-earliest", "--dry-run"], "--all-topics, --topic"),
    (["--reset-offsets", "--group", "g", "--topic", "t", "--dry-run"], "--to-datetime, --to-earliest, --to-latest"),
    (["--reset-offsets", "--group", "g", "--topic", "t", "--to-datetime", "yesterday", "--dry-run"],
     "--to-datetime: 'yesterday' is not a date and time"),
    (["--list", "--state", "Rebalancing"], "valid states are: Empty, Stable, Reconciling, Dead"),
])
def test_bad_arguments_name_the_flag(broker: EmbeddedBroker, args: list[str], says: str) -> None:
    code, out = cli(broker, *args)
    assert code == 2 and says in " ".join(out.split()), out


def test_parse_datetime_as_kafka() -> None:
    assert parse_datetime("2024-01-31T12:00:00.000Z") == 1706702400000
    assert parse_datetime("2024-01-31T13:00:00+01:00") == 1706702400000
    local = datetime.datetime(2024, 1, 31, 12).astimezone()
    assert parse_datetime("2024-01-31T12:00:00") == int(local.timestamp() * 1000)
    with pytest.raises(ValueError):
        parse_datetime("2024-01-31")
