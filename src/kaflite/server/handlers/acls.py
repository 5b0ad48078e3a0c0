"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31): Kafka's AclApis.

Rules (tests/acl/test_acl_apis.py):
- without an ACL authorizer (`authorizer.class.name` unset) every answer is SECURITY_DISABLED;
- DescribeAcls needs DESCRIBE on the cluster, CreateAcls and DeleteAcls ALTER: refused, the whole answer
  (every creation, every filter) is CLUSTER_AUTHORIZATION_FAILED;
- a creation that is not a storable binding (UNKNOWN or ANY codes, MATCH / ANY pattern type, an empty name,
  a CLUSTER not named kafka-cluster, a name with `/`, a principal without `Type:`) is INVALID_REQUEST, the
  others are stored; a filter with an UNKNOWN code is INVALID_REQUEST (Kafka refuses the request);
- DescribeAcls groups the matching bindings by resource pattern; DeleteAcls answers, per filter, every
  binding it deleted (one matched by several filters under the first).
"""

from __future__ import annotations

import datetime
from typing import Any

from kaflite.protocol.errors import ErrorCode
from kaflite.server.acl import rules
from kaflite.server.acl.model import AccessControlEntry, AclBinding, AclBindingFilter, ResourcePattern
from kaflite.server.context import RequestContext, build
from kaflite.server.handlers import ApiTable

_ZERO = datetime.timedelta(0)
_DISABLED = "No Authorizer is configured on the broker"


def _filter(f: Any, request_level: bool) -> AclBindingFilter:
    return AclBindingFilter(int(f.resource_type_filter), f.resource_name_filter, int(f.pattern_type_filter),
                            f.principal_filter, f.host_filter, int(f.operation), int(f.permission_type))


async def handle_describe_acls(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response

    def answer(code: ErrorCode, message: str | None, resources: tuple[Any, ...] = ()) -> Any:
        return build(R.DescribeAclsResponse, throttle_time=_ZERO, error_code=code, error_message=message,
                     resources=resources)

    if not ctx.allowed(rules.DESCRIBE_ACLS):
        return answer(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
    manager = ctx.broker.acls
    if manager is None:
        return answer(ErrorCode.security_disabled, _DISABLED)
    flt = _filter(request, True)
    why = flt.unknown()
    if why is not None:
        return answer(ErrorCode.invalid_request, why)
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in manager.authorizer.acls(flt):
        grouped.setdefault(b.pattern, []).append(b.entry)
    resources = tuple(
        build(R.DescribeAclsResource, resource_type=p.resource_type, resource_name=p.name,
              pattern_type=p.pattern_type, acls=tuple(
                  build(R.AclDescription, principal=e.principal, host=e.host, operation=e.operation,
                        permission_type=e.permission) for e in entries))
        for p, entries in grouped.items())
    return answer(ErrorCode.none, None, resources)


async def handle_create_acls(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response

    def result(code: ErrorCode, message: str | None) -> Any:
        return build(R.AclCreationResult, error_code=code, error_message=message)

    def answer(results: list[Any]) -> Any:
        return build(R.CreateAclsResponse, throttle_time=_ZERO, results=tuple(results))

    if not ctx.allowed(rules.CREATE_ACLS):
        return answer([result(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
                       for _ in request.creations])
    manager = ctx.broker.acls
    if manager is None:
        return answer([result(ErrorCode.security_disabled, "No Authorizer is configured.")
                       for _ in request.creations])
    bindings = [AclBinding(ResourcePattern(int(c.resource_type), c.resource_name, int(c.resource_pattern_type)),
                           AccessControlEntry(c.principal, c.host, int(c.operation), int(c.permission_type)))
                for c in request.creations]
    invalid = [b.validate() for b in bindings]
    valid = [b for b, why in zip(bindings, invalid, strict=True) if why is None]
    stored = iter(await manager.create(valid)) if valid else iter(())
    results = []
    for why in invalid:
        if why is not None:
            results.append(result(ErrorCode.invalid_request, why))
            continue
        failure = next(stored)
        results.append(result(ErrorCode.none, None) if failure is None
                       else result(ErrorCode.unknown_server_error, failure))
    return answer(results)


async def handle_delete_acls(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response

    def answer(results: list[Any]) -> Any:
        return build(R.DeleteAclsResponse, throttle_time=_ZERO, filter_results=tuple(results))

    def filter_result(code: ErrorCode, message: str | None, matching: tuple[Any, ...] = ()) -> Any:
        return build(R.DeleteAclsFilterResult, error_code=code, error_message=message, matching_acls=matching)

    if not ctx.allowed(rules.DELETE_ACLS):
        return answer([filter_result(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
                       for _ in request.filters])
    manager = ctx.broker.acls
    if manager is None:
        return answer([filter_result(ErrorCode.security_disabled, "No Authorizer is configured.")
                       for _ in request.filters])
    filters = [_filter(f, False) for f in request.filters]
    unknown = [f.unknown() for f in filters]
    usable = [f for f, why in zip(filters, unknown, strict=True) if why is None]
    deleted = iter(await manager.delete(usable)) if usable else iter(())
    results = []
    for why in unknown:
        if why is not None:
            results.append(filter_result(ErrorCode.invalid_request, why))
            continue
        matching = tuple(
            build(R.DeleteAclsMatchingAcl, error_code=ErrorCode.none if err is None else ErrorCode.unknown_server_error,
                  error_message=err, resource_type=b.pattern.resource_type, resource_name=b.pattern.name,
                  pattern_type=b.pattern.pattern_type, principal=b.entry.principal, host=b.entry.host,
                  operation=b.entry.operation, permission_type=b.entry.permission)
            for b, err in next(deleted))
        results.append(filter_result(ErrorCode.none, None, matching))
    return answer(results)


APIS: ApiTable = {
    29: (1, 3, handle_describe_acls),
    30: (1, 3, handle_create_acls),
    31: (1, 3, handle_delete_acls),
}
