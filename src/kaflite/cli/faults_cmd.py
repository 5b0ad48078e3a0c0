"""`kaflite faults add|list|clear|expire-member|force-rebalance`: fault rules on a running broker started with `kaflite.faults.enable=true`
(docs/testing.md), sent as DescribeConfigs / IncrementalAlterConfigs of the pseudo resource
`kaflite.faults` (server/faults_admin.py says why that and not an HTTP endpoint).

Rules (tests/server/test_faults.py):
- each command talks to the first address of --bootstrap-server: rules belong to one broker;
- `add` prints the rule as the broker stored it (its id first), `list` one JSON line per rule, `clear`
  how many it removed (`--id N` removes one);
- `expire-member GROUP MEMBER` / `force-rebalance GROUP` act on the group's coordinator, found through
  --bootstrap-server (server/faults_client.py), and print what they did;
- a broker without fault injection, or a refused rule, is one `error:` line and exit 1.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from kaflite.cli.common import DEFAULT_BOOTSTRAP, Bootstrap, fail, handle_errors

__all__ = ["register"]

faults_app = typer.Typer(help="Fault injection on a broker started with kaflite.faults.enable=true "
                              "(injected errors, delays, throttle times, dropped and half-closed "
                              "connections).", no_args_is_help=True)

_RESOURCE = "kaflite.faults"
_TIMEOUT = 10.0


def register(app: typer.Typer) -> None:
    app.add_typer(faults_app, name="faults")


def _address(bootstrap: str) -> tuple[str, int]:
    first = bootstrap.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    if not host or not port.isdigit():
        fail(f"--bootstrap-server: expected HOST:PORT, got {first!r}", 2)
    return host, int(port)


def _send(bootstrap: str, req: Any, response_schema: Any) -> Any:
    from kaflite.cluster.wire import request

    host, port = _address(bootstrap)
    try:
        return request(host, port, req, response_schema, _TIMEOUT)
    except OSError as err:
        fail(f"cannot reach {host}:{port}: {err.strerror or err}")


def _describe(bootstrap: str) -> list[dict[str, Any]]:
    from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
    from kio.schema.describe_configs.v4.response import DescribeConfigsResponse
    from kio.static.primitive import i8

    resp = _send(bootstrap, DescribeConfigsRequest(resources=(DescribeConfigsResource(
        resource_type=i8(4), resource_name=_RESOURCE, configuration_keys=None),), include_synonyms=False,
        include_documentation=False), DescribeConfigsResponse)
    result = resp.results[0]
    _check(result.error_code, result.error_message)
    return [json.loads(c.value) for c in result.configs]


def _alter(bootstrap: str, configs: list[tuple[str, int, str | None]]) -> None:
    from kio.schema.incremental_alter_configs.v1.request import (
        AlterableConfig,
        AlterConfigsResource,
        IncrementalAlterConfigsRequest,
    )
    from kio.schema.incremental_alter_configs.v1.response import IncrementalAlterConfigsResponse
    from kio.static.primitive import i8

    resp = _send(bootstrap, IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
        resource_type=i8(4), resource_name=_RESOURCE, configs=tuple(
            AlterableConfig(name=n, config_operation=i8(op), value=v) for n, op, v in configs)),),
        validate_only=False), IncrementalAlterConfigsResponse)
    result = resp.responses[0]
    _check(result.error_code, result.error_message)


def _check(code: Any, message: str | None) -> None:
    value = int(code.value if hasattr(code, "value") else code)
    if value == 0:
        return
    from kaflite.protocol.errors import ErrorCode

    name = ErrorCode(value).name.upper()
    if name == "INVALID_REQUEST" or (name == "UNKNOWN_SERVER_ERROR" and not message):
        fail("the broker does not inject faults (start it with kaflite.faults.enable=true)")
    if name in ("INVALID_CONFIG",) and message:
        fail(f"fault refused: {message}")
    fail(f"the broker answered {name}{': ' + message if message else ''} (is kaflite.faults.enable=true set?)")


@faults_app.command("add")
@handle_errors
def add(
    api: Annotated[str, typer.Option("--api", help="The request: Produce, Fetch, Metadata, JoinGroup, ...")],
    error: Annotated[str | None, typer.Option("--error", help="Answer with this error (e.g. NOT_LEADER_OR_FOLLOWER).")] = None,
    delay_ms: Annotated[int | None, typer.Option("--delay-ms", min=0, help="Hold the request this long instead.")] = None,
    drop: Annotated[bool, typer.Option("--drop", help="Close the connection instead.")] = False,
    throttle_ms: Annotated[int | None, typer.Option(
        "--throttle-ms", min=1, help="Answer normally with this throttle time, and mute the connection.")] = None,
    half_close: Annotated[bool, typer.Option(
        "--half-close", help="Shut down the connection's write side, unanswered.")] = False,
    times: Annotated[int | None, typer.Option("--times", min=1, help="Fire on the next N matching requests only.")] = None,
    rate: Annotated[float | None, typer.Option("--rate", min=0.0, max=1.0, help="Fire with this probability.")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of --rate's random draws.")] = None,
    topic: Annotated[str | None, typer.Option("--topic", help="Only requests naming this topic.")] = None,
    client_id: Annotated[str | None, typer.Option("--client-id", help="Only requests of this client id.")] = None,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Add a fault rule: exactly one of --error, --delay-ms, --drop, --throttle-ms, --half-close."""
    if sum([error is not None, delay_ms is not None, drop, throttle_ms is not None, half_close]) != 1:
        fail("give exactly one of --error, --delay-ms, --drop, --throttle-ms, --half-close", 2)
    spec: dict[str, Any] = {"api": api}
    if error is not None:
        spec.update(kind="error", error=error)
    elif delay_ms is not None:
        spec.update(kind="delay", ms=delay_ms)
    elif throttle_ms is not None:
        spec.update(kind="throttle", ms=throttle_ms)
    elif half_close:
        spec["kind"] = "half_close"
    else:
        spec["kind"] = "drop"
    for key, value in (("times", times), ("rate", rate), ("seed", seed), ("topic", topic), ("client_id", client_id)):
        if value is not None:
            spec[key] = value
    before = {r["id"] for r in _describe(bootstrap_server)}
    _alter(bootstrap_server, [("add", 0, json.dumps(spec))])
    added = [r for r in _describe(bootstrap_server) if r["id"] not in before]
    for rule in added:
        typer.echo(json.dumps(rule))


@faults_app.command("list")
@handle_errors
def list_rules(bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP) -> None:
    """The broker's fault rules, one JSON object a line (with how many times each fired)."""
    for rule in _describe(bootstrap_server):
        typer.echo(json.dumps(rule))


@faults_app.command("clear")
@handle_errors
def clear(
    rule_id: Annotated[int | None, typer.Option("--id", help="Remove this rule only.")] = None,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Remove every fault rule (or one, --id)."""
    count = len(_describe(bootstrap_server))
    _alter(bootstrap_server, [("all" if rule_id is None else str(rule_id), 1, None)])
    typer.echo(f"removed {1 if rule_id is not None else count} fault rule(s)")


def _group_fault(bootstrap: str, group: str, member: str | None) -> None:
    from kaflite.protocol.errors import KafkaError
    from kaflite.server.faults_client import group_fault

    try:
        group_fault(bootstrap, group, member, _TIMEOUT)
    except KafkaError as err:
        _check(err.code.value, err.message)
    except (OSError, ValueError) as err:
        fail(f"cannot reach the group's coordinator through {bootstrap}: {err}")


@faults_app.command("expire-member")
@handle_errors
def expire_member(
    group: Annotated[str, typer.Argument(help="The group id.")],
    member: Annotated[str, typer.Argument(help="The member id (kaflite groups describe --members).")],
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Expire a group member now, as its session timeout would (the group rebalances)."""
    _group_fault(bootstrap_server, group, member)
    typer.echo(f"expired member {member} of group {group}")


@faults_app.command("force-rebalance")
@handle_errors
def force_rebalance(
    group: Annotated[str, typer.Argument(help="The group id.")],
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
) -> None:
    """Make a group rebalance now."""
    _group_fault(bootstrap_server, group, None)
    typer.echo(f"group {group} rebalances")
