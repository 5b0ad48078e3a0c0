"""Client quotas through `kaflite configs` with kafka-configs.sh's spellings (cli/quotas_cmd.py): the
entity flags, Kafka's output lines, and alterations and descriptions against a broker."""

from __future__ import annotations

import pytest

from kaflite.cli.kafka_flags import translate
from kaflite.cli.quotas_cmd import alter_line, quota_entity, quota_line


def test_kafka_spellings_of_quota_entities() -> None:
    assert translate(["configs", "--alter", "--user", "alice", "--client", "app", "--add-config", "a=1"]).argv == [
        "configs", "alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
        "--entity-name", "app", "--add-config", "a=1"]
    assert translate(["configs", "--describe", "--entity-type", "clients", "--entity-default"]).argv == [
        "configs", "describe", "--entity-type", "clients", "--entity-name", ""]
    assert translate(["configs", "--describe", "--user-defaults", "--client-defaults"]).argv == [
        "configs", "describe", "--entity-type", "users", "--entity-name", "", "--entity-type", "clients",
        "--entity-name", ""]


def test_entities_and_kafkas_lines() -> None:
    assert quota_entity(["clients", "users"], ["app", "alice"], describing=False) == \
        [("user", "alice"), ("client-id", "app")]
    assert quota_entity(["users"], [""], describing=False) == [("user", None)]
    assert quota_entity(["users", "clients"], ["bob"], describing=True) == [("user", "bob"), ("client-id", "*")]
    assert quota_line([("user", "alice"), ("client-id", None)], [("producer_byte_rate", 1024.0),
                                                                 ("request_percentage", 12.5)]) == \
        "Quota configs for user-principal 'alice', the default client-id are producer_byte_rate=1024.0, " \
        "request_percentage=12.5"
    assert quota_line([("client-id", "c")], [("consumer_byte_rate", 2e7)]) == \
        "Quota configs for client-id 'c' are consumer_byte_rate=2.0E7"
    assert alter_line(["users", "clients"], ["alice", "app"]) == "Completed updating config for user alice."
    assert alter_line(["clients"], [""]) == "Completed updating default config for clients in the cluster."


def test_alter_describe_and_delete_quotas_against_a_broker(cli, cli_bootstrap: str) -> None:  # type: ignore[no-untyped-def]
    b = ["--bootstrap-server", cli_bootstrap]
    out = cli("configs", *b, "--alter", "--entity-type", "users", "--entity-name", "qalice",
              "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048")
    assert out.exit_code == 0, out.output
    assert out.output == "Completed updating config for user qalice.\n"
    out = cli("configs", *b, "--alter", "--user", "qalice", "--client", "qapp", "--add-config",
              "request_percentage=12.5")
    assert out.output == "Completed updating config for user qalice.\n", out.output
    out = cli("configs", *b, "--alter", "--entity-type", "clients", "--entity-default", "--add-config",
              "consumer_byte_rate=100")
    assert out.output == "Completed updating default config for clients in the cluster.\n", out.output
    out = cli("configs", *b, "--describe", "--entity-type", "users", "--entity-name", "qalice")
    assert out.exit_code == 0, out.output
    # the quota line, then the user's SCRAM credentials (none: the broker's error for that user, as Kafka)
    assert out.output.splitlines()[0] == \
        "Quota configs for user-principal 'qalice' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0"
    assert "SCRAM credential configs for user-principal 'qalice'" in out.output
    out = cli("configs", *b, "--describe", "--entity-type", "users", "--entity-type", "clients")
    assert "Quota configs for user-principal 'qalice', client-id 'qapp' are request_percentage=12.5\n" \
        in out.output, out.output
    out = cli("configs", *b, "--describe", "--client-defaults")
    assert out.output == "Quota configs for the default client-id are consumer_byte_rate=100.0\n", out.output
    # delete: the key goes, the entity without quotas is described no more
    out = cli("configs", *b, "--alter", "--entity-type", "users", "--entity-name", "qalice",
              "--delete-config", "producer_byte_rate,consumer_byte_rate")
    assert out.exit_code == 0, out.output
    out = cli("configs", *b, "--describe", "--entity-type", "users", "--entity-name", "qalice")
    assert "Quota configs" not in out.output, out.output
    for entity in (["--user", "qalice", "--client", "qapp"], ["--client-defaults"]):
        assert cli("configs", *b, "--alter", *entity, "--delete-config", "request_percentage,consumer_byte_rate"
                   ).exit_code == 0


def test_scram_and_quota_keys_in_one_alteration(cli, cli_bootstrap: str) -> None:  # type: ignore[no-untyped-def]
    b = ["--bootstrap-server", cli_bootstrap]
    out = cli("configs", *b, "--alter", "--entity-type", "users", "--entity-name", "qbob", "--add-config",
              "SCRAM-SHA-256=[iterations=8192,password=bob-secret],producer_byte_rate=4096")
    assert out.output == "Completed updating config for user qbob.\n", out.output
    out = cli("configs", *b, "--describe", "--entity-type", "users", "--entity-name", "qbob")
    assert out.output.splitlines() == [
        "Quota configs for user-principal 'qbob' are producer_byte_rate=4096.0",
        "SCRAM credential configs for user-principal 'qbob' are SCRAM-SHA-256=iterations=8192"]
    assert "bob-secret" not in out.output
    out = cli("configs", *b, "--alter", "--entity-type", "users", "--entity-name", "qbob", "--delete-config",
              "SCRAM-SHA-256,producer_byte_rate")
    assert out.exit_code == 0, out.output


@pytest.mark.parametrize(("args", "message"), [
    (["--entity-type", "users", "--entity-type", "users", "--entity-name", "a", "--entity-name", "b"],
     "client quotas are on users, clients"),
    (["--entity-type", "users"], "give one --entity-name"),
    (["--entity-type", "clients", "--entity-name", "c", "--add-config", "producer_byte_rate=lots"],
     "is not a number"),
    (["--entity-type", "clients", "--entity-name", "c", "--add-config", "SCRAM-SHA-256=[password=x]"],
     "SCRAM credentials belong to one named user"),
])
def test_usage_errors(cli, args: list[str], message: str) -> None:  # type: ignore[no-untyped-def]
    extra = [] if "--add-config" in args else ["--add-config", "producer_byte_rate=1"]
    out = cli("configs", "--bootstrap-server", "127.0.0.1:1", "--alter", *args, *extra)
    assert out.exit_code == 2 and message in out.output, out.output
