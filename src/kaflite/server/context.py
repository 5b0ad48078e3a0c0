"""What a handler gets besides its request: the broker, the request header, the client's address."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

from kio.index import load_payload_module
from kio.static.constants import EntityType

from kaflite.protocol.messages import RequestHeader

if TYPE_CHECKING:
    from kaflite.server.broker import Broker

__all__ = ["RequestContext", "build", "response_module"]


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    header: RequestHeader
    client_host: str = ""
    connection_id: int = 0

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    @property
    def response(self) -> ModuleType:
        """kio's response module for this request's api key and version (its nested classes)."""
        return response_module(self.header.api_key, self.header.api_version)

    def now_ms(self) -> int:
        return self.broker.now_ms()


@cache
def response_module(api_key: int, version: int) -> ModuleType:
    return load_payload_module(api_key, version, EntityType.response)


_FIELDS: dict[Any, frozenset[str]] = {}


def _field_names(cls: Any) -> frozenset[str]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return names


def build(cls: type[Any], **values: Any) -> Any:
    """Instantiate a kio entity of any version from the union of fields the versions know: values for
    fields this version does not have are dropped (e.g. `log_start_offset` below Produce v5)."""
    names = _field_names(cls)
    return cls(**{k: v for k, v in values.items() if k in names})
