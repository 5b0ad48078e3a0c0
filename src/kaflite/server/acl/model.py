"""Kafka's ACL model: resource patterns, access control entries, bindings and their filters.

Rules (checkable in tests/acl/test_model.py):
- the codes are Kafka's (AclOperation, AclPermissionType, ResourceType, PatternType); a binding's pattern is
  LITERAL or PREFIXED, its operation neither ANY nor UNKNOWN, its permission ALLOW or DENY; `validate`
  answers why a binding cannot be stored (INVALID_REQUEST), None when it can;
- a principal is `<Type>:<name>` (Kafka's SecurityUtils.parseKafkaPrincipal); `User:*` matches every
  principal, host `*` every host, a LITERAL pattern named `*` every resource of its type;
- a filter matches a binding as Kafka's AclBindingFilter: resource type ANY matches every type; pattern
  type ANY matches LITERAL and PREFIXED patterns by exact name; MATCH matches the patterns that would apply
  to the named resource (the literal name, the `*` literal, every PREFIXED pattern the name starts with);
  a null name, principal or host matches any; operation and permission ANY match any;
- names in ZooKeeper and in the data directory file are Kafka's PascalCase (`Topic`, `TransactionalId`,
  `IdempotentWrite`, `Allow`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kaflite.server.authorizer import SUPPORTED_OPERATIONS, AclOperation, ResourceType

__all__ = [
    "ANY_OPERATION",
    "ANY_RESOURCE",
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_RESOURCE",
    "AccessControlEntry",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "Op",
    "PatternType",
    "Permission",
    "ResourcePattern",
    "ResourceType",
    "pascal",
    "parse_operation",
    "parse_permission",
    "parse_resource_type",
    "supported_operations",
]

WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
WILDCARD_RESOURCE = "*"


# Kafka's AclOperation, including the filter-only and wildcard codes (one enum: server/authorizer.py)
Op = AclOperation


ANY_OPERATION = Op.ANY
ANY_RESOURCE = 1  # ResourceType.ANY in a filter
_UNKNOWN_RESOURCE = 0


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


def pascal(name: str) -> str:
    """Kafka's SecurityUtils.toPascalCase: TRANSACTIONAL_ID -> TransactionalId."""
    return "".join(part[:1].upper() + part[1:].lower() for part in name.split("_"))


def _by_name(enum_cls: type[enum.IntEnum], text: str, what: str) -> int:
    key = text.strip().replace("-", "_")
    for member in enum_cls:
        if member.name == key.upper() or pascal(member.name) == key or member.name.replace("_", "") == key.upper():
            return int(member)
    raise ValueError(f"unknown {what} {text!r}")


def parse_operation(text: str) -> Op:
    return Op(_by_name(Op, text, "operation"))


def parse_permission(text: str) -> Permission:
    return Permission(_by_name(Permission, text, "permission type"))


def parse_resource_type(text: str) -> ResourceType:
    return ResourceType(_by_name(ResourceType, text, "resource type"))


def valid_principal(principal: str) -> bool:
    """Kafka's parseKafkaPrincipal: `<type>:<name>` with both parts non-empty."""
    kind, sep, name = principal.partition(":")
    return bool(sep and kind and name)


# Kafka's AclEntry.supportedOperations (server/authorizer.py holds the table)
_SUPPORTED: dict[int, tuple[Op, ...]] = {int(rt): ops for rt, ops in SUPPORTED_OPERATIONS.items()}


def supported_operations(resource_type: ResourceType) -> tuple[Op, ...]:
    return _SUPPORTED[resource_type]


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    resource_type: int
    name: str
    pattern_type: int = PatternType.LITERAL

    def __str__(self) -> str:
        return f"ResourcePattern(resourceType={_name(ResourceType, self.resource_type)}, name={self.name}, " \
               f"patternType={_name(PatternType, self.pattern_type)})"


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: int
    permission: int

    def __str__(self) -> str:
        return f"(principal={self.principal}, host={self.host}, operation={_name(Op, self.operation)}, " \
               f"permissionType={_name(Permission, self.permission)})"


def _name(enum_cls: type[enum.IntEnum], code: int) -> str:
    try:
        return enum_cls(code).name
    except ValueError:
        return "UNKNOWN"


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def validate(self) -> str | None:
        """Why this binding cannot be created (Kafka answers INVALID_REQUEST), or None."""
        p, e = self.pattern, self.entry
        if p.resource_type not in _SUPPORTED:
            return f"Invalid resource type {p.resource_type}"
        if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return f"Invalid pattern type {p.pattern_type}: an ACL's pattern is LITERAL or PREFIXED"
        if e.operation in (Op.ANY, Op.UNKNOWN) or e.operation not in Op.__members__.values():
            return f"Invalid operation {e.operation}"
        if e.permission not in (Permission.ALLOW, Permission.DENY):
            return f"Invalid permission type {e.permission}"
        if not p.name:
            return "Invalid empty resource name"
        if p.resource_type == ResourceType.CLUSTER and p.name != "kafka-cluster":
            return "The only valid name for the CLUSTER resource is kafka-cluster"
        if "/" in p.name:  # a znode path component (Kafka's AclAuthorizer refuses it too)
            return f"ACL binding contains invalid resource name: {p.name}"
        if not valid_principal(e.principal):
            return f"Could not parse principal from `{e.principal}` (no colon is found)"
        if not e.host:
            return "Invalid empty host"
        return None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Kafka's AclBindingFilter (ResourcePatternFilter + AccessControlEntryFilter)."""

    resource_type: int = ANY_RESOURCE
    name: str | None = None
    pattern_type: int = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: int = Op.ANY
    permission: int = Permission.ANY

    def unknown(self) -> str | None:
        """Why the filter is unusable (Kafka's isUnknown: an UNKNOWN or out-of-range code), or None."""
        if self.resource_type == _UNKNOWN_RESOURCE or (
                self.resource_type != ANY_RESOURCE and self.resource_type not in _SUPPORTED):
            return f"Invalid resource type filter {self.resource_type}"
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED):
            return f"Invalid pattern type filter {self.pattern_type}"
        if self.operation == Op.UNKNOWN or self.operation not in Op.__members__.values():
            return f"Invalid operation filter {self.operation}"
        if self.permission not in (Permission.ANY, Permission.DENY, Permission.ALLOW):
            return f"Invalid permission type filter {self.permission}"
        return None

    def matches_pattern(self, p: ResourcePattern) -> bool:
        if self.resource_type != ANY_RESOURCE and self.resource_type != p.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != p.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, p.pattern_type):
            return self.name == p.name
        # MATCH: the patterns that apply to the named resource
        if p.pattern_type == PatternType.LITERAL:
            return self.name == p.name or p.name == WILDCARD_RESOURCE
        return self.name.startswith(p.name)

    def matches_entry(self, e: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == e.principal)
                and (self.host is None or self.host == e.host)
                and (self.operation == Op.ANY or self.operation == e.operation)
                and (self.permission == Permission.ANY or self.permission == e.permission))

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)

    def exact_patterns(self) -> tuple[ResourcePattern, ...]:
        """The patterns this filter names exactly (Kafka's filterToResources when matchesAtMostOne)."""
        if self.resource_type in (ANY_RESOURCE, _UNKNOWN_RESOURCE) or self.name is None:
            return ()
        if self.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            return (ResourcePattern(self.resource_type, self.name, self.pattern_type),)
        return ()
