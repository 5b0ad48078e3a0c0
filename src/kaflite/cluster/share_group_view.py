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

__all__ = ["RESOURCE_PREFIX", "ShareGroupViewError", "fetch_share_group"]

RESOURCE_PREFIX = "kaflite.share-group:"


class ShareGroupViewError(Exception):
    """The coordinator could not say (the message names Kafka's error)."""


def fetch_share_group(host: str, port: int, group_id: str, timeout: float = 3.0) -> dict[str, Any]:
    """The share group's view from its coordinator at host:port. Raises ShareGroupViewError (an error
    answer), OSError / ConnectionError / EOFError (no answer)."""
    from kaflite.cluster.group_history import describe_pseudo_resource

    error, message, configs = describe_pseudo_resource(host, port, RESOURCE_PREFIX + group_id, timeout)
    if error is not None:
        raise ShareGroupViewError(f"{error.name.upper()}" + (f": {message}" if message else ""))
    entries = {name: json.loads(value) for name, value in configs.items()}
    partitions = [v for k, v in entries.items() if k.startswith("partition:")]
    partitions.sort(key=lambda p: (p["topic"], p["partition"]))
    return {"group": entries.get("group", {}), "partitions": partitions}
