"""`kaflite topics ...` against a real broker on loopback, checked with an independent client."""

from __future__ import annotations

import json
import os
import re

import pytest
from confluent_kafka.admin import AdminClient

# Tests of what the broker answers (validation, configs); the peer broker does not implement these.
kaflite_broker_only = pytest.mark.skipif(
    bool(os.environ.get("KAFLITE_CLI_PEER")), reason="checks the answers of kaflite's broker"
)


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def test_create_list_describe_delete(cli, cli_bootstrap: str, topic_name: str) -> None:
    b = ["--bootstrap-server", cli_bootstrap]
    result = cli("topics", "create", topic_name, "--partitions", "3", *b)
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"Created topic {topic_name}."
    md = _admin(cli_bootstrap).list_topics(topic_name, timeout=10).topics[topic_name]
    assert md.error is None and len(md.partitions) == 3

    listed = cli("topics", "list", *b)
    assert listed.exit_code == 0 and topic_name in listed.output.splitlines()

    described = cli("topics", "describe", topic_name, *b)
    assert described.exit_code == 0, described.output
    lines = described.output.rstrip("\n").split("\n")
    assert re.fullmatch(
        rf"Topic: {topic_name}(\tTopicId: [A-Za-z0-9_-]{{22}})?\tPartitionCount: 3"
        r"\tReplicationFactor: 1\tConfigs: .*",
        lines[0],
    ), lines[0]
    assert len(lines) == 4
    for partition, line in enumerate(lines[1:]):
        m = re.fullmatch(
            rf"\tTopic: {topic_name}\tPartition: {partition}\tLeader: (\d+)\tReplicas: (\d+)\tIsr: (\d+)",
            line,
        )
        assert m, line
        assert m.group(1) == m.group(2) == m.group(3)

    deleted = cli("topics", "delete", topic_name, *b)
    assert deleted.exit_code == 0 and f"Deleted topic {topic_name}." in deleted.output
    missing = cli("topics", "describe", topic_name, *b)
    assert missing.exit_code == 1
    assert f"Topic '{topic_name}' does not exist as expected" in missing.output


def test_describe_json(cli, cli_bootstrap: str, topic_name: str) -> None:
    b = ["--bootstrap-server", cli_bootstrap]
    assert cli("topics", "create", topic_name, "-p", "2", *b).exit_code == 0
    result = cli("topics", "describe", topic_name, "--json", *b)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["topic"] == topic_name and doc["partition_count"] == 2 and doc["replication_factor"] == 1
    assert [p["partition"] for p in doc["partitions"]] == [0, 1]


def test_create_existing_topic(cli, cli_bootstrap: str, topic_name: str) -> None:
    b = ["--bootstrap-server", cli_bootstrap]
    assert cli("topics", "create", topic_name, *b).exit_code == 0
    again = cli("topics", "create", topic_name, *b)
    assert again.exit_code == 1
    assert "already exists" in again.output.lower()
    assert cli("topics", "create", topic_name, "--if-not-exists", *b).exit_code == 0


def test_create_with_broker_default_partitions(cli, cli_bootstrap: str, topic_name: str) -> None:
    assert cli("topics", "create", topic_name, "--bootstrap-server", cli_bootstrap).exit_code == 0
    md = _admin(cli_bootstrap).list_topics(topic_name, timeout=10).topics[topic_name]
    assert len(md.partitions) >= 1


def test_delete_missing_topic(cli, cli_bootstrap: str, topic_name: str) -> None:
    b = ["--bootstrap-server", cli_bootstrap]
    result = cli("topics", "delete", topic_name, *b)
    assert result.exit_code == 1
    assert f"Topic '{topic_name}' does not exist as expected" in result.output
    assert cli("topics", "delete", topic_name, "--if-exists", *b).exit_code == 0


def test_alter_adds_partitions(cli, cli_bootstrap: str, topic_name: str) -> None:
    b = ["--bootstrap-server", cli_bootstrap]
    assert cli("topics", "create", topic_name, "-p", "1", *b).exit_code == 0
    result = cli("topics", "alter", topic_name, "--partitions", "4", *b)
    if os.environ.get("KAFLITE_CLI_PEER") and "not supported by broker" in result.output:
        pytest.skip("the peer broker has no CreatePartitions")
    assert result.exit_code == 0, result.output
    md = _admin(cli_bootstrap).list_topics(topic_name, timeout=10).topics[topic_name]
    assert len(md.partitions) == 4
    shrink = cli("topics", "alter", topic_name, "--partitions", "2", *b)
    assert shrink.exit_code == 2 and "can only grow" in shrink.output


@pytest.mark.parametrize("args", [["alter", "x"], ["create", "x", "--config", "novalue"]])
def test_usage_errors(cli, cli_bootstrap: str, args: list[str]) -> None:
    result = cli("topics", *args, "--bootstrap-server", cli_bootstrap)
    assert result.exit_code == 2


def _configs_field(output: str) -> dict[str, str]:
    head = output.split("\n", 1)[0]
    configs = head.split("\tConfigs: ", 1)[1]
    return dict(pair.split("=", 1) for pair in configs.split(",") if pair)


@kaflite_broker_only
def test_create_with_configs_and_alter_them(cli, cli_bootstrap: str, topic_name: str) -> None:
    b = ["--bootstrap-server", cli_bootstrap]
    created = cli(
        "topics", "create", topic_name, "--config", "cleanup.policy=compact", "-c", "retention.ms=1000", *b
    )
    assert created.exit_code == 0, created.output
    configs = _configs_field(cli("topics", "describe", topic_name, *b).output)
    assert configs["cleanup.policy"] == "compact" and configs["retention.ms"] == "1000"

    altered = cli(
        "topics",
        "alter",
        topic_name,
        "--config",
        "retention.ms=5000",
        "--delete-config",
        "cleanup.policy",
        *b,
    )
    assert altered.exit_code == 0, altered.output
    configs = _configs_field(cli("topics", "describe", topic_name, *b).output)
    assert configs["retention.ms"] == "5000" and "cleanup.policy" not in configs


@kaflite_broker_only
@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            "cleanup.policy=forever",
            "cleanup.policy: expected a comma-separated list of delete, compact, got 'forever'",
        ),
        ("retention.mss=1", "retention.mss: unknown topic configuration key; did you mean retention.ms"),
    ],
)
def test_invalid_topic_config_is_one_line(
    cli, cli_bootstrap: str, topic_name: str, config: str, message: str
) -> None:
    result = cli("topics", "create", topic_name, "--config", config, "--bootstrap-server", cli_bootstrap)
    assert result.exit_code == 1
    assert "INVALID_CONFIG" in result.output
    assert message in result.output  # kaflite's broker explains with the config table's message
    assert len(result.output.strip().splitlines()) == 1


@kaflite_broker_only
def test_illegal_topic_name(cli, cli_bootstrap: str) -> None:
    result = cli("topics", "create", "bad name!", "--bootstrap-server", cli_bootstrap)
    assert result.exit_code == 1 and "bad name!" in result.output


@kaflite_broker_only
def test_configs_describe_topic_and_broker(cli, cli_bootstrap: str, topic_name: str) -> None:
    b = ["--bootstrap-server", cli_bootstrap]
    assert cli("topics", "create", topic_name, "--config", "cleanup.policy=compact", *b).exit_code == 0
    dynamic = cli("configs", "describe", "--topic", topic_name, *b)
    assert dynamic.exit_code == 0, dynamic.output
    assert dynamic.output.splitlines() == [
        f"Dynamic configs for topic {topic_name} are:",
        "  cleanup.policy=compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact, "
        "DEFAULT_CONFIG:log.cleanup.policy=delete}",
    ]
    everything = cli("configs", "describe", "--topic", topic_name, "--all", *b).output.splitlines()
    assert everything[0] == f"All configs for topic {topic_name} are:"
    assert (
        "  max.message.bytes=1048588 sensitive=false synonyms={DEFAULT_CONFIG:message.max.bytes=1048588}"
        in everything
    )
    broker = cli("configs", "describe", "--broker", "0", "--all", *b)
    assert (
        broker.exit_code == 0
        and "  num.partitions=1 sensitive=false synonyms={DEFAULT_CONFIG:num.partitions=1}"
        in (broker.output.splitlines())
    )
    assert cli("configs", "describe", *b).exit_code == 2
