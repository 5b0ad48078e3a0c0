"""A share group's members and records in flight, asked of its coordinator over the Kafka protocol (what
the console's group page shows for a share group; Kafka has no API for records in flight).

The request is a DescribeConfigs of the pseudo broker resource `kaflite.share-group:<group>`, as
kaflite.cluster.group_history's (server/handlers/admin.py answers it with share.share_group_view): one
config entry "group" (state, epochs, members, the broker's clock) and one "partition:<topic>:<p>" per
share partition, each value JSON.

Rules (tests/console/test_share_page.py):
- an error of the resource raises ShareGroupViewError with Kafka's error name (GROUP_ID_NOT_FOUND: no
  share group of that id on the coordinator; INVALID_REQUEST: not a kaflite broker);
- the answer is {"group": {...}, "partitions": [{...}, ...]} with the partitions sorted by (topic,
  partition); a range in flight is [first, last, state, delivery count, holder, lock deadline ms].
"""

from __future__ import annotations

import json
from typing import Any

from kaflite.protocol.errors import ErrorCode

__all__ = ["RESOURCE_PREFIX", "ShareGroupViewError", "fetch_share_group"]

RESOURCE_PREFIX = "kaflite.share-group:"
BROKER_RESOURCE = 4


class ShareGroupViewError(Exception):
    """The coordinator could not say (the message names Kafka's error)."""


def fetch_share_group(host: str, port: int, group_id: str, timeout: float = 3.0) -> dict[str, Any]:
    """The share group's view from its coordinator at host:port. Raises ShareGroupViewError (an error
    answer), OSError / ConnectionError / EOFError (no answer)."""
    from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
    from kio.schema.describe_configs.v4.response import DescribeConfigsResponse
    from kio.static.primitive import i8

    from kaflite.cluster.wire import request

    resp = request(host, port, DescribeConfigsRequest(resources=(DescribeConfigsResource(
        resource_type=i8(BROKER_RESOURCE), resource_name=RESOURCE_PREFIX + group_id, configuration_keys=None),),
        include_synonyms=False, include_documentation=False), DescribeConfigsResponse, timeout)
    result = resp.results[0]
    code = int(result.error_code.value if hasattr(result.error_code, "value") else result.error_code)
    if code:
        error = ErrorCode(code)
        raise ShareGroupViewError(f"{error.name.upper()}" + (f": {result.error_message}" if result.error_message
                                                              else ""))
    entries = {str(c.name): json.loads(c.value) for c in result.configs if c.value}
    partitions = [v for k, v in entries.items() if k.startswith("partition:")]
    partitions.sort(key=lambda p: (p["topic"], p["partition"]))
    return {"group": entries.get("group", {}), "partitions": partitions}
