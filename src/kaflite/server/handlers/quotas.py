"""DescribeClientQuotas (48) and AlterClientQuotas (49): Kafka's ZkAdminManager.describeClientQuotas /
alterClientQuotas.

Rules (tests/quota/test_quota_apis.py):
- DescribeClientQuotas needs DESCRIBE_CONFIGS on the cluster, AlterClientQuotas ALTER_CONFIGS (refused:
  CLUSTER_AUTHORIZATION_FAILED for the whole answer, or for every entry);
- a filter component matches: EXACT a name (a null name: the default), DEFAULT only the default,
  SPECIFIED any name given (the default too); an entity part the filter does not name matches only when
  the filter is not `strict` or the entity lacks that part; a duplicate entity type or an empty one is
  INVALID_REQUEST, another type than user / client-id / ip UNSUPPORTED_VERSION (Kafka's "custom entity
  type"), ip together with user or client-id INVALID_REQUEST; an ip filter alone matches nothing (kaflite
  keeps no IP quotas);
- an alteration names a user, a client id or both, each once (else INVALID_REQUEST; an ip entity is
  INVALID_REQUEST: kaflite has no IP quotas); its keys are Kafka's four client quota keys (another:
  INVALID_REQUEST), producer_byte_rate and consumer_byte_rate whole numbers; `validate_only` checks without
  storing; the valid entries are written durably (server/quota/store.py, in a worker thread: single node
  quotas.json, a cluster Kafka's /config/users|clients znodes with a change notification every broker
  applies) and are in force on this broker before the answer; an entity that could not be stored is
  UNKNOWN_SERVER_ERROR with the reason;
- in a cluster DescribeClientQuotas reads ZooKeeper (in a worker thread), as Kafka's ZkAdminManager does, so
  it shows an alteration made through any broker at once; on a single node it reads the broker's table.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from kaflite.protocol.errors import ErrorCode
from kaflite.server.acl import rules
from kaflite.server.context import RequestContext, build
from kaflite.server.handlers import ApiTable
from kaflite.server.quota import CONSUMER_BYTE_RATE, DEFAULT, PRODUCER_BYTE_RATE, QUOTA_KEYS, QuotaEntity
from kaflite.server.quota.manager import Name
from kaflite.server.quota.store import ZkQuotaStore
from kaflite.server.services import Slot

_ZERO = datetime.timedelta(0)
USER, CLIENT_ID, IP = "user", "client-id", "ip"
EXACT, MATCH_DEFAULT, SPECIFIED = 0, 1, 2
_LONG_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE)
_ANY = object()  # SPECIFIED: any name given


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _components(request: Any) -> dict[str, Any]:
    wanted: dict[str, Any] = {}
    for c in request.components:
        kind = c.entity_type
        if kind == "":
            raise _Refused(ErrorCode.invalid_request, "Unexpected empty filter component entity type")
        if kind not in (USER, CLIENT_ID, IP):
            raise _Refused(ErrorCode.unsupported_version, f"Custom entity type '{kind}' not supported")
        if kind in wanted:
            raise _Refused(ErrorCode.invalid_request, f"Duplicate {kind} filter component entity type")
        if c.match_type == EXACT:
            wanted[kind] = DEFAULT if c.match is None else c.match
        elif c.match_type == MATCH_DEFAULT:
            wanted[kind] = DEFAULT
        elif c.match_type == SPECIFIED:
            wanted[kind] = _ANY
        else:
            raise _Refused(ErrorCode.invalid_request, f"Unexpected match type {c.match_type}")
    if IP in wanted and (USER in wanted or CLIENT_ID in wanted):
        raise _Refused(ErrorCode.invalid_request, "Invalid entity filter component combination, IP filter "
                       "component should not be used with user or clientId filter component.")
    return wanted


def matches(wanted: dict[str, Any], strict: bool, entity: QuotaEntity) -> bool:
    if IP in wanted:
        return False
    for kind, name in ((USER, entity.user), (CLIENT_ID, entity.client_id)):
        if kind not in wanted:
            if name is not None and strict:
                return False
        elif name is None or (wanted[kind] is not _ANY and wanted[kind] != name):
            return False
    return True


def _entity_data(make: Any, entity: QuotaEntity) -> tuple[Any, ...]:
    out = []
    for kind, name in ((USER, entity.user), (CLIENT_ID, entity.client_id)):
        if name is not None:
            out.append(make(entity_type=kind, entity_name=None if name is DEFAULT else name))
    return tuple(out)


async def handle_describe_client_quotas(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response

    def answer(code: ErrorCode, message: str | None, entries: tuple[Any, ...] | None) -> Any:
        return build(R.DescribeClientQuotasResponse, throttle_time=_ZERO, error_code=code, error_message=message,
                     entries=entries)

    if not ctx.allowed(rules.DESCRIBE_CLIENT_QUOTAS):
        return answer(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.", None)
    try:
        wanted = _components(request)
    except _Refused as e:
        return answer(e.code, str(e), None)
    configs = ctx.broker.quotas.entities()
    store = ctx.broker.quota_store
    if isinstance(store, ZkQuotaStore):
        # as stored now, as Kafka's ZkAdminManager answers: an alteration through another broker is seen at
        # once, before its notification reached this one
        try:
            configs = await asyncio.to_thread(store.load)
        except Exception as e:  # ZooKeeper unreachable
            return answer(ErrorCode.unknown_server_error, f"{type(e).__name__}: {e}", None)
    entries = tuple(
        build(R.EntryData, entity=_entity_data(lambda **kw: build(R.EntityData, **kw), entity),
              values=tuple(build(R.ValueData, key=k, value=v) for k, v in sorted(values.items())))
        for entity, values in configs.items() if matches(wanted, request.strict, entity))
    return answer(ErrorCode.none, None, entries)


def _entity(entry: Any) -> QuotaEntity:
    parts: dict[str, Name] = {}
    for e in entry.entity:
        if e.entity_type == IP:
            raise _Refused(ErrorCode.invalid_request, "IP quotas are not supported by kaflite")
        if e.entity_type not in (USER, CLIENT_ID) or e.entity_type in parts:
            raise _Refused(ErrorCode.invalid_request, "Invalid client quota entity")
        parts[e.entity_type] = DEFAULT if e.entity_name is None else e.entity_name
    if not parts:
        raise _Refused(ErrorCode.invalid_request, "Invalid client quota entity")
    return QuotaEntity(parts.get(USER), parts.get(CLIENT_ID))


def _ops(entry: Any) -> dict[str, float | None]:
    ops: dict[str, float | None] = {}
    for op in entry.ops:
        if op.key not in QUOTA_KEYS:
            raise _Refused(ErrorCode.invalid_request, f"Invalid configuration key {op.key}")
        if op.remove:
            ops[op.key] = None
            continue
        value = float(op.value)
        if op.key in _LONG_KEYS and not value.is_integer():
            raise _Refused(ErrorCode.invalid_request, f"Configuration {op.key} must be a LONG value")
        ops[op.key] = value
    return ops


# one AlterClientQuotas change at a time (each writes the whole table)
ALTER_LOCK: Slot[asyncio.Lock] = Slot("quota_alter_lock")


def _lock(ctx: RequestContext) -> asyncio.Lock:
    return ctx.broker.services.get_or_make(ALTER_LOCK, asyncio.Lock)


async def handle_alter_client_quotas(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response

    def entry(code: ErrorCode, message: str | None, source: Any) -> Any:
        return build(R.EntryData, error_code=code, error_message=message, entity=tuple(
            build(R.EntityData, entity_type=e.entity_type, entity_name=e.entity_name) for e in source.entity))

    if not ctx.allowed(rules.ALTER_CLIENT_QUOTAS):
        return build(R.AlterClientQuotasResponse, throttle_time=_ZERO, entries=tuple(
            entry(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.", e)
            for e in request.entries))
    results: list[Any] = []
    changes: list[tuple[QuotaEntity, dict[str, float | None]]] = []
    for e in request.entries:
        try:
            changes.append((_entity(e), _ops(e)))
            results.append(entry(ErrorCode.none, None, e))
        except _Refused as refused:
            results.append(entry(refused.code, str(refused), e))
    store = ctx.broker.quota_store
    failed: dict[QuotaEntity, str] = {}
    if changes and not request.validate_only:
        if store is None:  # not started: nowhere to keep them
            failed = {entity: "the broker is starting" for entity, _ in changes}
        else:
            async with _lock(ctx):
                try:
                    # durable first (fsync / ZooKeeper, in a thread: never on the loop); the store publishes
                    # the new quotas to this broker's manager before it returns (and in a cluster to every
                    # broker's, through the change notification)
                    _, failed = await asyncio.to_thread(store.alter, changes)
                except Exception as err:  # a full disk: nothing was stored
                    failed = {entity: f"{type(err).__name__}: {err}" for entity, _ in changes}
    if failed:
        valid = iter(changes)
        for i, source in enumerate(request.entries):
            if results[i].error_code != ErrorCode.none:
                continue
            entity, _ = next(valid)
            if entity in failed:
                results[i] = entry(ErrorCode.unknown_server_error, failed[entity], source)
    return build(R.AlterClientQuotasResponse, throttle_time=_ZERO, entries=tuple(results))


APIS: ApiTable = {
    48: (0, 1, handle_describe_client_quotas),
    49: (0, 1, handle_alter_client_quotas),
}
