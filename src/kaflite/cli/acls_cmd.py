"""`kaflite acls`: kafka-acls.sh through CreateAcls, DescribeAcls and DeleteAcls.

Rules (Kafka's AclCommand; tests/cli/test_acls_cmd.py):
- exactly one of --add, --remove, --list;
- resources: --topic, --group, --transactional-id (each repeatable) and --cluster; --resource-pattern-type
  is literal or prefixed for --add, also any or match for --list / --remove (default literal);
- --add needs a principal (--allow-principal / --deny-principal, repeatable, `Type:name`) and a resource;
  each principal gets every --operation (default All) on every resource, from --allow-host / --deny-host
  (default `*`);
- --producer: WRITE, DESCRIBE and CREATE on the topics, WRITE and DESCRIBE on the transactional ids
  (IDEMPOTENT_WRITE on the cluster with --idempotent); --consumer: READ and DESCRIBE on the topics, READ on
  the groups (it needs --topic and --group);
- --list without a resource lists every ACL; --remove without a principal removes every ACL of the
  resources (Kafka asks for confirmation unless --force; this command never prompts);
- --command-config FILE reads client properties (security.protocol, sasl.mechanism, sasl.jaas.config with
  username="..." password="...", ssl.truststore.location of a PEM file) as kafka-acls.sh does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from kaflite.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_USAGE,
    Bootstrap,
    admin_result,
    check_reachable,
    client_config,
    fail,
    handle_errors,
)
from kaflite.cli.kafka_flags import command_config as command_config_settings
from kaflite.server.acl.model import Op, PatternType, Permission, parse_operation
from kaflite.server.authorizer import CLUSTER_NAME, ResourceType

__all__ = ["Binding", "bindings_for", "register"]

_PRODUCER_TOPIC = (Op.WRITE, Op.DESCRIBE, Op.CREATE)
_PRODUCER_TXN = (Op.WRITE, Op.DESCRIBE)
_CONSUMER_TOPIC = (Op.READ, Op.DESCRIBE)
_CONSUMER_GROUP = (Op.READ,)


def register(app: typer.Typer) -> None:
    app.command("acls")(acls)


@dataclass(frozen=True, order=True)
class Binding:
    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int


def _resources(topics: list[str], groups: list[str], txn_ids: list[str], cluster: bool) -> list[tuple[int, str]]:
    out = [(int(ResourceType.TOPIC), t) for t in topics] + [(int(ResourceType.GROUP), g) for g in groups]
    out += [(int(ResourceType.TRANSACTIONAL_ID), t) for t in txn_ids]
    if cluster:
        out.append((int(ResourceType.CLUSTER), CLUSTER_NAME))
    return out


def bindings_for(*, allow: list[str], deny: list[str], allow_hosts: list[str], deny_hosts: list[str],
                 operations: list[str], topics: list[str], groups: list[str], txn_ids: list[str], cluster: bool,
                 pattern: int, producer: bool, consumer: bool, idempotent: bool) -> list[Binding]:
    """The bindings --add creates (Kafka's AclCommand.getResourceToAcls)."""
    for p in allow + deny:
        kind, sep, name = p.partition(":")
        if not (sep and kind and name):
            fail(f"principal {p!r}: expected Type:name (User:alice)", EXIT_USAGE)
    if not allow and not deny:
        fail("--add needs --allow-principal or --deny-principal", EXIT_USAGE)
    if consumer and (not topics or not groups):
        fail("--consumer needs --topic and --group", EXIT_USAGE)
    if producer and not topics and not txn_ids:
        fail("--producer needs --topic or --transactional-id", EXIT_USAGE)
    per_resource: list[tuple[int, str, tuple[Op, ...]]] = []
    if producer or consumer:
        if producer:
            per_resource += [(int(ResourceType.TOPIC), t, _PRODUCER_TOPIC) for t in topics]
            per_resource += [(int(ResourceType.TRANSACTIONAL_ID), t, _PRODUCER_TXN) for t in txn_ids]
            if idempotent:
                per_resource.append((int(ResourceType.CLUSTER), CLUSTER_NAME, (Op.IDEMPOTENT_WRITE,)))
        if consumer:
            per_resource += [(int(ResourceType.TOPIC), t, _CONSUMER_TOPIC) for t in topics]
            per_resource += [(int(ResourceType.GROUP), g, _CONSUMER_GROUP) for g in groups]
    else:
        resources = _resources(topics, groups, txn_ids, cluster)
        if not resources:
            fail("--add needs a resource: --topic, --group, --transactional-id or --cluster", EXIT_USAGE)
        try:
            ops = tuple(parse_operation(o) for o in operations) or (Op.ALL,)
        except ValueError as err:
            fail(f"--operation: {err}", EXIT_USAGE)
        if any(o in (Op.ANY, Op.UNKNOWN) for o in ops):
            fail("--operation: Any is not an operation an ACL can grant", EXIT_USAGE)
        per_resource = [(rt, name, ops) for rt, name in resources]
    out = set()
    for rt, name, ops in per_resource:
        for principals, hosts, perm in ((allow, allow_hosts, Permission.ALLOW), (deny, deny_hosts, Permission.DENY)):
            for principal in principals:
                for host in hosts or ["*"]:
                    for op in ops:
                        out.add(Binding(rt, name, pattern, principal, host, int(op), int(perm)))
    return sorted(out)


def _pattern(value: str, adding: bool) -> int:
    allowed = ("literal", "prefixed") if adding else ("literal", "prefixed", "any", "match")
    if value.lower() not in allowed:
        fail(f"--resource-pattern-type: expected one of {', '.join(allowed)}, got {value!r}", EXIT_USAGE)
    return int(PatternType[value.upper()])


def _type_name(code: int) -> str:
    return ResourceType(code).name


def _print_acls(bindings: list[Any]) -> None:
    """Kafka's AclCommand listing: one block per resource pattern."""
    by_pattern: dict[tuple[str, str, str], list[Any]] = {}
    for b in bindings:
        key = (b.restype.name, b.name, b.resource_pattern_type.name)
        by_pattern.setdefault(key, []).append(b)
    for (rt, name, pt), items in sorted(by_pattern.items()):
        typer.echo(f"Current ACLs for resource `ResourcePattern(resourceType={rt}, name={name}, patternType={pt})`: ")
        for b in sorted(items, key=lambda b: (b.principal, b.host, b.operation.name, b.permission_type.name)):
            typer.echo(f" \t(principal={b.principal}, host={b.host}, operation={b.operation.name}, "
                       f"permissionType={b.permission_type.name})")
        typer.echo("")


@handle_errors
def acls(
    add: Annotated[bool, typer.Option("--add", help="Add ACLs.")] = False,
    remove: Annotated[bool, typer.Option("--remove", help="Remove ACLs.")] = False,
    list_: Annotated[bool, typer.Option("--list", help="List ACLs.")] = False,
    allow_principal: Annotated[list[str] | None, typer.Option("--allow-principal", help="Type:name, repeatable.")] = None,
    deny_principal: Annotated[list[str] | None, typer.Option("--deny-principal", help="Type:name, repeatable.")] = None,
    principal: Annotated[str | None, typer.Option("--principal", help="--list: only this principal's ACLs.")] = None,
    allow_host: Annotated[list[str] | None, typer.Option("--allow-host", help="Default *.")] = None,
    deny_host: Annotated[list[str] | None, typer.Option("--deny-host", help="Default *.")] = None,
    operation: Annotated[list[str] | None, typer.Option("--operation", help="Read, Write, ..., All (default).")] = None,
    topic: Annotated[list[str] | None, typer.Option("--topic", help="Topic, repeatable.")] = None,
    group: Annotated[list[str] | None, typer.Option("--group", help="Group, repeatable.")] = None,
    transactional_id: Annotated[list[str] | None, typer.Option("--transactional-id", help="Repeatable.")] = None,
    cluster: Annotated[bool, typer.Option("--cluster", help="The cluster resource.")] = False,
    resource_pattern_type: Annotated[
        str, typer.Option("--resource-pattern-type", help="literal, prefixed (and any, match for --list/--remove).")
    ] = "literal",
    producer: Annotated[bool, typer.Option("--producer", help="A producer's ACLs.")] = False,
    consumer: Annotated[bool, typer.Option("--consumer", help="A consumer's ACLs (with --group).")] = False,
    idempotent: Annotated[bool, typer.Option("--idempotent", help="With --producer: IDEMPOTENT_WRITE.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Accepted: this command never prompts.")] = False,
    command_config: Annotated[
        Path | None, typer.Option("--command-config", dir_okay=False, help="Client properties (SASL, TLS).")
    ] = None,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1, help="Seconds to wait for the answer.")] = 30.0,
) -> None:
    """Add, remove or list ACLs (kafka-acls.sh)."""
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
    )
    from confluent_kafka.admin import ResourceType as CkResourceType

    if sum([add, remove, list_]) != 1:
        fail("give exactly one of --add, --remove, --list", EXIT_USAGE)
    topics, groups, txn_ids = list(topic or ()), list(group or ()), list(transactional_id or ())
    pattern = _pattern(resource_pattern_type, add)
    extra = command_config_settings(command_config)
    check_reachable(bootstrap_server)
    admin = AdminClient({**client_config(bootstrap_server), **extra})

    def ck(b: Binding) -> Any:
        return AclBinding(CkResourceType(b.resource_type), b.name, ResourcePatternType(b.pattern_type), b.principal,
                          b.host, AclOperation(b.operation), AclPermissionType(b.permission))

    if add:
        bindings = bindings_for(allow=list(allow_principal or ()), deny=list(deny_principal or ()),
                                allow_hosts=list(allow_host or ()), deny_hosts=list(deny_host or ()),
                                operations=list(operation or ()), topics=topics, groups=groups, txn_ids=txn_ids,
                                cluster=cluster, pattern=pattern, producer=producer, consumer=consumer,
                                idempotent=idempotent)
        futures = admin.create_acls([ck(b) for b in bindings])
        for f in futures.values():
            admin_result(f, timeout, "adding ACLs")
        typer.echo(f"Added {len(bindings)} ACL(s):")
        _print_acls(list(futures))
        return
    resources = _resources(topics, groups, txn_ids, cluster)
    try:
        ops = [parse_operation(o) for o in operation or ()] or [Op.ANY]
    except ValueError as err:
        fail(f"--operation: {err}", EXIT_USAGE)
    principals: list[str | None] = [*(allow_principal or ()), *(deny_principal or ())]
    if principal is not None:
        principals.append(principal)
    filters = []
    wanted: list[tuple[int, str | None]] = list(resources) or [(1, None)]  # none: every ACL (type ANY)
    for rt, name in wanted:
        for p in principals or [None]:
            for op in ops:
                perm = Permission.ANY
                if p is not None and p in (allow_principal or ()) and p not in (deny_principal or ()):
                    perm = Permission.ALLOW
                elif p is not None and p in (deny_principal or ()) and p not in (allow_principal or ()):
                    perm = Permission.DENY
                filters.append(AclBindingFilter(  # (confluent-kafka's stubs say str; None is its "any")
                    CkResourceType(rt), name,  # type: ignore[arg-type]
                    ResourcePatternType(pattern if name is not None else PatternType.ANY),
                    p, None, AclOperation(int(op)), AclPermissionType(int(perm))))  # type: ignore[arg-type]
    if list_:
        found: dict[Any, None] = {}
        for flt in filters:
            for b in admin_result(admin.describe_acls(flt), timeout, "listing ACLs"):
                found[b] = None
        _print_acls(list(found))
        return
    removed: list[Any] = []
    for f in admin.delete_acls(filters).values():
        removed += admin_result(f, timeout, "removing ACLs")
    typer.echo(f"Removed {len(removed)} ACL(s):")
    _print_acls(removed)
