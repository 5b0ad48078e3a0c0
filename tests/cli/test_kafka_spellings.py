"""Kafka's (and kcat's / rpk's) option spellings beside ours, against a real broker.

kafka-topics.sh --topic, kafka-console-producer.sh --property parse.key/key.separator,
kafka-console-consumer.sh --topic --bootstrap-server --from-beginning --offset earliest|latest|N
--max-messages --timeout-ms --property print.*=true --group; kcat -t -o -N -o s@ts -e; rpk -o @ts;
kafka-consumer-groups.sh --list --state and --reset-offsets' dry-run warning.
"""

from __future__ import annotations

import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from kaflite.cli.console import StartOffset, parse_offset


def _produce(bootstrap: str, topic: str, values: list[str], partition: int = 0, key: bytes | None = None) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for v in values:
        producer.produce(topic, value=v.encode(), key=key, partition=partition)
        producer.flush(20)
    assert producer.flush(20) == 0


def _values(result) -> list[str]:
    return result.stdout.splitlines()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("earliest", StartOffset("earliest")),
        ("beginning", StartOffset("earliest")),
        ("LATEST", StartOffset("latest")),
        ("end", StartOffset("latest")),
        ("42", StartOffset("absolute", 42)),
        ("-3", StartOffset("tail", 3)),
        ("+2", StartOffset("from-start", 2)),
        ("s@1700000000000", StartOffset("timestamp", 1700000000000)),
        ("@1700000000000", StartOffset("timestamp", 1700000000000)),
        ("@2023-11-14T22:13:20", StartOffset("timestamp", 1700000000000)),
    ],
)
def test_parse_offset(text: str, expected: StartOffset) -> None:
    assert parse_offset(text) == expected


def test_topics_commands_take_dash_dash_topic(cli, cli_bootstrap: str, topic_name: str) -> None:
    b = ["--bootstrap-server", cli_bootstrap]
    created = cli("topics", "create", "--topic", topic_name, "--partitions", "2", *b)
    assert created.exit_code == 0, created.output
    assert created.output.strip() == f"Created topic {topic_name}."
    described = cli("topics", "describe", "--topic", topic_name, *b)
    assert described.exit_code == 0 and described.output.startswith(f"Topic: {topic_name}\t")
    assert len(described.output.splitlines()) == 3
    altered = cli("topics", "alter", "--topic", topic_name, "--partitions", "3", *b)
    assert altered.exit_code == 0, altered.output
    deleted = cli("topics", "delete", "--topic", topic_name, *b)
    assert deleted.exit_code == 0 and f"Deleted topic {topic_name}." in deleted.output
    assert topic_name not in AdminClient({"bootstrap.servers": cli_bootstrap}).list_topics(timeout=10).topics


def test_console_producer_and_consumer_spellings(cli, cli_bootstrap: str, topic_name: str) -> None:
    b = ["--bootstrap-server", cli_bootstrap]
    assert cli("topics", "create", "--topic", topic_name, *b).exit_code == 0
    produced = cli(
        "produce", "--topic", topic_name, "--property", "parse.key=true", "--property", "key.separator=:", *b,
        input="k1:hello\nk2:world\n",
    )
    assert produced.exit_code == 0, produced.output
    consumed = cli(
        "consume", "--topic", topic_name, "--from-beginning", "--max-messages", "2",
        "--property", "print.key=true", "--property", "key.separator=|", "--property", "print.offset=true",
        "--property", "print.partition=true", *b,
    )
    assert consumed.exit_code == 0, consumed.output
    assert _values(consumed) == ["Partition:0|Offset:0|k1|hello", "Partition:0|Offset:1|k2|world"]
    # parse.key alone splits at a tab, as kafka-console-producer.sh
    assert cli("produce", "-t", topic_name, "--property", "parse.key=true", *b, input="k3\tv3\n").exit_code == 0
    more = cli("consume", "-t", topic_name, "-o", "2", "-e", "--property", "print.key=true",
               "--property", "print.value=false", "--property", "print.timestamp=true", *b)
    assert more.exit_code == 0, more.output
    kind, rest = _values(more)[0].split(":", 1)
    assert kind == "CreateTime" and rest.split("\t")[1] == "k3"
    # a librdkafka key given with --property still reaches the client (it was our -X before)
    bad = cli("consume", "-t", topic_name, "-e", "--property", "no.such.key=1", *b)
    assert bad.exit_code == 2 and "No such configuration property" in bad.output


def test_consume_offsets_earliest_latest_n_tail_timestamp(cli, cli_bootstrap: str, topic_name: str) -> None:
    b = ["-b", cli_bootstrap]
    assert cli("topics", "create", topic_name, "-p", "1", *b).exit_code == 0
    _produce(cli_bootstrap, topic_name, ["v0", "v1", "v2"])
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    _produce(cli_bootstrap, topic_name, ["v3", "v4"])

    def run(*offset: str) -> list[str]:
        result = cli("consume", "--topic", topic_name, *offset, "--exit-at-end", *b)
        assert result.exit_code == 0, result.output
        return _values(result)

    assert run("--offset", "earliest") == ["v0", "v1", "v2", "v3", "v4"]
    assert run("--offset", "latest") == []
    assert run("--offset", "3") == ["v3", "v4"]
    assert run("--offset", "-2") == ["v3", "v4"]  # kcat / rpk: the last 2
    assert run("-o", "-10") == ["v0", "v1", "v2", "v3", "v4"]  # more than there is: from the start
    assert run("-o", "+1") == ["v1", "v2", "v3", "v4"]
    assert run("-o", f"s@{middle}") == ["v3", "v4"]  # kcat
    assert run("-o", f"@{middle}") == ["v3", "v4"]  # rpk
    assert run("-o", f"@{int(time.time() * 1000) + 3_600_000}") == []  # after the last record: the end


def test_consume_waits_for_records_like_kafka(kaflite_exe, cli, cli_bootstrap: str, topic_name: str) -> None:
    """Without -e it does not stop at the end: a record produced later is printed, then --max-messages ends it."""
    assert cli("topics", "create", topic_name, "-p", "1", "-b", cli_bootstrap).exit_code == 0
    proc = subprocess.Popen(
        [str(kaflite_exe), "consume", "--topic", topic_name, "--bootstrap-server", cli_bootstrap,
         "--from-beginning", "--max-messages", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        time.sleep(3)  # well past the end of the empty topic (where -e would have exited)
        assert proc.poll() is None, proc.communicate(timeout=5)
        _produce(cli_bootstrap, topic_name, ["late"])
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=5)
    assert proc.returncode == 0, err
    assert out == "late\n" and "Processed a total of 1 messages" in err


def test_consume_timeout_ms_ends_a_wait(cli, cli_bootstrap: str, topic_name: str) -> None:
    assert cli("topics", "create", topic_name, "-b", cli_bootstrap).exit_code == 0
    _produce(cli_bootstrap, topic_name, ["a"])
    started = time.monotonic()
    result = cli("consume", "--topic", topic_name, "--from-beginning", "--timeout-ms", "1500", "-b", cli_bootstrap)
    assert result.exit_code == 0, result.output
    assert _values(result) == ["a"] and "Processed a total of 1 messages" in result.stderr
    assert 1.5 <= time.monotonic() - started < 30


def test_consume_with_group(cli, cli_bootstrap: str, topic_name: str) -> None:
    assert cli("topics", "create", topic_name, "-b", cli_bootstrap).exit_code == 0
    _produce(cli_bootstrap, topic_name, ["g1", "g2"])
    group = f"{topic_name}-grp"
    first = cli("consume", "--topic", topic_name, "--group", group, "--from-beginning", "--max-messages", "2",
                "--bootstrap-server", cli_bootstrap)
    assert first.exit_code == 0 and _values(first) == ["g1", "g2"]
    _produce(cli_bootstrap, topic_name, ["g3"])
    second = cli("consume", "--topic", topic_name, "--group", group, "--max-messages", "1",
                 "--bootstrap-server", cli_bootstrap)
    assert second.exit_code == 0 and _values(second) == ["g3"]  # continues from the committed offset


def test_groups_list_state_flag_and_reset_dry_run(cli, cli_bootstrap: str, topic_name: str) -> None:
    b = ["--bootstrap-server", cli_bootstrap]
    assert cli("topics", "create", topic_name, *b).exit_code == 0
    _produce(cli_bootstrap, topic_name, ["x", "y", "z"])
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"bootstrap.servers": cli_bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic_name])
    deadline, seen = time.monotonic() + 30, 0
    while seen < 3 and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        seen += bool(msg is not None and msg.error() is None)
    consumer.commit(asynchronous=False)
    consumer.close()

    listed = cli("groups", "list", "--state", *b)  # a flag: every group, with its state
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert lines[0].split() == ["GROUP", "STATE"] and [group, "Empty"] in [ln.split() for ln in lines]
    only = cli("groups", "list", "--state", "Stable,Dead", *b)  # Kafka's value form still filters
    assert only.exit_code == 0 and group not in only.output

    plan = cli("groups", "reset-offsets", "--group", group, "--topic", topic_name, "--to-earliest", *b)
    assert plan.exit_code == 0, plan.output
    assert plan.stderr.startswith("WARN: No action will be performed as the --execute option is missing.")
    assert plan.stdout.splitlines()[0].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    assert plan.stdout.splitlines()[1].split() == [group, topic_name, "0", "0"]
    described = cli("groups", "describe", "--group", group, *b)
    row = next(ln.split() for ln in described.output.splitlines() if ln.startswith(group))
    assert row[3] == "3"  # nothing was changed
    quiet = cli("groups", "reset-offsets", group, "--topic", topic_name, "--to-earliest", "--dry-run", *b)
    assert quiet.exit_code == 0 and "WARN" not in quiet.stderr
    done = cli("groups", "reset-offsets", group, "--all-topics", "--to-earliest", "--execute", *b)
    assert done.exit_code == 0 and "WARN" not in done.stderr
    row = next(ln.split() for ln in cli("groups", "describe", group, *b).output.splitlines() if ln.startswith(group))
    assert row[3] == "0"
