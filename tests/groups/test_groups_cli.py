"""`kaflite groups list | describe | delete | reset-offsets` against a real broker and a real group."""

from __future__ import annotations

import time
import uuid

import confluent_kafka as ck
from typer.testing import CliRunner

from kaflite.cli.groups_cmd import OffsetRow, describe_lines
from kaflite.cli.main import app

runner = CliRunner()


def cli(broker, *args: str) -> tuple[int, str]:  # noqa: ANN001
    res = runner.invoke(app, ["groups", *args, "-b", broker.bootstrap])
    return res.exit_code, res.output


def test_describe_lines_match_kafka_consumer_groups_layout() -> None:
    rows = [OffsetRow("g", "t", 1, None, 10, "c-1", "/127.0.0.1", "cid"), OffsetRow("g", "t", 0, 4, 10)]
    lines = describe_lines("g", "Stable", rows)
    assert lines[0] == ""
    assert lines[1].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert lines[2].split() == ["g", "t", "0", "4", "10", "6", "-", "-", "-"]
    assert lines[3].split() == ["g", "t", "1", "-", "10", "-", "c-1", "/127.0.0.1", "cid"]
    # columns line up under their headers
    assert lines[2].index("4") == lines[1].index("CURRENT-OFFSET")
    assert describe_lines("g", "Empty", [])[0] == "Consumer group 'g' has no active members."


def test_groups_commands_end_to_end(broker, topic_factory) -> None:  # noqa: ANN001
    topic = topic_factory(2, 20)
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                            "auto.offset.reset": "earliest", "client.id": "cli-test"})
    consumer.subscribe([topic])
    try:
        deadline, seen = time.monotonic() + 30, 0
        while seen < 20 and time.monotonic() < deadline:
            msg = consumer.poll(0.1)
            seen += bool(msg is not None and not msg.error())
        consumer.commit(asynchronous=False)
        code, out = cli(broker, "list")
        assert code == 0 and group in out.split()
        code, out = cli(broker, "list", "--state", "stable")
        assert code == 0 and any(ln.split() == [group, "Stable"] for ln in out.splitlines())
        code, out = cli(broker, "describe", group)
        rows = [ln.split() for ln in out.splitlines() if ln.startswith(group)]
        assert code == 0 and len(rows) == 2
        for row in rows:
            assert row[1] == topic and row[3] == row[4] and row[5] == "0"  # fully consumed: no lag
            assert row[6].startswith("cli-test-") and row[7] == "/127.0.0.1" and row[8] == "cli-test"
        code, out = cli(broker, "describe", group, "--members")
        assert code == 0 and [ln.split()[2:] for ln in out.splitlines() if ln.startswith(group)] == \
            [["/127.0.0.1", "cli-test", "2"]]
        code, out = cli(broker, "describe", group, "--state")
        assert code == 0 and [ln.split()[-4:] for ln in out.splitlines() if ln.startswith(group)] == \
            [["range", "Stable", "1", "Classic"]]
        assert [ln.split() for ln in out.splitlines() if ln.startswith("GROUP")] == [
            ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS", "TYPE"]]
        code, out = cli(broker, "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute")
        assert code == 1 and "inactive" in out  # members still own the partitions
    finally:
        consumer.close()
    code, out = cli(broker, "reset-offsets", group, "--topic", f"{topic}:0", "--to-earliest", "--execute")
    assert code == 0, out
    code, out = cli(broker, "describe", group)
    assert "has no active members" in out
    rows = {int(r[2]): r for r in (ln.split() for ln in out.splitlines() if ln.startswith(group))}
    assert rows[0][3] == "0" and rows[0][5] == rows[0][4]  # lag = everything again
    code, out = cli(broker, "reset-offsets", group, "--topic", topic, "--to-offset", "3")
    assert code == 0 and "NEW-OFFSET" in out  # dry run: shows the plan only
    code, out = cli(broker, "delete", group)
    assert code == 0 and f"'{group}'" in out and "successful" in out
    code, out = cli(broker, "describe", group)
    assert code == 1 and "does not exist" in out


def test_describe_and_delete_a_kip848_consumer_group(broker, topic_factory) -> None:  # noqa: ANN001
    """A group of the consumer protocol (KIP-848, group.protocol=consumer): described per partition, per
    member and in its summary with its type Consumer and the broker's assignor; not deleted while it has a
    member (NON_EMPTY_GROUP), deleted once empty, then gone."""
    topic = topic_factory(2, 20)
    group = f"kip848-{uuid.uuid4().hex[:8]}"
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                            "enable.auto.commit": False, "auto.offset.reset": "earliest", "client.id": "cli-848"})
    consumer.subscribe([topic])
    try:
        deadline, seen = time.monotonic() + 30, 0
        while seen < 20 and time.monotonic() < deadline:
            msg = consumer.poll(0.1)
            seen += bool(msg is not None and not msg.error())
        assert seen == 20
        consumer.commit(asynchronous=False)
        code, out = cli(broker, "describe", group)
        rows = [ln.split() for ln in out.splitlines() if ln.startswith(group)]
        assert code == 0 and sorted(int(r[2]) for r in rows) == [0, 1], out
        for row in rows:
            assert row[1] == topic and row[3] == row[4] and row[5] == "0"
            assert row[6] != "-" and row[7] == "/127.0.0.1" and row[8] == "cli-848"
        code, out = cli(broker, "describe", group, "--members")
        assert code == 0 and [ln.split()[2:] for ln in out.splitlines() if ln.startswith(group)] == \
            [["/127.0.0.1", "cli-848", "2"]]
        code, out = cli(broker, "describe", group, "--state")
        assert code == 0 and [ln.split()[-4:] for ln in out.splitlines() if ln.startswith(group)] == \
            [["uniform", "Stable", "1", "Consumer"]], out
        code, out = cli(broker, "delete", group)
        assert code == 1 and "NON_EMPTY_GROUP" in out and "successful" not in out, out
    finally:
        consumer.close()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # the leave heartbeat empties the group
        code, out = cli(broker, "describe", group, "--state")
        if [ln.split()[-4:] for ln in out.splitlines() if ln.startswith(group)] == [["uniform", "Empty", "0",
                                                                                      "Consumer"]]:
            break
        time.sleep(0.2)
    assert code == 0 and [ln.split()[-4:] for ln in out.splitlines() if ln.startswith(group)] == \
        [["uniform", "Empty", "0", "Consumer"]], out
    code, out = cli(broker, "describe", group)
    assert code == 0 and "has no active members" in out
    assert sorted(int(ln.split()[2]) for ln in out.splitlines() if ln.startswith(group)) == [0, 1]
    code, out = cli(broker, "delete", group)
    assert code == 0 and f"'{group}'" in out and "successful" in out, out
    code, out = cli(broker, "describe", group)
    assert code == 1 and "does not exist" in out, out


def test_bad_arguments_get_clear_errors(broker) -> None:  # noqa: ANN001
    code, out = cli(broker, "list", "--state", "sleepy")
    assert code == 2 and "sleepy" in out and "Stable" in out
    code, out = cli(broker, "reset-offsets", "g", "--topic", "t")
    assert code == 2 and "exactly one of" in out
