"""Kafka's tools typed from habit after `kaflite` (kaflite.cli.kafka_flags).

tests/cli/data/*.flags are the option names of Kafka 3.9's kafka-topics.sh, kafka-consumer-groups.sh,
kafka-configs.sh, kafka-get-offsets.sh, kafka-console-producer.sh and kafka-console-consumer.sh (from
their option parsers). Each is either accepted by the kaflite command, or refused with a message naming a
kaflite command line that is itself valid.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from typer.main import get_command
from typer.testing import CliRunner

from kaflite.cli import kafka_flags
from kaflite.cli.kafka_flags import Refused, java_client_properties, translate

DATA = Path(__file__).parent / "data"
CLOSED = "127.0.0.1:1"  # nothing listens: a command that got past parsing fails fast to connect
TOOLS = {"kafka-topics": "topics", "kafka-consumer-groups": "groups", "kafka-configs": "configs",
         "kafka-get-offsets": "get-offsets", "kafka-console-producer": "produce",
         "kafka-console-consumer": "consume"}
# The flags refused (each with a kaflite equivalent); any other flag of the data must be accepted.
REFUSED = {
    "topics": {"--topic-id", "--replica-assignment"},
    "groups": {"--delete-offsets", "--export", "--from-file", "--to-current", "--to-datetime", "--by-duration"},
    "configs": {"--zookeeper", "--zk-tls-config-file", "--bootstrap-controller", "--broker-defaults",
                "--broker-logger", "--ip", "--ip-defaults"},
    "get-offsets": set(),
    "produce": {"--line-reader", "--max-block-ms"},
    "consume": {"--include", "--whitelist", "--enable-systest-events"},
}


def _flags(tool: str) -> list[str]:
    lines = (DATA / f"{tool}.flags").read_text().splitlines()
    return [ln for ln in lines if ln.startswith("--")]


_ROOT: list[Any] = []


def _root() -> Any:
    """The Click command of the app, built once (Typer rebuilds it, ~0.5 s, on every CliRunner.invoke)."""
    if not _ROOT:
        from kaflite.cli.main import app

        _ROOT.append(get_command(app))
    return _ROOT[0]


@pytest.fixture
def fast_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("typer.testing._get_command", lambda app: _root())


def _command(path: list[str]) -> Any:
    cmd = _root()
    for name in path:
        cmd = cmd.commands[name]
    return cmd


def _option(cmd: Any, flag: str) -> Any:
    return next((p for p in cmd.params if flag in getattr(p, "opts", [])), None)


@pytest.fixture(scope="module")
def props_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("props") / "client.properties"
    path.write_text("# a client properties file\nprint.key=true\n")
    return str(path)


def _sample(flag: str, props: str) -> str:
    samples = {"--time": "-1", "--formatter": "kafka.tools.DefaultMessageFormatter", "--entity-type": "topics",
               "--compression-codec": "gzip", "--request-required-acks": "all", "--timeout": "5000",
               "--key-deserializer": "org.apache.kafka.common.serialization.StringDeserializer",
               "--value-deserializer": "org.apache.kafka.common.serialization.StringDeserializer",
               "--offset": "earliest", "--isolation-level": "read_committed", "--bootstrap-server": CLOSED,
               "--broker-list": CLOSED, "--add-config": "retention.ms=1", "--topic-partitions": "t:0",
               "--property": "print.key=true", "--consumer-property": "fetch.wait.max.ms=10",
               "--producer-property": "linger.ms=1"}
    if flag in ("--command-config", "--producer.config", "--consumer.config", "--reader-config",
                "--formatter-config", "--add-config-file", "--from-file"):
        return props
    return samples.get(flag, "1")


def _try(command: str, action: str | None, flag: str, props: str) -> tuple[str, str]:
    """('accepted' | 'refused' | 'unknown', detail) for `kaflite COMMAND [ACTION] FLAG [VALUE]`."""
    argv = [command] + ([action] if action else []) + [flag]
    kafka_form = action is not None
    takes = kafka_flags.takes_value(command, flag, kafka_form)
    if flag in kafka_flags.TOOLS[command].actions or flag in ("--help", "--version"):
        takes = False
    elif kafka_flags.TOOLS[command].mapping(flag, kafka_form) is None:
        sub = [kafka_flags.TOOLS[command].actions[action]] if action else []
        opt = _option(_command([command, *sub]), flag)
        if opt is None:
            return "unknown", f"{argv}: no such option"
        takes = not opt.is_flag
    if takes is not False:
        argv.append(_sample(flag, props))
    if flag not in ("--bootstrap-server", "--broker-list", "--help", "--version"):
        argv += ["--bootstrap-server", CLOSED]
    try:
        translation = translate(argv)
    except Refused as err:
        return "refused", err.message + "\x00" + (err.equivalent or "")
    from kaflite.cli.main import app

    result = CliRunner().invoke(app, argv, input="")
    out = result.output
    if "No such option" in out or "unexpected extra argument" in out or "No such command" in out:
        return "unknown", f"{translation.argv}: {out}"
    return "accepted", out


def _check_equivalent(line: str) -> None:
    """A refusal's equivalent is a kaflite command line whose command and options exist."""
    words = line.split()
    assert words[0] == "kaflite", line
    path = []
    for w in words[1:]:
        if w.startswith("-"):
            break
        path.append(w)
    cmd = _command(path)
    for w in words[1:]:
        if w.startswith("-"):
            assert _option(cmd, w) is not None, f"{line}: {w} is not an option of kaflite {' '.join(path)}"


@pytest.mark.parametrize("tool", sorted(TOOLS))
@pytest.mark.usefixtures("fast_runner")
def test_every_flag_of_kafkas_tool_is_accepted_or_refused_naming_kaflites_equivalent(tool: str, props_file: str,
                                                                                    ) -> None:
    command = TOOLS[tool]
    actions = list(kafka_flags.TOOLS[command].actions) or [None]
    flags = _flags(tool)
    assert len(flags) >= 8  # the data is there
    refused: set[str] = set()
    problems = []
    for flag in flags:
        if flag in kafka_flags.TOOLS[command].actions:
            outcomes = [_try(command, None, flag, props_file)]
        else:
            outcomes = [_try(command, a, flag, props_file) for a in actions]
        kinds = {k for k, _ in outcomes}
        if "accepted" in kinds:
            continue
        if "refused" in kinds:
            message, equivalent = next(d for k, d in outcomes if k == "refused").split("\x00")
            assert flag in message and "`kaflite " in message, message
            _check_equivalent(equivalent)
            refused.add(flag)
            continue
        problems.append((flag, outcomes))
    assert not problems, problems
    assert refused == REFUSED[command]


def test_action_flags_become_subcommands_wherever_they_stand() -> None:
    assert translate(["topics", "--bootstrap-server", "h:1", "--create", "--topic", "kt"]).argv == [
        "topics", "create", "--bootstrap-server", "h:1", "--topic", "kt"]
    assert translate(["groups", "--group", "g", "--reset-offsets", "--to-earliest"]).argv == [
        "groups", "reset-offsets", "--group", "g", "--to-earliest"]
    # kaflite's own spelling is left alone, and so is an unknown command
    assert translate(["topics", "create", "kt"]).argv == ["topics", "create", "kt"]
    assert translate(["serve", "--dev"]).argv == ["serve", "--dev"]
    with pytest.raises(Refused, match="give one action"):
        translate(["topics", "--create", "--delete", "--topic", "t"])
    assert translate(["configs", "--version"]).argv == ["--version"]


def test_kafka_meanings_that_differ_are_converted_only_in_kafkas_spelling() -> None:
    # kafka-consumer-groups.sh --timeout is milliseconds; kaflite's is seconds
    assert translate(["groups", "--describe", "--group", "g", "--timeout", "5000"]).argv[-1] == "5"
    assert translate(["groups", "describe", "g", "--timeout", "5"]).argv[-1] == "5"
    produce = translate(["produce", "--topic", "t", "--compression-codec", "--batch-size", "100", "--sync"])
    assert produce.argv == ["produce", "--topic", "t", "--compression", "gzip", "-X", "batch.size=100",
                            "--linger-ms", "0"]
    assert translate(["consume", "--formatter", "org.apache.kafka.tools.consumer.DefaultMessageFormatter"]).argv == [
        "consume"]
    with pytest.raises(Refused, match="kaflite consume --topic TOPIC --json"):
        translate(["consume", "--formatter", "kafka.coordinator.group.GroupMetadataManager$OffsetsMessageFormatter"])
    noted = translate(["configs", "--alter", "--force", "--topic", "t"])
    assert noted.argv == ["configs", "alter", "--topic", "t"] and "--force" in noted.notes[0]


def test_command_config_security_keys_become_librdkafka_settings(tmp_path: Path) -> None:
    props = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
             "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                 'username="alice" password="a-secret";',
             "ssl.truststore.type": "PEM", "ssl.truststore.location": "/certs/ca.pem",
             "ssl.endpoint.identification.algorithm": "", "request.timeout.ms": "1000"}
    assert java_client_properties(props, "client.properties", security_only=True) == {
        "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": "alice",
        "sasl.password": "a-secret", "ssl.ca.location": "/certs/ca.pem",
        "ssl.endpoint.identification.algorithm": "none"}
    with pytest.raises(Refused, match="librdkafka reads PEM"):
        java_client_properties({"ssl.truststore.location": "/x.jks"}, "p", security_only=True)
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n")
    assert translate(["topics", "--list", "--command-config", str(path)]).client_properties == {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN"}


def test_kafka_invocations_unchanged_against_a_broker(cli, cli_bootstrap: str, topic_name: str,
                                                       tmp_path: Path) -> None:
    b = ["--bootstrap-server", cli_bootstrap]
    created = cli("topics", *b, "--create", "--topic", topic_name, "--partitions", "2")
    assert created.exit_code == 0 and created.output.strip() == f"Created topic {topic_name}.", created.output
    assert topic_name in cli("topics", *b, "--list").stdout.split()
    described = cli("topics", *b, "--describe", "--topic", topic_name)
    assert described.exit_code == 0 and described.stdout.startswith(f"Topic: {topic_name}\t")
    assert cli("topics", *b, "--alter", "--topic", topic_name, "--partitions", "3").exit_code == 0
    altered = cli("configs", *b, "--alter", "--entity-type", "topics", "--entity-name", topic_name,
                  "--add-config", "retention.ms=86400000")
    assert altered.exit_code == 0, altered.output
    shown = cli("configs", *b, "--describe", "--entity-type", "topics", "--entity-name", topic_name)
    assert "retention.ms=86400000" in shown.stdout, shown.output
    overridden = cli("topics", *b, "--describe", "--topics-with-overrides", "--topic", topic_name)
    assert overridden.stdout.count("\n") == 1 and "retention.ms=86400000" in overridden.stdout, overridden.output

    producer = Producer({"bootstrap.servers": cli_bootstrap})
    for i in range(3):
        producer.produce(topic_name, key=b"k", value=f"v{i}".encode(), partition=1)
    assert producer.flush(20) == 0
    assert cli("get-offsets", *b, "--topic", topic_name, "--time", "-1").stdout.splitlines() == [
        f"{topic_name}:0:0", f"{topic_name}:1:3", f"{topic_name}:2:0"]
    earliest = cli("get-offsets", *b, "--topic", topic_name, "--partitions", "1", "--time", "-2")
    assert earliest.stdout.splitlines() == [f"{topic_name}:1:0"]
    future = cli("get-offsets", *b, "--topic", topic_name, "--time", str(int(time.time() * 1000) + 3_600_000))
    assert future.exit_code == 0 and future.stdout == ""  # no record at or after that time: nothing, as Kafka

    group = f"{topic_name}-g"
    consumed = cli("consume", *b, "--topic", topic_name, "--group", group, "--from-beginning", "--max-messages", "3",
                   "--formatter", "kafka.tools.DefaultMessageFormatter", "--property", "print.key=true",
                   "--key-deserializer", "org.apache.kafka.common.serialization.StringDeserializer")
    assert consumed.exit_code == 0 and consumed.stdout.splitlines() == ["k\tv0", "k\tv1", "k\tv2"], consumed.output
    listed = cli("groups", *b, "--list")
    assert group in listed.stdout.split()
    every = cli("groups", *b, "--describe", "--all-groups")
    assert every.exit_code == 0 and any(ln.split()[:4] == [group, topic_name, "1", "3"]
                                        for ln in every.stdout.splitlines() if ln.strip()), every.output
    reset = cli("groups", *b, "--reset-offsets", "--group", group, "--all-topics", "--to-earliest", "--execute")
    assert reset.exit_code == 0, reset.output
    # the command-config file's security keys reach the client: a bad one fails naming the key
    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=NOT_A_PROTOCOL\n")
    refused = cli("topics", *b, "--list", "--command-config", str(bad))
    assert refused.exit_code != 0 and "security.protocol" in refused.output, refused.output
    deleted = cli("groups", *b, "--delete", "--group", group)
    assert deleted.exit_code == 0, deleted.output
    assert cli("topics", *b, "--delete", "--topic", topic_name).exit_code == 0


def test_another_command_module_plugs_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """How `kaflite acls` (kafka-acls.sh) or `kaflite users` register their Kafka spellings."""
    from kaflite.cli.kafka_flags import KafkaTool, Rename, extend_tool, register_tool

    monkeypatch.setattr(kafka_flags, "TOOLS", dict(kafka_flags.TOOLS))
    register_tool(KafkaTool("kafka-acls.sh", "acls", actions={"--add": "add", "--list": "list"}))
    assert translate(["acls", "--bootstrap-server", "h:1", "--list", "--topic", "t"]).argv == [
        "acls", "list", "--bootstrap-server", "h:1", "--topic", "t"]
    with pytest.raises(Refused):
        translate(["configs", "--describe", "--ip", "1.2.3.4"])
    extend_tool("configs", flags={"--ip": Rename("--entity-name")})
    assert translate(["configs", "--describe", "--ip", "1.2.3.4"]).argv == [
        "configs", "describe", "--entity-name", "1.2.3.4"]
