"""kaflite.coordinator.share: KIP-932 share groups, pure: the share-partition state machine
(partition.SharePartition), the share-group coordinator (group), and the share coordinator's durable
state in `__share_group_state` (state_records, state_shard). The broker shells are
kaflite.server.handlers.share and .share_state (docs/share-groups.md says what is served)."""

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
