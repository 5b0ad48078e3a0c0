"""Committed offsets of one shard (Kafka's OffsetMetadataManager): OffsetCommit, OffsetFetch,
OffsetDelete, retention, and the OffsetCommit records of `__consumer_offsets`.

Rules:
- OffsetCommit from a current member at the current generation (classic), with the current member epoch
  (KIP-848, v9+), with generation -1 into an Empty group, or with generation -1 into an unknown group
  (which creates a *simple* group); an unknown group with a generation: GROUP_ID_NOT_FOUND from v9,
  ILLEGAL_GENERATION before. Metadata over offset.metadata.max.bytes is refused for that partition only.
  Each accepted partition is one OffsetCommit record; the latest wins.
- OffsetFetch answers -1 for a partition without a commit; `topics` None means every committed partition.
- OffsetDelete refuses partitions of topics a consumer-protocol group subscribes to and non-consumer
  groups with members; it writes tombstones.
- Expiry (offsets.retention.minutes, checked every offsets.retention.check.interval.ms): offsets of an
  Empty group once it has been empty for the retention period; a simple group's per commit; a Stable
  consumer group keeps offsets of subscribed topics; an explicit expire timestamp wins. An Empty group
  left without offsets is deleted (a GroupMetadata tombstone).
- Transactional offsets (TxnOffsetCommit, Kafka's pendingTransactionalOffsets): written as OffsetCommit
  records of the producer's transactional batch and kept pending per producer id (not fetched, not
  expired); the transaction's COMMIT marker in this partition makes them committed (as if replayed then),
  its ABORT marker drops them; loading replays both, so a restart mid-transaction keeps them pending.
  OffsetFetch with require_stable is UNSTABLE_OFFSET_COMMIT for a partition with a pending offset.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from kaflite.protocol.consumer_protocol import subscription_topics
from kaflite.protocol.errors import ErrorCode

from . import messages as m
from .consumer_group import ConsumerGroupManager
from .group import ClassicGroup
from .group_metadata_manager import GroupMetadataManager
from .records import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue
from .shard_context import ShardContext
from .state import GroupState


class OffsetMetadataManager:
    """Every committed offset of one shard, by group and (topic, partition)."""

    def __init__(self, ctx: ShardContext, groups: GroupMetadataManager) -> None:
        self.ctx = ctx
        self.group_manager = groups
        self.offsets: dict[str, dict[tuple[str, int], OffsetCommitValue]] = {}
        # producer id -> group -> (topic, partition) -> the offset its open transaction commits
        self.pending: dict[int, dict[str, dict[tuple[str, int], OffsetCommitValue]]] = {}

    @property
    def groups(self) -> dict[str, ClassicGroup]:
        return self.group_manager.groups

    @property
    def consumer(self) -> ConsumerGroupManager:
        return self.group_manager.consumer

    def replay(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        """Apply an OffsetCommit record (value None: the offset was deleted or expired)."""
        offsets = self.offsets.setdefault(key.group, {})
        if value is None:
            offsets.pop((key.topic, key.partition), None)
            if not offsets:
                del self.offsets[key.group]
            return
        offsets[(key.topic, key.partition)] = value
        if key.group not in self.consumer.groups:  # a KIP-848 group's offsets need no classic group (one per id)
            self.group_manager.simple_group(key.group, value.commit_timestamp)

    def delete_all(self, group_id: str) -> None:
        """Tombstones for every offset of a group being deleted."""
        for topic, partition in sorted(self.offsets.get(group_id, {})):
            self.ctx.append(OffsetCommitKey(group_id, topic, partition), None)

    def commit(self, req: m.OffsetCommitRequest) -> m.OffsetCommitResponse:
        def all_failed(error: ErrorCode) -> m.OffsetCommitResponse:
            return m.OffsetCommitResponse(tuple((t, tuple((p.partition, error) for p in ps)) for t, ps in req.topics))

        if not self.ctx.active:
            return all_failed(ErrorCode.coordinator_not_available)
        if not req.group_id:
            return all_failed(ErrorCode.invalid_group_id)
        consumer_group = self.consumer.groups.get(req.group_id)
        group = self.groups.get(req.group_id)
        if consumer_group is not None:
            error = self.consumer.validate_offset_commit(consumer_group, req.member_id, req.generation_id,
                                                         req.version)
            if error is not None:
                return all_failed(error)
        elif group is None:
            if req.generation_id >= 0:
                # v9+ says what happened; older versions keep the historical answer
                return all_failed(ErrorCode.group_id_not_found if req.version >= 9 else ErrorCode.illegal_generation)
            group = self.group_manager.simple_group(req.group_id, self.ctx.now)
        else:
            error = group.validate_offset_commit(req.member_id, req.group_instance_id, req.generation_id)
            if error is not None:
                return all_failed(error)
        expire = self.ctx.now + req.retention_time_ms if req.retention_time_ms >= 0 else -1
        topics = []
        for topic, partitions in req.topics:
            answers = []
            for p in partitions:
                metadata = p.metadata or ""
                if len(metadata) > self.ctx.config.offset_metadata_max_bytes:
                    answers.append((p.partition, ErrorCode.offset_metadata_too_large))
                    continue
                self.ctx.append(OffsetCommitKey(req.group_id, topic, p.partition),
                                OffsetCommitValue(p.offset, metadata, self.ctx.now, p.leader_epoch, expire))
                answers.append((p.partition, ErrorCode.none))
            topics.append((topic, tuple(answers)))
        return m.OffsetCommitResponse(tuple(topics))

    def commit_transactional(self, group_id: str, producer_id: int,
                             offsets: Mapping[tuple[str, int], tuple[int, int, str]]) -> None:
        """TxnOffsetCommit: (topic, partition) -> (offset, leader epoch, metadata), written in the producer's
        transaction and pending until its marker."""
        for (topic, partition), (offset, leader_epoch, metadata) in sorted(offsets.items()):
            key = OffsetCommitKey(group_id, topic, partition)
            value = OffsetCommitValue(offset, metadata, self.ctx.now, leader_epoch, -1)
            self.ctx.emit(key, value)
            self.replay_transactional(producer_id, key, value)

    def replay_transactional(self, producer_id: int, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        by_group = self.pending.setdefault(producer_id, {}).setdefault(key.group, {})
        if value is None:
            by_group.pop((key.topic, key.partition), None)
        else:
            by_group[(key.topic, key.partition)] = value

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        """The producer's marker reached this partition: its pending offsets become committed, or go."""
        pending = self.pending.pop(producer_id, None)
        if not pending or not commit:
            return
        for group_id, offsets in sorted(pending.items()):
            for (topic, partition), value in sorted(offsets.items()):
                self.replay(OffsetCommitKey(group_id, topic, partition), value)

    def pending_partitions(self, group_id: str) -> set[tuple[str, int]]:
        """The partitions of `group_id` with an offset waiting for its transaction's marker."""
        out: set[tuple[str, int]] = set()
        for by_group in self.pending.values():
            out.update(by_group.get(group_id, ()))
        return out

    def fetch(self, req: m.OffsetFetchRequest) -> m.OffsetFetchResponse:
        if not self.ctx.active:
            return m.OffsetFetchResponse(req.group_id, ErrorCode.coordinator_load_in_progress)
        if not req.group_id:
            return m.OffsetFetchResponse(req.group_id, ErrorCode.invalid_group_id)
        group = self.groups.get(req.group_id)
        if group is not None and group.is_in(GroupState.DEAD):
            return m.OffsetFetchResponse(req.group_id, ErrorCode.group_id_not_found)
        committed = self.offsets.get(req.group_id, {})
        wanted: Iterable[tuple[str, tuple[int, ...]]]
        if req.topics is None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(committed):
                by_topic.setdefault(topic, []).append(partition)
            wanted = [(t, tuple(ps)) for t, ps in by_topic.items()]
        else:
            wanted = req.topics
        unstable = self.pending_partitions(req.group_id) if req.require_stable else set()
        topics = []
        for topic, partitions in wanted:
            fetched = []
            for partition in partitions:
                value = committed.get((topic, partition))
                if (topic, partition) in unstable:  # a transaction's offset waits for its marker
                    fetched.append(m.FetchedOffset(partition, -1, -1, "", ErrorCode.unstable_offset_commit))
                elif value is None:
                    fetched.append(m.FetchedOffset(partition, -1, -1, ""))
                else:
                    fetched.append(m.FetchedOffset(partition, value.offset, value.leader_epoch, value.metadata))
            topics.append((topic, tuple(fetched)))
        return m.OffsetFetchResponse(req.group_id, ErrorCode.none, tuple(topics))

    def delete(self, req: m.OffsetDeleteRequest) -> m.OffsetDeleteResponse:
        if not self.ctx.active:
            return m.OffsetDeleteResponse(ErrorCode.coordinator_not_available)
        group = self.groups.get(req.group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return m.OffsetDeleteResponse(ErrorCode.group_id_not_found)
        active_members = group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE,
                                         GroupState.COMPLETING_REBALANCE)
        if active_members and not group.uses_consumer_protocol():
            return m.OffsetDeleteResponse(ErrorCode.non_empty_group)
        committed = self.offsets.get(req.group_id, {})
        topics = []
        for topic, partitions in req.topics:
            if active_members and self.is_subscribed(group, topic):
                topics.append((topic, tuple((p, ErrorCode.group_subscribed_to_topic) for p in partitions)))
                continue
            for p in partitions:
                if (topic, p) in committed:
                    self.ctx.append(OffsetCommitKey(req.group_id, topic, p), None)
            topics.append((topic, tuple((p, ErrorCode.none) for p in partitions)))
        return m.OffsetDeleteResponse(ErrorCode.none, tuple(topics))

    @staticmethod
    def is_subscribed(group: ClassicGroup, topic: str) -> bool:
        """Whether a consumer group's members subscribe to `topic` (unknown bytes count as yes)."""
        for member in group.members.values():
            protocol = group.protocol_name or (member.protocols[0].name if member.protocols else None)
            topics = subscription_topics(member.metadata(protocol))
            if topics is None or topic in topics:
                return True
        return False

    def schedule_expiration(self) -> None:
        self.ctx.schedule(("offsets-expire",), self.ctx.now + self.ctx.config.offsets_retention_check_interval_ms,
                          self._expire_offsets)

    def _expire_offsets(self) -> None:
        retention_ms = self.ctx.config.offsets_retention_minutes * 60_000
        for group_id in sorted(set(self.groups) | set(self.offsets)):
            group = self.groups.get(group_id)
            committed = self.offsets.get(group_id, {})
            base: Callable[[OffsetCommitValue], int] | None
            if group is None or group.protocol_type is None:
                base = lambda v: v.commit_timestamp  # noqa: E731 - simple group: since each commit
            elif group.is_in(GroupState.EMPTY):
                base = _since(group.state_timestamp_ms)
            elif group.uses_consumer_protocol() and group.is_in(GroupState.STABLE):
                base = lambda v: v.commit_timestamp  # noqa: E731 - only for topics nobody subscribes
            else:
                continue
            for (topic, partition), value in sorted(committed.items()):
                if group is not None and group.is_in(GroupState.STABLE) and self.is_subscribed(group, topic):
                    continue
                expired = (self.ctx.now >= value.expire_timestamp if value.expire_timestamp >= 0
                           else self.ctx.now - base(value) >= retention_ms)
                if expired:
                    self.ctx.append(OffsetCommitKey(group_id, topic, partition), None)
            if group is not None and group.is_in(GroupState.EMPTY) and group_id not in self.offsets:
                for key in self.group_manager.timeline.delete(group_id):
                    self.ctx.append(key, None)
                self.ctx.append(GroupMetadataKey(group_id), None)  # nothing left to remember
        self.schedule_expiration()


def _since(state_ts: int) -> Callable[[OffsetCommitValue], int]:
    # an Empty group's offsets age from the moment it became Empty (older records: from each commit)
    return lambda v: state_ts if state_ts >= 0 else v.commit_timestamp
