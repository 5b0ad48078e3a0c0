"""LogConfig: the per-partition storage settings, with Kafka's names and defaults.

Field names are Kafka's topic-level names with '_' for '.', except the two flush settings whose topic
names are `flush.messages` / `flush.ms` (broker names `log.flush.interval.messages` / `.ms`).
`LogConfig.from_topic_configs` understands topic-level names (what CreateTopics / AlterConfigs carry);
`LogConfig.from_broker_configs` understands the broker's `server.properties` names (`log.*`), through
`TOPIC_CONFIG_SYNONYMS`, the one table of topic keys and the broker keys they fall back to.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from kaflite.protocol.errors import ErrorCode, KafkaError

__all__ = ["LONG_MAX", "TOPIC_CONFIG_SYNONYMS", "LogConfig"]

LONG_MAX = 2**63 - 1
_CLEANUP_POLICIES = ("delete", "compact", "compact,delete")
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024  # log.segment.bytes / segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000  # log.roll.ms (log.roll.hours=168) / segment.ms
    segment_jitter_ms: int = 0  # log.roll.jitter.ms / segment.jitter.ms
    retention_ms: int = 168 * 3600 * 1000  # log.retention.ms/minutes/hours / retention.ms; -1 = forever
    retention_bytes: int = -1  # log.retention.bytes / retention.bytes; -1 = unlimited
    index_interval_bytes: int = 4096  # log.index.interval.bytes / index.interval.bytes
    segment_index_bytes: int = 10 * 1024 * 1024  # log.index.size.max.bytes / segment.index.bytes
    max_message_bytes: int = 1048588  # message.max.bytes / max.message.bytes
    message_timestamp_type: str = "CreateTime"  # log.message.timestamp.type / message.timestamp.type
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    # deprecated in Kafka 3.6 (KIP-937) and still honoured there: the bound on both sides while
    # before/after are at their default (`timestamp_before_max_ms` / `timestamp_after_max_ms`)
    message_timestamp_difference_max_ms: int = LONG_MAX
    cleanup_policy: str = "delete"  # log.cleanup.policy / cleanup.policy
    delete_retention_ms: int = 24 * 3600 * 1000  # log.cleaner.delete.retention.ms / delete.retention.ms
    min_cleanable_dirty_ratio: float = 0.5  # log.cleaner.min.cleanable.ratio / min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    flush_interval_messages: int = LONG_MAX  # log.flush.interval.messages / flush.messages
    flush_interval_ms: int | None = None  # log.flush.interval.ms / flush.ms; None = never by time
    file_delete_delay_ms: int = 60000  # log.segment.delete.delay.ms / file.delete.delay.ms
    producer_id_expiration_ms: int = 86_400_000  # producer.id.expiration.ms (broker-level in Kafka)

    def __post_init__(self) -> None:
        errors = []
        if self.segment_bytes < 14:
            errors.append(f"segment.bytes={self.segment_bytes} (must be >= 14)")
        if self.segment_ms < 1:
            errors.append(f"segment.ms={self.segment_ms} (must be >= 1)")
        if self.index_interval_bytes < 0:
            errors.append(f"index.interval.bytes={self.index_interval_bytes} (must be >= 0)")
        if self.segment_index_bytes < 12:
            errors.append(f"segment.index.bytes={self.segment_index_bytes} (must be >= 12)")
        if self.max_message_bytes < 0:
            errors.append(f"max.message.bytes={self.max_message_bytes} (must be >= 0)")
        if self.message_timestamp_type not in _TIMESTAMP_TYPES:
            errors.append(f"message.timestamp.type={self.message_timestamp_type!r} (allowed: CreateTime, LogAppendTime)")
        if self.cleanup_policy not in _CLEANUP_POLICIES:
            errors.append(f"cleanup.policy={self.cleanup_policy!r} (allowed: delete, compact, compact,delete)")
        if self.flush_interval_messages < 1:
            errors.append(f"flush.messages={self.flush_interval_messages} (must be >= 1)")
        if self.flush_interval_ms is not None and self.flush_interval_ms < 0:
            errors.append(f"flush.ms={self.flush_interval_ms} (must be >= 0)")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            errors.append(f"min.cleanable.dirty.ratio={self.min_cleanable_dirty_ratio} (must be in [0, 1])")
        if errors:
            raise KafkaError(ErrorCode.invalid_config, "invalid log config: " + "; ".join(errors))

    # -- derived --------------------------------------------------------------------------------
    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def timestamp_before_max_ms(self) -> int:
        """How far in the past a CreateTime may be: message.timestamp.before.max.ms when set, else the
        deprecated message.timestamp.difference.max.ms (Kafka 3.6-3.9's LogConfig)."""
        before = self.message_timestamp_before_max_ms
        return before if before != LONG_MAX else self.message_timestamp_difference_max_ms

    @property
    def timestamp_after_max_ms(self) -> int:
        """How far in the future a CreateTime may be (same fallback as timestamp_before_max_ms)."""
        after = self.message_timestamp_after_max_ms
        return after if after != LONG_MAX else self.message_timestamp_difference_max_ms

    def replace(self, **changes: object) -> LogConfig:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    # -- parsing --------------------------------------------------------------------------------
    @classmethod
    def from_topic_configs(cls, configs: Mapping[str, str | None], base: LogConfig | None = None) -> LogConfig:
        """Apply Kafka topic-level configs (`retention.ms`, `cleanup.policy`, ...) on top of `base`.

        Topic configs that do not concern storage (`min.insync.replicas`, ...) are accepted and ignored;
        an unknown key or a bad value raises KafkaError(INVALID_CONFIG) naming the key.
        A None value means "use the base value" (a config being deleted).
        """
        base = base or cls()
        changes: dict[str, object] = {}
        for key, raw in configs.items():
            if raw is None:
                continue
            field = _TOPIC_KEYS.get(key)
            if field is None:
                if key in _NON_STORAGE_TOPIC_KEYS:
                    continue
                raise KafkaError(ErrorCode.invalid_config, f"unknown topic config {key!r}")
            changes[field] = _convert(key, field, raw)
        return _build(base, changes)

    @classmethod
    def from_broker_configs(cls, props: Mapping[str, str], base: LogConfig | None = None) -> LogConfig:
        """Defaults from `server.properties` names (`log.segment.bytes`, `log.retention.hours`, ...).

        Keys that are not log settings are ignored (the broker owns them). Precedence for retention
        and roll is Kafka's: `*.ms` over `*.minutes` over `*.hours`.
        """
        base = base or cls()
        changes: dict[str, object] = {}
        for key, field in _BROKER_KEYS.items():
            if key in props and props[key] is not None:
                changes[field] = _convert(key, field, props[key])
        # Kafka's precedence: *.ms, else *.minutes, else *.hours (a negative value means "forever")
        for field, chain in (
            ("retention_ms", (("log.retention.ms", 1), ("log.retention.minutes", 60_000), ("log.retention.hours", 3600_000))),
            ("segment_ms", (("log.roll.ms", 1), ("log.roll.hours", 3600_000))),
            ("segment_jitter_ms", (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", 3600_000))),
        ):
            for key, factor in chain:
                if props.get(key) is not None:
                    value = int(_convert(key, field, props[key]))  # type: ignore[call-overload]
                    changes[field] = value * factor if value >= 0 else -1
                    break
        return _build(base, changes)


def _build(base: LogConfig, changes: dict[str, object]) -> LogConfig:
    try:
        return dataclasses.replace(base, **changes)  # type: ignore[arg-type]
    except TypeError as e:  # pragma: no cover - field names come from our own tables
        raise KafkaError(ErrorCode.invalid_config, str(e)) from None


def _convert(key: str, field: str, raw: str) -> object:
    ftype = _FIELD_TYPES[field]
    text = str(raw).strip()
    try:
        if ftype is str:
            if field == "cleanup_policy":
                parts = sorted(p.strip() for p in text.split(",") if p.strip())
                text = ",".join(parts)
            return text
        if ftype is float:
            return float(text)
        if field == "flush_interval_ms" and int(text) >= LONG_MAX:
            return None
        return int(text)
    except ValueError:
        raise KafkaError(
            ErrorCode.invalid_config, f"config {key}={raw!r} is not a valid {ftype.__name__}"
        ) from None


_FIELD_TYPES: dict[str, type] = {
    "segment_bytes": int,
    "segment_ms": int,
    "segment_jitter_ms": int,
    "retention_ms": int,
    "retention_bytes": int,
    "index_interval_bytes": int,
    "segment_index_bytes": int,
    "max_message_bytes": int,
    "message_timestamp_type": str,
    "message_timestamp_before_max_ms": int,
    "message_timestamp_after_max_ms": int,
    "message_timestamp_difference_max_ms": int,
    "cleanup_policy": str,
    "delete_retention_ms": int,
    "min_cleanable_dirty_ratio": float,
    "min_compaction_lag_ms": int,
    "max_compaction_lag_ms": int,
    "flush_interval_messages": int,
    "flush_interval_ms": int,
    "file_delete_delay_ms": int,
    "producer_id_expiration_ms": int,
}

# Kafka topic-level config name -> field. The field names with '.' for '_' are accepted too.
_TOPIC_KEYS: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.jitter.ms": "segment_jitter_ms",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "segment.index.bytes": "segment_index_bytes",
    "max.message.bytes": "max_message_bytes",
    "message.timestamp.type": "message_timestamp_type",
    "message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
    "message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
    "message.timestamp.difference.max.ms": "message_timestamp_difference_max_ms",
    "cleanup.policy": "cleanup_policy",
    "delete.retention.ms": "delete_retention_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "flush.messages": "flush_interval_messages",
    "flush.ms": "flush_interval_ms",
    "file.delete.delay.ms": "file_delete_delay_ms",
}
_TOPIC_KEYS.update({f.replace("_", "."): f for f in _FIELD_TYPES})

# Valid Kafka topic configs that are not storage's business (the broker / replication read them).
_NON_STORAGE_TOPIC_KEYS = frozenset(
    {
        "compression.type",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "min.insync.replicas",
        "unclean.leader.election.enable",
        "message.downconversion.enable",
        "message.format.version",
        "preallocate",
        "local.retention.ms",
        "local.retention.bytes",
    }
)

# Kafka's ServerTopicConfigSynonyms: every topic-level key and the broker keys its default comes from,
# first choice first (`retention.ms` <- log.retention.ms, then .minutes, then .hours). The one table of
# topic keys and their synonyms: the broker's topic-key table (kaflite.server.config.topic_keys) takes
# its synonyms from here, and `LogConfig.from_broker_configs` reads the storage keys' first synonyms.
TOPIC_CONFIG_SYNONYMS: dict[str, tuple[str, ...]] = {
    "cleanup.policy": ("log.cleanup.policy",),
    "compression.type": ("compression.type",),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms",),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms",),
    "flush.messages": ("log.flush.interval.messages",),
    "flush.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    "index.interval.bytes": ("log.index.interval.bytes",),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms",),
    "max.message.bytes": ("message.max.bytes",),
    "message.downconversion.enable": ("log.message.downconversion.enable",),
    "message.format.version": ("log.message.format.version",),
    "local.retention.ms": ("log.local.retention.ms",),
    "local.retention.bytes": ("log.local.retention.bytes",),
    "compression.gzip.level": ("compression.gzip.level",),
    "compression.lz4.level": ("compression.lz4.level",),
    "compression.zstd.level": ("compression.zstd.level",),
    "message.timestamp.type": ("log.message.timestamp.type",),
    "message.timestamp.difference.max.ms": ("log.message.timestamp.difference.max.ms",),
    "message.timestamp.before.max.ms": ("log.message.timestamp.before.max.ms",),
    "message.timestamp.after.max.ms": ("log.message.timestamp.after.max.ms",),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio",),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms",),
    "min.insync.replicas": ("min.insync.replicas",),
    "preallocate": ("log.preallocate",),
    "retention.bytes": ("log.retention.bytes",),
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "segment.bytes": ("log.segment.bytes",),
    "segment.index.bytes": ("log.index.size.max.bytes",),
    "segment.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "unclean.leader.election.enable": ("unclean.leader.election.enable",),
}

# broker key -> LogConfig field: the first synonym of each storage topic key (the *.minutes / *.hours
# alternatives are read by from_broker_configs' precedence chains), plus the broker-level producer expiry.
_BROKER_KEYS: dict[str, str] = {
    synonyms[0]: _TOPIC_KEYS[topic] for topic, synonyms in TOPIC_CONFIG_SYNONYMS.items() if topic in _TOPIC_KEYS
}
_BROKER_KEYS["producer.id.expiration.ms"] = "producer_id_expiration_ms"
