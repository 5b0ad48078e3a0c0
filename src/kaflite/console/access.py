"""The Access page's pure part: ACL bindings and client quotas as the console shows them, grouped by
principal, and which of them apply to one principal.

Rules (tests/console/test_units.py):
- an ACL applies to a principal when its principal is that principal or the wildcard `User:*` (which
  matches every principal, as in Kafka's AclAuthorizer);
- a client quota applies to `User:NAME` when its user part is NAME, the default user, or absent (a
  client-id-only quota); they are listed in Kafka's precedence order (user+client-id, user+default
  client-id, user, default user+client-id, default user+default client-id, default user, client-id,
  default client-id): the first one listed that sets a key is the one Kafka enforces for a client
  whose client id that entity matches;
- resource types, operations, permissions and pattern types are shown by Kafka's names for the
  DescribeAcls codes (an unknown code as UNKNOWN(n));
- a quota entity is shown as `user 'alice', client-id 'app'` with `the default user` / `the default
  client-id` for a default (kafka-configs.sh's wording), values as integers when whole.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["AclRow", "QuotaEntry", "acl_row", "acls_by_principal", "acls_for", "quotas_for", "entity_label",
           "quota_value", "principal_user", "QUOTA_ORDER",
           "OPERATIONS", "PERMISSIONS", "RESOURCE_TYPES", "PATTERN_TYPES", "WILDCARD_PRINCIPAL"]

# A quota entity's part: (entity type, name); name None is the default entity of that type.
Part = tuple[str, str | None]


@dataclass(frozen=True, slots=True, order=True)
class AclRow:
    principal: str
    host: str
    operation: str
    permission: str
    resource_type: str
    pattern_type: str
    name: str


@dataclass(frozen=True, slots=True)
class QuotaEntry:
    entity: tuple[Part, ...]  # user part first
    values: tuple[tuple[str, float], ...]  # (quota key, value), by key

    def part(self, kind: str) -> Part | None:
        return next((p for p in self.entity if p[0] == kind), None)


# Kafka's int8 codes of DescribeAcls (AclOperation, AclPermissionType, ResourceType, PatternType)
OPERATIONS = ("UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
              "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS")
PERMISSIONS = ("UNKNOWN", "ANY", "DENY", "ALLOW")
RESOURCE_TYPES = ("UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER")
PATTERN_TYPES = ("UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED")


def _code_name(names: tuple[str, ...], code: int) -> str:
    return names[code] if 0 <= code < len(names) else f"UNKNOWN({code})"


def acl_row(principal: str, host: str, operation: int, permission: int, resource_type: int, pattern_type: int,
            name: str) -> AclRow:
    """A DescribeAcls binding as a row, its codes by Kafka's names (READ, ALLOW, TOPIC, LITERAL); a code
    newer than this table shows as UNKNOWN(n)."""
    return AclRow(principal, host, _code_name(OPERATIONS, operation), _code_name(PERMISSIONS, permission),
                  _code_name(RESOURCE_TYPES, resource_type), _code_name(PATTERN_TYPES, pattern_type), name)


def acls_by_principal(rows: Iterable[AclRow]) -> list[tuple[str, list[AclRow]]]:
    """[(principal, its rows sorted)] by principal."""
    out: dict[str, list[AclRow]] = {}
    for r in rows:
        out.setdefault(r.principal, []).append(r)
    return [(p, sorted(rs)) for p, rs in sorted(out.items())]


WILDCARD_PRINCIPAL = "User:*"  # Kafka's wildcard principal: it matches every principal, of any type


def acls_for(rows: Iterable[AclRow], principal: str) -> list[AclRow]:
    """The rows that apply to `principal`: its own, then the wildcard principal's (`User:*`)."""
    rows = list(rows)
    own = sorted(r for r in rows if r.principal == principal)
    if principal == WILDCARD_PRINCIPAL:
        return own
    return own + sorted(r for r in rows if r.principal == WILDCARD_PRINCIPAL)


def principal_user(principal: str) -> str | None:
    """The quota user name of a principal (`User:alice` -> `alice`); None for other principal types."""
    kind, sep, name = principal.partition(":")
    return name if sep and kind == "User" else None


# Kafka's precedence, from (user part, client-id part), each "name" / "default" / "absent"
QUOTA_ORDER = [("name", "name"), ("name", "default"), ("name", "absent"), ("default", "name"),
               ("default", "default"), ("default", "absent"), ("absent", "name"), ("absent", "default")]


def _how(part: Part | None) -> str:
    return "absent" if part is None else "default" if part[1] is None else "name"


def quotas_for(entries: Iterable[QuotaEntry], principal: str) -> list[QuotaEntry]:
    """The quota entries that apply to `principal`, in Kafka's precedence order (most specific first)."""
    user = principal_user(principal)
    if user is None:
        return []
    applying = []
    for e in entries:
        u = e.part("user")
        if u is not None and u[1] is not None and u[1] != user:
            continue
        rank = QUOTA_ORDER.index((_how(u), _how(e.part("client-id"))))
        applying.append((rank, e.part("client-id") or ("", ""), e))
    return [e for _r, _c, e in sorted(applying, key=lambda t: (t[0], str(t[1][1])))]


_LABEL = {"user": "user", "client-id": "client-id"}


def entity_label(entity: Iterable[Part]) -> str:
    """`user 'alice', client-id 'app'`; `the default user` for a default (kafka-configs.sh's wording)."""
    return ", ".join(f"{_LABEL.get(kind, kind)} '{name}'" if name is not None
                     else f"the default {_LABEL.get(kind, kind)}" for kind, name in entity)


def quota_value(value: float) -> str:
    """A quota value: whole numbers without a fraction (1048576), others as given (12.5)."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e18 else repr(float(value))
