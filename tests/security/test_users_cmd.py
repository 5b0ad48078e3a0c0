"""`kaflite users` (cli/users_cmd.py): kafka-configs.sh's --entity-type users flags over the wire, against
a SASL broker reached with a client properties file (`--command-config`, Kafka's sasl.jaas.config
translated)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from typer.testing import CliRunner

from kaflite.cli.kafka_flags import command_config
from kaflite.cli.main import app
from kaflite.cli.users_cmd import parse_add_config
from kaflite.server.embedded import EmbeddedBroker

pytestmark = pytest.mark.timeout(120)


def test_add_config_parsed_as_kafka_configs_parses_it() -> None:
    assert parse_add_config("SCRAM-SHA-256=[iterations=8192,password=a,b=c],SCRAM-SHA-512=[password=x]") == \
        {"SCRAM-SHA-256": (8192, "a,b=c"), "SCRAM-SHA-512": (4096, "x")}
    assert parse_add_config("SCRAM-SHA-512=[iterations=-1,password=p]") == {"SCRAM-SHA-512": (4096, "p")}
    for bad in ("SCRAM-SHA-1=[password=p]", "SCRAM-SHA-256=[iterations=8192]", "SCRAM-SHA-256", "consumer_byte_rate=1"):
        with pytest.raises(ValueError) as e:
            parse_add_config(bad)
        assert "p]" not in str(e.value)


def test_command_config_translates_kafkas_java_keys(tmp_path: Path) -> None:
    f = tmp_path / "client.properties"
    f.write_text("# a comment\nsecurity.protocol=SASL_SSL\nsasl.mechanism = SCRAM-SHA-512\n"
                 "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
                 '    username="admin" password="s3cret";\n'
                 "ssl.truststore.type=PEM\nssl.truststore.location=/etc/ca.pem\n")
    assert command_config(f) == {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
                                 "sasl.username": "admin", "sasl.password": "s3cret", "ssl.ca.location": "/etc/ca.pem"}


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("users"), security="sasl_plaintext",
                        users={"admin": "admin-secret"}) as broker:
        yield broker


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_alter_describe_login_delete(sasl_broker: EmbeddedBroker, tmp_path: Path) -> None:
    props = tmp_path / "admin.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                     'username="admin" password="admin-secret";\n')
    base = ("users", "--bootstrap-server", sasl_broker.bootstrap, "--command-config", str(props))
    code, out = run(*base, "--entity-type", "users", "--entity-name", "carol", "--alter", "--add-config",
                    "SCRAM-SHA-256=[iterations=8192,password=carol-secret],SCRAM-SHA-512=[password=carol-512]")
    assert (code, out.strip()) == (0, "Completed updating config for user carol.")
    assert "carol-secret" not in out
    code, out = run(*base, "--describe", "--entity-name", "carol")
    assert (code, out.strip()) == \
        (0, "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-256=iterations=8192, "
            "SCRAM-SHA-512=iterations=4096")
    # the new credential logs in
    conf = {**sasl_broker.confluent_config(), "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "carol",
            "sasl.password": "carol-secret"}
    assert AdminClient(conf).list_topics(timeout=10).brokers
    code, out = run(*base, "--alter", "--entity-name", "carol", "--delete-config", "SCRAM-SHA-256")
    assert code == 0
    code, out = run(*base, "--describe")  # every user with a credential (admin's come from the kit)
    assert "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-512=iterations=4096" in out
    assert "user-principal 'admin'" in out
    with pytest.raises(KafkaException):
        AdminClient({**conf, "socket.timeout.ms": 2000}).list_topics(timeout=2)
    code, out = run(*base, "--describe", "--entity-name", "nobody")
    assert code == 0 and out.startswith("Error retrieving SCRAM credential configs for user-principal 'nobody'")


@pytest.mark.parametrize("args,message", [
    (("--describe", "--alter"), "exactly one of --describe and --alter"),
    (("--alter", "--add-config", "SCRAM-SHA-256=[password=p]"), "--alter needs --entity-name"),
    (("--alter", "--entity-name", "x"), "--add-config or --delete-config"),
    (("--alter", "--entity-name", "x", "--delete-config", "PLAIN"), "only SCRAM credential configs"),
    (("--alter", "--entity-name", "x", "--add-config", "SCRAM-SHA-256=[iterations=1]"), "--add-config"),
    (("--describe", "--entity-type", "topics"), "users only"),
])
def test_usage_errors(args: tuple[str, ...], message: str) -> None:
    code, out = run("users", "--bootstrap-server", "127.0.0.1:1", *args)
    assert code == 2 and message in " ".join(out.split())
