"""`kaflite schemas`: a schema registry's subjects, schemas and compatibility over its REST API (Confluent
Schema Registry's, as `kaflite schema-registry` serves it; Confluent's own registry works too):

    kaflite schemas list [--prefix orders] [--deleted]
    kaflite schemas get orders-value [--version 2]          kaflite schemas get --id 7
    kaflite schemas register orders-value --schema order.avsc [--type AVRO|JSON|PROTOBUF] [--reference ...]
    kaflite schemas check orders-value --schema order-v2.avsc [--version latest]
    kaflite schemas delete orders-value [--version 2] [--permanent]
    kaflite schemas config [orders-value] [--set FULL | --delete]

The registry is `--registry-url`, else $KAFLITE_SCHEMA_REGISTRY, else http://127.0.0.1:8081. A refusal
prints the registry's error code and message ("error: 40401 Subject 'x' not found.") and exits 1; an
incompatible schema makes `check` exit 1 too; an unreachable registry exits 1 naming the URL; bad usage
exits 2.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Annotated, Any

import typer

from kaflite.cli.common import EXIT_USAGE, fail, handle_errors

__all__ = ["register", "RegistryClient"]

DEFAULT_URL = "http://127.0.0.1:8081"
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
TYPES = ("AVRO", "JSON", "PROTOBUF")

schemas_app = typer.Typer(help="Subjects, schemas and compatibility of a schema registry (Confluent's REST API).",
                          no_args_is_help=True)

RegistryUrl = Annotated[str | None, typer.Option(
    "--registry-url", "-r", help=f"The registry (default: $KAFLITE_SCHEMA_REGISTRY, else {DEFAULT_URL}).")]
SchemaFile = Annotated[Path | None, typer.Option("--schema", "-s", help="A file holding the schema.")]
SchemaString = Annotated[str | None, typer.Option("--schema-string", help="The schema itself.")]
SchemaType = Annotated[str, typer.Option("--type", "-t", help="AVRO, JSON or PROTOBUF.")]
References = Annotated[list[str] | None, typer.Option(
    "--reference", help="NAME=SUBJECT:VERSION, a schema this one references (repeatable).")]


def register(app: typer.Typer) -> None:
    app.add_typer(schemas_app, name="schemas")


class RegistryClient:
    """The few REST calls the commands make; a registry error becomes a CliFailure with its code."""

    def __init__(self, url: str | None, timeout: float = 10.0) -> None:
        self.url = (url or os.environ.get("KAFLITE_SCHEMA_REGISTRY") or DEFAULT_URL).rstrip("/")
        if not self.url.startswith(("http://", "https://")):
            fail(f"--registry-url must be http://host:port, got {self.url!r}", EXIT_USAGE)
        self.timeout = timeout

    def call(self, method: str, path: str, body: Any = None, **query: str) -> Any:
        url = self.url + "/" + "/".join(urllib.parse.quote(p, safe="") for p in path.strip("/").split("/"))
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method,
                                         headers={"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                return json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as err:
            try:
                detail = json.loads(err.read())
                fail(f"{detail['error_code']} {detail['message']}")
            except (ValueError, KeyError, TypeError):
                fail(f"the schema registry at {self.url} answered HTTP {err.code} {err.reason}")
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            fail(f"cannot reach the schema registry at {self.url}: {reason}")


def _schema_text(schema: Path | None, schema_string: str | None) -> str:
    if (schema is None) == (schema_string is None):
        fail("give the schema with exactly one of --schema FILE or --schema-string TEXT", EXIT_USAGE)
    if schema is not None:
        try:
            return schema.read_text()
        except OSError as err:
            fail(f"cannot read {schema}: {err.strerror}", EXIT_USAGE)
    assert schema_string is not None
    return schema_string


def _schema_body(schema: Path | None, schema_string: str | None, schema_type: str,
                 references: list[str] | None) -> dict[str, Any]:
    kind = schema_type.upper()
    if kind not in TYPES:
        fail(f"--type must be one of {', '.join(TYPES)}, got {schema_type!r}", EXIT_USAGE)
    body: dict[str, Any] = {"schema": _schema_text(schema, schema_string)}
    if kind != "AVRO":
        body["schemaType"] = kind
    refs = []
    for ref in references or []:
        name, _, target = ref.partition("=")
        subject, _, version = target.rpartition(":")
        if not name or not subject or not version.lstrip("-").isdigit():
            fail(f"--reference must be NAME=SUBJECT:VERSION, got {ref!r}", EXIT_USAGE)
        refs.append({"name": name, "subject": subject, "version": int(version)})
    if refs:
        body["references"] = refs
    return body


def _print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2))


@schemas_app.command("list")
@handle_errors
def list_subjects(
    registry_url: RegistryUrl = None,
    prefix: Annotated[str, typer.Option("--prefix", help="Only subjects starting with this.")] = "",
    deleted: Annotated[bool, typer.Option("--deleted", help="Also soft-deleted subjects.")] = False,
) -> None:
    """List subjects, one a line."""
    query = {"deleted": "true"} if deleted else {}
    if prefix:
        query["subjectPrefix"] = prefix
    for subject in RegistryClient(registry_url).call("GET", "/subjects", **query):
        typer.echo(subject)


@schemas_app.command("get")
@handle_errors
def get(
    subject: Annotated[str | None, typer.Argument(help="The subject (or give --id).")] = None,
    version: Annotated[str, typer.Option("--version", "-v", help="A version number or latest.")] = "latest",
    schema_id: Annotated[int | None, typer.Option("--id", help="A schema id instead of a subject.")] = None,
    versions: Annotated[bool, typer.Option("--versions", help="List the subject's version numbers.")] = False,
    registry_url: RegistryUrl = None,
) -> None:
    """Show a subject's version (subject, version, id, schemaType, schema) or a schema by id."""
    client = RegistryClient(registry_url)
    if schema_id is not None:
        if subject is not None:
            fail("give a subject or --id, not both", EXIT_USAGE)
        _print_json({"id": schema_id, **client.call("GET", f"/schemas/ids/{schema_id}")})
    elif subject is None:
        fail("give a subject or --id", EXIT_USAGE)
    elif versions:
        _print_json(client.call("GET", f"/subjects/{subject}/versions"))
    else:
        _print_json(client.call("GET", f"/subjects/{subject}/versions/{version}"))


@schemas_app.command("register")
@handle_errors
def register_schema(
    subject: Annotated[str, typer.Argument(help="The subject, e.g. orders-value.")],
    schema: SchemaFile = None,
    schema_string: SchemaString = None,
    schema_type: SchemaType = "AVRO",
    reference: References = None,
    normalize: Annotated[bool, typer.Option("--normalize", help="Register the normalized schema.")] = False,
    registry_url: RegistryUrl = None,
) -> None:
    """Register a schema under a subject (its id is reused when the schema is already known)."""
    body = _schema_body(schema, schema_string, schema_type, reference)
    client = RegistryClient(registry_url)
    query = {"normalize": "true"} if normalize else {}
    answer = client.call("POST", f"/subjects/{subject}/versions", body, **query)
    version = answer.get("version")
    if version is None:  # older registries answer the id only
        version = client.call("POST", f"/subjects/{subject}", body, **query).get("version")
    typer.echo(f"Successfully registered schema with ID: {answer['id']} (subject {subject}, version {version})")


@schemas_app.command("check")
@handle_errors
def check(
    subject: Annotated[str, typer.Argument(help="The subject to check against.")],
    schema: SchemaFile = None,
    schema_string: SchemaString = None,
    schema_type: SchemaType = "AVRO",
    reference: References = None,
    version: Annotated[str | None, typer.Option(
        "--version", "-v", help="One version to check against (default: the versions the level compares)."
    )] = None,
    registry_url: RegistryUrl = None,
) -> None:
    """Test a schema against the subject's compatibility level; exit 1 when it is incompatible."""
    body = _schema_body(schema, schema_string, schema_type, reference)
    path = f"/compatibility/subjects/{subject}/versions" + (f"/{version}" if version else "")
    answer = RegistryClient(registry_url).call("POST", path, body, verbose="true")
    if answer.get("is_compatible"):
        typer.echo(f"Schema is compatible with subject {subject}.")
        return
    typer.echo(f"Schema is incompatible with subject {subject}:")
    for message in answer.get("messages") or []:
        typer.echo(f"  {message}")
    raise typer.Exit(1)


@schemas_app.command("delete")
@handle_errors
def delete(
    subject: Annotated[str, typer.Argument(help="The subject.")],
    version: Annotated[str | None, typer.Option("--version", "-v", help="Only this version (or latest).")] = None,
    permanent: Annotated[bool, typer.Option(
        "--permanent", help="Delete for good (a soft delete must come first, as in Confluent's registry).")] = False,
    registry_url: RegistryUrl = None,
) -> None:
    """Soft-delete a subject or one of its versions; --permanent deletes a soft-deleted one for good."""
    client = RegistryClient(registry_url)
    query = {"permanent": "true"} if permanent else {}
    how = "Permanently deleted" if permanent else "Deleted"
    if version is not None:
        number = client.call("DELETE", f"/subjects/{subject}/versions/{version}", **query)
        typer.echo(f"{how} version {number} of subject {subject}.")
    else:
        numbers = client.call("DELETE", f"/subjects/{subject}", **query)
        typer.echo(f"{how} subject {subject}, versions {', '.join(str(n) for n in numbers)}.")


@schemas_app.command("config")
@handle_errors
def config(
    subject: Annotated[str | None, typer.Argument(help="A subject (default: the global level).")] = None,
    set_level: Annotated[str | None, typer.Option(
        "--set", help="BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE "
                      "or NONE.")] = None,
    delete_level: Annotated[bool, typer.Option("--delete", help="Remove the subject's own level.")] = False,
    registry_url: RegistryUrl = None,
) -> None:
    """Show or change a compatibility level (a subject without its own level shows the global one)."""
    if set_level is not None and delete_level:
        fail("give --set or --delete, not both", EXIT_USAGE)
    client = RegistryClient(registry_url)
    path = f"/config/{subject}" if subject else "/config"
    scope = f"subject {subject}" if subject else "the global level"
    if set_level is not None:
        answer = client.call("PUT", path, {"compatibility": set_level.upper()})
        typer.echo(f"Compatibility level of {scope} set to {answer['compatibility']}.")
    elif delete_level:
        answer = client.call("DELETE", path)
        typer.echo(f"Compatibility level of {scope} ({answer['compatibilityLevel']}) deleted.")
    else:
        query = {"defaultToGlobal": "true"} if subject else {}
        answer = client.call("GET", path, **query)
        typer.echo(f"Compatibility level of {scope}: {answer['compatibilityLevel']}")
