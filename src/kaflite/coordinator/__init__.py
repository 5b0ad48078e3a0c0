"""kaflite.coordinator: the PURE classic group coordinator (no sockets, no files, no clock).

    from kaflite.coordinator import GroupCoordinator, CoordinatorConfig, messages
    gc = GroupCoordinator(CoordinatorConfig(group_initial_rebalance_delay_ms=0))
    result = gc.handle_join(messages.JoinGroupRequest(...), now_ms)   # records, responses, timers
    gc.poll_timers(now_ms)                                             # fire due session/rebalance timers
    gc.replay(key_bytes, value_bytes)                                  # rebuild from __consumer_offsets

A GroupCoordinator is one shard: the server shell (kaflite.server.coordinators.groups) runs one per
`__consumer_offsets` partition on the generic `runtime.CoordinatorRuntime`, which appends a step's
`result.records` to that partition and sends `result.responses` only once the write is committed.
"""

from . import messages
from .config import CoordinatorConfig
from .coordinator import (
    CoordinatorRecord,
    CoordinatorResult,
    GroupCoordinator,
    TimerOp,
    handle_heartbeat,
    handle_join,
    handle_leave,
    handle_offset_commit,
    handle_offset_delete,
    handle_offset_fetch,
    handle_sync,
)
from .group import ClassicGroup, ClassicGroupMember
from .offsets_topic import OFFSETS_TOPIC, java_string_hashcode, partition_for, utils_abs
from .state import VALID_PREVIOUS_STATES, GroupState, IllegalStateError, can_rebalance, is_valid_transition

__all__ = [
    "OFFSETS_TOPIC",
    "VALID_PREVIOUS_STATES",
    "ClassicGroup",
    "ClassicGroupMember",
    "CoordinatorConfig",
    "CoordinatorRecord",
    "CoordinatorResult",
    "GroupCoordinator",
    "GroupState",
    "IllegalStateError",
    "TimerOp",
    "can_rebalance",
    "handle_heartbeat",
    "handle_join",
    "handle_leave",
    "handle_offset_commit",
    "handle_offset_delete",
    "handle_offset_fetch",
    "handle_sync",
    "is_valid_transition",
    "java_string_hashcode",
    "messages",
    "partition_for",
    "utils_abs",
]
