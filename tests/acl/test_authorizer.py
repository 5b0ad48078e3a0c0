"""Kafka's AclAuthorizer decision and ACL filters, without sockets (server/acl/authorizer.py, model.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kaflite.server.acl.authorizer import AclAuthorizer
from kaflite.server.acl.model import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Op,
    PatternType,
    Permission,
    ResourcePattern,
    parse_operation,
    pascal,
)
from kaflite.server.authorizer import AclOperation, AllowAllAuthorizer, ResourceType, Session

LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
T, G, C, TX = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID


def acl(rt: int, name: str, principal: str, op: Op, perm: Permission = Permission.ALLOW,
        pattern: int = LIT, host: str = "*") -> AclBinding:
    return AclBinding(ResourcePattern(rt, name, pattern), AccessControlEntry(principal, host, op, perm))


def authz(*bindings: AclBinding, supers: tuple[str, ...] = (), everyone: bool = False) -> AclAuthorizer:
    table: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for b in bindings:
        table.setdefault(b.pattern, set()).add(b.entry)
    return AclAuthorizer(supers, everyone, {p: frozenset(e) for p, e in table.items()})


def s(principal: str = "User:alice", host: str = "10.0.0.1") -> Session:
    return Session("SASL_PLAINTEXT", "SASL_PLAINTEXT", principal, host)


def ok(a: AclAuthorizer, op: Op, rt: int, name: str, sess: Session | None = None) -> bool:
    return a.authorize(sess or s(), AclOperation(op), ResourceType(rt), name)


def test_no_acl_denies_unless_allow_everyone() -> None:
    assert not ok(authz(), Op.READ, T, "orders")
    assert ok(authz(everyone=True), Op.READ, T, "orders")
    # an ACL for someone else on the resource: allow.everyone no longer applies
    a = authz(acl(T, "orders", "User:bob", Op.READ), everyone=True)
    assert not ok(a, Op.READ, T, "orders")
    assert ok(a, Op.READ, T, "payments")


def test_super_users_may_do_everything() -> None:
    a = authz(acl(T, "orders", "User:root", Op.ALL, Permission.DENY), supers=("User:root",))
    assert ok(a, Op.WRITE, T, "orders", s("User:root"))
    assert ok(a, Op.CLUSTER_ACTION, C, "kafka-cluster", s("User:root"))


def test_deny_beats_allow() -> None:
    a = authz(acl(T, "orders", "User:alice", Op.READ), acl(T, "orders", "User:*", Op.READ, Permission.DENY))
    assert not ok(a, Op.READ, T, "orders")
    a = authz(acl(T, "*", "User:alice", Op.ALL), acl(T, "ord", "User:alice", Op.WRITE, Permission.DENY, PRE))
    assert ok(a, Op.READ, T, "orders")
    assert not ok(a, Op.WRITE, T, "orders")
    assert ok(a, Op.WRITE, T, "payments")


def test_implied_describe_and_describe_configs() -> None:
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert ok(authz(acl(T, "t", "User:alice", op)), Op.DESCRIBE, T, "t"), op
    assert not ok(authz(acl(T, "t", "User:alice", Op.CREATE)), Op.DESCRIBE, T, "t")
    assert ok(authz(acl(T, "t", "User:alice", Op.ALTER_CONFIGS)), Op.DESCRIBE_CONFIGS, T, "t")
    assert not ok(authz(acl(T, "t", "User:alice", Op.DESCRIBE)), Op.READ, T, "t")
    # a DENY of READ does not deny DESCRIBE given by a WRITE allow (Kafka denies only the operation named)
    a = authz(acl(T, "t", "User:alice", Op.WRITE), acl(T, "t", "User:alice", Op.READ, Permission.DENY))
    assert ok(a, Op.DESCRIBE, T, "t") and not ok(a, Op.READ, T, "t")
    # a DENY of DESCRIBE beats the implied DESCRIBE
    a = authz(acl(T, "t", "User:alice", Op.WRITE), acl(T, "t", "User:alice", Op.DESCRIBE, Permission.DENY))
    assert not ok(a, Op.DESCRIBE, T, "t") and ok(a, Op.WRITE, T, "t")


def test_all_operation_and_wildcards() -> None:
    a = authz(acl(G, "*", "User:*", Op.ALL))
    assert ok(a, Op.READ, G, "any-group", s("User:zed"))
    assert not ok(a, Op.READ, T, "any-topic", s("User:zed"))


def test_prefixed_patterns_match_names_starting_with_them() -> None:
    a = authz(acl(T, "orders.", "User:alice", Op.READ, pattern=PRE))
    assert ok(a, Op.READ, T, "orders.eu")
    assert ok(a, Op.READ, T, "orders.")
    assert not ok(a, Op.READ, T, "orders")
    assert not ok(a, Op.READ, T, "xorders.eu")
    # a literal named like the prefix is not a prefix
    assert not ok(authz(acl(T, "orders.", "User:alice", Op.READ)), Op.READ, T, "orders.eu")


def test_host_rules() -> None:
    a = authz(acl(T, "t", "User:alice", Op.READ, host="10.0.0.1"))
    assert ok(a, Op.READ, T, "t", s(host="10.0.0.1"))
    assert not ok(a, Op.READ, T, "t", s(host="10.0.0.2"))
    a = authz(acl(T, "t", "User:alice", Op.READ), acl(T, "t", "User:alice", Op.READ, Permission.DENY, host="10.0.0.2"))
    assert ok(a, Op.READ, T, "t", s(host="10.0.0.1"))
    assert not ok(a, Op.READ, T, "t", s(host="10.0.0.2"))


def test_authorized_operations_bitfield() -> None:
    a = authz(acl(T, "t", "User:alice", Op.WRITE))
    bits = a.authorized_operations(s(), T, "t")
    assert bits == (1 << Op.WRITE) | (1 << Op.DESCRIBE)
    assert a.authorized_operations(s(), T, "other") == 0
    every = AllowAllAuthorizer().authorized_operations(s(), G, "g")
    assert every == sum(1 << o for o in (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS))


def test_authorize_by_resource_type_as_kip_679() -> None:
    def by_type(a: AclAuthorizer, sess: Session | None = None) -> bool:
        return a.authorize_by_resource_type(sess or s(), AclOperation.WRITE, ResourceType.TOPIC)

    assert not by_type(authz())
    assert by_type(authz(everyone=True))
    assert by_type(authz(acl(T, "orders", "User:alice", Op.WRITE)))
    assert by_type(authz(acl(T, "orders", "User:alice", Op.ALL)))
    assert not by_type(authz(acl(T, "orders", "User:alice", Op.READ)))
    assert not by_type(authz(acl(T, "orders", "User:alice", Op.WRITE),
                             acl(T, "ord", "User:alice", Op.WRITE, Permission.DENY, PRE)))
    assert not by_type(authz(acl(T, "orders", "User:alice", Op.WRITE),
                             acl(T, "*", "User:*", Op.WRITE, Permission.DENY)), )
    assert by_type(authz(acl(T, "orders", "User:alice", Op.WRITE),
                         acl(T, "payments", "User:alice", Op.WRITE, Permission.DENY)))
    assert by_type(authz(supers=("User:alice",)))


def test_binding_validation() -> None:
    good = acl(T, "t", "User:alice", Op.READ)
    assert good.validate() is None
    assert acl(T, "t", "User:alice", Op.ANY).validate()
    assert acl(T, "t", "User:alice", Op.READ, Permission.ANY).validate()
    assert acl(T, "t", "User:alice", Op.READ, pattern=PatternType.MATCH).validate()
    assert acl(T, "", "User:alice", Op.READ).validate()
    assert acl(C, "other", "User:alice", Op.ALTER).validate()
    assert acl(C, "kafka-cluster", "User:alice", Op.ALTER).validate() is None
    assert acl(T, "a/b", "User:alice", Op.READ).validate()
    assert acl(T, "t", "alice", Op.READ).validate()
    assert acl(1, "t", "User:alice", Op.READ).validate()  # ResourceType.ANY


def test_filters_as_kafkas_acl_binding_filter() -> None:
    lit = acl(T, "orders", "User:alice", Op.READ)
    star = acl(T, "*", "User:bob", Op.WRITE, Permission.DENY)
    pre = acl(T, "ord", "User:alice", Op.READ, pattern=PRE)
    grp = acl(G, "orders", "User:alice", Op.READ)
    every = [lit, star, pre, grp]

    def sel(f: AclBindingFilter) -> set[AclBinding]:
        return {b for b in every if f.matches(b)}

    assert sel(AclBindingFilter()) == set(every)
    assert sel(AclBindingFilter(resource_type=T)) == {lit, star, pre}
    assert sel(AclBindingFilter(T, "orders")) == {lit}  # ANY pattern type: exact names only
    assert sel(AclBindingFilter(T, "orders", PatternType.MATCH)) == {lit, star, pre}
    assert sel(AclBindingFilter(T, "ord", PRE)) == {pre}
    assert sel(AclBindingFilter(T, "ord", LIT)) == set()
    assert sel(AclBindingFilter(principal="User:bob")) == {star}
    assert sel(AclBindingFilter(operation=Op.READ, permission=Permission.ALLOW)) == {lit, pre, grp}
    assert sel(AclBindingFilter(host="10.0.0.1")) == set()
    assert AclBindingFilter(resource_type=0).unknown()
    assert AclBindingFilter(pattern_type=0).unknown()
    assert AclBindingFilter(operation=0).unknown()
    assert AclBindingFilter().unknown() is None


def test_names_are_kafkas() -> None:
    assert pascal("TRANSACTIONAL_ID") == "TransactionalId"
    assert parse_operation("IdempotentWrite") == Op.IDEMPOTENT_WRITE
    assert parse_operation("idempotent-write") == Op.IDEMPOTENT_WRITE
    assert parse_operation("ALL") == Op.ALL


names = st.text(alphabet="ab.*", min_size=1, max_size=5)
principals = st.sampled_from(["User:alice", "User:bob", "User:*"])
hosts = st.sampled_from(["*", "10.0.0.1", "10.0.0.2"])
ops = st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALL, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS])
bindings = st.builds(acl, st.just(T), names, principals, ops, st.sampled_from([Permission.ALLOW, Permission.DENY]),
                     st.sampled_from([LIT, PRE]), hosts)


@given(st.lists(bindings, max_size=8), names, st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS]),
       st.sampled_from(["User:alice", "User:bob"]), st.sampled_from(["10.0.0.1", "10.0.0.2"]))
def test_decision_equals_the_definition(acls: list[AclBinding], name: str, op: Op, principal: str,
                                        host: str) -> None:
    """The decision, against a direct reading of Kafka's rules over every binding (no index)."""
    a = authz(*acls)

    def applies(b: AclBinding) -> bool:
        p = b.pattern
        return p.name == name or (p.pattern_type == LIT and p.name == "*") if p.pattern_type == LIT \
            else name.startswith(p.name)

    def matches(b: AclBinding, wanted: set[int]) -> bool:
        e = b.entry
        return e.principal in (principal, "User:*") and e.host in (host, "*") and (e.operation in wanted
                                                                                    or e.operation == Op.ALL)

    relevant = [b for b in acls if applies(b)]
    implied = {Op.DESCRIBE: {Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
               Op.DESCRIBE_CONFIGS: {Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}}.get(op, {op})
    if not relevant:
        expected = False
    elif any(b.entry.permission == Permission.DENY and matches(b, {op}) for b in relevant):
        expected = False
    else:
        expected = any(b.entry.permission == Permission.ALLOW and matches(b, set(implied)) for b in relevant)
    assert a.decide(principal, host, op, T, name) == expected
    # the same after the table is rebuilt pattern by pattern (replace keeps the prefix index in step)
    b = AclAuthorizer()
    for p, entries in a.table.items():
        b.replace({p: entries})
    assert b.decide(principal, host, op, T, name) == expected
