"""Topic-level keys (Kafka's LogConfig / TopicConfig), their types and validators, and the broker keys
each falls back to (Kafka's ServerTopicConfigSynonyms); `validate_topic_config(s)` and the "did you mean"
error of both levels.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kaflite.server.config.definitions import (
    _CLEANUP,
    _COMPRESSION,
    _TS_TYPES,
    AtLeast,
    Between,
    ConfigType,
    ListOf,
    OneOf,
    UnknownConfigKey,
    Validator,
    _bad_value,
    _parse_typed,
)
from kaflite.server.config.keys_storage import _FORMAT_VERSION, _GZIP_LEVEL
from kaflite.storage.config import TOPIC_CONFIG_SYNONYMS

__all__ = ["TOPIC_CONFIGS", "TOPIC_NOT_READ", "TopicConfigKey", "validate_topic_config", "validate_topic_configs"]


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


def _t(name: str, type_: ConfigType, doc: str, validator: Validator | None = None) -> TopicConfigKey:
    """A topic key; its broker synonyms come from storage's TOPIC_CONFIG_SYNONYMS (the one table)."""
    return TopicConfigKey(name, type_, TOPIC_CONFIG_SYNONYMS[name], doc, validator)


TOPIC_CONFIGS: dict[str, TopicConfigKey] = {
    t.name: t
    for t in [
        _t("cleanup.policy", "list", "delete, compact, or both.", ListOf(_CLEANUP)),
        _t(
            "compression.type",
            "string",
            "Compression of stored batches.",
            OneOf(_COMPRESSION),
        ),
        _t(
            "delete.retention.ms",
            "long",
            "How long tombstones are kept.",
            AtLeast(0),
        ),
        _t(
            "file.delete.delay.ms",
            "long",
            "Delay before deleted segment files are removed.",
            AtLeast(0),
        ),
        _t(
            "flush.messages",
            "long",
            "Fsync after this many messages.",
            AtLeast(1),
        ),
        _t(
            "flush.ms",
            "long",
            "Fsync when the oldest unflushed message is this old.",
            AtLeast(0),
        ),
        _t(
            "index.interval.bytes",
            "int",
            "Bytes between offset-index entries.",
            AtLeast(0),
        ),
        _t(
            "max.compaction.lag.ms",
            "long",
            "Maximum time a record stays uncompacted.",
            AtLeast(1),
        ),
        _t("max.message.bytes", "int", "Largest record batch accepted.", AtLeast(0)),
        _t(
            "message.downconversion.enable",
            "boolean",
            "Down-convert for old fetch versions.",
        ),
        _t(
            "message.format.version",
            "string",
            "Record format (deprecated in Kafka 3.0; accepted, ignored: every batch is magic 2).",
            _FORMAT_VERSION,
        ),
        _t(
            "local.retention.ms",
            "long",
            "Tiered storage's local retention (accepted, no effect: kaflite has no tiered storage).",
            AtLeast(-2),
        ),
        _t(
            "local.retention.bytes",
            "long",
            "Tiered storage's local retention (accepted, no effect: kaflite has no tiered storage).",
            AtLeast(-2),
        ),
        _t(
            "compression.gzip.level",
            "int",
            "gzip level for broker-side compression (accepted, no effect: the codec's default is used).",
            _GZIP_LEVEL,
        ),
        _t(
            "compression.lz4.level",
            "int",
            "lz4 level for broker-side compression (accepted, no effect: the codec's default is used).",
            Between(1, 17),
        ),
        _t(
            "compression.zstd.level",
            "int",
            "zstd level for broker-side compression (accepted, no effect: the codec's default is used).",
            Between(-131072, 22),
        ),
        _t(
            "message.timestamp.type",
            "string",
            "CreateTime or LogAppendTime.",
            OneOf(_TS_TYPES),
        ),
        _t(
            "message.timestamp.difference.max.ms",
            "long",
            "Maximum CreateTime skew.",
            AtLeast(0),
        ),
        _t(
            "message.timestamp.before.max.ms",
            "long",
            "How far in the past a CreateTime may be.",
            AtLeast(0),
        ),
        _t(
            "message.timestamp.after.max.ms",
            "long",
            "How far in the future a CreateTime may be.",
            AtLeast(0),
        ),
        _t(
            "min.cleanable.dirty.ratio",
            "double",
            "Dirty ratio that triggers compaction.",
            Between(0, 1),
        ),
        _t(
            "min.compaction.lag.ms",
            "long",
            "Minimum age before compaction.",
            AtLeast(0),
        ),
        _t("min.insync.replicas", "int", "Replicas needed for acks=all.", AtLeast(1)),
        _t("preallocate", "boolean", "Preallocate segment files."),
        _t(
            "retention.bytes",
            "long",
            "Maximum partition size; -1 for no limit.",
            AtLeast(-1),
        ),
        _t(
            "retention.ms",
            "long",
            "How long records are kept; -1 forever.",
            AtLeast(-1),
        ),
        _t("segment.bytes", "int", "Maximum segment size.", AtLeast(14)),
        _t("segment.index.bytes", "int", "Maximum index file size.", AtLeast(4)),
        _t(
            "segment.jitter.ms",
            "long",
            "Roll-time jitter.",
            AtLeast(0),
        ),
        _t(
            "segment.ms",
            "long",
            "Roll a segment after this long.",
            AtLeast(1),
        ),
        _t(
            "unclean.leader.election.enable",
            "boolean",
            "Allow out-of-sync leaders.",
        ),
    ]
}


# Topic keys accepted (validated, stored, described) that change nothing, with the reason: the one list,
# which docs/configuration.md repeats and tests/config/test_keys_read.py holds to the code (every other
# topic key must reach a use, and these must not).
TOPIC_NOT_READ: dict[str, str] = {
    "message.downconversion.enable": "kaflite serves Fetch v4+ only, whose batches are magic 2 as stored: "
    "there is nothing to down-convert",
    "message.format.version": "deprecated in Kafka 3.0; every batch is magic 2",
    "local.retention.ms": "no tiered storage: every segment is local",
    "local.retention.bytes": "no tiered storage: every segment is local",
    "compression.gzip.level": "kaflite recompresses with each codec's default level",
    "compression.lz4.level": "kaflite recompresses with each codec's default level",
    "compression.zstd.level": "kaflite recompresses with each codec's default level",
    "preallocate": "segment files grow as they are written (Kafka's default too)",
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
