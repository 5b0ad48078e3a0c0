"""The group coordinator shard (Kafka's GroupCoordinatorShard): a pure, synchronous state machine over
the groups and committed offsets of one `__consumer_offsets` partition (or of a whole broker, as the
unit tests drive it).

Each `handle_*` takes a request and the current time and returns a CoordinatorResult:
  records   - `__consumer_offsets` records to append (already applied to our state through `replay`);
  responses - (token, response) pairs: the caller's answer, and answers to requests parked earlier
              (a JoinGroup waits for the whole join phase, a follower's SyncGroup for the leader);
  timers    - TimerOps (set or cancel a deadline); `poll_timers(now)` fires the due ones.
The runtime (kaflite.coordinator.runtime) appends the records and sends the responses once the write is
committed. The rules live with their nouns: groups in GroupMetadataManager, offsets in
OffsetMetadataManager; this module routes requests and records to them.

Rules:
- a record is applied by key type: OffsetCommit -> offsets, GroupMetadata -> groups; replay and live
  writes take the same path, so the state is always what the records say;
- deleting a group writes a tombstone for each of its offsets, then for the group (Kafka's order); the
  group leaves memory when its own tombstone is applied, never before (validation changes nothing);
- the offsets-expiry timer is the shard's (it may delete groups left empty without offsets);
- a group's rebalance timeline (kaflite.coordinator.timeline) is written at the end of a step that writes
  records, after them (never by a step that writes nothing), and deleted (tombstoned) with the group.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kaflite.protocol.errors import ErrorCode

from . import messages as m
from .config import CoordinatorConfig
from .consumer_group import ConsumerGroup, ConsumerGroupManager, ConsumerHeartbeatRequest
from .consumer_records import KEY_VERSIONS as CONSUMER_RECORD_KEYS
from .group import ClassicGroup
from .group_metadata_manager import GroupMetadataManager
from .offset_metadata_manager import OffsetMetadataManager
from .offsets_topic import partition_for
from .records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordKey,
    RecordValue,
    decode_record,
)
from .shard_context import CoordinatorRecord, CoordinatorResult, ShardContext, TimerKey, TimerOp
from .share import membership_records as share_records
from .timeline import RebalanceEvent, RebalanceEventKey, RebalanceEventValue

__all__ = [
    "CoordinatorConfig",
    "CoordinatorRecord",
    "CoordinatorResult",
    "GroupCoordinator",
    "TimerOp",
    "handle_heartbeat",
    "handle_join",
    "handle_leave",
    "handle_offset_commit",
    "handle_offset_delete",
    "handle_offset_fetch",
    "handle_sync",
]


class GroupCoordinator:
    """One shard: its classic and consumer groups, their committed offsets, and the timers that drive them."""

    def __init__(self, config: CoordinatorConfig | None = None,
                 new_uuid: Callable[[], str] | None = None, active: bool = True) -> None:
        self.config = config or CoordinatorConfig()
        self.ctx = ShardContext(self.config, new_uuid, self._apply, active)
        self.group_manager = GroupMetadataManager(self.ctx)
        self.offset_manager = OffsetMetadataManager(self.ctx, self.group_manager)
        # the share groups' membership records, as written (group id -> live records): the share-group
        # shell (server/coordinators/share_membership.py) rebuilds its groups from them after a load
        self.share_records: dict[str, share_records.ShareRecords] = {}
        self.activated_ms: int | None = None  # when loading ended: share members' sessions restart from it

    # the state, for the shell's reads and the tests
    @property
    def groups(self) -> dict[str, ClassicGroup]:
        return self.group_manager.groups

    @property
    def offsets(self) -> dict[str, dict[tuple[str, int], OffsetCommitValue]]:
        return self.offset_manager.offsets

    @property
    def consumer(self) -> ConsumerGroupManager:
        return self.group_manager.consumer

    @property
    def active(self) -> bool:
        return self.ctx.active

    @active.setter
    def active(self, value: bool) -> None:
        self.ctx.active = value

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    # === loading and timers =========================================================================

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one `__consumer_offsets` record (while loading, and for every record we write)."""
        k, v = decode_record(key, value)
        self._apply(k, v)

    def replay_transactional(self, producer_id: int, key: bytes, value: bytes | None) -> None:
        """A record of a transactional batch (loading): an offset commit stays pending until its marker."""
        k, v = decode_record(key, value)
        if isinstance(k, OffsetCommitKey):
            assert v is None or isinstance(v, OffsetCommitValue)
            self.offset_manager.replay_transactional(producer_id, k, v)
        else:  # only offsets are written transactionally; anything else applies as written
            self._apply(k, v)

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        self.offset_manager.replay_end_transaction(producer_id, commit)

    def _apply(self, key: RecordKey, value: RecordValue | None) -> None:
        if type(key) in CONSUMER_RECORD_KEYS:
            self.group_manager.consumer.replay(key, value)
        elif type(key) in share_records.KEY_TYPES:
            share_records.apply(self.share_records, key, value)  # type: ignore[arg-type]
        elif isinstance(key, RebalanceEventKey):
            assert value is None or isinstance(value, RebalanceEventValue)
            self.group_manager.timeline.replay(key, value)
        elif isinstance(key, OffsetCommitKey):
            assert value is None or isinstance(value, OffsetCommitValue)
            self.offset_manager.replay(key, value)
        else:
            assert isinstance(key, GroupMetadataKey)
            assert value is None or isinstance(value, GroupMetadataValue)
            self.group_manager.replay(key, value)

    def activate(self, now_ms: int) -> CoordinatorResult:
        """Loading is over: loaded members must heartbeat within their session timeout from now."""
        result = self.ctx.begin(now_ms)
        self.activated_ms = now_ms
        self.ctx.active = True
        self.group_manager.activate()
        self.offset_manager.schedule_expiration()
        self.ctx.end()
        return result

    def next_deadline(self) -> int | None:
        return self.ctx.next_deadline()

    def handle_share_group_write(self, group_id: str, records: Mapping[share_records.ShareRecordKey,
                                                                       share_records.ShareRecordValue],
                                 now_ms: int, covered: Iterable[share_records.ShareRecordKey] | None = None
                                 ) -> CoordinatorResult:
        """Make the share group's written records `records` (its whole live state; empty: deleted): the
        step writes their difference from what this shard holds (membership_records.diff). `covered`: the
        keys `records` stands for (a partial `group_records`: the group's own and some members'); every
        other record of the group stays as written."""
        def run() -> ErrorCode:
            for key, value in share_records.diff(self.share_records.get(group_id, {}), records, covered):
                self.ctx.append(key, value)
            return ErrorCode.none
        return self._step(now_ms, run)

    def handle_read_barrier(self, now_ms: int) -> CoordinatorResult:
        """A step that writes nothing: answered once every earlier write of this partition is committed (the
        runtime's "read operation after all"), for a request that read state such a write may have made."""
        return self._step(now_ms, lambda: ErrorCode.none)

    def timer_deadline(self, key: TimerKey) -> int | None:
        return self.ctx.timer_deadline(key)

    def poll_timers(self, now_ms: int) -> CoordinatorResult:
        """Fire every timer due at `now_ms`, earliest first, each seeing its own deadline as the time."""
        result = self.ctx.begin(now_ms)
        self.ctx.poll(now_ms)
        self.group_manager.flush_step()
        self.ctx.end()
        return result

    # === requests ===================================================================================

    def _step(self, now_ms: int, run: Callable[[], object], answer: bool = True,
              timeline: bool = True) -> CoordinatorResult:
        """`timeline` False: the step's records are a producer's transactional batch, which must hold its
        offsets only (the timeline's pending records wait for the next step)."""
        result = self.ctx.begin(now_ms)
        response = run()
        self.group_manager.flush_step(timeline)
        if answer:
            self.ctx.respond(None, response)
        self.ctx.end()
        return result

    def handle_join(self, req: m.JoinGroupRequest, now_ms: int) -> CoordinatorResult:
        return self._step(now_ms, lambda: self.group_manager.join(req), answer=False)

    def handle_sync(self, req: m.SyncGroupRequest, now_ms: int) -> CoordinatorResult:
        return self._step(now_ms, lambda: self.group_manager.sync(req), answer=False)

    def handle_heartbeat(self, req: m.HeartbeatRequest, now_ms: int) -> CoordinatorResult:
        return self._step(now_ms, lambda: m.HeartbeatResponse(self.group_manager.heartbeat(req)))

    def handle_leave(self, req: m.LeaveGroupRequest, now_ms: int) -> CoordinatorResult:
        return self._step(now_ms, lambda: self.group_manager.leave(req))

    def handle_expire_member(self, group_id: str, member_id: str, now_ms: int) -> CoordinatorResult:
        """Test kit: the member's session timeout, now; the answer is an ErrorCode."""
        return self._step(now_ms, lambda: self.group_manager.expire_member(group_id, member_id))

    def handle_force_rebalance(self, group_id: str, now_ms: int) -> CoordinatorResult:
        """Test kit: a rebalance now (classic or KIP-848 group); the answer is an ErrorCode."""
        return self._step(now_ms, lambda: self.group_manager.force_rebalance(group_id))

    def handle_consumer_heartbeat(self, req: ConsumerHeartbeatRequest, topics: Mapping[str, int],
                                  now_ms: int, topic_ids: Mapping[str, Any] | None = None) -> CoordinatorResult:
        """`topics`: partition count of every topic in the broker's metadata (`topic_ids`: their ids,
        which the persisted assignments name topics by)."""
        return self._step(now_ms, lambda: self.group_manager.consumer_heartbeat(req, topics, topic_ids))

    def handle_offset_commit(self, req: m.OffsetCommitRequest, now_ms: int) -> CoordinatorResult:
        return self._step(now_ms, lambda: self.offset_manager.commit(req))

    def handle_txn_offset_commit(self, group_id: str, producer_id: int,
                                 offsets: Mapping[tuple[str, int], tuple[int, int, str]],
                                 now_ms: int) -> CoordinatorResult:
        """TxnOffsetCommit (checked by the caller): OffsetCommit records to write as the producer's
        transactional batch, pending until its transaction's marker reaches this partition."""
        return self._step(now_ms, lambda: self.offset_manager.commit_transactional(group_id, producer_id, offsets),
                          timeline=False)

    def handle_end_transaction(self, producer_id: int, commit: bool, now_ms: int) -> CoordinatorResult:
        """The producer's COMMIT / ABORT marker was written to this partition (Kafka's
        replayEndTransactionMarker, run after the marker's write): nothing to write."""
        return self._step(now_ms, lambda: self.offset_manager.replay_end_transaction(producer_id, commit))

    def handle_offset_fetch(self, req: m.OffsetFetchRequest, now_ms: int) -> CoordinatorResult:
        return self._step(now_ms, lambda: self.offset_manager.fetch(req))

    def handle_offset_delete(self, req: m.OffsetDeleteRequest, now_ms: int) -> CoordinatorResult:
        return self._step(now_ms, lambda: self.offset_manager.delete(req))

    def handle_delete_groups(self, group_ids: Iterable[str], now_ms: int) -> CoordinatorResult:
        return self._step(now_ms, lambda: [(group_id, self._delete_group(group_id)) for group_id in group_ids])

    def _delete_group(self, group_id: str) -> ErrorCode:
        error = self.group_manager.delete_group(group_id)
        if error is not None:
            return error
        # the state changes only as the tombstones are applied (the same replay as loading), so the shard
        # never holds less than its records say: offsets first, then the consumer group's records (its
        # ConsumerGroupMetadata tombstone removes it), then the classic group (or the classic shadow a
        # consumer group's offsets leave when replayed before its records)
        self.offset_manager.delete_all(group_id)
        if group_id in self.consumer.groups:
            for key, value in self.consumer.deletion_records(group_id):
                self.ctx.append(key, value)
        for key in self.group_manager.timeline.delete(group_id):
            self.ctx.append(key, None)
        self.ctx.append(GroupMetadataKey(group_id), None)
        return ErrorCode.none

    # === reads ======================================================================================
    # As steps (handle_*), reads go through the runtime like writes without records: answered after the
    # shard's pending writes, so they never report state that is not committed.

    def handle_describe_groups(self, group_ids: Iterable[str], now_ms: int) -> CoordinatorResult:
        return self._step(now_ms, lambda: self.describe_groups(group_ids))

    def handle_describe_consumer_groups(self, group_ids: Iterable[str], now_ms: int) -> CoordinatorResult:
        return self._step(now_ms, lambda: self.describe_consumer_groups(group_ids))

    def handle_list_groups(self, states: Iterable[str], now_ms: int) -> CoordinatorResult:
        return self._step(now_ms, lambda: self.list_groups(states))

    def handle_group_history(self, group_id: str, now_ms: int) -> CoordinatorResult:
        """The group's rebalance timeline, oldest first (the answer: None while loading)."""
        return self._step(now_ms, lambda: self.group_history(group_id) if self.ctx.active else None)

    def group_history(self, group_id: str) -> list[RebalanceEvent]:
        return self.group_manager.timeline.history(group_id)

    def describe_groups(self, group_ids: Iterable[str]) -> list[m.DescribedGroup]:
        return self.group_manager.describe_groups(group_ids)

    def describe_consumer_groups(
        self, group_ids: Iterable[str]
    ) -> list[tuple[str, ErrorCode, str | None, ConsumerGroup | None]]:
        return self.group_manager.describe_consumer_groups(group_ids)

    def list_groups(self, states: Iterable[str] = ()) -> list[m.ListedGroup]:
        return self.group_manager.list_groups(states)


# Module-level spelling of the pure API: handle_x(state, request, now_ms) -> (records, responses, timers).

def handle_join(state: GroupCoordinator, req: m.JoinGroupRequest, now_ms: int) -> CoordinatorResult:
    return state.handle_join(req, now_ms)


def handle_sync(state: GroupCoordinator, req: m.SyncGroupRequest, now_ms: int) -> CoordinatorResult:
    return state.handle_sync(req, now_ms)


def handle_heartbeat(state: GroupCoordinator, req: m.HeartbeatRequest, now_ms: int) -> CoordinatorResult:
    return state.handle_heartbeat(req, now_ms)


def handle_leave(state: GroupCoordinator, req: m.LeaveGroupRequest, now_ms: int) -> CoordinatorResult:
    return state.handle_leave(req, now_ms)


def handle_offset_commit(state: GroupCoordinator, req: m.OffsetCommitRequest, now_ms: int) -> CoordinatorResult:
    return state.handle_offset_commit(req, now_ms)


def handle_offset_fetch(state: GroupCoordinator, req: m.OffsetFetchRequest, now_ms: int) -> CoordinatorResult:
    return state.handle_offset_fetch(req, now_ms)


def handle_offset_delete(state: GroupCoordinator, req: m.OffsetDeleteRequest, now_ms: int) -> CoordinatorResult:
    return state.handle_offset_delete(req, now_ms)
