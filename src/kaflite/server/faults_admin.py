"""Fault rules over the Kafka protocol (what `kaflite faults add|list|clear` sends): the configuration of
a pseudo broker resource named `kaflite.faults`, on a broker started with `kaflite.faults.enable=true`.

Why this way and not an HTTP endpoint: the commands reach the broker at its bootstrap address, through
the listener's own TLS and SASL and the authorizer, with no second port to open or secure; the requests
are Kafka's own DescribeConfigs and IncrementalAlterConfigs, so nothing new is parsed.

Rules (tests/server/test_faults.py):
- a DescribeConfigs or IncrementalAlterConfigs whose every resource is (BROKER, "kaflite.faults") is
  answered here, before any handler; a request naming any other resource is left to its handler, and
  without `kaflite.faults.enable` nothing is intercepted (the name is then an invalid broker id there);
- IncrementalAlterConfigs: SET `add` = a JSON rule ({"kind": "error", "api": "Produce", "error":
  "NOT_LEADER_OR_FOLLOWER", "times": 3, ...}) adds it; DELETE `all` removes every rule, DELETE `<id>`
  one; a bad rule answers INVALID_CONFIG with the reason; validate_only changes nothing;
- DescribeConfigs answers one entry per rule: name = its id, value = its JSON description (with `fired`);
- IncrementalAlterConfigs SET `expire_member` = {"group": G, "member": M} expires that member now (as its
  session timeout would) and SET `force_rebalance` = G makes the group rebalance now, on the group's
  coordinator (`GroupCoordinator.handle_expire_member` / `handle_force_rebalance`, what
  `EmbeddedBroker.expire_member` / `force_rebalance` run): answered with the step's code once its records
  are committed (NOT_COORDINATOR on another broker, GROUP_ID_NOT_FOUND / UNKNOWN_MEMBER_ID as the step
  says); validate_only checks the value only;
- the principal needs ALTER_CONFIGS (changes) or DESCRIBE_CONFIGS (list) on the cluster resource, else
  CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kaflite.protocol.errors import ErrorCode
from kaflite.server.authorizer import AclOperation, ResourceType

if TYPE_CHECKING:
    from kaflite.server.context import RequestContext
    from kaflite.server.faults import FaultInjector

__all__ = ["RESOURCE_NAME", "answer"]

RESOURCE_NAME = "kaflite.faults"
BROKER_RESOURCE = 4
DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
SET, DELETE = 0, 1


def _ours(resources: Any) -> bool:
    return bool(resources) and all(int(r.resource_type) == BROKER_RESOURCE and r.resource_name == RESOURCE_NAME
                                   for r in resources)


async def answer(ctx: RequestContext, request: Any, faults: FaultInjector) -> Any | None:
    """The response when `request` manages fault rules, else None (the handler answers it)."""
    from kaflite.server.context import build
    from kaflite.server.faults_response import _entity

    api_key = ctx.header.api_key
    R = ctx.response
    if api_key == DESCRIBE_CONFIGS and _ours(request.resources):
        allowed = ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER)
        code = ErrorCode.none if allowed else ErrorCode.cluster_authorization_failed
        configs = tuple(
            _entity(R.DescribeConfigsResourceResult, ErrorCode.none, name=str(rule["id"]), value=json.dumps(rule),
                    read_only=False, is_sensitive=False, synonyms=(), documentation=None)
            for rule in (faults.rules() if allowed else ()))
        return build(R.DescribeConfigsResponse, throttle_time=_zero_ms(), results=tuple(
            _entity(R.DescribeConfigsResult, code, error_message=None, resource_type=r.resource_type,
                    resource_name=r.resource_name, configs=configs) for r in request.resources))
    if api_key == INCREMENTAL_ALTER_CONFIGS and _ours(request.resources):
        results = []
        for r in request.resources:
            code, message = ErrorCode.none, None
            if not ctx.authorize(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER):
                code = ErrorCode.cluster_authorization_failed
            else:
                group_ops = [c for c in r.configs if c.name in GROUP_OPS and int(c.config_operation) == SET]
                try:
                    steps = [_group_step(c.name, c.value) for c in group_ops]
                    _apply([c for c in r.configs if c not in group_ops], faults, bool(request.validate_only))
                except (ValueError, TypeError, KeyError) as err:
                    code, message = ErrorCode.invalid_config, str(err)
                else:
                    if not request.validate_only:
                        code, message = await _run_group_steps(ctx, steps)
            results.append(_entity(R.AlterConfigsResourceResponse, code, error_message=message,
                                   resource_type=r.resource_type, resource_name=r.resource_name))
        return build(R.IncrementalAlterConfigsResponse, throttle_time=_zero_ms(), responses=tuple(results))
    return None


GROUP_OPS = ("expire_member", "force_rebalance")
GroupStep = tuple[str, Callable[[Any, int], Any]]


def _group_step(name: str, value: str | None) -> GroupStep:
    """(group id, the coordinator step) of a SET `expire_member` / `force_rebalance` (module rules)."""
    if name == "force_rebalance":
        if not value:
            raise ValueError("force_rebalance: the value is the group id")
        group = value
        return group, lambda shard, now: shard.handle_force_rebalance(group, now)
    spec = json.loads(value or "")
    if not isinstance(spec, dict) or not isinstance(spec.get("group"), str) or not isinstance(spec.get("member"), str):
        raise ValueError('expire_member: the value is {"group": "<group id>", "member": "<member id>"}')
    group, member = spec["group"], spec["member"]
    return group, lambda shard, now: shard.handle_expire_member(group, member, now)


async def _run_group_steps(ctx: RequestContext, steps: list[GroupStep]) -> tuple[ErrorCode, str | None]:
    """Each step on its group's shard, in order; the first error stops them."""
    from kaflite.server.coordinators.groups import GroupService

    for group, step in steps:
        code = await GroupService.of(ctx.broker).call(group, step, lambda c: c)
        if code != ErrorCode.none:
            return ErrorCode(code), f"group {group!r}"
    return ErrorCode.none, None


def _apply(configs: Any, faults: FaultInjector, validate_only: bool) -> None:
    for c in configs:
        op = int(c.config_operation)
        if op == SET and c.name == "add":
            spec = json.loads(c.value or "")
            if not isinstance(spec, dict):
                raise ValueError("a fault rule is a JSON object")
            rule = faults.add(spec)
            if validate_only:
                faults.remove(rule.id)
        elif op == DELETE and c.name == "all":
            if not validate_only:
                faults.clear()
        elif op == DELETE and c.name.isdigit():
            if not validate_only and not faults.remove(int(c.name)):
                raise KeyError(f"no fault rule {c.name}")
        else:
            raise ValueError(f"unknown fault operation {op} on {c.name!r} (SET add=<json>, DELETE all, DELETE <id>)")


def _zero_ms() -> Any:
    import datetime

    return datetime.timedelta(0)
