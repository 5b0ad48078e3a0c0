"""`kaflite get-offsets`: kafka-get-offsets.sh (GetOffsetShell) through confluent-kafka's ListOffsets.

Prints `topic:partition:offset` per partition, in the order of Kafka's tool (by the string
`topic-partition`). `--time` takes Kafka's values: -1 / latest, -2 / earliest, -3 / max-timestamp, a
timestamp in ms (the first offset whose timestamp is at or after it; a partition without one is left out,
as Kafka), and -4 / earliest-local (the same as earliest: kaflite has no tiered storage). `--topic` is a
regular expression matched against the whole name; `--partitions 0,2` narrows it; `--topic-partitions`
takes Kafka's `topic-regex:P`, `:P-Q` (Q exclusive), `:P-`, `:-Q` rules, comma separated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from kaflite.cli.common import (
    DEFAULT_BOOTSTRAP,
    EXIT_USAGE,
    Bootstrap,
    admin_client,
    fail,
    handle_errors,
    print_error,
)

__all__ = ["PartitionRule", "offset_spec", "parse_rules", "register"]

_NAMED_TIMES = {"latest": -1, "earliest": -2, "max-timestamp": -3, "earliest-local": -4, "latest-tiered": -5}
# Kafka's TOPIC_PARTITION_PATTERN: topic regex, then optionally :P, :P-Q, :P-, :-Q
_RULE = re.compile(r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?")


@dataclass(frozen=True)
class PartitionRule:
    topic: re.Pattern[str]
    low: int = 0  # inclusive
    high: int | None = None  # exclusive; None = no bound
    only: frozenset[int] | None = None

    def topic_allowed(self, topic: str) -> bool:
        return self.topic.fullmatch(topic) is not None

    def allowed(self, topic: str, partition: int) -> bool:
        if not self.topic_allowed(topic):
            return False
        if self.only is not None:
            return not self.only or partition in self.only
        return self.low <= partition and (self.high is None or partition < self.high)


def _regex(text: str | None, option: str) -> re.Pattern[str]:
    try:
        return re.compile(text or ".*")
    except re.error as err:
        fail(f"{option}: not a regular expression ({err}): {text!r}", EXIT_USAGE)


def parse_rules(topic: str | None, partitions: str | None, topic_partitions: str | None) -> list[PartitionRule]:
    """The partition filter of kafka-get-offsets.sh's options."""
    if topic_partitions is not None:
        if topic is not None or partitions is not None:
            fail("--topic-partitions cannot be used with --topic or --partitions", EXIT_USAGE)
        rules = []
        for spec in topic_partitions.split(","):
            m = _RULE.fullmatch(spec)
            if m is None:
                fail(f"--topic-partitions: invalid rule {spec!r} (expected topic-regex[:P|:P-Q|:P-|:-Q])", EXIT_USAGE)
            name, one, low, high = m.groups()
            pattern = _regex(name or None, "--topic-partitions")
            if one:
                rules.append(PartitionRule(pattern, only=frozenset({int(one)})))
            else:
                rules.append(PartitionRule(pattern, int(low) if low else 0, int(high) if high else None))
        return rules
    only: frozenset[int] = frozenset()
    if partitions:
        try:
            only = frozenset(int(p) for p in partitions.split(","))
        except ValueError:
            fail("--partitions expects a comma separated list of numeric partition ids, but received: "
                 f"{partitions}", EXIT_USAGE)
    return [PartitionRule(_regex(topic, "--topic"), only=only)]


def offset_spec(time: str) -> int:
    """--time as ListOffsets' timestamp: -1 latest, -2 earliest, -3 max timestamp, else ms since the epoch."""
    value = _NAMED_TIMES.get(time)
    if value is None:
        try:
            value = int(time)
        except ValueError:
            fail(f"--time: malformed time {time!r}; use -1 or latest, -2 or earliest, -3 or max-timestamp, "
                 "-4 or earliest-local, or a timestamp in ms", EXIT_USAGE)
    if value == -4:
        return -2  # no tiered storage here: the local log start is the log start
    if value == -5:
        fail("--time -5 / latest-tiered: kaflite has no tiered storage; use -1 (latest) or -2 (earliest)",
             EXIT_USAGE)
    if value < -5:
        fail(f"--time: expected a timestamp in ms or -1..-4, got {time}", EXIT_USAGE)
    return value


@handle_errors
def get_offsets(
    topic: Annotated[
        str | None, typer.Option("--topic", "-t", help="Topics to query: a regular expression (default: all).")
    ] = None,
    partitions: Annotated[
        str | None, typer.Option("--partitions", help="Comma separated partition ids (default: all).")
    ] = None,
    topic_partitions: Annotated[
        str | None,
        typer.Option("--topic-partitions", metavar="RULES",
                     help="topic1:1,topic2:0-3,topic3,topic4:5-,topic5:-3 (topic regex, partition or range; "
                     "not with --topic / --partitions)."),
    ] = None,
    time: Annotated[
        str,
        typer.Option("--time", help="-1 or latest, -2 or earliest, -3 or max-timestamp, or a timestamp in ms: "
                     "the first offset at or after it."),
    ] = "latest",
    exclude_internal_topics: Annotated[
        bool, typer.Option("--exclude-internal-topics", help="Leave out internal topics (__consumer_offsets, ...).")
    ] = False,
    bootstrap_server: Bootstrap = DEFAULT_BOOTSTRAP,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1, help="Seconds to wait for the broker.")] = 15.0,
) -> None:
    """Print topic:partition:offset for each matching partition (like kafka-get-offsets.sh)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    rules = parse_rules(topic, partitions, topic_partitions)
    stamp = offset_spec(time)
    admin = admin_client(bootstrap_server)
    try:
        metadata = admin.list_topics(timeout=timeout)
    except Exception as err:  # noqa: BLE001 - one line, like every command
        fail(f"listing topics: {err}")
    wanted: list[tuple[str, int]] = []
    for name, md in metadata.topics.items():
        if exclude_internal_topics and name.startswith("__"):
            continue
        if md.error is not None or not any(r.topic_allowed(name) for r in rules):
            continue
        wanted += [(name, p) for p in md.partitions if any(r.allowed(name, p) for r in rules)]
    if not wanted:
        fail("Could not match any topic-partitions with the specified filters")
    spec: Any = {-1: OffsetSpec.latest(), -2: OffsetSpec.earliest(), -3: OffsetSpec.max_timestamp()}.get(
        stamp) or OffsetSpec.for_timestamp(stamp)
    futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in wanted}, request_timeout=timeout)
    results: dict[tuple[str, int], int] = {}
    for tp, future in futures.items():
        try:
            info = future.result(timeout=timeout + 1)
        except Exception as err:  # noqa: BLE001 - Kafka's tool skips the partition and says why
            print_error(f"Skip getting offsets for topic-partition {tp.topic}-{tp.partition} due to error: {err}")
            continue
        if info.offset >= 0:  # UNKNOWN_OFFSET (-1): no record at or after the timestamp
            results[(tp.topic, tp.partition)] = info.offset
    for (name, p), offset in sorted(results.items(), key=lambda kv: f"{kv[0][0]}-{kv[0][1]}"):
        typer.echo(f"{name}:{p}:{offset}")


def register(app: typer.Typer) -> None:
    app.command("get-offsets")(get_offsets)
