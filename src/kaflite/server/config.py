"""The broker's configuration: Kafka's `server.properties` keys, types, defaults and validation.

One table (`BROKER_CONFIGS`) defines every key the broker accepts, with Kafka's name, type and default,
the allowed values and a line of documentation; `TOPIC_CONFIGS` does the same for topic-level keys and
names the broker key each one falls back to (Kafka's "synonym"). Everything here is pure: files are read
in `BrokerConfig.load` and nowhere else.

Precedence, lowest first: Kafka's default < the `--dev` profile < the properties file < overrides (CLI
flags, EmbeddedBroker arguments). `BrokerConfig.source(key)` says which one supplied a value, which is
what DescribeConfigs reports.

Keys Kafka has but that change nothing in a single-process asyncio broker (thread counts, ZooKeeper
timeouts, KRaft controller settings, ...) are accepted and validated so that Kafka's own
`config/server.properties` loads unchanged; `ConfigKey.applies` is False for them and the docs say so.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kaflite.cluster.zkconfig import CONNECT_SYNTAX, valid_connect

__all__ = [
    "BROKER_CONFIGS",
    "DEV_PROFILE",
    "DEV_PROFILE_WARNING",
    "TOPIC_CONFIGS",
    "BrokerConfig",
    "ConfigEntry",
    "ConfigError",
    "ConfigKey",
    "Listener",
    "Source",
    "TopicConfigKey",
    "UnknownConfigKey",
    "format_value",
    "parse_listeners",
    "parse_properties",
    "validate_topic_config",
    "validate_topic_configs",
]

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)
SHORT_MAX = 2**15 - 1
SHORT_MIN = -(2**15)

Source = Literal["default", "dev-profile", "file", "override"]
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
ConfigType = Literal["boolean", "string", "int", "short", "long", "double", "list", "class", "password"]

# Kafka's DescribeConfigs `config_source` codes (org.apache.kafka.common.requests.DescribeConfigsResponse).
SOURCE_DYNAMIC_TOPIC_CONFIG = 1
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5
SOURCE_CODES: dict[str, int] = {
    "default": SOURCE_DEFAULT_CONFIG,
    "dev-profile": SOURCE_STATIC_BROKER_CONFIG,
    "file": SOURCE_STATIC_BROKER_CONFIG,
    "override": SOURCE_STATIC_BROKER_CONFIG,
    "topic": SOURCE_DYNAMIC_TOPIC_CONFIG,
}
# Kafka's DescribeConfigs v3+ `config_type` codes (ConfigEntry.ConfigType).
TYPE_CODES: dict[str, int] = {
    "boolean": 1,
    "string": 2,
    "int": 3,
    "short": 4,
    "long": 5,
    "double": 6,
    "list": 7,
    "class": 8,
    "password": 9,
}

_TYPE_PHRASE: dict[str, str] = {
    "boolean": "a boolean (true or false)",
    "string": "a string",
    "int": "an int",
    "short": "a short",
    "long": "a long",
    "double": "a double",
    "list": "a comma-separated list",
    "class": "a class name",
    "password": "a password",
}


class ConfigError(ValueError):
    """A configuration key or value that is refused; the message names the key and what is allowed."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.message = message

    def __str__(self) -> str:
        return self.message


class UnknownConfigKey(ConfigError, KeyError):
    """An unknown key (also a KeyError, so `Mapping.get` and `in` behave as for any mapping)."""


# --------------------------------------------------------------------------------------------------
# Validators: each checks a parsed value and describes what is allowed, for the error message.


class Validator:
    def check(self, value: Any) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    def describe(self, type_phrase: str) -> str:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(frozen=True)
class AtLeast(Validator):
    minimum: float

    def check(self, value: Any) -> bool:
        return value is None or value >= self.minimum

    def describe(self, type_phrase: str) -> str:
        return f"{type_phrase} >= {_num(self.minimum)}"


@dataclass(frozen=True)
class Between(Validator):
    low: float
    high: float

    def check(self, value: Any) -> bool:
        return value is None or self.low <= value <= self.high

    def describe(self, type_phrase: str) -> str:
        return f"{type_phrase} between {_num(self.low)} and {_num(self.high)}"


@dataclass(frozen=True)
class OneOf(Validator):
    allowed: tuple[str, ...]

    def check(self, value: Any) -> bool:
        return value is None or value in self.allowed

    def describe(self, type_phrase: str) -> str:
        return "one of " + ", ".join(self.allowed)


@dataclass(frozen=True)
class ListOf(Validator):
    """Every element of a list value is one of `allowed` (Kafka's ValidList)."""

    allowed: tuple[str, ...]
    allow_empty: bool = False

    def check(self, value: Any) -> bool:
        if value is None:
            return True
        if not value and not self.allow_empty:
            return False
        return all(v in self.allowed for v in value)

    def describe(self, type_phrase: str) -> str:
        return "a comma-separated list of " + ", ".join(self.allowed)


@dataclass(frozen=True)
class Custom(Validator):
    predicate: Callable[[Any], bool]
    text: str

    def check(self, value: Any) -> bool:
        return value is None or self.predicate(value)

    def describe(self, type_phrase: str) -> str:
        return self.text


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


# --------------------------------------------------------------------------------------------------
# Listeners: `NAME://host:port`, comma separated (Kafka's listener syntax).


@dataclass(frozen=True)
class Listener:
    """One endpoint (Kafka's EndPoint): a listener name, where it listens, and its security protocol
    (from listener.security.protocol.map; None while only parsed). Two listeners are equal when name,
    host and port are."""

    name: str  # listener name, e.g. PLAINTEXT or CONTROLLER
    host: str  # "" means every interface, as in Kafka
    port: int
    security_protocol: str | None = field(default=None, compare=False)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


_LISTENER_RE = re.compile(
    r"^(?P<name>[A-Za-z][A-Za-z0-9_]*)://(?P<host>\[[0-9A-Fa-f:.]+\]|[^:/\[\]\s]*):(?P<port>\d+)$"
)


def parse_listeners(value: str, key: str = "listeners") -> list[Listener]:
    """Parse Kafka's `listeners` syntax; raises ConfigError naming `key` on the first bad entry."""
    out: list[Listener] = []
    for part in [p.strip() for p in value.split(",") if p.strip()]:
        m = _LISTENER_RE.match(part)
        if not m:
            raise ConfigError(
                f"{key}: expected NAME://host:port entries such as PLAINTEXT://127.0.0.1:9092, got {part!r}",
                key,
            )
        port = int(m["port"])
        if port > 65535:
            raise ConfigError(f"{key}: port must be between 0 and 65535, got {part!r}", key)
        host = m["host"][1:-1] if m["host"].startswith("[") else m["host"]
        out.append(Listener(m["name"].upper(), host, port))
    names = [li.name for li in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(
            f"{key}: each listener name may appear once, {', '.join(dupes)} appears more than "
            f"once in {value!r}",
            key,
        )
    return out


def _metrics_listener(value: str) -> tuple[str, int]:
    from kaflite.server.metrics import parse_metrics_listener

    try:
        return parse_metrics_listener(value)
    except ValueError as err:
        raise ConfigError(str(err), "metrics.listener") from None


def _listeners_validator(key: str) -> Validator:
    # parse_listeners raises its own precise message (bad port, duplicate name); an empty list is refused.
    return Custom(
        lambda value: bool(parse_listeners(value, key)),
        "NAME://host:port entries such as PLAINTEXT://127.0.0.1:9092",
    )


# --------------------------------------------------------------------------------------------------
# Key definitions.


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: Any
    doc: str
    validator: Validator | None = None
    applies: bool = True  # False: accepted for compatibility with Kafka's files, changes nothing here
    kafka_default: Any = field(default=None)  # set when kaflite's default differs from Kafka's
    differs: str = ""  # why kaflite's default or behaviour differs from Kafka's

    def parse(self, raw: Any) -> Any:
        """Parse a string (or already-typed value) to this key's type and validate it."""
        value = _parse_typed(self.name, self.type, raw, self.validator)
        if self.validator is not None and not self.validator.check(value):
            raise _bad_value(self.name, self.type, raw, self.validator)
        return value


def _bad_value(key: str, type_: str, raw: Any, validator: Validator | None) -> ConfigError:
    phrase = _TYPE_PHRASE[type_]
    want = validator.describe(phrase) if validator is not None else phrase
    return ConfigError(f"{key}: expected {want}, got {_show(raw)}", key)


def _show(raw: Any) -> str:
    return repr(raw) if isinstance(raw, str) else repr(format_value(raw))


def _parse_typed(key: str, type_: str, raw: Any, validator: Validator | None) -> Any:
    if raw is None:
        return None
    if not isinstance(raw, str):
        # Already typed (EmbeddedBroker(overrides={"num.partitions": 3})): check the type, keep the value.
        if type_ == "boolean" and isinstance(raw, bool):
            return raw
        if type_ in ("int", "short", "long") and isinstance(raw, int) and not isinstance(raw, bool):
            return _int_in_range(key, type_, raw, raw, validator)
        if type_ == "double" and isinstance(raw, int | float) and not isinstance(raw, bool):
            return float(raw)
        if type_ == "list" and isinstance(raw, list | tuple):
            return [str(v) for v in raw]
        if isinstance(raw, Path):
            raw = str(raw)
        else:
            raw = format_value(raw)
    text = raw.strip()
    if type_ == "boolean":
        low = text.lower()
        if low in ("true", "false"):
            return low == "true"
        raise _bad_value(key, type_, raw, None)
    if type_ in ("int", "short", "long"):
        if not re.fullmatch(r"[+-]?\d+", text):
            raise _bad_value(key, type_, raw, validator)
        return _int_in_range(key, type_, int(text), raw, validator)
    if type_ == "double":
        try:
            return float(text)
        except ValueError:
            raise _bad_value(key, type_, raw, validator) from None
    if type_ == "list":
        # Kafka splits on commas with surrounding whitespace; an empty string is an empty list.
        return [] if not text else [p for p in re.split(r"\s*,\s*", text) if p != ""]
    return text


def _int_in_range(key: str, type_: str, value: int, raw: Any, validator: Validator | None) -> int:
    lo, hi = {"int": (INT_MIN, INT_MAX), "short": (SHORT_MIN, SHORT_MAX), "long": (LONG_MIN, LONG_MAX)}[type_]
    if not lo <= value <= hi:
        raise _bad_value(key, type_, raw, validator)
    return value


def _k(
    name: str,
    type_: ConfigType,
    default: Any,
    doc: str,
    validator: Validator | None = None,
    applies: bool = True,
    kafka_default: Any = None,
    differs: str = "",
) -> ConfigKey:
    return ConfigKey(name, type_, default, doc, validator, applies, kafka_default, differs)


_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TS_TYPES = ("CreateTime", "LogAppendTime")
_CLEANUP = ("delete", "compact")
_NOT_HERE = "accepted for compatibility; kaflite is one asyncio process, so this changes nothing"

_BROKER_KEYS: list[ConfigKey] = [
    # --- identity and listeners -----------------------------------------------------------------
    _k(
        "broker.id",
        "int",
        0,
        "The id of this broker (used as node.id when node.id is not set).",
        AtLeast(-1),
        kafka_default=-1,
        differs="Kafka defaults to -1 (generate an id); kaflite is one broker and uses 0.",
    ),
    _k(
        "node.id",
        "int",
        None,
        "KRaft name of the broker id; when set it must equal broker.id if both are set, and wins.",
        AtLeast(0),
        kafka_default=-1,
    ),
    _k(
        "cluster.id",
        "string",
        None,
        "The cluster id reported in Metadata and DescribeCluster; when unset "
        "the broker generates one and keeps it in the data directory's meta.properties.",
        differs="kaflite-only key: Kafka keeps the cluster id only in meta.properties.",
    ),
    _k("broker.rack", "string", None, "Rack of this broker, reported in Metadata (rack-aware assignors)."),
    _k(
        "listeners",
        "string",
        "PLAINTEXT://127.0.0.1:9092",
        "Comma-separated NAME://host:port addresses to listen on; port 0 picks a free port; an empty host "
        "means every interface.",
        _listeners_validator("listeners"),
        kafka_default="PLAINTEXT://:9092",
        differs="Kafka listens on every interface by default; kaflite on loopback only.",
    ),
    _k(
        "advertised.listeners",
        "string",
        None,
        "Addresses given to clients in Metadata; unset means the addresses actually bound by listeners.",
        _listeners_validator("advertised.listeners"),
    ),
    _k(
        "listener.security.protocol.map",
        "string",
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "Listener name to security protocol; kaflite serves PLAINTEXT only (controller listeners not "
        "named here are PLAINTEXT while the map is at its default).",
    ),
    _k(
        "inter.broker.listener.name",
        "string",
        None,
        "Listener used between brokers (this broker's address in the cluster); unset means the first "
        "PLAINTEXT client listener.",
    ),
    _k(
        "controller.listener.names",
        "string",
        None,
        "KRaft controller listener names: kaflite has no KRaft controller, so these listeners are not "
        "bound (and not advertised).",
    ),
    _k(
        "process.roles",
        "list",
        [],
        "KRaft roles.",
        ListOf(("broker", "controller"), allow_empty=True),
        applies=False,
    ),
    _k("controller.quorum.voters", "list", [], "KRaft controller quorum.", applies=False),
    _k("controller.quorum.bootstrap.servers", "list", [], "KRaft controller quorum.", applies=False),
    _k(
        "metrics.listener",
        "string",
        None,
        "http://HOST:PORT where the broker serves Prometheus metrics at /metrics (Kafka's MBean names as the "
        "JMX exporter writes them, docs/metrics.md); unset: no metrics endpoint and no counting.",
        Custom(lambda v: bool(_metrics_listener(v)), "http://HOST:PORT such as http://127.0.0.1:9404"),
        differs="kaflite-only key: Kafka exposes JMX MBeans and needs the Prometheus JMX exporter agent.",
    ),
    # --- ZooKeeper (cluster mode; unset zookeeper.connect = the single-node broker) ---------------
    _k(
        "zookeeper.connect",
        "string",
        None,
        "ZooKeeper of the cluster: host:port[,host:port...][/chroot] (the chroot is created when "
        "missing). Unset: kaflite is a single node and needs no ZooKeeper.",
        Custom(valid_connect, CONNECT_SYNTAX),
    ),
    _k(
        "zookeeper.connection.timeout.ms",
        "int",
        None,
        "How long to wait for the ZooKeeper connection at start-up; unset means zookeeper.session.timeout.ms.",
        AtLeast(1),
    ),
    _k(
        "zookeeper.session.timeout.ms",
        "int",
        18000,
        "ZooKeeper session timeout: how long after a broker stops answering it counts as dead (its "
        "registration and leadership move). 6000 in the dev profile.",
        AtLeast(1),
    ),
    # --- storage --------------------------------------------------------------------------------
    _k(
        "log.dirs",
        "list",
        None,
        "Directories holding the partition logs (kaflite uses the first); when unset, log.dir is used.",
    ),
    _k(
        "log.dir",
        "string",
        "./kaflite-data",
        "The log directory when log.dirs is not set.",
        kafka_default="/tmp/kafka-logs",
        differs="kaflite keeps its data under the working directory.",
    ),
    _k(
        "num.partitions",
        "int",
        1,
        "Partitions of an auto-created topic or a CreateTopics without a count.",
        AtLeast(1),
    ),
    _k("default.replication.factor", "int", 1, "Replication factor of auto-created topics.", AtLeast(1)),
    _k("auto.create.topics.enable", "boolean", True, "Create a topic when Metadata asks for an unknown one."),
    _k("delete.topic.enable", "boolean", True, "Allow DeleteTopics."),
    _k(
        "log.retention.hours",
        "int",
        168,
        "Hours to keep a log segment before deleting it (third choice "
        "after log.retention.ms and log.retention.minutes); -1 keeps forever.",
        AtLeast(-1),
    ),
    _k("log.retention.minutes", "int", None, "Minutes to keep a log segment (second choice).", AtLeast(-1)),
    _k(
        "log.retention.ms",
        "long",
        None,
        "Milliseconds to keep a log segment (first choice); -1 keeps forever.",
        AtLeast(-1),
    ),
    _k(
        "log.retention.bytes",
        "long",
        -1,
        "Maximum size of a partition's log before old segments are deleted; -1 means no limit.",
        AtLeast(-1),
    ),
    _k("log.retention.check.interval.ms", "long", 300000, "How often the retention check runs.", AtLeast(1)),
    _k("log.segment.bytes", "int", 1073741824, "Maximum size of one log segment file.", AtLeast(14)),
    _k("log.roll.hours", "int", 168, "Roll a new segment after this many hours (second choice).", AtLeast(1)),
    _k(
        "log.roll.ms",
        "long",
        None,
        "Roll a new segment after this many milliseconds (first choice).",
        AtLeast(1),
    ),
    _k("log.roll.jitter.hours", "int", 0, "Random jitter subtracted from the roll time.", AtLeast(0)),
    _k(
        "log.roll.jitter.ms",
        "long",
        None,
        "Random jitter subtracted from the roll time (first choice).",
        AtLeast(0),
    ),
    _k(
        "log.index.interval.bytes",
        "int",
        4096,
        "Bytes of records between two offset-index entries.",
        AtLeast(0),
    ),
    _k(
        "log.index.size.max.bytes",
        "int",
        10485760,
        "Maximum size of an offset or time index file.",
        AtLeast(4),
    ),
    _k(
        "log.flush.interval.messages",
        "long",
        LONG_MAX,
        "Fsync a partition after this many appended "
        "messages; 1 means fsync before acknowledging each produce (flush-before-ack).",
        AtLeast(1),
    ),
    _k(
        "log.flush.interval.ms",
        "long",
        None,
        "Fsync a partition when its oldest unflushed message is this "
        "old; unset means log.flush.scheduler.interval.ms.",
        AtLeast(0),
    ),
    _k(
        "log.flush.scheduler.interval.ms",
        "long",
        LONG_MAX,
        "How often the flusher checks whether a log needs an fsync.",
        AtLeast(0),
    ),
    _k(
        "log.flush.offset.checkpoint.interval.ms",
        "int",
        60000,
        "How often the recovery-point checkpoint is written.",
        AtLeast(0),
    ),
    _k(
        "log.flush.start.offset.checkpoint.interval.ms",
        "int",
        60000,
        "How often the log-start-offset checkpoint is written.",
        AtLeast(0),
    ),
    _k(
        "log.segment.delete.delay.ms",
        "long",
        60000,
        "Delay before a deleted segment's files are removed.",
        AtLeast(0),
    ),
    _k("log.preallocate", "boolean", False, "Preallocate segment files."),
    _k(
        "log.cleanup.policy",
        "list",
        ["delete"],
        "delete (retention), compact (keep the latest record per key), or both.",
        ListOf(_CLEANUP),
    ),
    _k("log.cleaner.enable", "boolean", True, "Run the log cleaner for compacted topics."),
    _k("log.cleaner.threads", "int", 1, "Log cleaner threads.", AtLeast(0), applies=False),
    _k(
        "log.cleaner.delete.retention.ms",
        "long",
        86400000,
        "How long tombstones are kept in compacted topics.",
        AtLeast(0),
    ),
    _k(
        "log.cleaner.min.compaction.lag.ms",
        "long",
        0,
        "Minimum age of a record before it can be compacted.",
        AtLeast(0),
    ),
    _k(
        "log.cleaner.max.compaction.lag.ms",
        "long",
        LONG_MAX,
        "Maximum time a record stays uncompacted.",
        AtLeast(1),
    ),
    _k(
        "log.cleaner.min.cleanable.ratio",
        "double",
        0.5,
        "Dirty ratio above which a log is compacted.",
        Between(0, 1),
    ),
    _k(
        "log.cleaner.backoff.ms",
        "long",
        15000,
        "Sleep of the cleaner when there is nothing to clean.",
        AtLeast(0),
    ),
    _k(
        "log.message.timestamp.type",
        "string",
        "CreateTime",
        "Whether record timestamps are the "
        "producer's (CreateTime) or the broker's append time (LogAppendTime).",
        OneOf(_TS_TYPES),
    ),
    _k(
        "log.message.timestamp.difference.max.ms",
        "long",
        LONG_MAX,
        "Maximum difference between a CreateTime timestamp and the broker's clock (deprecated in Kafka 3.6).",
        AtLeast(0),
    ),
    _k(
        "log.message.timestamp.before.max.ms",
        "long",
        LONG_MAX,
        "How far in the past a CreateTime timestamp may be.",
        AtLeast(0),
    ),
    _k(
        "log.message.timestamp.after.max.ms",
        "long",
        LONG_MAX,
        "How far in the future a CreateTime timestamp may be.",
        AtLeast(0),
    ),
    _k(
        "log.message.downconversion.enable",
        "boolean",
        True,
        "Down-convert records for old fetch versions.",
        applies=False,
    ),
    _k(
        "num.recovery.threads.per.data.dir",
        "int",
        1,
        "Threads recovering logs at startup.",
        AtLeast(1),
        applies=False,
    ),
    _k(
        "compression.type",
        "string",
        "producer",
        "Compression of stored batches; producer keeps what the producer sent.",
        OneOf(_COMPRESSION),
    ),
    _k(
        "message.max.bytes",
        "int",
        1048588,
        "Largest record batch the broker accepts (after compression).",
        AtLeast(0),
    ),
    _k("min.insync.replicas", "int", 1, "Replicas that must acknowledge an acks=all produce.", AtLeast(1)),
    _k(
        "unclean.leader.election.enable",
        "boolean",
        False,
        "Allow an out-of-sync replica to become leader.",
        applies=False,
    ),
    # --- consumer groups and offsets ------------------------------------------------------------
    _k(
        "offsets.topic.num.partitions",
        "int",
        50,
        "Partitions of __consumer_offsets (fixes which "
        "partition a group lives in; do not change after first start).",
        AtLeast(1),
    ),
    _k(
        "offsets.topic.replication.factor",
        "short",
        1,
        "Replication factor of __consumer_offsets.",
        AtLeast(1),
        kafka_default=3,
        differs="Kafka's built-in default is 3 (its shipped server.properties sets 1); "
        "kaflite is one broker.",
    ),
    _k("offsets.topic.segment.bytes", "int", 104857600, "Segment size of __consumer_offsets.", AtLeast(1)),
    _k(
        "offsets.topic.compression.codec",
        "int",
        0,
        "Compression codec of __consumer_offsets records: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.",
        Between(0, 4),
    ),
    _k(
        "offsets.retention.minutes",
        "int",
        10080,
        "Committed offsets of an empty group expire after this many minutes.",
        AtLeast(1),
    ),
    _k(
        "offsets.retention.check.interval.ms",
        "long",
        600000,
        "How often stale offsets are checked.",
        AtLeast(1),
    ),
    _k(
        "offsets.commit.timeout.ms", "int", 5000, "How long an offset commit waits to be written.", AtLeast(1)
    ),
    _k("offsets.load.buffer.size", "int", 5242880, "Read size when loading offsets at startup.", AtLeast(1)),
    _k(
        "offsets.commit.required.acks",
        "short",
        -1,
        "Acks needed for an offset commit (deprecated).",
        applies=False,
    ),
    _k(
        "group.initial.rebalance.delay.ms",
        "int",
        3000,
        "How long the first rebalance of a new group waits for more members to join (100 in the dev profile).",
        AtLeast(0),
    ),
    _k(
        "group.min.session.timeout.ms",
        "int",
        6000,
        "Smallest session timeout a member may ask for.",
        AtLeast(0),
    ),
    _k(
        "group.max.session.timeout.ms",
        "int",
        1800000,
        "Largest session timeout a member may ask for.",
        AtLeast(0),
    ),
    _k("group.max.size", "int", INT_MAX, "Maximum members of one consumer group.", AtLeast(1)),
    _k(
        "offset.metadata.max.bytes",
        "int",
        4096,
        "Largest metadata string an OffsetCommit may attach to an offset (OFFSET_METADATA_TOO_LARGE above).",
        AtLeast(0),
    ),
    # KIP-848 groups (ConsumerGroupHeartbeat, `group.protocol=consumer` clients)
    _k(
        "group.consumer.session.timeout.ms",
        "int",
        45000,
        "Session timeout of members of KIP-848 consumer groups.",
        AtLeast(1),
    ),
    _k(
        "group.consumer.heartbeat.interval.ms",
        "int",
        5000,
        "Heartbeat interval given to members of KIP-848 consumer groups.",
        AtLeast(1),
    ),
    _k("group.consumer.max.size", "int", INT_MAX, "Maximum members of one KIP-848 consumer group.", AtLeast(1)),
    # --- producers and transactions ------------------------------------------------------------
    _k(
        "producer.id.expiration.ms",
        "int",
        86400000,
        "Idle time after which a producer id's deduplication state is dropped.",
        AtLeast(1),
    ),
    _k(
        "transactional.id.expiration.ms",
        "int",
        604800000,
        "Idle time after which a transactional id expires.",
        AtLeast(1),
    ),
    _k(
        "transaction.max.timeout.ms",
        "int",
        900000,
        "Largest transaction timeout a producer may ask for.",
        AtLeast(1),
    ),
    _k("transaction.state.log.num.partitions", "int", 50, "Partitions of __transaction_state.", AtLeast(1)),
    _k(
        "transaction.state.log.replication.factor",
        "short",
        1,
        "Replication factor of __transaction_state.",
        AtLeast(1),
        kafka_default=3,
        differs="Kafka's built-in default is 3; kaflite is one broker.",
    ),
    _k(
        "transaction.state.log.min.isr",
        "int",
        1,
        "min.insync.replicas of __transaction_state.",
        AtLeast(1),
        kafka_default=2,
    ),
    # --- network --------------------------------------------------------------------------------
    _k(
        "socket.request.max.bytes",
        "int",
        104857600,
        "Largest request frame accepted; a longer length prefix closes the connection.",
        AtLeast(1),
    ),
    _k(
        "socket.send.buffer.bytes",
        "int",
        102400,
        "SO_SNDBUF of client sockets; -1 keeps the OS default.",
        AtLeast(-1),
    ),
    _k(
        "socket.receive.buffer.bytes",
        "int",
        102400,
        "SO_RCVBUF of client sockets; -1 keeps the OS default.",
        AtLeast(-1),
    ),
    _k("socket.listen.backlog.size", "int", 50, "Listen backlog of the server socket.", AtLeast(1)),
    _k(
        "queued.max.requests",
        "int",
        500,
        "Requests read ahead per connection before reading pauses (backpressure).",
        AtLeast(1),
    ),
    _k(
        "queued.max.request.bytes",
        "long",
        -1,
        "Request bytes read ahead over all connections before reading pauses; -1 (Kafka: unbounded) "
        "means 100 MiB in kaflite.",
        AtLeast(-1),
        differs="Kafka's -1 is unbounded; kaflite bounds it at 100 MiB (a Python broker cannot afford no bound).",
    ),
    _k("connections.max.idle.ms", "long", 600000, "Close connections idle for this long.", AtLeast(0)),
    _k("max.connections", "int", INT_MAX, "Maximum concurrent client connections.", AtLeast(0)),
    _k("fetch.max.bytes", "int", 57671680, "Largest Fetch response the broker builds.", AtLeast(1024)),
    _k(
        "max.incremental.fetch.session.cache.slots",
        "int",
        1000,
        "Incremental fetch sessions cached.",
        AtLeast(0),
    ),
    _k("num.network.threads", "int", 3, "Network threads.", AtLeast(1), applies=False),
    _k("num.io.threads", "int", 8, "Request handler threads.", AtLeast(1), applies=False),
    _k("background.threads", "int", 10, "Background task threads.", AtLeast(1), applies=False),
    _k("num.replica.fetchers", "int", 1, "Replica fetcher threads.", AtLeast(1), applies=False),
    _k("replica.lag.time.max.ms", "long", 30000, "A follower this far behind leaves the ISR.", AtLeast(0)),
    _k(
        "auto.leader.rebalance.enable",
        "boolean",
        True,
        "Move leadership back to preferred replicas.",
        applies=False,
    ),
    _k("controlled.shutdown.enable", "boolean", True, "Hand over leadership before shutdown.", applies=False),
]
# Keys Kafka's files carry that this broker validates but does not read (yet), and why. They are marked
# `applies=False`, so `--print-config`, the docs and DescribeConfigs users are not told they take effect;
# tests/config/test_keys_read.py checks that every key still claimed to apply is read somewhere.
_NOT_READ: dict[str, str] = {
    "log.flush.offset.checkpoint.interval.ms": "checkpoint files are rewritten by the log manager's own "
    "schedule (with every flush pass) and on retention, DeleteRecords and shutdown",
    "log.flush.start.offset.checkpoint.interval.ms": "see log.flush.offset.checkpoint.interval.ms",
    "log.preallocate": "segment files grow as they are written (Kafka's default too)",
    "log.message.timestamp.difference.max.ms": "deprecated in Kafka 3.6; kaflite reads "
    "log.message.timestamp.before.max.ms and log.message.timestamp.after.max.ms",
    "offsets.topic.replication.factor": "one broker: every partition has one replica",
    "offsets.commit.timeout.ms": "a commit is appended locally; there are no replicas to wait for",
    "offsets.load.buffer.size": "the offsets topic is replayed segment by segment",
    "transactional.id.expiration.ms": "no transactions",
    "transaction.max.timeout.ms": "no transactions",
    "transaction.state.log.num.partitions": "no transactions",
    "transaction.state.log.replication.factor": "no transactions",
    "transaction.state.log.min.isr": "no transactions",
    "replica.lag.time.max.ms": "one broker: the ISR is the leader alone",
}

for _key in _BROKER_KEYS:
    if _key.name in _NOT_READ:
        object.__setattr__(_key, "applies", False)
        object.__setattr__(_key, "differs", "accepted for compatibility, no effect: " + _NOT_READ[_key.name])
    if not _key.applies and not _key.differs:
        object.__setattr__(_key, "differs", _NOT_HERE)

BROKER_CONFIGS: dict[str, ConfigKey] = {k.name: k for k in _BROKER_KEYS}

# The dev profile: fast feedback on a laptop, at the price of durability.
# The group delay is short rather than 0: with 0 the first consumer forms a generation alone and the others'
# joins each start another rebalance that the earlier members only notice on their next heartbeat (~1 s with
# librdkafka); 100 ms lets a group that starts together join one generation (bench/group_bench.py).
DEV_PROFILE: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "100",
    "log.segment.bytes": str(1024 * 1024),
    "log.retention.check.interval.ms": "30000",
    "zookeeper.session.timeout.ms": "6000",
}
DEV_PROFILE_WARNING = (
    "DEV PROFILE - no durability guarantee: records are acknowledged before they are fsynced (as with "
    "Kafka's defaults; log.flush.interval.messages=1 fsyncs before acknowledging), so a crash of the machine "
    "can lose acknowledged records. group.initial.rebalance.delay.ms=100 and 1 MiB log segments. Do not use "
    "the dev profile for data you need to keep."
)


# --------------------------------------------------------------------------------------------------
# Topic-level keys (Kafka's LogConfig / TopicConfig) and the broker keys they fall back to.


@dataclass(frozen=True)
class TopicConfigKey:
    name: str
    type: ConfigType
    broker_keys: tuple[str, ...]  # synonyms, first choice first (retention.ms -> log.retention.ms, ...)
    doc: str
    validator: Validator | None = None

    @property
    def broker_key(self) -> str:
        return self.broker_keys[0]

    def parse(self, raw: Any) -> Any:
        value = _parse_typed(self.name, self.type, raw, self.validator)
        if self.validator is not None and not self.validator.check(value):
            raise _bad_value(self.name, self.type, raw, self.validator)
        return value


def _t(
    name: str,
    type_: ConfigType,
    broker_keys: str | tuple[str, ...],
    doc: str,
    validator: Validator | None = None,
) -> TopicConfigKey:
    keys = (broker_keys,) if isinstance(broker_keys, str) else broker_keys
    return TopicConfigKey(name, type_, keys, doc, validator)


TOPIC_CONFIGS: dict[str, TopicConfigKey] = {
    t.name: t
    for t in [
        _t("cleanup.policy", "list", "log.cleanup.policy", "delete, compact, or both.", ListOf(_CLEANUP)),
        _t(
            "compression.type",
            "string",
            "compression.type",
            "Compression of stored batches.",
            OneOf(_COMPRESSION),
        ),
        _t(
            "delete.retention.ms",
            "long",
            "log.cleaner.delete.retention.ms",
            "How long tombstones are kept.",
            AtLeast(0),
        ),
        _t(
            "file.delete.delay.ms",
            "long",
            "log.segment.delete.delay.ms",
            "Delay before deleted segment files are removed.",
            AtLeast(0),
        ),
        _t(
            "flush.messages",
            "long",
            "log.flush.interval.messages",
            "Fsync after this many messages.",
            AtLeast(1),
        ),
        _t(
            "flush.ms",
            "long",
            ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
            "Fsync when the oldest unflushed message is this old.",
            AtLeast(0),
        ),
        _t(
            "index.interval.bytes",
            "int",
            "log.index.interval.bytes",
            "Bytes between offset-index entries.",
            AtLeast(0),
        ),
        _t(
            "max.compaction.lag.ms",
            "long",
            "log.cleaner.max.compaction.lag.ms",
            "Maximum time a record stays uncompacted.",
            AtLeast(1),
        ),
        _t("max.message.bytes", "int", "message.max.bytes", "Largest record batch accepted.", AtLeast(0)),
        _t(
            "message.downconversion.enable",
            "boolean",
            "log.message.downconversion.enable",
            "Down-convert for old fetch versions.",
        ),
        _t(
            "message.timestamp.type",
            "string",
            "log.message.timestamp.type",
            "CreateTime or LogAppendTime.",
            OneOf(_TS_TYPES),
        ),
        _t(
            "message.timestamp.difference.max.ms",
            "long",
            "log.message.timestamp.difference.max.ms",
            "Maximum CreateTime skew.",
            AtLeast(0),
        ),
        _t(
            "message.timestamp.before.max.ms",
            "long",
            "log.message.timestamp.before.max.ms",
            "How far in the past a CreateTime may be.",
            AtLeast(0),
        ),
        _t(
            "message.timestamp.after.max.ms",
            "long",
            "log.message.timestamp.after.max.ms",
            "How far in the future a CreateTime may be.",
            AtLeast(0),
        ),
        _t(
            "min.cleanable.dirty.ratio",
            "double",
            "log.cleaner.min.cleanable.ratio",
            "Dirty ratio that triggers compaction.",
            Between(0, 1),
        ),
        _t(
            "min.compaction.lag.ms",
            "long",
            "log.cleaner.min.compaction.lag.ms",
            "Minimum age before compaction.",
            AtLeast(0),
        ),
        _t("min.insync.replicas", "int", "min.insync.replicas", "Replicas needed for acks=all.", AtLeast(1)),
        _t("preallocate", "boolean", "log.preallocate", "Preallocate segment files."),
        _t(
            "retention.bytes",
            "long",
            "log.retention.bytes",
            "Maximum partition size; -1 for no limit.",
            AtLeast(-1),
        ),
        _t(
            "retention.ms",
            "long",
            ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
            "How long records are kept; -1 forever.",
            AtLeast(-1),
        ),
        _t("segment.bytes", "int", "log.segment.bytes", "Maximum segment size.", AtLeast(14)),
        _t("segment.index.bytes", "int", "log.index.size.max.bytes", "Maximum index file size.", AtLeast(4)),
        _t(
            "segment.jitter.ms",
            "long",
            ("log.roll.jitter.ms", "log.roll.jitter.hours"),
            "Roll-time jitter.",
            AtLeast(0),
        ),
        _t(
            "segment.ms",
            "long",
            ("log.roll.ms", "log.roll.hours"),
            "Roll a segment after this long.",
            AtLeast(1),
        ),
        _t(
            "unclean.leader.election.enable",
            "boolean",
            "unclean.leader.election.enable",
            "Allow out-of-sync leaders.",
        ),
    ]
}


def _unknown(key: str, known: Sequence[str], what: str) -> UnknownConfigKey:
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
    if not close:  # also match on the last dotted words, e.g. "retention.hours" -> log.retention.hours
        close = [k for k in known if k.endswith("." + key) or key.endswith("." + k)][:3]
    hint = (
        f"; did you mean {', '.join(close)}?" if close else f"; see docs/configuration.md for the {what} keys"
    )
    # A key of the other level is a common slip: say which key is meant at this level.
    if what == "broker" and key in TOPIC_CONFIGS:
        hint = f"; {key} is a topic-level key, its broker-wide default is {TOPIC_CONFIGS[key].broker_key}"
    elif what == "topic":
        topic_keys = [t.name for t in TOPIC_CONFIGS.values() if key in t.broker_keys]
        if topic_keys:
            hint = f"; {key} is a broker key, the topic-level key is {topic_keys[0]}"
    return UnknownConfigKey(f"{key}: unknown {what} configuration key{hint}", key)


def validate_topic_config(key: str, value: Any) -> Any:
    """Parse and validate one topic-level config value; returns the typed value or raises ConfigError."""
    definition = TOPIC_CONFIGS.get(key)
    if definition is None:
        raise _unknown(key, list(TOPIC_CONFIGS), "topic")
    return definition.parse(value)


def validate_topic_configs(configs: Mapping[str, Any]) -> dict[str, Any]:
    """Validate a whole CreateTopics/AlterConfigs config map; returns the typed values."""
    return {k: validate_topic_config(k, v) for k, v in configs.items()}


# --------------------------------------------------------------------------------------------------
# Java .properties parsing (the rules that matter for server.properties).


def parse_properties(text: str) -> list[tuple[str, str, int]]:
    """Parse .properties text into (key, value, line_number) in file order (later duplicates win).

    Rules (java.util.Properties.load): lines whose first non-blank character is # or ! are comments; a
    line ending in an odd number of backslashes continues on the next line, whose leading whitespace is
    dropped; the key ends at the first unescaped `=`, `:` or whitespace; whitespace and one `=` or `:`
    after it are skipped; escapes \\t \\n \\r \\f \\uXXXX are decoded and any other escaped character
    stands for itself.
    """
    out: list[tuple[str, str, int]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start = i
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        if _continues(line):  # a continuation on the last line: drop the lone backslash
            line = line[:-1]
        key, value = _split_key_value(line)
        out.append((_unescape(key), _unescape(value), start + 1))
    return out


def _continues(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    j = 0
    while j < len(line):
        c = line[j]
        if c == "\\":
            j += 2
            continue
        if c in "=: \t\f":
            break
        j += 1
    key = line[:j]
    rest = line[j:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):  # one separator, after optional whitespace
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _escape_value(value: str) -> str:
    """Escape a value for a .properties line (backslashes, control characters, leading whitespace)."""
    out = value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    out = out.replace("\f", "\\f")
    return "\\" + out if out[:1] == " " else out


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    j = 0
    while j < len(s):
        c = s[j]
        if c != "\\" or j + 1 >= len(s):
            out.append(c)
            j += 1
            continue
        n = s[j + 1]
        if n == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", s[j + 2 : j + 6]):
            out.append(chr(int(s[j + 2 : j + 6], 16)))
            j += 6
            continue
        out.append(_ESCAPES.get(n, n))
        j += 2
    return "".join(out)


# --------------------------------------------------------------------------------------------------
# The loaded configuration.


@dataclass(frozen=True)
class ConfigEntry:
    """One DescribeConfigs entry."""

    name: str
    value: str | None
    source: str  # "default" | "dev-profile" | "file" | "override" | "topic"
    source_code: int  # Kafka's config_source
    config_type: int  # Kafka's config_type (DescribeConfigs v3+)
    documentation: str
    read_only: bool
    is_sensitive: bool = False
    synonyms: tuple[tuple[str, str | None, int], ...] = ()  # (name, value, source_code), first wins

    @property
    def is_default(self) -> bool:
        return self.source_code == SOURCE_DEFAULT_CONFIG


def format_value(value: Any) -> str | None:
    """A typed value as Kafka writes it in DescribeConfigs (true/false, comma-joined lists, null)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(value)
    return str(value)


class BrokerConfig(Mapping[str, Any]):
    """The validated, typed broker configuration. `cfg[key]` is the typed value (None when unset)."""

    def __init__(
        self,
        values: Mapping[str, Any],
        sources: Mapping[str, Source],
        path: Path | None = None,
        dev: bool = False,
    ) -> None:
        self._values = dict(values)
        self._sources = dict(sources)
        self.path = path
        self.dev = dev

    # --- construction -----------------------------------------------------------------------------
    @classmethod
    def load(
        cls, path: Path | str | None = None, overrides: Mapping[str, Any] | None = None, dev: bool = False
    ) -> BrokerConfig:
        """Defaults, then the dev profile, then the properties file at `path`, then `overrides`."""
        values: dict[str, Any] = {k.name: k.default for k in _BROKER_KEYS}
        sources: dict[str, Source] = {k.name: "default" for k in _BROKER_KEYS}

        def apply(key: str, raw: Any, source: Source, where: str = "") -> None:
            definition = BROKER_CONFIGS.get(key)
            if definition is None:
                err = _unknown(key, list(BROKER_CONFIGS), "broker")
                raise UnknownConfigKey(where + err.message, key)
            try:
                values[key] = definition.parse(raw)
            except ConfigError as err:
                raise ConfigError(where + err.message, key) from None
            sources[key] = source

        if dev:
            for key, raw in DEV_PROFILE.items():
                apply(key, raw, "dev-profile")
        file_path = Path(path) if path is not None else None
        if file_path is not None:
            try:
                data = file_path.read_bytes()
            except OSError as err:
                raise ConfigError(
                    f"cannot read configuration file {file_path}: {err.strerror or err}"
                ) from None
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:  # Java reads .properties as ISO-8859-1
                text = data.decode("latin-1")
            for key, raw, line in parse_properties(text):
                apply(key, raw, "file", f"{file_path}:{line}: ")
        for key, raw in (overrides or {}).items():
            apply(key, raw, "override")
        cfg = cls(values, sources, file_path, dev)
        cfg._check_consistency()
        return cfg

    def with_overrides(self, overrides: Mapping[str, Any]) -> BrokerConfig:
        """A copy with more overrides applied (validated the same way)."""
        values = dict(self._values)
        sources = dict(self._sources)
        for key, raw in overrides.items():
            definition = BROKER_CONFIGS.get(key)
            if definition is None:
                raise _unknown(key, list(BROKER_CONFIGS), "broker")
            values[key] = definition.parse(raw)
            sources[key] = "override"
        cfg = BrokerConfig(values, sources, self.path, self.dev)
        cfg._check_consistency()
        return cfg

    def _check_consistency(self) -> None:
        v = self._values
        if (
            v["node.id"] is not None
            and self._sources["broker.id"] != "default"
            and v["node.id"] != v["broker.id"]
        ):
            raise ConfigError(
                f"node.id: must equal broker.id when both are set, got node.id={v['node.id']} "
                f"and broker.id={v['broker.id']}",
                "node.id",
            )
        if v["group.min.session.timeout.ms"] > v["group.max.session.timeout.ms"]:
            raise ConfigError(
                "group.min.session.timeout.ms: must be <= group.max.session.timeout.ms, got "
                f"{v['group.min.session.timeout.ms']} > {v['group.max.session.timeout.ms']}",
                "group.min.session.timeout.ms",
            )
        if v["log.dirs"] is not None and not v["log.dirs"]:
            raise ConfigError("log.dirs: expected at least one directory, got ''", "log.dirs")
        if not v["log.dir"]:
            raise ConfigError("log.dir: expected a directory, got ''", "log.dir")
        self._check_listeners()

    def _check_listeners(self) -> None:
        """Kafka's listener rules (KafkaConfig.validateValues) for a broker that serves PLAINTEXT only."""
        v = self._values
        protocols = self.security_protocol_map  # raises on a malformed map
        controller = self.controller_listener_names
        for li in self.listeners:
            proto = li.security_protocol
            if proto is None:
                raise ConfigError(
                    f"listeners: listener name {li.name} has no entry in listener.security.protocol.map "
                    f"({', '.join(f'{n}:{p}' for n, p in protocols.items())})",
                    "listeners",
                )
            if proto != "PLAINTEXT" and li.name not in controller:
                raise ConfigError(
                    f"listeners: kaflite serves PLAINTEXT only, got {li} ({proto})", "listeners"
                )
        clients = self.client_listeners
        if not clients:
            raise ConfigError(
                f"listeners: expected at least one PLAINTEXT listener for clients, got {v['listeners']!r}",
                "listeners",
            )
        names = {li.name for li in clients}
        inter = v["inter.broker.listener.name"]
        if inter is not None and inter.strip().upper() not in names:
            raise ConfigError(
                f"inter.broker.listener.name: must be the name of a client listener in listeners "
                f"({', '.join(sorted(names))}), got {inter!r}",
                "inter.broker.listener.name",
            )
        if v["advertised.listeners"] is not None:
            for li in parse_listeners(v["advertised.listeners"], "advertised.listeners"):
                if li.name in controller:
                    raise ConfigError(
                        f"advertised.listeners: the controller listener {li.name} cannot be advertised to clients",
                        "advertised.listeners",
                    )
                if li.name not in names:
                    raise ConfigError(
                        f"advertised.listeners: listener {li.name} is not in listeners ({v['listeners']})",
                        "advertised.listeners",
                    )

    # --- Mapping ----------------------------------------------------------------------------------
    def __getitem__(self, key: str) -> Any:
        if key not in self._values:
            raise _unknown(key, list(BROKER_CONFIGS), "broker")
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        explicit = {k: format_value(v) for k, v in self._values.items() if self._sources[k] != "default"}
        return f"BrokerConfig({explicit!r}, path={self.path!s}, dev={self.dev})"

    def source(self, key: str) -> Source:
        """Where the value of `key` came from: "default", "dev-profile", "file" or "override"."""
        if key not in self._sources:
            raise _unknown(key, list(BROKER_CONFIGS), "broker")
        return self._sources[key]

    def explicit(self) -> dict[str, str | None]:
        """The keys not at their default, as strings (to write back out or log at startup)."""
        return {k: format_value(v) for k, v in self._values.items() if self._sources[k] != "default"}

    def to_properties(self) -> str:
        """The effective configuration as a .properties file that `load` reads back to the same values.

        Keys are grouped by source (override, file, dev-profile, default) under a comment line; unset
        keys are written commented out (`#key=`), since an empty value is not "unset" for most types.
        """
        lines = ["# kaflite broker configuration (kaflite serve --print-config)"]
        for source in ("override", "file", "dev-profile", "default"):
            keys = [k for k in self._values if self._sources[k] == source]
            if not keys:
                continue
            lines.append(f"# source: {source}")
            for key in keys:
                text = format_value(self._values[key])
                lines.append(f"#{key}=" if text is None else f"{key}={_escape_value(text)}")
        return "\n".join(lines) + "\n"

    # --- derived values (Kafka's precedence between related keys) --------------------------------
    @property
    def broker_id(self) -> int:
        node_id = self._values["node.id"]
        return int(node_id if node_id is not None else self._values["broker.id"])

    @property
    def listeners(self) -> list[Listener]:
        """Every listener of `listeners`, with its security protocol (None when the map has none)."""
        protocols = self.security_protocol_map
        return [
            dataclasses.replace(li, security_protocol=protocols.get(li.name))
            for li in parse_listeners(self._values["listeners"])
        ]

    @property
    def security_protocol_map(self) -> dict[str, str]:
        """listener.security.protocol.map; as Kafka, when the map is left at its default, a controller
        listener it does not name is PLAINTEXT (KafkaConfig.effectiveListenerSecurityProtocolMap)."""
        key = "listener.security.protocol.map"
        out: dict[str, str] = {}
        raw = self._values["listener.security.protocol.map"]
        for part in [p.strip() for p in str(raw).split(",") if p.strip()]:
            name, sep, proto = part.partition(":")
            proto = proto.strip().upper()
            if not sep or not name.strip() or proto not in SECURITY_PROTOCOLS:
                raise ConfigError(
                    f"{key}: expected NAME:PROTOCOL entries with a protocol among "
                    f"{', '.join(SECURITY_PROTOCOLS)}, got {part!r}",
                    key,
                )
            out[name.strip().upper()] = proto
        if self._sources[key] == "default":
            for name in sorted(self.controller_listener_names):
                out.setdefault(name, "PLAINTEXT")
        return out

    @property
    def controller_listener_names(self) -> set[str]:
        raw = self._values["controller.listener.names"] or ""
        return {n.strip().upper() for n in raw.split(",") if n.strip()}

    @property
    def client_listeners(self) -> list[Listener]:
        """The listeners the broker binds for clients: every listener except the KRaft controller
        listeners (`controller.listener.names`), each with its security protocol."""
        controller = self.controller_listener_names
        return [li for li in self.listeners if li.name not in controller]

    @property
    def inter_broker_listener_name(self) -> str:
        """inter.broker.listener.name, else (Kafka's security.inter.broker.protocol=PLAINTEXT) the first
        client listener whose protocol is PLAINTEXT."""
        inter = self._values["inter.broker.listener.name"]
        if inter is not None:
            return str(inter).strip().upper()
        clients = self.client_listeners
        return next((li.name for li in clients if li.security_protocol == "PLAINTEXT"), clients[0].name)

    @property
    def advertised_listeners(self) -> list[Listener] | None:
        """The configured advertised listeners, or None: advertise what was actually bound."""
        raw = self._values["advertised.listeners"]
        return None if raw is None else parse_listeners(raw, "advertised.listeners")

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self._values["log.dirs"]
        return [Path(d) for d in dirs] if dirs is not None else [Path(self._values["log.dir"])]

    @property
    def log_dir(self) -> Path:
        """The data directory kaflite uses (the first of log.dirs)."""
        return self.log_dirs[0]

    @property
    def retention_ms(self) -> int:
        """log.retention.ms, else minutes, else hours, in ms; -1 (any negative) means keep forever."""
        v = self._values
        if v["log.retention.ms"] is not None:
            ms = int(v["log.retention.ms"])
        elif v["log.retention.minutes"] is not None:
            ms = int(v["log.retention.minutes"]) * 60_000
        else:
            ms = int(v["log.retention.hours"]) * 3_600_000
        return -1 if ms < 0 else ms

    @property
    def roll_ms(self) -> int:
        v = self._values
        return int(v["log.roll.ms"]) if v["log.roll.ms"] is not None else int(v["log.roll.hours"]) * 3_600_000

    @property
    def roll_jitter_ms(self) -> int:
        v = self._values
        if v["log.roll.jitter.ms"] is not None:
            return int(v["log.roll.jitter.ms"])
        return int(v["log.roll.jitter.hours"]) * 3_600_000

    @property
    def flush_interval_ms(self) -> int:
        v = self._values
        ms = v["log.flush.interval.ms"]
        return int(ms) if ms is not None else int(v["log.flush.scheduler.interval.ms"])

    # --- topic-level defaults and DescribeConfigs --------------------------------------------------
    def topic_default(self, key: str) -> Any:
        """The broker-wide default of a topic-level key (what a topic without an override uses)."""
        definition = TOPIC_CONFIGS.get(key)
        if definition is None:
            raise _unknown(key, list(TOPIC_CONFIGS), "topic")
        if key == "retention.ms":
            return self.retention_ms
        if key == "segment.ms":
            return self.roll_ms
        if key == "segment.jitter.ms":
            return self.roll_jitter_ms
        if key == "flush.ms":
            return self.flush_interval_ms
        return self._values[definition.broker_key]

    def topic_defaults(self) -> dict[str, Any]:
        return {k: self.topic_default(k) for k in TOPIC_CONFIGS}

    def topic_config(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Every topic-level key's effective typed value for a topic with these (validated) overrides."""
        out = self.topic_defaults()
        out.update(validate_topic_configs(overrides or {}))
        return out

    def describe(self, keys: Sequence[str] | None = None) -> list[ConfigEntry]:
        """DescribeConfigs entries for the broker (every key, or `keys`; unknown keys raise)."""
        names = list(keys) if keys else list(BROKER_CONFIGS)
        out = []
        for name in names:
            definition = BROKER_CONFIGS.get(name)
            if definition is None:
                raise _unknown(name, list(BROKER_CONFIGS), "broker")
            source = self._sources[name]
            code = SOURCE_CODES[source]
            value = format_value(self._values[name])
            synonyms = ((name, value, code),)
            out.append(
                ConfigEntry(
                    name,
                    value,
                    source,
                    code,
                    TYPE_CODES[definition.type],
                    definition.doc,
                    read_only=True,
                    is_sensitive=definition.type == "password",
                    synonyms=synonyms,
                )
            )
        return out

    def describe_topic(
        self, overrides: Mapping[str, Any] | None = None, keys: Sequence[str] | None = None
    ) -> list[ConfigEntry]:
        """DescribeConfigs entries of a topic whose stored per-topic configs are `overrides`."""
        overrides = overrides or {}
        names = list(keys) if keys else list(TOPIC_CONFIGS)
        out = []
        for name in names:
            definition = TOPIC_CONFIGS.get(name)
            if definition is None:
                raise _unknown(name, list(TOPIC_CONFIGS), "topic")
            synonyms: list[tuple[str, str | None, int]] = []
            if name in overrides:
                synonyms.append(
                    (name, format_value(definition.parse(overrides[name])), SOURCE_DYNAMIC_TOPIC_CONFIG)
                )
            for broker_key in definition.broker_keys:
                if self._values[broker_key] is not None:
                    synonyms.append(
                        (
                            broker_key,
                            format_value(self._values[broker_key]),
                            SOURCE_CODES[self._sources[broker_key]],
                        )
                    )
            if name in overrides:
                value, source = synonyms[0][1], "topic"
            else:
                value = format_value(self.topic_default(name))
                first = next((s for s in synonyms if s[2] != SOURCE_DEFAULT_CONFIG), None)
                source = self._sources[first[0]] if first else "default"
            out.append(
                ConfigEntry(
                    name,
                    value,
                    source,
                    SOURCE_CODES[source],
                    TYPE_CODES[definition.type],
                    definition.doc,
                    read_only=False,
                    synonyms=tuple(synonyms),
                )
            )
        return out
