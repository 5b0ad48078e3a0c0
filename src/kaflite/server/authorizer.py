"""Who may do what: the session a request came in on, Kafka's ACL operation and resource codes, and the
authorizer interface the handlers ask (through `RequestContext.authorize`).

Rules: a PLAINTEXT session's principal is `User:ANONYMOUS` (Kafka's KafkaPrincipal.ANONYMOUS), as is an
SSL session without a client certificate; an SSL session with one is `User:<its subject DN>` (mapped by
ssl.principal.mapping.rules), a SASL session `User:<the authenticated name>` (server/security/);
- without `authorizer.class.name` the authorizer is `AllowAllAuthorizer` (Kafka without an authorizer:
  every operation allowed, every supported operation in `*_authorized_operations`, the ACL APIs answered
  SECURITY_DISABLED); with Kafka's AclAuthorizer it is `kaflite.server.acl.AclAuthorizer`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kaflite.server.config import Listener

__all__ = [
    "ANONYMOUS",
    "CLUSTER_NAME",
    "AclOperation",
    "AllowAllAuthorizer",
    "Authorizer",
    "ResourceType",
    "SUPPORTED_OPERATIONS",
    "Session",
]

ANONYMOUS = "User:ANONYMOUS"  # Kafka's KafkaPrincipal.ANONYMOUS, the principal of a PLAINTEXT session


class AclOperation(enum.IntEnum):
    """Kafka's AclOperation codes (3..14 are also the bits of `*_authorized_operations`; UNKNOWN, ANY and
    ALL appear only in ACL bindings and filters)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class ResourceType(enum.IntEnum):
    """Kafka's ResourceType codes."""

    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


CLUSTER_NAME = "kafka-cluster"  # Kafka's name of the one CLUSTER resource

_O = AclOperation
# Kafka's AclEntry.supportedOperations: what each resource type's `*_authorized_operations` can contain
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER, _O.DESCRIBE_CONFIGS,
                         _O.ALTER_CONFIGS),
    ResourceType.GROUP: (_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS),
    ResourceType.CLUSTER: (_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE,
                           _O.ALTER, _O.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (_O.DESCRIBE, _O.WRITE),
    ResourceType.DELEGATION_TOKEN: (_O.DESCRIBE,),
    ResourceType.USER: (_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS),
}


@dataclass(frozen=True, slots=True)
class Session:
    """Who sent a request and over what: Kafka's RequestContext.listenerName / securityProtocol / principal."""

    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    principal: str = ANONYMOUS
    client_address: str = ""

    @classmethod
    def on(cls, listener: Listener | None, client_address: str = "") -> Session:
        if listener is None:
            return cls(client_address=client_address)
        return cls(listener.name, listener.security_protocol or "PLAINTEXT", ANONYMOUS, client_address)


class Authorizer(Protocol):
    def authorize(self, session: Session, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        ...

    def authorize_by_resource_type(self, session: Session, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """May the principal do `operation` on some resource of the type? (KIP-679's idempotent check.)"""
        ...

    def authorized_operations(self, session: Session, resource_type: ResourceType, name: str) -> int:
        """The `*_authorized_operations` bitfield of the resource (bit n: AclOperation code n allowed)."""
        ...


class AllowAllAuthorizer:
    """Allows every operation (Kafka without `authorizer.class.name`)."""

    def authorize(self, session: Session, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        return True

    def authorize_by_resource_type(self, session: Session, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        return True

    def authorized_operations(self, session: Session, resource_type: ResourceType, name: str) -> int:
        return sum(1 << int(op) for op in SUPPORTED_OPERATIONS[resource_type])
