"""ApiVersions (key 18): the version ranges derived from the handler registry.

Rules: v0-4 are served; an unsupported version is answered by the dispatcher in v0 with
UNSUPPORTED_VERSION and the full list (KIP-511); default-valued tagged fields (supported/finalized
features, zk_migration_ready) are omitted, which librdkafka 2.0 (Debian's kcat) needs to parse it.
"""

from __future__ import annotations

import datetime
from typing import Any

from kaflite.protocol.errors import ErrorCode
from kaflite.server.context import RequestContext, build, response_module
from kaflite.server.handlers import ApiTable, Registry

API_KEY = 18
CONSUMER_PROTOCOL_APIS = frozenset({68, 69})  # ConsumerGroupHeartbeat, ConsumerGroupDescribe
# ShareGroupHeartbeat/Describe, ShareFetch, ShareAcknowledge, the share coordinator's Initialize / Read / Write /
# Delete ShareGroupState and ReadShareGroupStateSummary, Describe / Alter / DeleteShareGroupOffsets
SHARE_GROUP_APIS = frozenset({76, 77, 78, 79, 83, 84, 85, 86, 87, 90, 91, 92})
_ZERO = datetime.timedelta(0)


def api_versions_response(registry: Registry, version: int, error: ErrorCode = ErrorCode.none,
                          hidden: frozenset[int] = frozenset()) -> Any:
    mod = response_module(API_KEY, version)
    keys = tuple(
        build(mod.ApiVersion, api_key=k, min_version=lo, max_version=hi) for k, lo, hi in registry.ranges()
        if k not in hidden
    )
    return build(mod.ApiVersionsResponse, error_code=error, api_keys=keys, throttle_time=_ZERO)


async def handle_api_versions(ctx: RequestContext, request: Any) -> Any:
    # KIP-848's APIs are advertised only when group.coordinator.rebalance.protocols lists consumer (Kafka)
    hidden = frozenset() if "consumer" in ctx.broker.setting("group.coordinator.rebalance.protocols") \
        else CONSUMER_PROTOCOL_APIS
    # KIP-932's APIs only when share groups are on (Kafka: the share.version feature; here group.share.enable)
    if not ctx.broker.setting("group.share.enable"):
        hidden |= SHARE_GROUP_APIS
    return api_versions_response(ctx.broker.registry, ctx.api_version, hidden=hidden)


APIS: ApiTable = {API_KEY: (0, 4, handle_api_versions)}
