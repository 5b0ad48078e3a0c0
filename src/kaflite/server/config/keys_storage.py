"""Log storage keys (Kafka's ServerLogConfigs and CleanerConfig): segments, retention, flushing, compaction, topic defaults.

This subsystem owns these keys; `kaflite.server.config.broker_config` assembles every subsystem's table
into `BROKER_CONFIGS`, as Kafka assembles KafkaConfig from the ConfigDefs of its subsystems.
"""

from __future__ import annotations

from kaflite.server.config.definitions import (
    _CLEANUP,
    _COMPRESSION,
    _TS_TYPES,
    KAFKA_RELEASE,
    LONG_MAX,
    AtLeast,
    Between,
    ConfigKey,
    Custom,
    ListOf,
    OneOf,
    _k,
)

__all__ = ["KEYS", "NOT_READ"]

_FORMAT_VERSION = KAFKA_RELEASE
_GZIP_LEVEL = Custom(lambda v: v == -1 or 1 <= v <= 9, "-1, or an integer between 1 and 9")

KEYS: list[ConfigKey] = [
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
        "log.cleaner.io.max.bytes.per.second",
        "double",
        1.7976931348623157e308,
        "The cleaner's read + write rate cap in bytes/s (Kafka's Throttler, checked every 300 ms).",
        Custom(lambda v: v > 0, "a positive number"),
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
        "Maximum difference between a CreateTime timestamp and the broker's clock (deprecated in Kafka 3.6): "
        "the bound on each side that log.message.timestamp.before.max.ms / after.max.ms leave at their "
        "default (INVALID_TIMESTAMP beyond it).",
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
        "log.message.format.version",
        "string",
        "3.0-IV1",
        "Record format of the logs (deprecated in Kafka 3.0: ignored for magic-2 batches).",
        _FORMAT_VERSION,
        applies=False,
        differs="Kafka 3.x ignores it once inter.broker.protocol.version is 3.0 or newer, which kaflite "
        "always is: every batch is written in magic 2 whatever it says.",
    ),
    _k(
        "log.local.retention.ms",
        "long",
        -2,
        "Tiered storage: how long segments stay local (-2: log.retention.ms).",
        AtLeast(-2),
        applies=False,
        differs="kaflite has no tiered storage: every segment is local and log.retention.ms decides.",
    ),
    _k(
        "log.local.retention.bytes",
        "long",
        -2,
        "Tiered storage: how many bytes stay local (-2: log.retention.bytes).",
        AtLeast(-2),
        applies=False,
        differs="kaflite has no tiered storage: every segment is local and log.retention.bytes decides.",
    ),
    _k(
        "compression.gzip.level",
        "int",
        -1,
        "gzip level of batches the broker compresses (KIP-390); -1 is the codec's default.",
        _GZIP_LEVEL,
        applies=False,
        differs="kaflite recompresses with each codec's default level.",
    ),
    _k(
        "compression.lz4.level",
        "int",
        9,
        "lz4 level of batches the broker compresses (KIP-390).",
        Between(1, 17),
        applies=False,
        differs="kaflite recompresses with each codec's default level.",
    ),
    _k(
        "compression.zstd.level",
        "int",
        3,
        "zstd level of batches the broker compresses (KIP-390).",
        Between(-131072, 22),
        applies=False,
        differs="kaflite recompresses with each codec's default level.",
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
]

# Keys validated but not read (yet), and why (marked applies=False; tests/config/test_keys_read.py).
NOT_READ: dict[str, str] = {
    "log.flush.offset.checkpoint.interval.ms": "checkpoint files are rewritten by the log manager's own "
    "schedule (with every flush pass) and on retention, DeleteRecords and shutdown",
    "log.flush.start.offset.checkpoint.interval.ms": "see log.flush.offset.checkpoint.interval.ms",
    "log.preallocate": "segment files grow as they are written (Kafka's default too)",
}
