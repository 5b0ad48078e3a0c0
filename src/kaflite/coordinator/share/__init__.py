"""kaflite.coordinator.share: KIP-932 share groups. So far the pure share-partition state machine
(partition.SharePartition); the APIs, the share coordinator and its durable state come later
(docs/share-groups.md says what is served)."""

from .partition import (
    AcknowledgeResult,
    AckType,
    AcquiredRange,
    RecordState,
    ShareConfig,
    SharePartition,
    ShareSnapshot,
    StateBatch,
)

__all__ = [
    "AckType",
    "AcknowledgeResult",
    "AcquiredRange",
    "RecordState",
    "ShareConfig",
    "SharePartition",
    "ShareSnapshot",
    "StateBatch",
]
