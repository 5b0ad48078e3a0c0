"""The API registry: which handler serves which api key, for which versions.

How a handler module declares its APIs (this is the whole contract):

    # src/kaflite/server/handlers/<family>.py
    from kaflite.server.context import RequestContext, build

    async def handle_heartbeat(ctx: RequestContext, request: Any) -> Any | None:
        R = ctx.response                      # kio's response module for this version
        return build(R.HeartbeatResponse, throttle_time=..., error_code=...)

    APIS = {12: (0, 4, handle_heartbeat)}     # {api_key: (min_version, max_version, handler)}

- `request` is kio's request entity of exactly `ctx.api_version`; return kio's response entity of the same
  version (use `build(cls, **fields)`, which drops fields a version lacks), `None` to send no response
  (Produce with acks=0), or an `EncodedBody` (a list of buffers) from a hand-written hot encoder.
- Raising `KafkaError` from a handler is a bug in the handler (answer per-partition error codes instead);
  any exception closes the connection and logs one line, as Kafka does for a request it cannot answer.
- A handler may await (long polls, JoinGroup): `ctx.broker.purgatory.wait(keys, timeout_ms)`; the
  connection's later requests wait behind it, in order, like Kafka's muted channel.
- To add a module, list it in `HANDLER_MODULES`; a module that does not exist yet is skipped, so the
  coordinator's `groups` and `offsets` modules join the registry the moment they land.
- The advertised range (ApiVersions) is the declared range clipped to the versions kio can parse.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kaflite.protocol.messages import request_schema, response_schema, schema_known
from kaflite.server.context import RequestContext

__all__ = ["HANDLER_MODULES", "ApiTable", "EncodedBody", "Handler", "Registry", "load_registry"]

log = logging.getLogger("kaflite.server")

Handler = Callable[[RequestContext, Any], Awaitable[Any]]
ApiTable = dict[int, tuple[int, int, Handler]]

HANDLER_MODULES: tuple[str, ...] = (
    "kaflite.server.handlers.api_versions",
    "kaflite.server.handlers.metadata",
    "kaflite.server.handlers.produce",
    "kaflite.server.handlers.fetch",
    "kaflite.server.handlers.list_offsets",
    "kaflite.server.handlers.offset_for_leader_epoch",
    "kaflite.server.handlers.init_producer_id",
    "kaflite.server.handlers.admin",
    "kaflite.server.handlers.elect_leaders",
    "kaflite.server.handlers.alter_partition",
    "kaflite.server.handlers.reassignments",
    "kaflite.server.handlers.groups",
    "kaflite.server.handlers.offsets",
    "kaflite.server.handlers.transactions",
    "kaflite.server.handlers.find_coordinator",
    "kaflite.server.handlers.security",
    "kaflite.server.handlers.acls",
    "kaflite.server.handlers.quotas",
    "kaflite.server.handlers.share",
    "kaflite.server.handlers.share_state",
    "kaflite.server.handlers.share_admin",
)


@dataclass(frozen=True, slots=True)
class EncodedBody:
    """A response body already encoded (without size and response header), as buffers to write in order."""

    parts: list[bytes | memoryview]


class Registry:
    def __init__(self) -> None:
        self._apis: dict[int, tuple[int, int, Handler]] = {}
        # `on_start(broker)` of the handler modules, run once the broker has opened its logs and before
        # it listens (e.g. the group coordinator replays __consumer_offsets, as Kafka does at start-up); a
        # hook may return an awaitable, which the server awaits before it listens
        self.startup: list[Callable[[Any], Any]] = []

    def register(self, table: ApiTable, origin: str = "") -> None:
        for api_key, (lo, hi, handler) in table.items():
            if api_key in self._apis:
                raise ValueError(f"api key {api_key} registered twice ({origin})")
            # Clip to what kio can decode and encode, so ApiVersions never advertises a version we
            # would then fail to parse. From kio's index, without loading the schemas: loading them (about
            # 100 modules of dataclasses) was a third of a broker's start-up CPU; `warm_schemas` loads them
            # once the broker listens, in a worker thread.
            while hi >= lo and not schema_known(api_key, hi):
                hi -= 1
            if hi < lo:
                raise ValueError(f"api key {api_key}: kio knows none of versions {lo}..{table[api_key][1]}")
            self._apis[api_key] = (lo, hi, handler)

    def lookup(self, api_key: int, version: int) -> Handler | None:
        entry = self._apis.get(api_key)
        if entry is None or not entry[0] <= version <= entry[1]:
            return None
        return entry[2]

    def has_api(self, api_key: int) -> bool:
        return api_key in self._apis

    def warm_schemas(self) -> int:
        """Load the request and response schemas of every API's newest version (what clients negotiate),
        so that no client's first request of an API pays the import on the event loop. Run in a worker
        thread once the broker listens (KafkaServer). Returns how many (api key, version) pairs loaded."""
        loaded = 0
        for api_key, (_lo, hi, _handler) in sorted(self._apis.items()):
            if request_schema(api_key, hi) is not None and response_schema(api_key, hi) is not None:
                loaded += 1
        return loaded

    def ranges(self) -> list[tuple[int, int, int]]:
        """(api_key, min, max) for every registered API, by api key (feeds ApiVersions)."""
        return [(k, lo, hi) for k, (lo, hi, _h) in sorted(self._apis.items())]


def load_registry(modules: Iterable[str] = HANDLER_MODULES) -> Registry:
    registry = Registry()
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:
                log.debug("handler module %s not present yet", name)
                continue
            raise
        table = getattr(module, "APIS", None)
        if table:
            registry.register(table, name)
        hook = getattr(module, "on_start", None)
        if callable(hook):
            registry.startup.append(hook)
    return registry
