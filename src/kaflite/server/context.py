"""What a handler gets besides its request: the broker, the request header, the session it came in on
(listener, security protocol, principal), the authorizer's verdicts and the throttle time.

Rules:
- `build(cls, **fields)` builds a kio response entity of any version from the union of the fields that
  the versions of that entity know: a field this version lacks is dropped (`log_start_offset` below
  Produce v5), a name that NO version has is a bug in the handler and raises TypeError (a misspelled
  `leader_epcoh=7` would otherwise go out as the default, silently);
- `allowed(check, name)` / `check(check, name)` ask the broker's authorizer one of the checks of
  server/acl/rules.py, where Kafka's KafkaApis asks its Authorizer;
- `record_request_time()` records the handler's event-loop time against `request_percentage` once;
- `mutation_quota(strict_since)` is the request's `controller_mutation_rate` quota (strict from that API
  version on, as Kafka's newQuotaFor); `throttle_mutations(quota)` makes its throttle this request's;
- `throttle_time_ms` is the throttle a quota decided for this request (server/quota); the dispatcher
  writes it into the response's `throttle_time` field (hot-encoded answers write it themselves) and tells
  the connection, which mutes itself for that long (KIP-219).
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from kio.index import load_payload_module
from kio.schema.index import schema_name_map
from kio.static.constants import EntityType

from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.messages import RequestHeader
from kaflite.server.authorizer import CLUSTER_NAME, AclOperation, ResourceType, Session
from kaflite.server.quota.manager import REQUEST_PERCENTAGE, THROTTLING_QUOTA_EXCEEDED_MESSAGE, MutationQuota

if TYPE_CHECKING:
    from kaflite.server.acl.rules import Check
    from kaflite.server.broker import Broker
    from kaflite.server.config import Listener

__all__ = ["AclOperation", "RequestContext", "ResourceType", "Session", "build", "response_module"]

@dataclass(slots=True)
class RequestContext:
    broker: Broker
    header: RequestHeader
    client_host: str = ""
    connection_id: int = 0
    session: Session = field(default_factory=Session)
    throttle_time_ms: int = 0
    request_bytes: int = 0  # the request's size (Kafka's request.sizeInBytes, what a produce quota counts)
    # the handler's time on the event loop so far (the dispatcher's LoopTimer; None: not measured)
    loop_time_ns: Callable[[], int] | None = None
    request_time_recorded: bool = False

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    def record_quota(self, key: str, value: float) -> int:
        """Record `value` against this principal's and client id's quota `key`; the throttle it earns
        becomes this request's (the largest of its quotas', as KafkaApis takes the max)."""
        quotas = self.broker.quotas
        if not quotas.enabled(key):
            return 0
        ms = quotas.record(key, self.session.principal, self.client_id, value, self.broker.now_ms())
        self.throttle_time_ms = max(self.throttle_time_ms, ms)
        return ms

    def mutation_quota(self, strict_since_version: int) -> MutationQuota:
        """This request's controller mutation quota (KIP-599): strict (a topic over it is refused
        THROTTLING_QUOTA_EXCEEDED) from `strict_since_version` on, permissive (throttled only) below, as
        Kafka's ControllerMutationQuotaManager.newQuotaFor."""
        return self.broker.quotas.mutation_quota(self.session.principal, self.client_id,
                                                 strict=self.api_version >= strict_since_version)

    def take_mutations(self, quota: MutationQuota, partitions: int) -> None:
        """Take `partitions` from the quota before creating or deleting them; raises
        THROTTLING_QUOTA_EXCEEDED when a strict quota is exhausted."""
        if not quota.record(partitions, self.broker.now_ms()):
            raise KafkaError(ErrorCode.throttling_quota_exceeded, THROTTLING_QUOTA_EXCEEDED_MESSAGE)

    def throttle_mutations(self, quota: MutationQuota) -> None:
        """The quota's throttle, as of now, becomes this request's (the largest of its quotas')."""
        self.throttle_time_ms = max(self.throttle_time_ms, quota.throttle_time_ms(self.broker.now_ms()))

    def record_request_time(self) -> int:
        """Record the handler's event-loop time so far against `request_percentage` (Kafka's request quota:
        percent of one thread's second, thread time in seconds * 100), once per request; the throttle it
        earns (at most one window) becomes this request's. Produce and Fetch call it before they encode
        their answer (a Fetch throttled by it answers no data, as Kafka's); the dispatcher for the rest."""
        if self.request_time_recorded or self.loop_time_ns is None:
            return 0
        self.request_time_recorded = True
        return self.record_quota(REQUEST_PERCENTAGE, self.loop_time_ns() * 1e-7)

    @property
    def response(self) -> ModuleType:
        """kio's response module for this request's api key and version (its nested classes)."""
        return response_module(self.header.api_key, self.header.api_version)

    @property
    def advertised(self) -> Listener:
        """This broker's address as clients of the listener this request came in on must see it."""
        return self.broker.advertised_for(self.session.listener_name)

    def now_ms(self) -> int:
        return self.broker.now_ms()

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str = CLUSTER_NAME) -> bool:
        """May this request's principal do `operation` on the resource? (Kafka's KafkaApis.authorize.)"""
        return self.broker.authorizer.authorize(self.session, operation, resource_type, name)

    def allowed(self, check: Check, name: str = CLUSTER_NAME) -> bool:
        """May this request's principal pass `check` (one of acl.rules' table) on the named resource?"""
        return self.broker.authorizer.authorize(self.session, check.operation, check.resource_type, name)

    def check(self, check: Check, name: str = CLUSTER_NAME) -> None:
        """`allowed`, or raise KafkaError with the check's *_AUTHORIZATION_FAILED code (inside a per-topic
        or per-partition loop it becomes that item's error)."""
        if not self.allowed(check, name):
            raise KafkaError(check.error, f"{self.session.principal} may not {check.operation.name} "
                                          f"{check.resource_type.name} {name}")

    def authorized_operations(self, resource_type: ResourceType, name: str = CLUSTER_NAME) -> int:
        """Kafka's `*_authorized_operations` bitfield of the resource for this request's principal."""
        return self.broker.authorizer.authorized_operations(self.session, resource_type, name)


@cache
def response_module(api_key: int, version: int) -> ModuleType:
    return load_payload_module(api_key, version, EntityType.response)


_FIELDS: dict[type, tuple[frozenset[str], frozenset[str]]] = {}
_OWN: dict[type, frozenset[str]] = {}  # each entity's own field names
_NEWEST: dict[type, frozenset[str] | None] = {}  # field names of the same entity in its newest version


def _version_modules(module_name: str) -> list[ModuleType]:
    """Every version's module of a kio schema module (`kio.schema.produce.v9.response` -> v3..v13)."""
    parts = module_name.split(".")
    if len(parts) < 3 or not parts[-2].startswith("v") or not parts[-2][1:].isdigit():
        return [importlib.import_module(module_name)]
    api = importlib.import_module(".".join(parts[:-2]))
    out = []
    for info in pkgutil.iter_modules(api.__path__):
        if info.name.startswith("v") and info.name[1:].isdigit():
            try:
                out.append(importlib.import_module(f"{api.__name__}.{info.name}.{parts[-1]}"))
            except ImportError:  # this version has no such module (e.g. only a request)
                continue
    return out


def _field_names(cls: type) -> tuple[frozenset[str], frozenset[str]]:
    """(this version's field names, the union over every version of the entity)."""
    names = _FIELDS.get(cls)
    if names is None:
        own = frozenset(f.name for f in dataclasses.fields(cls))
        union = set(own)
        for module in _version_modules(cls.__module__):
            other = getattr(module, cls.__qualname__, None)
            if other is not None and dataclasses.is_dataclass(other):
                union.update(f.name for f in dataclasses.fields(other))
        names = _FIELDS[cls] = (own, frozenset(union))
    return names


def _newest_field_names(cls: type) -> frozenset[str] | None:
    """The field names of the same entity in kio's newest version of its API (None when not a versioned
    kio schema); imports that one module only."""
    if cls in _NEWEST:
        return _NEWEST[cls]
    names: frozenset[str] | None = None
    parts = cls.__module__.split(".")
    if len(parts) >= 4 and parts[-2].startswith("v") and parts[-2][1:].isdigit():
        versions = schema_name_map.get(parts[-3])
        if versions:
            try:
                module = importlib.import_module(".".join([*parts[:-2], f"v{max(versions)}", parts[-1]]))
            except ImportError:
                module = None
            other = getattr(module, cls.__qualname__, None) if module is not None else None
            if other is not None and dataclasses.is_dataclass(other):
                names = frozenset(f.name for f in dataclasses.fields(other))
    _NEWEST[cls] = names
    return names


T = TypeVar("T")


def build(cls: type[T], **values: Any) -> T:
    """Instantiate a kio entity of any version from the union of fields the versions know: values for
    fields this version does not have are dropped (e.g. `log_start_offset` below Produce v5); a name
    that no version of the entity has raises TypeError."""
    own = _OWN.get(cls)
    if own is None:
        own = _OWN[cls] = frozenset(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
    if own.issuperset(values):  # the common case: every value is this version's (no other version imported)
        return cls(**values)
    newest = _newest_field_names(cls)
    if newest is not None and (own | newest).issuperset(values):
        # a field of a later version (the handler fills the newest shape): known without importing every
        # version's module; the newest is loaded already (Registry.warm_schemas)
        return cls(**{k: v for k, v in values.items() if k in own})
    # Only now the union over every version: it imports each version's module of the API, which took
    # ~100 ms on the event loop the first time an API was answered (seen by the loop watchdog)
    own, union = _field_names(cls)
    unknown = [k for k in values if k not in union]
    if unknown:
        raise TypeError(
            f"{cls.__qualname__} has no field {', '.join(sorted(unknown))} in any version "
            f"(fields: {', '.join(sorted(union))})"
        )
    return cls(**{k: v for k, v in values.items() if k in own})
