"""`kaflite users`: SCRAM credentials with the flags of `kafka-configs.sh --entity-type users`, over the
wire (DescribeUserScramCredentials / AlterUserScramCredentials through confluent-kafka's AdminClient), so
it manages any Kafka cluster's users as well as kaflite's:

    kaflite users --alter --entity-name alice --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
    kaflite users --alter --entity-name alice --delete-config SCRAM-SHA-512
    kaflite users --describe [--entity-name alice]

`--add-config` is parsed as kafka-configs.sh parses it: entries split at commas outside `[...]`, each
`MECHANISM=[iterations=N,password=P]` or `MECHANISM=[password=P]` (iterations 4096, Kafka's default);
`--delete-config` names mechanisms. Output as kafka-configs.sh prints it ("Completed updating config for
user alice.", "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192").
`--command-config` reads a client properties file (a secured cluster): librdkafka's keys, plus Kafka's
`sasl.jaas.config` (its username and password) and a PEM `ssl.truststore.location`, translated. A
password is never printed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import typer

from kaflite.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_USAGE,
    admin_result,
    check_reachable,
    client_config,
    fail,
    handle_errors,
)
from kaflite.cli.kafka_flags import command_config

__all__ = ["alter_credentials", "describe_credentials", "parse_add_config", "register"]

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_ITERATIONS = 4096  # kafka-configs.sh's DefaultScramIterations
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"  # kafka-configs.sh's lookahead: not inside [...]
_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.S)


def register(app: typer.Typer) -> None:
    app.command("users")(users)


def parse_add_config(text: str) -> dict[str, tuple[int, str]]:
    """mechanism -> (iterations, password) of an `--add-config` value (ValueError naming the entry, never
    the password)."""
    out: dict[str, tuple[int, str]] = {}
    for entry in re.split("," + _OUTSIDE_BRACKETS, text):
        parts = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, entry)
        if len(parts) != 2:
            raise ValueError('all configs to be added must be in the format "key=val"')
        key, value = parts[0].strip(), re.sub(r"\[?\]?", "", parts[1]).strip()
        if key not in MECHANISMS:
            raise ValueError(f"only SCRAM credential configs ({', '.join(MECHANISMS)}) can be added for users, "
                             f"got {key!r}")
        m = _CREDENTIAL.fullmatch(value)
        if m is None:
            raise ValueError(f"{key}: expected [iterations=N,password=P] or [password=P]")
        iterations = int(m.group(1)) if m.group(1) not in (None, "", "-1") else DEFAULT_ITERATIONS
        out[key] = (iterations, m.group(2))
    return out


@handle_errors
def users(
    bootstrap: Annotated[str, typer.Option("--bootstrap-server", "-b", envvar="KAFLITE_BOOTSTRAP",
                                           help="host:port of a broker.")] = DEFAULT_BOOTSTRAP,
    entity_type: Annotated[str, typer.Option("--entity-type", help="Only users (kafka-configs.sh's flag).")] = "users",
    entity_name: Annotated[str | None, typer.Option("--entity-name", "--user", help="The user.")] = None,
    describe: Annotated[bool, typer.Option("--describe", help="List SCRAM credentials (all users, or one).")] = False,
    alter: Annotated[bool, typer.Option("--alter", help="Add or delete SCRAM credentials of --entity-name.")] = False,
    add_config: Annotated[str | None, typer.Option(
        "--add-config", help="Credentials to add or replace: 'SCRAM-SHA-256=\\[iterations=8192,password=...],"
                             "SCRAM-SHA-512=\\[password=...]' (iterations default 4096).")] = None,
    delete_config: Annotated[list[str] | None, typer.Option(
        "--delete-config", help="Mechanisms whose credential to delete (comma-separated or repeated).")] = None,
    command_config_file: Annotated[Path | None, typer.Option(
        "--command-config", help="Client properties file (security.protocol, sasl.*, ssl.*).")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for the answer.", min=0.1)] = 30.0,
) -> None:
    """Describe, add and delete users' SCRAM credentials (like kafka-configs.sh --entity-type users)."""
    if entity_type not in ("users", "user"):
        fail(f"--entity-type: kaflite users manages users only, got {entity_type!r}", EXIT_USAGE)
    if describe == alter:
        fail("exactly one of --describe and --alter is required", EXIT_USAGE)
    deletions = [m.strip() for value in (delete_config or []) for m in value.split(",") if m.strip()]
    if alter:
        if not entity_name:
            fail("--alter needs --entity-name", EXIT_USAGE)
        if add_config is None and not deletions:
            fail("--alter needs --add-config or --delete-config", EXIT_USAGE)
        try:
            upserts = parse_add_config(add_config) if add_config is not None else {}
        except ValueError as e:
            fail(f"--add-config: {e}", EXIT_USAGE)
        bad = [m for m in deletions if m not in MECHANISMS]
        if bad:
            fail(f"--delete-config: only SCRAM credential configs ({', '.join(MECHANISMS)}) can be deleted for "
                 f"users, got {', '.join(bad)}", EXIT_USAGE)
    elif add_config is not None or deletions:
        fail("--add-config and --delete-config go with --alter", EXIT_USAGE)
    from confluent_kafka.admin import AdminClient

    check_reachable(bootstrap)
    admin = AdminClient({**client_config(bootstrap), **command_config(command_config_file)})
    if alter:
        assert entity_name is not None
        alter_credentials(admin, entity_name, upserts, deletions, timeout)
        typer.echo(f"Completed updating config for user {entity_name}.")
    else:
        describe_credentials(admin, entity_name, timeout)


def _mechanism(name: str) -> Any:
    from confluent_kafka.admin import ScramMechanism

    return {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256, "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}[name]


def alter_credentials(admin: Any, user: str, upserts: dict[str, tuple[int, str]], deletions: list[str], timeout: float) -> None:
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    alterations: list[Any] = [
        UserScramCredentialUpsertion(user, ScramCredentialInfo(_mechanism(m), iterations), password.encode())
        for m, (iterations, password) in upserts.items()
    ] + [UserScramCredentialDeletion(user, _mechanism(m)) for m in deletions]
    for future in admin.alter_user_scram_credentials(alterations, request_timeout=timeout).values():
        admin_result(future, timeout, f"altering the SCRAM credentials of user {user}")


def describe_credentials(admin: Any, user: str | None, timeout: float) -> None:
    def line(name: str, description: Any) -> str:
        infos = ", ".join(f"{_name(i.mechanism)}=iterations={i.iterations}" for i in description.scram_credential_infos)
        return f"SCRAM credential configs for user-principal '{name}' are {infos}"

    if user is None:
        found = admin_result(admin.describe_user_scram_credentials(request_timeout=timeout), timeout,
                             "describing SCRAM credentials")
        for name in sorted(found):
            typer.echo(line(name, found[name]))
        return
    future = admin.describe_user_scram_credentials([user], request_timeout=timeout)[user]
    try:
        description = future.result(timeout=timeout)
    except Exception as e:  # Kafka prints the error for that user and goes on
        from kaflite.cli.common import describe_exception

        typer.echo(f"Error retrieving SCRAM credential configs for user-principal '{user}': {describe_exception(e)}")
        return
    typer.echo(line(user, description))


def _name(mechanism: Any) -> str:
    return str(getattr(mechanism, "name", mechanism)).replace("_", "-")
