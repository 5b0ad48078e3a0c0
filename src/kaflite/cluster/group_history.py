"""A group's rebalance timeline, asked of its coordinator over the Kafka protocol (what `kaflite groups
describe --history` and the console's group page use), and its rows as both show them.

The request is a DescribeConfigs of the pseudo broker resource `kaflite.group-history:<group>`, sent to the
group's coordinator (server/handlers/admin.py answers it; docs/consumer-groups.md says why this form):
one config entry per event, oldest first, name = its sequence number, value = the event as JSON.

Rules (tests/cli/test_groups_history.py, tests/console/test_pages.py):
- an error of the resource raises GroupHistoryError with Kafka's error name; a broker that is not kaflite
  answers INVALID_REQUEST for such a broker "id" (an unexpected broker id), which is reported as "no
  rebalance history on this broker";
- times are shown in UTC with milliseconds; a rebalance's duration in seconds; a moved partition as
  `topic-p: from -> to` ("-" for no owner), at most `max_moved` of them then "... (+n more)".
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Mapping
from typing import Any

from kaflite.protocol.errors import ErrorCode

__all__ = ["GroupHistoryError", "RESOURCE_PREFIX", "describe_pseudo_resource", "fetch_group_history",
           "history_rows", "moved_text"]

RESOURCE_PREFIX = "kaflite.group-history:"
BROKER_RESOURCE = 4
HEADER = ("TIME (UTC)", "EVENT", "CAUSE", "GENERATION", "MEMBER", "DURATION", "MOVED", "DETAIL")


class GroupHistoryError(Exception):
    """The coordinator could not say (the message names Kafka's error)."""


def describe_pseudo_resource(host: str, port: int, name: str, timeout: float = 3.0
                             ) -> tuple[ErrorCode | None, str | None, dict[str, str]]:
    """DescribeConfigs of the pseudo broker resource `name` (`kaflite.group-history:<group>`,
    `kaflite.share-group:<group>`: server/handlers/admin.py answers them) at host:port: (the error answered
    or None, its message, {config name: value} of the entries with a value). Raises OSError /
    ConnectionError / EOFError when the broker does not answer."""
    from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
    from kio.schema.describe_configs.v4.response import DescribeConfigsResponse
    from kio.static.primitive import i8

    from kaflite.cluster.wire import request

    resp = request(host, port, DescribeConfigsRequest(resources=(DescribeConfigsResource(
        resource_type=i8(BROKER_RESOURCE), resource_name=name, configuration_keys=None),),
        include_synonyms=False, include_documentation=False), DescribeConfigsResponse, timeout)
    result = resp.results[0]
    code = int(result.error_code.value if hasattr(result.error_code, "value") else result.error_code)
    return (ErrorCode(code) if code else None, result.error_message,
            {str(c.name): str(c.value) for c in result.configs if c.value})


def fetch_group_history(host: str, port: int, group_id: str, timeout: float = 3.0) -> list[dict[str, Any]]:
    """The events of `group_id`'s timeline, oldest first, from its coordinator at host:port. Raises
    GroupHistoryError (an error answer), OSError / ConnectionError / EOFError (no answer)."""
    error, message, configs = describe_pseudo_resource(host, port, RESOURCE_PREFIX + group_id, timeout)
    if error is not None:
        if error is ErrorCode.invalid_request:
            raise GroupHistoryError(f"no rebalance history on {host}:{port} (not a kaflite broker?): "
                                    f"{message or error.name.upper()}")
        raise GroupHistoryError(f"{error.name.upper()}" + (f": {message}" if message else ""))
    events = [json.loads(v) for v in configs.values()]
    return sorted(events, key=lambda e: int(e["seq"]))


def _time(ms: int) -> str:
    t = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}"


def moved_text(moved: Iterable[Iterable[Any]], total: int, max_moved: int = 10) -> str:
    items = [f"{t}-{p}: {a or '-'} -> {b or '-'}" for t, p, a, b in moved]
    shown = items[:max_moved]
    more = total - len(shown)
    return ", ".join(shown) + (f" ... (+{more} more)" if more > 0 else "")


def history_rows(events: Iterable[Mapping[str, Any]], max_moved: int = 10) -> list[tuple[str, ...]]:
    """One row of HEADER's columns per event."""
    rows: list[tuple[str, ...]] = []
    for e in events:
        duration = e.get("duration_ms")
        moved = e.get("moved") or []
        total = int(e.get("moved_total") or 0)
        rows.append((_time(int(e["time_ms"])), str(e["kind"]), str(e["cause"]), str(e["generation"]),
                     str(e.get("member_id") or "-"), "-" if duration is None else f"{int(duration) / 1000:.3f}s",
                     (str(total) + (f" ({moved_text(moved, total, max_moved)})" if moved else ""))
                     if e["kind"] == "rebalance-completed" else "-",
                     str(e.get("detail") or "-")))
    return rows
