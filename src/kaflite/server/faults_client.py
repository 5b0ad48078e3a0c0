"""The client half of the group faults (`faults_admin.py`): find a group's coordinator, then send it the
IncrementalAlterConfigs of the pseudo resource `kaflite.faults` that expires a member or forces a
rebalance. What `EmbeddedCluster.expire_member` / `force_rebalance` and `kaflite faults expire-member` /
`force-rebalance` send. Blocking (a plain socket per request): never call it on an event loop.

Rules (tests/cluster/test_embedded_cluster.py, tests/server/test_faults.py):
- the coordinator is asked of each bootstrap address in turn until one answers FindCoordinator;
- COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS (a coordinator moving or
  loading) are asked again, every 0.2 s, until `timeout`; any other error raises KafkaError at once.
"""

from __future__ import annotations

import json
import time

from kaflite.protocol.errors import ErrorCode, KafkaError

__all__ = ["group_fault"]

_RETRIED = (ErrorCode.coordinator_not_available, ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress)
RESOURCE = "kaflite.faults"


def _addresses(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for part in bootstrap.split(","):
        host, _, port = part.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"bootstrap: expected HOST:PORT[,HOST:PORT...], got {bootstrap!r}")
        out.append((host, int(port)))
    return out


def _coordinator(addresses: list[tuple[str, int]], group: str, timeout: float) -> tuple[str, int]:
    from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
    from kio.schema.find_coordinator.v4.response import FindCoordinatorResponse
    from kio.static.primitive import i8

    from kaflite.cluster.wire import request

    last: Exception | None = None
    for host, port in addresses:
        try:
            resp = request(host, port, FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(group,)),
                           FindCoordinatorResponse, timeout)
        except OSError as err:
            last = err
            continue
        c = resp.coordinators[0]
        code = ErrorCode(int(c.error_code))
        if code is not ErrorCode.none:
            raise KafkaError(code, c.error_message or f"FindCoordinator of group {group!r}")
        return str(c.host), int(c.port)
    raise OSError(f"no bootstrap address answered: {last}")


def _alter(host: str, port: int, name: str, value: str, timeout: float) -> tuple[ErrorCode, str | None]:
    from kio.schema.incremental_alter_configs.v1.request import (
        AlterableConfig,
        AlterConfigsResource,
        IncrementalAlterConfigsRequest,
    )
    from kio.schema.incremental_alter_configs.v1.response import IncrementalAlterConfigsResponse
    from kio.static.primitive import i8

    from kaflite.cluster.wire import request

    resp = request(host, port, IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
        resource_type=i8(4), resource_name=RESOURCE, configs=(
            AlterableConfig(name=name, config_operation=i8(0), value=value),)),), validate_only=False),
        IncrementalAlterConfigsResponse, timeout)
    r = resp.responses[0]
    return ErrorCode(int(r.error_code)), r.error_message


def group_fault(bootstrap: str, group: str, member: str | None = None, timeout: float = 30.0) -> None:
    """Expire `member` of `group` (or, with no member, force the group to rebalance) on its coordinator;
    raises KafkaError with the broker's code (INVALID_REQUEST / INVALID_CONFIG: a broker without
    kaflite.faults.enable), OSError when no broker answers."""
    name, value = (("force_rebalance", group) if member is None else
                   ("expire_member", json.dumps({"group": group, "member": member})))
    addresses = _addresses(bootstrap)
    deadline = time.monotonic() + timeout
    while True:
        left = max(0.5, deadline - time.monotonic())
        try:
            host, port = _coordinator(addresses, group, min(left, 10.0))
            code, message = _alter(host, port, name, value, min(left, 10.0))
        except KafkaError as err:
            code, message = err.code, err.message
        if code is ErrorCode.none:
            return
        if code not in _RETRIED or time.monotonic() >= deadline:
            raise KafkaError(code, message or f"{name} of group {group!r}")
        time.sleep(0.2)


