"""`kaflite reassign-partitions` without sockets: Kafka's reassignment and topics JSON files (refusals naming
the file, the entry and the key), the broker list, the JSON it prints, --generate's placement, and the
option checks made before connecting. The command against a real cluster: docs/cli.md's console-cluster
examples (tests/cli/test_docs_cluster_examples.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from kaflite.cli.common import CliFailure
from kaflite.cli.reassign_cmd import (
    calculate_assignment,
    format_reassignment_json,
    parse_broker_list,
    parse_reassignment_json,
    parse_topics_json,
)


def test_reassignment_file_as_kafka_reads_it() -> None:
    text = json.dumps({"version": 1, "partitions": [
        {"topic": "a", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]},
        {"topic": "a", "partition": 0, "replicas": [2]},
    ]})
    assert parse_reassignment_json(text, "f.json", for_execute=True) == [(("a", 1), [3, 1]), (("a", 0), [2])]
    # no version: version 1 (Kafka's EARLIEST_VERSION); --verify / --cancel take an empty list
    assert parse_reassignment_json('{"partitions": []}', "f.json") == []


@pytest.mark.parametrize(("text", "why"), [
    ("{", "--reassignment-json-file f.json: not JSON"),
    ("[]", "expected a JSON object"),
    ('{"version": 2, "partitions": []}', '"version": not supported version field value 2 (allowed: 1)'),
    ('{"partitions": {}}', '"partitions" must be a list'),
    ('{"partitions": [{"partition": 0, "replicas": [1]}]}', 'partitions[0]: "topic" must be a topic name'),
    ('{"partitions": [{"topic": "t", "partition": "0", "replicas": [1]}]}', '"partition" must be an integer'),
    ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1, "2"]}]}', '"replicas" must be a list'),
    ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"]}]}',
     "Size of replicas list [1, 2] is different from size of log dirs list"),
    ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["/d"]}]}',
     'only "any" is supported'),
    ('{"partitions": []}', "Partition reassignment list cannot be empty"),
    ('{"partitions": [{"topic": "t", "partition": 0, "replicas": []}]}', "Partition replica list cannot be empty"),
    ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1]}, {"topic": "t", "partition": 0, '
     '"replicas": [2]}]}', "contains duplicate topic partitions: t-0"),
    ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2, 1]}]}',
     "may not contain duplicate entries: t-0 contains multiple entries for 1"),
])
def test_bad_reassignment_files_are_one_line_naming_the_key(text: str, why: str) -> None:
    with pytest.raises(CliFailure) as err:
        parse_reassignment_json(text, "f.json", for_execute=True)
    assert why in err.value.message and err.value.code == 2 and "\n" not in err.value.message
    assert err.value.message.startswith("--reassignment-json-file f.json")


def test_topics_file_and_broker_list() -> None:
    assert parse_topics_json('{"version": 1, "topics": [{"topic": "a"}, {"topic": "b"}]}', "t.json") == ["a", "b"]
    for bad, why in [
        ('{"topics": [{"topic": "a"}, {"topic": "a"}]}', "List of topics to reassign contains duplicate entries: a"),
        ('{"topics": [{"name": "a"}]}', 'topics[0]: "topic" must be a topic name'),
        ('{"topics": []}', "the topic list is empty"),
    ]:
        with pytest.raises(CliFailure) as err:
            parse_topics_json(bad, "t.json")
        assert why in err.value.message and err.value.message.startswith("--topics-to-move-json-file t.json")
    assert parse_broker_list("2,0,1") == [2, 0, 1]
    for bad, why in [("1,x", "expected broker ids"), ("1,2,1", "Broker list contains duplicate entries: 1"),
                     ("-1", ">= 0")]:
        with pytest.raises(CliFailure) as err:
            parse_broker_list(bad)
        assert why in err.value.message and err.value.code == 2


def test_printed_json_is_kafkas_compact_sorted_form() -> None:
    out = format_reassignment_json({("b", 0): [2, 1], ("a", 1): [1], ("a", 0): [0]})
    assert out == ('{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[0],"log_dirs":["any"]},'
                   '{"topic":"a","partition":1,"replicas":[1],"log_dirs":["any"]},'
                   '{"topic":"b","partition":0,"replicas":[2,1],"log_dirs":["any","any"]}]}')
    assert parse_reassignment_json(out, "x") == [(("a", 0), [0]), (("a", 1), [1]), (("b", 0), [2, 1])]


def test_generate_places_like_a_new_topic_over_the_listed_brokers() -> None:
    current = {("t", p): [1, 2] for p in range(4)} | {("u", 0): [5]}
    got = calculate_assignment(current, {0: None, 2: None, 3: None}, random.Random(7))
    assert sorted(got) == sorted(current)
    assert all(len(got[("t", p)]) == 2 and len(set(got[("t", p)])) == 2 for p in range(4))
    assert all(set(r) <= {0, 2, 3} for r in got.values()) and len(got[("u", 0)]) == 1
    # leaders go round robin from a random start (Kafka's): 4 partitions over 3 brokers lead 2, 1, 1
    leaders = [got[("t", p)][0] for p in range(4)]
    assert sorted(leaders.count(b) for b in (0, 2, 3)) == [1, 1, 2]
    # rack-aware: each partition spans both racks
    racked = calculate_assignment({("t", p): [1, 2] for p in range(4)}, {0: "r1", 1: "r1", 2: "r2", 3: "r2"},
                                  random.Random(1))
    racks = {0: "r1", 1: "r1", 2: "r2", 3: "r2"}
    assert all({racks[b] for b in r} == {"r1", "r2"} for r in racked.values())
    with pytest.raises(CliFailure) as err:
        calculate_assignment({("t", 0): [1, 2, 3]}, {0: None, 1: None}, random.Random(1))
    assert "cannot place t: Replication factor: 3 larger than available brokers: 2." == err.value.message


@pytest.mark.parametrize(("args", "message"), [
    (["--list", "--execute"], "Command must include exactly one action: --generate, --execute, --verify"),
    (["--verify"], 'Missing required argument "[reassignment-json-file]" for --verify'),
    (["--generate", "--topics-to-move-json-file", "t.json"], 'Missing required argument "[broker-list]"'),
    (["--list", "--additional"], 'Option "[additional]" can\'t be used with action "[list]"'),
    (["--execute", "--reassignment-json-file", "f.json", "--throttle", "1000"],
     "--throttle: replication throttles are not supported"),
    (["--execute", "--reassignment-json-file", "missing.json"], "--reassignment-json-file: cannot read missing.json"),
])
def test_usage_errors_before_connecting(args: list[str], message: str, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from kaflite.cli.main import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    with pytest.raises(SystemExit) as done:
        app(["reassign-partitions", *args, "-b", "127.0.0.1:1"], prog_name="kaflite")
    err = capsys.readouterr().err
    assert done.value.code == 2, err
    assert err.startswith(f"error: {message}") and len(err.strip().splitlines()) == 1
