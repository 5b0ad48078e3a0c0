"""kaflite.storage: durable partition logs in Kafka's own on-disk layout (see docs/storage.md).

Public API: LogConfig, LogManager, Log, AppendResult, FetchDataInfo, LogSegment.
"""

from kaflite.storage.config import LogConfig
from kaflite.storage.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AppendResult,
    FetchDataInfo,
    Log,
    parse_topic_partition,
)
from kaflite.storage.manager import LogManager, validate_topic_name
from kaflite.storage.segment import LogSegment

__all__ = [
    "AppendResult",
    "EARLIEST_TIMESTAMP",
    "FetchDataInfo",
    "LATEST_TIMESTAMP",
    "Log",
    "LogConfig",
    "LogManager",
    "LogSegment",
    "MAX_TIMESTAMP",
    "parse_topic_partition",
    "validate_topic_name",
]
