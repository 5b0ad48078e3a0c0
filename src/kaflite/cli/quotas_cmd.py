"""Client quotas in `kaflite configs`, with kafka-configs.sh's spellings and output lines:

    kaflite configs --alter --entity-type users --entity-name alice --add-config 'producer_byte_rate=1024'
    kaflite configs --alter --entity-type clients --entity-default --add-config consumer_byte_rate=2048
    kaflite configs --alter --entity-type users --entity-name alice --entity-type clients --entity-name app \
        --delete-config producer_byte_rate
    kaflite configs --describe --entity-type users [--entity-name alice | --entity-default]

`--user NAME` / `--client NAME` / `--user-defaults` / `--client-defaults` are Kafka's shortcuts for the
same (cli/kafka_flags.py maps them); `--entity-default` is an `--entity-name ''`, as kafka-configs.sh
itself keeps it. A user's SCRAM credentials (`SCRAM-SHA-256=[iterations=..,password=..]` in the same
`--add-config`) go through `kaflite users`' code (cli/users_cmd.py), the quota keys through
AlterClientQuotas / DescribeClientQuotas, sent over the wire with the kio schemas (confluent-kafka's
AdminClient has no client quota API) to the first bootstrap server that answers, PLAINTEXT only.

Rules (tests/cli/test_quotas_cmd.py):
- entity types are `users` and `clients`, each at most once, users first in the entity (as Kafka's
  ClientQuotaEntity); a name or the default is given for each type in order (`--describe` may leave the
  names out: every entity of those types);
- the lines are kafka-configs.sh's: `Quota configs for user-principal 'alice', client-id 'app' are
  producer_byte_rate=1024.0` (`the default user-principal` for a default; values as Java prints a
  double), `Completed updating config for user alice.`, `Completed updating default config for users in
  the cluster.`; an error answer fails the command with the broker's message.
"""

from __future__ import annotations

from typing import Any

from kaflite.cli.common import EXIT_USAGE, _split_host_port, fail

__all__ = ["QUOTA_TYPES", "alter_line", "describe", "alter", "quota_entity", "quota_line"]

QUOTA_TYPES = {"users": "user", "clients": "client-id"}  # kafka-configs.sh's type -> ClientQuotaEntity's
_LABEL = {"user": "user-principal", "client-id": "client-id"}
_MATCH_EXACT, _MATCH_DEFAULT, _MATCH_SPECIFIED = 0, 1, 2


def quota_entity(types: list[str], names: list[str], describing: bool) -> list[tuple[str, str | None]]:
    """[(ClientQuotaEntity type, name or None for the default)], users first; for describe a type without
    a name is any name (the name `*`)."""
    if len(set(types)) != len(types) or not set(types) <= set(QUOTA_TYPES):
        fail(f"--entity-type: client quotas are on users, clients, or one user and one client, got "
             f"{', '.join(types)}", EXIT_USAGE)
    if len(names) > len(types) or (not describing and len(names) != len(types)):
        fail("give one --entity-name NAME (or --entity-default) after each --entity-type", EXIT_USAGE)
    out: list[tuple[str, str | None]] = []
    for i, kind in enumerate(types):
        name: str | None = names[i] if i < len(names) else "*"
        out.append((QUOTA_TYPES[kind], None if name == "" else name))
    return sorted(out, key=lambda e: e[0] != "user")


def _java_double(value: float) -> str:
    """Java's Double.toString for the values a quota takes (1024.0, 12.5, 1.0E7)."""
    if value != 0 and (abs(value) >= 1e7 or abs(value) < 1e-3):
        mantissa, _, exp = f"{value:E}".partition("E")
        mantissa = mantissa.rstrip("0")
        if mantissa.endswith("."):
            mantissa += "0"
        return f"{mantissa}E{int(exp)}"
    return repr(float(value))


def quota_line(entity: list[tuple[str, str | None]], values: list[tuple[str, float]]) -> str:
    who = ", ".join(f"{_LABEL[kind]} '{name}'" if name is not None else f"the default {_LABEL[kind]}"
                    for kind, name in entity)
    return f"Quota configs for {who} are {', '.join(f'{k}={_java_double(v)}' for k, v in values)}"


def alter_line(types: list[str], names: list[str]) -> str:
    """kafka-configs.sh's line after an alteration: the first entity type and name given."""
    if names[0]:
        return f"Completed updating config for {types[0][:-1]} {names[0]}."
    return f"Completed updating default config for {types[0]} in the cluster."


def _request(bootstrap: str, req: Any, response_schema: Any, timeout: float) -> Any:
    """`req` to the first bootstrap server that answers."""
    from kaflite.cli.common import _COMMAND_CLIENT_PROPERTIES
    from kaflite.console.wire import request

    props = _COMMAND_CLIENT_PROPERTIES.get() or {}
    if props.get("security.protocol", "plaintext").lower() != "plaintext":
        fail("client quotas are sent over a PLAINTEXT connection only (confluent-kafka has no client quota API "
             "and kaflite's own requests do not do TLS or SASL): give a PLAINTEXT listener's address")
    reasons = []
    for server in (s for s in bootstrap.split(",") if s.strip()):
        host, port = _split_host_port(server)
        try:
            return request(host, port, req, response_schema, timeout)
        except (OSError, ConnectionError, ValueError) as e:
            reasons.append(f"{host}:{port} ({getattr(e, 'strerror', None) or e})")
    fail(f"cannot reach a broker at {', '.join(reasons)}")


def _error(code: Any, message: str | None, what: str) -> None:
    number = int(getattr(code, "value", code))
    if number != 0:
        name = getattr(code, "name", str(number)).upper()
        fail(f"{what}: {name}" + (f": {message}" if message else ""))


def alter(bootstrap: str, entity: list[tuple[str, str | None]], sets: dict[str, str], deletes: list[str],
          timeout: float) -> None:
    from kio.schema.alter_client_quotas.v1 import request as areq
    from kio.schema.alter_client_quotas.v1 import response as aresp
    from kio.static.primitive import f64

    ops = []
    for key, text in sets.items():
        try:
            value = float(text)
        except ValueError:
            fail(f"--add-config: {key}={text!r} is not a number", EXIT_USAGE)
        ops.append(areq.OpData(key=key, value=f64(value), remove=False))
    ops += [areq.OpData(key=key, value=f64(0.0), remove=True) for key in deletes]
    req = areq.AlterClientQuotasRequest(validate_only=False, entries=(areq.EntryData(
        entity=tuple(areq.EntityData(entity_type=kind, entity_name=name) for kind, name in entity),
        ops=tuple(ops)),))
    resp = _request(bootstrap, req, aresp.AlterClientQuotasResponse, timeout)
    for entry in resp.entries:
        _error(entry.error_code, entry.error_message, "altering client quotas")


def describe(bootstrap: str, entity: list[tuple[str, str | None]], timeout: float) -> list[str]:
    """kafka-configs.sh's lines for the entities matching `entity` (strict: no other entity type)."""
    from kio.schema.describe_client_quotas.v1 import request as dreq
    from kio.schema.describe_client_quotas.v1 import response as dresp
    from kio.static.primitive import i8

    components = []
    for kind, name in entity:
        if name is None:
            components.append(dreq.ComponentData(entity_type=kind, match_type=i8(_MATCH_DEFAULT), match=None))
        elif name == "*":
            components.append(dreq.ComponentData(entity_type=kind, match_type=i8(_MATCH_SPECIFIED), match=None))
        else:
            components.append(dreq.ComponentData(entity_type=kind, match_type=i8(_MATCH_EXACT), match=name))
    resp = _request(bootstrap, dreq.DescribeClientQuotasRequest(components=tuple(components), strict=True),
                    dresp.DescribeClientQuotasResponse, timeout)
    _error(resp.error_code, resp.error_message, "describing client quotas")
    found = []
    for e in resp.entries or ():
        parts = sorted(((p.entity_type, p.entity_name) for p in e.entity), key=lambda p: p[0] != "user")
        found.append((parts, [(v.key, float(v.value)) for v in e.values]))
    def order(item: tuple[list[tuple[str, str | None]], list[tuple[str, float]]]) -> list[tuple[str, str]]:
        return [(kind, "" if name is None else name) for kind, name in item[0]]

    return [quota_line(parts, values) for parts, values in sorted(found, key=order)]
