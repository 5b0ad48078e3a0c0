"""Kafka's AclAuthorizer decision, over an in-memory table of ACLs (pure: no I/O, no clock).

Rules (checkable in tests/acl/test_authorizer.py):
- a principal named in `super.users` may do everything;
- the ACLs that apply to a resource are those of its literal name, of the `*` literal of its type, and of
  every PREFIXED pattern its name starts with; when none apply, `allow.everyone.if.no.acl.found` decides;
- an entry applies to a request when its principal is the session's or `User:*`, its host the client's
  address or `*`, and its operation the one asked or ALL;
- DENY beats ALLOW: one applying DENY entry refuses; otherwise an applying ALLOW entry allows, where an
  ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE and ALLOW ALTER_CONFIGS allows
  DESCRIBE_CONFIGS (a DENY refuses only its own operation, or every one when ALL);
- `authorize_by_resource_type` (KIP-679: may the principal WRITE some topic?) is Kafka's
  authorizeByResourceType: refused by a DENY on the `*` literal, else allowed by allow.everyone, else by
  an ALLOW pattern that no DENY literal of the same name or DENY prefix of it dominates;
- the table changes only through `replace` (whole entry sets per pattern), so a reader never sees half of
  a change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kaflite.server.acl.model import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Op,
    PatternType,
    Permission,
    ResourcePattern,
    supported_operations,
)
from kaflite.server.authorizer import AclOperation, ResourceType, Session

__all__ = ["AclAuthorizer", "AclTable"]

AclTable = Mapping[ResourcePattern, frozenset[AccessControlEntry]]

# what an ALLOW of each operation also allows (Kafka's AclAuthorizer.allowAclExists)
_IMPLIED_BY: dict[int, tuple[int, ...]] = {
    Op.DESCRIBE: (Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER),
    Op.DESCRIBE_CONFIGS: (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
}


class AclAuthorizer:
    """Kafka's `kafka.security.authorizer.AclAuthorizer` decision; storage is the owner's (acl.store)."""

    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False,
                 acls: AclTable | None = None) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone = allow_everyone_if_no_acl_found
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        # prefixed patterns by resource type, for the walk over a name's prefixes
        self._prefixed: dict[int, dict[str, frozenset[AccessControlEntry]]] = {}
        if acls:
            self.replace(acls)

    # -- the table ---------------------------------------------------------------------------------------
    @property
    def table(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        return dict(self._acls)

    def entries(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        return self._acls.get(pattern, frozenset())

    def replace(self, changes: AclTable) -> None:
        """Set each pattern's entries (an empty set removes the pattern)."""
        for pattern, entries in changes.items():
            if entries:
                self._acls[pattern] = frozenset(entries)
            else:
                self._acls.pop(pattern, None)
            if pattern.pattern_type == PatternType.PREFIXED:
                by_name = self._prefixed.setdefault(pattern.resource_type, {})
                if entries:
                    by_name[pattern.name] = frozenset(entries)
                else:
                    by_name.pop(pattern.name, None)

    def reset(self, table: AclTable) -> None:
        self._acls.clear()
        self._prefixed.clear()
        self.replace(table)

    def acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        """Every binding the filter matches (DescribeAcls), sorted for a stable answer."""
        out: list[AclBinding] = []
        for pattern, entries in self._acls.items():
            if flt.matches_pattern(pattern):
                out.extend(AclBinding(pattern, e) for e in entries if flt.matches_entry(e))
        return sorted(out)

    # -- decisions ---------------------------------------------------------------------------------------
    def _matching(self, resource_type: int, name: str) -> list[AccessControlEntry]:
        out: list[AccessControlEntry] = []
        out.extend(self._acls.get(ResourcePattern(resource_type, name, PatternType.LITERAL), ()))
        if name != WILDCARD_RESOURCE:
            out.extend(self._acls.get(ResourcePattern(resource_type, WILDCARD_RESOURCE, PatternType.LITERAL), ()))
        prefixed = self._prefixed.get(resource_type)
        if prefixed:
            for i in range(1, len(name) + 1):
                entries = prefixed.get(name[:i])
                if entries:
                    out.extend(entries)
        return out

    @staticmethod
    def _applies(e: AccessControlEntry, principal: str, host: str, operations: tuple[int, ...]) -> bool:
        return ((e.principal == principal or e.principal == WILDCARD_PRINCIPAL)
                and (e.host == host or e.host == WILDCARD_HOST)
                and (e.operation in operations or e.operation == Op.ALL))

    def decide(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        if principal in self.super_users:
            return True
        acls = self._matching(resource_type, name)
        if not acls:
            return self.allow_everyone
        if any(e.permission == Permission.DENY and self._applies(e, principal, host, (operation,)) for e in acls):
            return False
        allowed_by = _IMPLIED_BY.get(operation, (operation,))
        return any(e.permission == Permission.ALLOW and self._applies(e, principal, host, allowed_by) for e in acls)

    def authorize(self, session: Session, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        return self.decide(session.principal, session.client_address, operation, resource_type, name)

    def authorized_operations(self, session: Session, resource_type: ResourceType, name: str) -> int:
        """Kafka's `*_authorized_operations` bitfield: bit n set when operation code n is allowed."""
        bits = 0
        for op in supported_operations(resource_type):
            if self.decide(session.principal, session.client_address, op, resource_type, name):
                bits |= 1 << int(op)
        return bits

    def authorize_by_resource_type(self, session: Session, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        principal, host = session.principal, session.client_address
        if principal in self.super_users:
            return True
        names: dict[tuple[int, int], set[str]] = {}  # (permission, pattern type) -> names
        for pattern, entries in self._acls.items():
            if pattern.resource_type != resource_type:
                continue
            for e in entries:
                if self._applies(e, principal, host, (operation,)):
                    names.setdefault((e.permission, pattern.pattern_type), set()).add(pattern.name)
        deny_literals = names.get((Permission.DENY, PatternType.LITERAL), set())
        deny_prefixes = names.get((Permission.DENY, PatternType.PREFIXED), set())
        if WILDCARD_RESOURCE in deny_literals:
            return False
        if self.allow_everyone:
            return True

        def dominated(name: str) -> bool:
            return any(name[:i] in deny_prefixes for i in range(1, len(name) + 1))

        for prefix in names.get((Permission.ALLOW, PatternType.PREFIXED), ()):
            if not dominated(prefix):
                return True
        for literal in names.get((Permission.ALLOW, PatternType.LITERAL), ()):
            if literal == WILDCARD_RESOURCE or (literal not in deny_literals and not dominated(literal)):
                return True
        return False
