"""`kaflite produce` / `kaflite consume` against a real broker, cross-checked with confluent-kafka."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition


def _create(cli, bootstrap: str, topic: str, partitions: int = 1) -> None:
    result = cli("topics", "create", topic, "-p", str(partitions), "--bootstrap-server", bootstrap)
    assert result.exit_code == 0, result.output


def _read_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    deadline = time.monotonic() + 20
    while len(out) < expected and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            out.append(msg)
    consumer.close()
    return out


def test_produce_lines_with_keys_and_headers(cli, cli_bootstrap: str, topic_name: str) -> None:
    _create(cli, cli_bootstrap, topic_name, 2)
    result = cli(
        "produce",
        topic_name,
        "--key-separator",
        ":",
        "--header",
        "source=cli",
        "-H",
        "n=1",
        "--bootstrap-server",
        cli_bootstrap,
        input="k1:v1\nk2:v2\nk1:v3\n",
    )
    assert result.exit_code == 0, result.output
    records = _read_all(cli_bootstrap, topic_name, 2, 3)
    got = sorted((m.key(), m.value(), tuple(m.headers() or [])) for m in records)
    assert got == [
        (b"k1", b"v1", (("source", b"cli"), ("n", b"1"))),
        (b"k1", b"v3", (("source", b"cli"), ("n", b"1"))),
        (b"k2", b"v2", (("source", b"cli"), ("n", b"1"))),
    ]
    # same key -> same partition, in order
    k1 = [m for m in records if m.key() == b"k1"]
    assert k1[0].partition() == k1[1].partition() and k1[0].offset() < k1[1].offset()


def test_produce_to_partition_and_acks(cli, cli_bootstrap: str, topic_name: str) -> None:
    _create(cli, cli_bootstrap, topic_name, 3)
    for acks in ("0", "1", "all"):
        result = cli(
            "produce",
            topic_name,
            "--partition",
            "2",
            "--acks",
            acks,
            "--bootstrap-server",
            cli_bootstrap,
            input=f"acks-{acks}\n",
        )
        assert result.exit_code == 0, result.output
    records = _read_all(cli_bootstrap, topic_name, 3, 3)
    assert sorted(m.value() for m in records) == [b"acks-0", b"acks-1", b"acks-all"]
    assert {m.partition() for m in records} == {2}
    bad = cli("produce", topic_name, "--partition", "7", "--bootstrap-server", cli_bootstrap, input="x\n")
    assert bad.exit_code == 2 and "has partitions 0..2, got 7" in bad.output
    bad_acks = cli("produce", topic_name, "--acks", "2", "--bootstrap-server", cli_bootstrap, input="x\n")
    assert bad_acks.exit_code == 2 and "--acks: expected 0, 1, all or -1, got '2'" in bad_acks.output


def test_produce_missing_key_separator_names_the_line(cli, cli_bootstrap: str, topic_name: str) -> None:
    _create(cli, cli_bootstrap, topic_name)
    result = cli("produce", topic_name, "-k", ":", "--bootstrap-server", cli_bootstrap, input="a:1\nnokey\n")
    assert result.exit_code == 1
    assert "line 2: no key separator ':' in 'nokey'" in result.output


def _produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes, int]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for key, value, partition in records:
        producer.produce(topic, value=value, key=key, partition=partition, headers=[("h", b"x")])
    assert producer.flush(20) == 0


def test_consume_from_beginning_until_end(cli, cli_bootstrap: str, topic_name: str) -> None:
    _create(cli, cli_bootstrap, topic_name, 2)
    _produce(cli_bootstrap, topic_name, [(b"a", b"1", 0), (b"b", b"2", 1), (None, b"3", 0)])
    result = cli(
        "consume",
        topic_name,
        "--from-beginning",
        "--exit-at-end",
        "--print-key",
        "--print-partition",
        "--print-offset",
        "--print-headers",
        "--bootstrap-server",
        cli_bootstrap,
    )
    assert result.exit_code == 0, result.output
    lines = sorted(line for line in result.stdout.splitlines() if line)
    assert lines == [
        "Partition:0\tOffset:0\th:x\ta\t1",
        "Partition:0\tOffset:1\th:x\tnull\t3",
        "Partition:1\tOffset:0\th:x\tb\t2",
    ]
    assert "Processed a total of 3 messages" in result.stderr


def test_consume_latest_reads_nothing_and_exits(cli, cli_bootstrap: str, topic_name: str) -> None:
    _create(cli, cli_bootstrap, topic_name)
    _produce(cli_bootstrap, topic_name, [(None, b"old", 0)])
    result = cli("consume", topic_name, "-e", "--bootstrap-server", cli_bootstrap)
    assert result.exit_code == 0, result.output
    assert result.stdout == ""


def test_consume_json_max_messages_partition_offset(cli, cli_bootstrap: str, topic_name: str) -> None:
    _create(cli, cli_bootstrap, topic_name)
    _produce(cli_bootstrap, topic_name, [(b"k", f"v{i}".encode(), 0) for i in range(5)])
    result = cli(
        "consume",
        topic_name,
        "--partition",
        "0",
        "--offset",
        "1",
        "--max-messages",
        "2",
        "--json",
        "--bootstrap-server",
        cli_bootstrap,
    )
    assert result.exit_code == 0, result.output
    docs = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(d["offset"], d["key"], d["value"]) for d in docs] == [(1, "k", "v1"), (2, "k", "v2")]
    assert docs[0]["headers"] == [["h", "x"]] and docs[0]["timestamp_type"] == "CreateTime"


def test_consume_timestamp_format(cli, cli_bootstrap: str, topic_name: str) -> None:
    _create(cli, cli_bootstrap, topic_name)
    before = int(time.time() * 1000)
    _produce(cli_bootstrap, topic_name, [(None, b"v", 0)])
    result = cli(
        "consume", topic_name, "--from-beginning", "--print-timestamp", "-e", "-b", cli_bootstrap
    )
    ts_field, value = result.stdout.strip().split("\t")
    kind, ts = ts_field.split(":")
    assert kind == "CreateTime" and before - 5000 <= int(ts) <= before + 60_000 and value == "v"


def test_consume_missing_topic(cli, cli_bootstrap: str, topic_name: str) -> None:
    result = cli("consume", topic_name, "--bootstrap-server", cli_bootstrap)
    assert result.exit_code == 1
    assert f"Topic '{topic_name}' does not exist" in result.output


def test_consume_group_commits(cli, cli_bootstrap: str, topic_name: str) -> None:
    _create(cli, cli_bootstrap, topic_name)
    _produce(cli_bootstrap, topic_name, [(None, f"m{i}".encode(), 0) for i in range(3)])
    group = f"{topic_name}-g"
    first = cli(
        "consume",
        topic_name,
        "--group",
        group,
        "--from-beginning",
        "--idle-timeout",
        "45",
        "--max-messages",
        "3",
        "--bootstrap-server",
        cli_bootstrap,
    )
    assert first.exit_code == 0, first.output
    assert first.stdout.split() == ["m0", "m1", "m2"]
    consumer = Consumer({"bootstrap.servers": cli_bootstrap, "group.id": group})
    committed = consumer.committed([TopicPartition(topic_name, 0)], timeout=10)
    consumer.close()
    assert committed[0].offset == 3


def test_produce_consume_pipeline_subprocess(
    run_kaflite, kaflite_exe, cli_bootstrap: str, topic_name: str
) -> None:
    """The console scripts end to end: produce from a pipe, then follow with an idle timeout."""
    assert run_kaflite("topics", "create", topic_name, "-p", "1", "-b", cli_bootstrap).returncode == 0
    lines = [f"line {i}" for i in range(50)]
    produced = run_kaflite("produce", topic_name, "-b", cli_bootstrap, input="\n".join(lines) + "\n")
    assert produced.returncode == 0, produced.stderr
    follower = subprocess.run(
        [
            str(kaflite_exe),
            "consume",
            topic_name,
            "-b",
            cli_bootstrap,
            "--from-beginning",
            "--follow",
            "--idle-timeout",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert follower.returncode == 0, follower.stderr
    assert follower.stdout.splitlines() == lines


def test_follow_prints_records_produced_later(kaflite_exe, cli, cli_bootstrap: str, topic_name: str) -> None:
    _create(cli, cli_bootstrap, topic_name)
    follower = subprocess.Popen(
        [
            str(kaflite_exe),
            "consume",
            topic_name,
            "--from-beginning",
            "--follow",
            "--max-messages",
            "2",
            "--print-offset",
            "-b",
            cli_bootstrap,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # --from-beginning makes the result independent of when the follower is ready; the pause lets it
        # usually reach the (empty) end first, where a non-following consumer would exit
        time.sleep(2)
        _produce(cli_bootstrap, topic_name, [(None, b"late-1", 0), (None, b"late-2", 0)])
        out, err = follower.communicate(timeout=30)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate(timeout=5)
    assert follower.returncode == 0, err
    assert out.splitlines() == ["Offset:0\tlate-1", "Offset:1\tlate-2"]


def test_client_properties(cli, cli_bootstrap: str, topic_name: str) -> None:
    _create(cli, cli_bootstrap, topic_name)
    ok = cli("produce", topic_name, "-X", "enable.idempotence=true", "-b", cli_bootstrap, input="idem\n")
    assert ok.exit_code == 0, ok.output
    assert [m.value() for m in _read_all(cli_bootstrap, topic_name, 1, 1)] == [b"idem"]
    bad = cli("produce", topic_name, "-X", "no.such.property=1", "-b", cli_bootstrap, input="x\n")
    assert bad.exit_code == 2 and "--property: No such configuration property" in bad.output


def test_produce_keeps_bytes_exactly(run_kaflite, kaflite_exe, cli_bootstrap: str, topic_name: str) -> None:
    """Non-UTF-8 bytes, CRLF endings and an empty value go through unchanged (subprocess: real stdin)."""
    assert run_kaflite("topics", "create", topic_name, "-p", "1", "-b", cli_bootstrap).returncode == 0
    proc = subprocess.run(
        [str(kaflite_exe), "produce", topic_name, "-k", "\\t", "-b", cli_bootstrap],
        input=b"k\t\xff\xfe\r\nk2\t\n",
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    records = _read_all(cli_bootstrap, topic_name, 1, 2)
    assert [(m.key(), m.value()) for m in records] == [(b"k", b"\xff\xfe"), (b"k2", b"")]


def test_sigterm_stops_a_group_follower_cleanly(
    kaflite_exe, cli, cli_bootstrap: str, topic_name: str
) -> None:
    """SIGTERM ends `--follow` like Ctrl-C: summary printed, exit 0, the group's position committed."""
    _create(cli, cli_bootstrap, topic_name)
    _produce(cli_bootstrap, topic_name, [(None, b"r1", 0), (None, b"r2", 0)])
    group = f"{topic_name}-follow"
    follower = subprocess.Popen(
        [
            str(kaflite_exe),
            "consume",
            topic_name,
            "--group",
            group,
            "--from-beginning",
            "--follow",
            "-b",
            cli_bootstrap,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert follower.stdout is not None
        lines = [follower.stdout.readline().strip() for _ in range(2)]  # blocks until both are printed
        assert lines == ["r1", "r2"]
        follower.send_signal(signal.SIGTERM)
        _, err = follower.communicate(timeout=30)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate(timeout=5)
    assert follower.returncode == 0, err
    assert "Processed a total of 2 messages" in err
    consumer = Consumer({"bootstrap.servers": cli_bootstrap, "group.id": group})
    committed = consumer.committed([TopicPartition(topic_name, 0)], timeout=10)
    consumer.close()
    assert committed[0].offset == 2


@pytest.mark.parametrize("inherited", ["default", "ignored"])
def test_ctrl_c_in_produce_still_delivers_what_was_read(
    kaflite_exe, cli, cli_bootstrap: str, topic_name: str, inherited: str, inherit_sigint
) -> None:
    """Ctrl-C stops reading stdin and delivers what was read, whether the producer inherits SIGINT's
    default disposition or SIG_IGN (a background job of a non-interactive shell, nohup, some CI runners):
    the disposition is set explicitly here, so the test does not depend on how pytest was started."""
    _create(cli, cli_bootstrap, topic_name)
    producer = subprocess.Popen(
        [str(kaflite_exe), "produce", topic_name, "--linger-ms", "0", "-b", cli_bootstrap],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=inherit_sigint(inherited),
    )
    try:
        assert producer.stdin is not None
        producer.stdin.write("typed-1\ntyped-2\n")
        producer.stdin.flush()
        records = _read_all(cli_bootstrap, topic_name, 1, 2)  # both are delivered while stdin stays open
        producer.send_signal(signal.SIGINT)
        producer.wait(timeout=30)  # stdin stays open: the signal, not an end of input, stops the reading
        _, err = producer.communicate(timeout=5)
    finally:
        if producer.poll() is None:
            producer.kill()
            producer.communicate(timeout=5)
    assert [m.value() for m in records] == [b"typed-1", b"typed-2"]
    assert producer.returncode == 0, err
    assert "Produced 2 record(s)" in err and "Traceback" not in err
