"""Source and sink options, parsed and validated the way Spark's Kafka connector does (pure, no I/O).

Option names are Spark's (`KafkaSourceProvider`), matched case-insensitively. Messages for refused
options follow Spark's wording so that a pipeline moved between `format("kafka")` and
`format("kaflite")` fails the same way. Differences from Spark are listed in docs/spark.md.

Offset specs:
- `startingOffsets` / `endingOffsets`: "earliest", "latest" or JSON `{"topic": {"0": 23, "1": -2}}`
  where -2 means earliest and -1 latest.
- `startingOffsetsByTimestamp` / `endingOffsetsByTimestamp`: JSON `{"topic": {"0": 1700000000000}}`.
- `startingTimestamp` / `endingTimestamp`: one timestamp (ms) for every partition.
Precedence (as in Spark): the global timestamp, then the per-partition timestamps, then the offsets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

EARLIEST = -2  # Kafka's ListOffsets sentinel, and Spark's JSON value for "earliest"
LATEST = -1  # likewise for "latest"

SUBSCRIBE = "subscribe"
SUBSCRIBE_PATTERN = "subscribepattern"
ASSIGN = "assign"
STRATEGY_KEYS = (SUBSCRIBE, SUBSCRIBE_PATTERN, ASSIGN)

# Consumer settings Spark refuses: the connector owns deserialisation, offsets and commits.
_REJECTED_SOURCE_KAFKA_KEYS = {
    "auto.offset.reset": (
        "Kafka option 'auto.offset.reset' is not supported. Instead set the source option "
        "'startingoffsets' to 'earliest' or 'latest' to specify where to start. Structured Streaming "
        "manages which offsets are consumed internally, rather than relying on the kafkaConsumer to do it."
    ),
    "key.deserializer": (
        "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte arrays. "
        "Use DataFrame operations to explicitly deserialize the keys."
    ),
    "value.deserializer": (
        "Kafka option 'value.deserializer' is not supported as values are deserialized as byte arrays. "
        "Use DataFrame operations to explicitly deserialize the values."
    ),
    "enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported",
    "interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
}
_REJECTED_SINK_KAFKA_KEYS = {
    "key.serializer": (
        "Kafka option 'key.serializer' is not supported as keys are serialized as byte arrays. "
        "Use DataFrame operations to explicitly serialize the keys into either strings or byte arrays."
    ),
    "value.serializer": (
        "Kafka option 'value.serializer' is not supported as values are serialized as byte arrays. "
        "Use DataFrame operations to explicitly serialize the values into either strings or byte arrays."
    ),
}

# Java-client settings with no librdkafka equivalent: accepted (so Spark pipelines keep working) and
# dropped, because librdkafka refuses unknown properties.
_JAVA_ONLY_CLIENT_KEYS = {
    "key.deserializer",
    "value.deserializer",
    "key.serializer",
    "value.serializer",
    "default.api.timeout.ms",
    "max.poll.records",
}


class OptionError(ValueError):
    """An option is missing, unknown in value, or not allowed; the message names it (Spark's
    IllegalArgumentException)."""


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends.

    kind: "earliest" | "latest" | "offsets" (per partition, may hold -2/-1) | "timestamps" (per
    partition) | "timestamp" (one for all partitions).
    """

    kind: str
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    timestamp: int | None = None
    # startingOffsetsByTimestampStrategy: "error" (no offset at or after the timestamp is an error)
    # or "latest" (fall back to the latest offset)
    no_match: str = "error"


@dataclass(frozen=True)
class ReaderOptions:
    bootstrap_servers: str
    strategy: str  # one of STRATEGY_KEYS
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: tuple[tuple[str, int], ...] = ()
    starting: OffsetSpec = OffsetSpec("latest")
    ending: OffsetSpec = OffsetSpec("latest")
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = 120_000
    client_config: dict[str, str] = field(default_factory=dict)
    # commitOffsetsToGroup=true: the consumer group (`kafka.group.id`) a streaming query commits its
    # processed offsets to, for lag monitoring only (kaflite.spark.group_commit); None: no commits
    commit_group: str | None = None

    def matches(self, topic: str) -> bool:
        """Whether `topic` belongs to this source's subscription (assign is checked per partition)."""
        if self.strategy == SUBSCRIBE:
            return topic in self.topics
        if self.strategy == SUBSCRIBE_PATTERN:
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assigned)


@dataclass(frozen=True)
class WriterOptions:
    bootstrap_servers: str
    topic: str | None
    client_config: dict[str, str] = field(default_factory=dict)
    batch_id_header: str | None = None
    # exactlyOnce=true: each task of a streaming micro-batch writes in one Kafka transaction with the
    # transactional id `<transactionalIdPrefix>-<task partition>` and records the batch id inside that
    # transaction as the offset the group of the same name commits for partition 0 of the progress topic
    # (`progressTopic`, by default the `topic` option: a topic that exists, as Kafka checks)
    exactly_once: bool = False
    transactional_id_prefix: str | None = None
    progress_topic: str | None = None


def lower(options: Mapping[str, Any]) -> dict[str, str]:
    """Spark hands options through a case-insensitive map; normalise keys to lower case."""
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _bool(opts: dict[str, str], key: str, default: bool, name: str) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in ("true", "false"):
        return value == "true"
    raise OptionError(f"option '{name}' must be 'true' or 'false', got '{raw}'")


def _int(opts: dict[str, str], key: str, name: str, positive: bool = True) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(f"option '{name}' must be an integer, got '{raw}'") from None
    if positive and value <= 0:
        raise OptionError(f"{name} must be positive")
    return value


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(raw: str, name: str) -> int:
    """Spark time strings for maxTriggerDelay: "15m", "30s", "500ms", "2h"; a bare number is ms."""
    m = _DURATION.match(raw)
    if m is None:
        raise OptionError(f"option '{name}' must be a duration such as '500ms', '30s', '15m', got '{raw}'")
    return int(m.group(1)) * _UNIT_MS[(m.group(2) or "ms").lower()]


_DISPLAY = {
    "startingoffsets": "startingOffsets",
    "endingoffsets": "endingOffsets",
    "startingoffsetsbytimestamp": "startingOffsetsByTimestamp",
    "endingoffsetsbytimestamp": "endingOffsetsByTimestamp",
}


def _json_object(raw: str, key: str) -> dict[str, Any]:
    name = _DISPLAY.get(key, key)
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise OptionError(
            f'option \'{name}\' expects JSON such as {{"topicA":{{"0":23,"1":-1}}}}, got \'{raw}\''
        )
    return value


def parse_partition_map(raw: str, name: str) -> dict[tuple[str, int], int]:
    """`{"topic": {"0": 23}}` -> {("topic", 0): 23} (Spark's JsonUtils.partitionOffsets)."""
    out: dict[tuple[str, int], int] = {}
    for topic, parts in _json_object(raw, name).items():
        if not isinstance(parts, dict):
            raise OptionError(
                f"option '{_DISPLAY.get(name, name)}': topic '{topic}' must map partition numbers to values"
            )
        for p, v in parts.items():
            try:
                out[(topic, int(p))] = int(v)
            except (TypeError, ValueError):
                raise OptionError(
                    f"option '{_DISPLAY.get(name, name)}': '{topic}' partition '{p}' value '{v}' is not an integer"
                ) from None
    return out


def parse_assign(raw: str) -> tuple[tuple[str, int], ...]:
    """`{"topicA":[0,1],"topicB":[2,4]}` (Spark's JsonUtils.partitions)."""
    if not raw.strip().startswith("{"):
        raise OptionError(f"No topicpartitions to assign as specified value for option 'assign' is '{raw}'")
    out: list[tuple[str, int]] = []
    for topic, parts in _json_object(raw, "assign").items():
        if not isinstance(parts, list) or not all(isinstance(p, int) for p in parts):
            raise OptionError(f"option 'assign': topic '{topic}' must map to a list of partition numbers")
        out.extend((topic, p) for p in parts)
    return tuple(out)


def offset_spec(
    opts: dict[str, str], global_ts_key: str, by_ts_key: str, offsets_key: str, default: str
) -> OffsetSpec:
    """Spark's getKafkaOffsetRangeLimit: global timestamp, then per-partition timestamps, then offsets."""
    no_match = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if no_match not in ("error", "latest"):
        raise OptionError("option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest'")
    if global_ts_key in opts:
        raw = opts[global_ts_key].strip()
        try:
            return OffsetSpec("timestamp", timestamp=int(raw), no_match=no_match)
        except ValueError:
            raise OptionError(f"Expected a single long value, got {raw}") from None
    if by_ts_key in opts:
        return OffsetSpec(
            "timestamps", offsets=parse_partition_map(opts[by_ts_key], by_ts_key), no_match=no_match
        )
    given = opts.get(offsets_key)
    if given is None:
        return OffsetSpec(default)
    raw = given.strip()
    if raw.lower() in ("earliest", "latest"):
        return OffsetSpec(raw.lower())
    return OffsetSpec("offsets", offsets=parse_partition_map(raw, offsets_key))


def client_config(opts: dict[str, str], rejected: dict[str, str]) -> dict[str, str]:
    """The `kafka.*` options, prefix stripped, for the Kafka client (refusing what Spark refuses)."""
    conf: dict[str, str] = {}
    for key, value in opts.items():
        if not key.startswith("kafka."):
            continue
        name = key[len("kafka.") :]
        if name in rejected:
            raise OptionError(rejected[name])
        if name in _JAVA_ONLY_CLIENT_KEYS:
            continue
        conf[name] = value
    if "bootstrap.servers" not in conf:
        raise OptionError("Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer")
    return conf


def parse_reader_options(options: Mapping[str, Any], streaming: bool) -> ReaderOptions:
    """Validate source options as Spark's validateStreamOptions / validateBatchOptions do."""
    opts = lower(options)
    strategies = [k for k in STRATEGY_KEYS if k in opts]
    if not strategies:
        raise OptionError(
            "One of the following options must be specified for Kafka source: subscribe, subscribepattern, "
            "assign. See the docs for more details."
        )
    if len(strategies) > 1:
        raise OptionError(
            "Only one of the following options can be specified for Kafka source: subscribe, "
            "subscribepattern, assign. See the docs for more details."
        )
    strategy = strategies[0]
    topics: tuple[str, ...] = ()
    pattern = ""
    assigned: tuple[tuple[str, int], ...] = ()
    if strategy == SUBSCRIBE:
        topics = tuple(t.strip() for t in opts[SUBSCRIBE].split(",") if t.strip())
        if not topics:
            raise OptionError(
                f"No topics to subscribe to as specified value for option 'subscribe' is '{opts[SUBSCRIBE]}'"
            )
    elif strategy == SUBSCRIBE_PATTERN:
        pattern = opts[SUBSCRIBE_PATTERN].strip()
        if not pattern:
            raise OptionError(
                "Pattern to subscribe is empty as specified value for option 'subscribePattern' is "
                f"'{opts[SUBSCRIBE_PATTERN]}'"
            )
        try:
            re.compile(pattern)
        except re.error as e:
            raise OptionError(f"option 'subscribePattern' is not a valid regular expression: {e}") from None
    else:
        assigned = parse_assign(opts[ASSIGN])

    min_partitions = _int(opts, "minpartitions", "minPartitions")
    max_records = _int(opts, "maxrecordsperpartition", "maxRecordsPerPartition")
    conf = client_config(opts, _REJECTED_SOURCE_KAFKA_KEYS)
    max_per_trigger = _int(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger")
    min_per_trigger = _int(opts, "minoffsetspertrigger", "minOffsetsPerTrigger")
    if max_per_trigger is not None and min_per_trigger is not None and min_per_trigger > max_per_trigger:
        raise OptionError(
            f"The value of minOffsetPerTrigger({min_per_trigger}) is higher than the "
            f"maxOffsetsPerTrigger({max_per_trigger})."
        )
    delay = parse_duration_ms(opts.get("maxtriggerdelay", "15m"), "maxTriggerDelay")

    starting = offset_spec(
        opts,
        "startingtimestamp",
        "startingoffsetsbytimestamp",
        "startingoffsets",
        "latest" if streaming else "earliest",
    )
    if streaming:
        if "endingoffsets" in opts:
            raise OptionError("ending offset not valid in streaming queries")
        if "endingoffsetsbytimestamp" in opts or "endingtimestamp" in opts:
            raise OptionError("ending timestamp not valid in streaming queries")
    ending = offset_spec(opts, "endingtimestamp", "endingoffsetsbytimestamp", "endingoffsets", "latest")
    commit_group = _commit_group(opts, conf, streaming)
    if not streaming:
        if starting.kind == "latest":
            raise OptionError("starting offset can't be latest for batch queries on Kafka")
        for tp, off in starting.offsets.items():
            if starting.kind == "offsets" and off == LATEST:
                raise OptionError(
                    f"startingOffsets for {tp[0]}-{tp[1]} can't be latest for batch queries on Kafka"
                )
        if ending.kind == "earliest":
            raise OptionError("ending offset can't be earliest for batch queries on Kafka")
        for tp, off in ending.offsets.items():
            if ending.kind == "offsets" and off == EARLIEST:
                raise OptionError(
                    f"ending offset for {tp[0]}-{tp[1]} can't be earliest for batch queries on Kafka"
                )
        if starting.kind == "offsets" and ending.kind == "offsets":
            if set(starting.offsets) != set(ending.offsets):
                raise OptionError(
                    "startingOffsets and endingOffsets must name the same topic partitions: "
                    f"{sorted(starting.offsets)} vs {sorted(ending.offsets)}"
                )
            for tp, start in starting.offsets.items():
                end = ending.offsets[tp]
                if start >= 0 and end >= 0 and start > end:
                    raise OptionError(
                        f"The specified starting offset {start} is greater than the ending offset {end} "
                        f"for topic partition {tp[0]}-{tp[1]}"
                    )

    return ReaderOptions(
        bootstrap_servers=conf["bootstrap.servers"],
        strategy=strategy,
        topics=topics,
        pattern=pattern,
        assigned=assigned,
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=delay,
        min_partitions=min_partitions,
        max_records_per_partition=max_records,
        fail_on_data_loss=_bool(opts, "failondataloss", True, "failOnDataLoss"),
        include_headers=_bool(opts, "includeheaders", False, "includeHeaders"),
        poll_timeout_ms=_int(opts, "kafkaconsumer.polltimeoutms", "kafkaConsumer.pollTimeoutMs") or 120_000,
        client_config=conf,
        commit_group=commit_group,
    )


def _commit_group(opts: dict[str, str], conf: dict[str, str], streaming: bool) -> str | None:
    """commitOffsetsToGroup (kaflite only): 'true' or 'false' (default); with 'true' the query commits the
    offsets it has processed to the group `kafka.group.id`, which is then required."""
    if not _bool(opts, "commitoffsetstogroup", False, "commitOffsetsToGroup"):
        return None
    if not streaming:
        raise OptionError("option 'commitOffsetsToGroup' applies to streaming queries (readStream) only")
    group = conf.get("group.id", "").strip()
    if not group:
        raise OptionError(
            "option 'commitOffsetsToGroup' needs 'kafka.group.id': the consumer group the query commits its "
            "offsets to"
        )
    return group


def parse_writer_options(options: Mapping[str, Any]) -> WriterOptions:
    opts = lower(options)
    conf = client_config(opts, _REJECTED_SINK_KAFKA_KEYS)
    topic = opts.get("topic")
    header = opts.get("batchidheader")
    exactly_once = _bool(opts, "exactlyonce", False, "exactlyOnce")
    prefix = (opts.get("transactionalidprefix") or "").strip() or None
    if exactly_once and prefix is None:
        raise OptionError("option 'exactlyOnce' needs 'transactionalIdPrefix' (unique per streaming query)")
    if exactly_once and "transactional.id" in conf:
        raise OptionError("option 'kafka.transactional.id' cannot be set with 'exactlyOnce' "
                          "(the sink derives one per task from 'transactionalIdPrefix')")
    progress = (opts.get("progresstopic") or "").strip() or (topic.strip() if topic and topic.strip() else None)
    if exactly_once and progress is None:
        raise OptionError("option 'exactlyOnce' needs the 'topic' option or 'progressTopic' (an existing topic "
                          "whose partition 0 holds each task's progress as a committed group offset)")
    return WriterOptions(
        bootstrap_servers=conf["bootstrap.servers"],
        topic=topic.strip() if topic is not None else None,
        client_config=conf,
        batch_id_header=header.strip() if header else None,
        exactly_once=exactly_once,
        transactional_id_prefix=prefix,
        progress_topic=progress if exactly_once else None,
    )
