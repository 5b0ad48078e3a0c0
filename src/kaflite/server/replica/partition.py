"""Partition: one topic partition as this broker sees it (Kafka's `cluster.Partition`).

It holds the partition's state from the metadata image (replicas, ISR, leader, leader epoch, partition
epoch), the local replica's `Log` when this broker hosts one, and the log end offsets the followers
reported; it decides the high watermark and whether a request may use this replica.

Rules:
- a new state is applied only when it is newer: a higher leader epoch, or the same leader epoch with a
  higher partition epoch (an ISR or replica change); anything else is a stale decision (e.g. from a
  deposed controller) and is ignored, except a new replica set with the same epochs, leader and ISR (a
  reassignment: the replica set comes from the topic znode, which has no epoch), which is adopted;
- `check_current_leader_epoch(e)`: -1 means "not checked"; an epoch older than ours is
  FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH (the client knows of a leader we have not heard of
  yet and retries);
- `local_log(require_leader, epoch)`: the epoch check first, then NOT_LEADER_OR_FOLLOWER when this broker
  must lead and does not, or hosts no replica;
- the high watermark (leader only) is the smallest log end offset among the MAXIMAL ISR members (the
  written ISR plus a replica whose addition is being written, see the table below): the leader's own and
  each follower's last reported one; a follower that has not reported since this broker became leader holds
  it where it is. It does not move while the written ISR is smaller than min(`min.insync.replicas`,
  replication factor) (Kafka 3.7+'s `isUnderMinIsr`, KAFKA-15583: what a consumer sees is on enough
  replicas). It only moves forward (`Log.update_high_watermark`), is recomputed after every leader append
  (after the fsync in flush-before-ack mode, since the append fsyncs before it returns), every follower
  report, every ISR change and on becoming leader, so after a restart it starts at its checkpoint and only
  advances; with a single replica it is the leader's log end offset;
- acks=-1 is refused before the append with NOT_ENOUGH_REPLICAS when the written ISR is smaller than
  `min.insync.replicas`; it is complete once the high watermark passes the batch, with
  NOT_ENOUGH_REPLICAS_AFTER_APPEND when the maximal ISR is smaller than the minimum by then (Kafka's
  `checkEnoughReplicasReachOffset`);
- transaction markers are appended with acks=-1 (refused below `min.insync.replicas`, as Kafka refuses
  them); the coordinator's retry of a marker this leader appended in its current leader epoch (same
  producer epoch, coordinator epoch and result, and the producer opened no transaction since) is answered
  with the offset of that marker, never appended twice;
- the last stable offset is the log's: the first offset of the earliest open transaction, capped by the
  high watermark (Kafka's `UnifiedLog.lastStableOffset`);
- a follower's report is kept only while this broker leads; becoming leader forgets older reports; a
  report beyond the leader's log end offset or below its log start offset is refused (OFFSET_OUT_OF_RANGE)
  and changes nothing: the Fetch handler reports only a fetch whose read succeeded (Kafka's
  `Partition.fetchRecords`), so the high watermark never counts on offsets the leader does not have;
- `diverging_epoch(last_fetched_epoch, fetch_offset)` (Fetch v12+, KIP-595): the end of that epoch here
  (the leader-epoch cache); OFFSET_OUT_OF_RANGE when this log cannot say (no such epoch) or the fetch
  offset is below the log start; (epoch, end offset) when the follower's log diverges (the epoch here is
  older, or ends before the fetch offset): that fetch reads nothing and reports nothing;
- a follower is caught up (Kafka's `Replica.updateFetchState`) when its fetch offset reaches the leader's log
  end offset at that fetch, or the leader's log end offset at its previous fetch (then it caught up at the
  previous fetch's time); becoming leader counts every follower as caught up now (Kafka gives them
  `replica.lag.time.max.ms` from the election);
- ISR (leader only): a member whose last catch-up is older than `replica.lag.time.max.ms` is out of sync
  (`out_of_sync_replicas`); a replica outside the ISR whose log end offset reached the high watermark and
  the start of the current leader epoch may join (`can_join_isr`), except a replica a reassignment is
  removing once every target replica is in the ISR (the controller is completing the move and takes it
  out; Kafka's leader has been sent the target replica set by then);
- an ISR change is explicit state (Kafka's PartitionState: CommittedPartitionState / PendingExpandIsr /
  PendingShrinkIsr), written by the ReplicaManager (compare-and-set on the state znode) and applied only
  once written:

  | state            | ISR (append check, min-ISR gate) | maximal ISR (HW, acks=-1)   | a new change may start |
  |------------------|----------------------------------|-----------------------------|------------------------|
  | committed        | the written ISR                  | the written ISR             | yes, unless backing off|
  | pending expand r | the written ISR                  | the written ISR + r         | no                     |
  | pending shrink   | the written ISR (leavers kept)   | the written ISR             | no                     |

  committed -> pending: `propose_isr` (leader only, no change pending, not backing off); pending ->
  committed: `complete_isr_change` with the state written (applied), or with None (refused: the znode
  moved; or failed: ZooKeeper unreachable), which starts a backoff of `ISR_RETRY_BACKOFF_MS` before the
  next proposal; any newer state applied (an image: new leader epoch or partition epoch) drops the pending
  change and the backoff (the write's later answer is then ignored: its token is no longer current). So
  the high watermark never passes a replica that may be in the ISR once the write lands, and the ISR
  never holds a member behind the high watermark;
- a new leader records its leader epoch in the leader-epoch cache at the election, starting at its log end
  offset (Kafka's `makeLeader` / `maybeAssignEpochStartOffset`), so OffsetForLeaderEpoch and
  `diverging_epoch` answer for the current epoch before its first append;
- as follower (`append_records_to_follower`): the leader's batches are appended verbatim (their offsets and
  epochs), and the high watermark is the leader's, capped by the local log end offset. A set whose first
  batch starts below the log end is refused; when the log is empty (end == start) and that batch holds the
  log end, the log start lies inside it and the fetcher restarts the log at its base offset, then appends
  (`restart_offset_for`, Kafka's UnexpectedAppendOffsetException path).
Pure: no I/O of its own beyond the Log it is given; all of it runs on the broker's event loop.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.record_batch import MAGIC_V2, RecordBatchView
from kaflite.storage.log import AppendResult, Log

__all__ = ["ISR_RETRY_BACKOFF_MS", "NO_LEADER", "Partition", "PartitionState", "PendingIsrChange"]

NO_LEADER = -1
UNKNOWN = -1
# after an ISR write that was refused or failed, no new proposal for this long (unless a newer state
# arrives first): without it every follower fetch re-proposed it, one ZooKeeper read and write each
ISR_RETRY_BACKOFF_MS = 500


@dataclass(frozen=True, slots=True)
class PartitionState:
    """Who leads and who is in sync, as the controller (or the local image) decided it."""

    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    removing: tuple[int, ...] = ()  # replicas a reassignment is removing (from the topic znode)


@dataclass(frozen=True, slots=True, eq=False)
class PendingIsrChange:
    """An ISR change being written (Kafka's PendingExpandIsr / PendingShrinkIsr); compared by identity:
    it is the token `complete_isr_change` checks, so an answer to a superseded write is ignored."""

    isr: tuple[int, ...]  # the ISR proposed
    sent: PartitionState  # the state it is written against (its partition epoch is the znode version)
    added: tuple[int, ...]  # replicas it adds (count in the maximal ISR while it is in flight)
    removed: tuple[int, ...]  # replicas it removes (still in the ISR until written)


class Partition:
    __slots__ = ("topic", "partition", "broker_id", "log", "state", "min_insync_replicas", "codec",
                 "_follower_leo", "_single",
                 "_caught_up_ms", "_last_fetch_leo", "_last_fetch_ms", "_leader_since_ms", "_epoch_start",
                 "_leader_hw", "_markers", "_pending", "_maximal_isr", "_isr_retry_at_ms")

    def __init__(self, topic: str, partition: int, broker_id: int, log: Log | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.broker_id = broker_id
        self.log = log
        self.state = PartitionState(NO_LEADER, UNKNOWN, UNKNOWN, (), ())
        self.min_insync_replicas = 1  # the topic's min.insync.replicas, set by the ReplicaManager
        self.codec: int | None = None  # the codec the topic stores batches in (None: as produced)
        self._follower_leo: dict[int, int] = {}
        self._single = False  # this broker is the whole ISR: the high watermark is its log end offset
        # per follower, while this broker leads: last time it was caught up, the leader's log end offset and
        # the time of its previous fetch (Kafka's Replica state)
        self._caught_up_ms: dict[int, int] = {}
        self._last_fetch_leo: dict[int, int] = {}
        self._last_fetch_ms: dict[int, int] = {}
        self._leader_since_ms = -1  # set by the ReplicaManager when it makes this broker leader (-1: now)
        self._epoch_start = 0  # this leader epoch's start offset (the log end offset on becoming leader)
        self._leader_hw = UNKNOWN  # while following: the leader's high watermark in its last fetch answer
        # per producer, the last marker this broker appended as leader in this leader epoch: (producer epoch,
        # commit, coordinator epoch, offset), so the coordinator's retry of it is not written twice
        self._markers: dict[int, tuple[int, bool, int, int]] = {}
        self._pending: PendingIsrChange | None = None  # the ISR change being written (see the rules' table)
        self._maximal_isr: tuple[int, ...] = ()  # the written ISR plus the replica a pending expansion adds
        self._isr_retry_at_ms = -1  # no ISR proposal before this time (after a refused or failed write)

    def __repr__(self) -> str:
        s = self.state
        return (f"Partition({self.topic}-{self.partition}, leader={s.leader}, epoch={s.leader_epoch}, "
                f"isr={list(s.isr)}, hw={self.high_watermark})")

    # -- state -------------------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.broker_id

    @property
    def commits_on_append(self) -> bool:
        """This broker is the whole ISR: an append is committed when it returns (acks=-1 never waits)."""
        return self._single and not self.under_min_isr

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def isr(self) -> tuple[int, ...]:
        """The ISR as written (ZooKeeper's): what the append's min.insync.replicas check counts."""
        return self.state.isr

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The written ISR plus a replica whose addition is being written (Kafka's `maximalIsr`): whom the
        high watermark and acks=-1 wait for."""
        return self._maximal_isr

    @property
    def pending_isr_change(self) -> PendingIsrChange | None:
        return self._pending

    @property
    def under_min_isr(self) -> bool:
        """The written ISR is smaller than min(min.insync.replicas, replication factor) (Kafka's
        `isUnderMinIsr` with its `effectiveMinIsr`): the high watermark does not move."""
        state = self.state
        return len(state.isr) < min(self.min_insync_replicas, max(len(state.replicas), 1))

    def apply_state(self, state: PartitionState) -> bool:
        """Adopt a newer state (see the rules); returns False when `state` is stale and was ignored."""
        old = self.state
        if (state.leader_epoch, state.partition_epoch, state.leader, state.isr) == \
                (old.leader_epoch, old.partition_epoch, old.leader, old.isr) \
                and (state.replicas, state.removing) != (old.replicas, old.removing):
            # the replica set lives in the topic znode, which carries no epoch: a reassignment's new
            # replica set is adopted at the epochs held
            self.state = replace(old, replicas=state.replicas, removing=state.removing)
            for r in list(self._follower_leo):
                if r not in state.replicas:
                    del self._follower_leo[r]
            self._derive_isr()
            return True
        if (state.leader_epoch, state.partition_epoch) <= (old.leader_epoch, old.partition_epoch):
            return False
        became_leader = state.leader == self.broker_id and (
            old.leader != self.broker_id or state.leader_epoch != old.leader_epoch)
        self.state = state
        if state.leader != old.leader or state.leader_epoch != old.leader_epoch:
            self._leader_hw = UNKNOWN  # heard from the previous leader
        if became_leader:
            self._markers = {}
            self._follower_leo = {}
            self._caught_up_ms = {}
            self._last_fetch_leo = {}
            self._last_fetch_ms = {}
            self._leader_since_ms = -1
            self._epoch_start = self.log.log_end_offset if self.log is not None else 0
        for r in list(self._follower_leo):
            if r not in state.replicas:
                del self._follower_leo[r]
        # a newer state decides afresh: a write in flight was made against an older one (its answer is
        # ignored) and a backoff waited for news that have come
        self._pending = None
        self._isr_retry_at_ms = -1
        if became_leader and self.log is not None:
            # the new epoch starts here, before any append (Kafka's makeLeader): OffsetForLeaderEpoch and a
            # follower's diverging-epoch check must see it (in memory; written with the epoch's first batch)
            self.log.assign_leader_epoch_start(state.leader_epoch)
        self._derive_isr()
        if self.is_leader:
            self.maybe_increment_high_watermark()
        return True

    def _derive_isr(self) -> None:
        """The maximal ISR and the single-replica fast path, from the state and the pending change."""
        isr = self.state.isr
        pending = self._pending
        if pending is not None and pending.added:
            isr = isr + tuple(r for r in pending.added if r not in isr and r in self.state.replicas)
        self._maximal_isr = isr
        self._single = isr == (self.broker_id,)

    # -- ISR changes (the rules' table) ----------------------------------------------------------------
    def propose_isr(self, isr: tuple[int, ...], now_ms: int) -> PendingIsrChange | None:
        """Start writing `isr` (committed -> pending): the token to complete it with, or None when no change
        may start now (not leader, a change in flight, backing off, nothing to change)."""
        state = self.state
        if state.leader != self.broker_id or self.log is None or self._pending is not None \
                or now_ms < self._isr_retry_at_ms or not isr or isr == state.isr:
            return None
        pending = PendingIsrChange(isr, state, tuple(r for r in isr if r not in state.isr),
                                   tuple(r for r in state.isr if r not in isr))
        self._pending = pending
        self._derive_isr()  # a replica joining holds the high watermark from now on (never lowers it)
        return pending

    def complete_isr_change(self, pending: PendingIsrChange, written: PartitionState | None, now_ms: int) -> bool:
        """The write of `pending` answered (pending -> committed): `written` is the state as written, None
        when refused or failed (then no proposal for ISR_RETRY_BACKOFF_MS). Returns whether the high
        watermark may have moved. An answer to a superseded change (a newer state came first) is ignored."""
        if pending is not self._pending:
            return False
        self._pending = None
        if written is None:
            self._isr_retry_at_ms = now_ms + ISR_RETRY_BACKOFF_MS
            self._derive_isr()
            if self.is_leader:
                self.maybe_increment_high_watermark()
            return True
        # the replica set may have been adopted meanwhile (a reassignment, at the same epochs): keep it
        written = replace(written, replicas=self.state.replicas, removing=self.state.removing)
        if not self.apply_state(written):
            self._derive_isr()
            if self.is_leader:
                self.maybe_increment_high_watermark()
        return True

    # -- access checks (ReplicaManager.get_partition) -------------------------------------------------
    def check_current_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        if current_leader_epoch < 0:
            return ErrorCode.none
        local = self.state.leader_epoch
        if local > current_leader_epoch:
            return ErrorCode.fenced_leader_epoch
        if local < current_leader_epoch:
            return ErrorCode.unknown_leader_epoch
        return ErrorCode.none

    def check_access(self, require_leader: bool, current_leader_epoch: int) -> None:
        """Raise the KafkaError a request for this partition gets, if any (the order is Kafka's)."""
        code = self.check_current_leader_epoch(current_leader_epoch)
        if code is not ErrorCode.none:
            raise KafkaError(code, f"{self.topic}-{self.partition}: current leader epoch {current_leader_epoch}, "
                                   f"this broker has {self.state.leader_epoch}")
        if require_leader and self.state.leader != self.broker_id:
            raise KafkaError(ErrorCode.not_leader_or_follower,
                             f"broker {self.broker_id} is not the leader of {self.topic}-{self.partition} "
                             f"(leader: {self.state.leader})")
        if self.log is None:
            raise KafkaError(ErrorCode.not_leader_or_follower,
                             f"broker {self.broker_id} hosts no replica of {self.topic}-{self.partition}")

    # -- offsets -----------------------------------------------------------------------------------
    @property
    def high_watermark(self) -> int:
        return -1 if self.log is None else self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """What read_committed consumers read up to: nothing of an open transaction, nothing uncommitted."""
        return -1 if self.log is None else self.log.last_stable_offset

    def fetch_offsets(self) -> tuple[int, int]:
        """(high watermark, last stable offset) for a Fetch answer, read together."""
        log = self.log
        if log is None:
            return -1, -1
        return log.high_watermark, log.last_stable_offset

    @property
    def log_start_offset(self) -> int:
        return -1 if self.log is None else self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return -1 if self.log is None else self.log.log_end_offset

    def follower_log_end_offset(self, replica_id: int) -> int:
        """The last log end offset a follower reported while this broker led, -1 when none."""
        return self._follower_leo.get(replica_id, UNKNOWN)

    def maybe_increment_high_watermark(self) -> bool:
        """Move the high watermark to the smallest log end offset in the ISR when that is higher; returns
        whether it moved (the caller then completes delayed produce requests and fetches)."""
        log = self.log
        if log is None or self.state.leader != self.broker_id or self.under_min_isr:
            return False
        before = log.high_watermark
        candidate = log.log_end_offset
        if not self._single:
            for replica in self._maximal_isr:
                if replica == self.broker_id:
                    continue
                leo = self._follower_leo.get(replica, UNKNOWN)
                if leo < candidate:
                    candidate = leo
        if candidate <= before:
            return False
        return log.update_high_watermark(candidate) > before

    def update_follower_fetch_state(self, replica_id: int, log_end_offset: int, now_ms: int = -1) -> bool:
        """A follower's fetch, read successfully, told us its log end offset (its fetch offset); returns
        whether the high watermark moved. `now_ms` >= 0 also records when it was last caught up (see the
        rules). An offset outside this log is refused with OFFSET_OUT_OF_RANGE and changes nothing."""
        self.check_follower(replica_id)
        log = self.log
        assert log is not None  # check_follower checked it
        if not log.log_start_offset <= log_end_offset <= log.log_end_offset:
            raise KafkaError(ErrorCode.offset_out_of_range,
                             f"{self.topic}-{self.partition}: follower {replica_id} fetched at {log_end_offset}, "
                             f"this log holds [{log.log_start_offset}, {log.log_end_offset})")
        self._follower_leo[replica_id] = log_end_offset
        if now_ms >= 0:
            leader_leo = self.log_end_offset
            if log_end_offset >= leader_leo:
                self._caught_up_ms[replica_id] = now_ms
            elif log_end_offset >= self._last_fetch_leo.get(replica_id, leader_leo + 1):
                self._caught_up_ms[replica_id] = max(self._caught_up_ms.get(replica_id, -1),
                                                     self._last_fetch_ms.get(replica_id, -1))
            self._last_fetch_leo[replica_id] = leader_leo
            self._last_fetch_ms[replica_id] = now_ms
        return self.maybe_increment_high_watermark()

    def check_follower(self, replica_id: int) -> None:
        """NOT_LEADER_OR_FOLLOWER unless this broker leads and `replica_id` is one of the replicas."""
        if self.state.leader != self.broker_id or self.log is None or replica_id not in self.state.replicas:
            raise KafkaError(ErrorCode.not_leader_or_follower,
                             f"broker {replica_id} is not a follower of {self.topic}-{self.partition} here")

    def diverging_epoch(self, last_fetched_epoch: int, fetch_offset: int) -> tuple[int, int] | None:
        """A fetch carrying `last_fetched_epoch` (Fetch v12+, KIP-595; Kafka's `Partition.readRecords`): None
        when the fetcher's log agrees with this one up to `fetch_offset`, else (epoch, end offset) here, where
        the fetcher must truncate to. OFFSET_OUT_OF_RANGE when this log does not know the epoch or the fetch
        offset is below the log start."""
        log = self.log
        if log is None:
            raise KafkaError(ErrorCode.not_leader_or_follower, f"no replica of {self.topic}-{self.partition}")
        epoch, end = log.end_offset_for_epoch(last_fetched_epoch)
        if epoch < 0 or end < 0:
            raise KafkaError(ErrorCode.offset_out_of_range,
                             f"{self.topic}-{self.partition}: no end offset for last fetched epoch {last_fetched_epoch}")
        if fetch_offset < log.log_start_offset:
            raise KafkaError(ErrorCode.offset_out_of_range,
                             f"{self.topic}-{self.partition}: offset {fetch_offset} is below the log start "
                             f"{log.log_start_offset}")
        if epoch < last_fetched_epoch or end < fetch_offset:
            return epoch, end
        return None

    def last_caught_up_ms(self, replica_id: int, now_ms: int) -> int:
        """When the follower was last caught up; a follower not heard from since this broker became leader
        counts from then (Kafka's grace of replica.lag.time.max.ms after an election)."""
        if self._leader_since_ms < 0:
            self._leader_since_ms = now_ms
        return max(self._caught_up_ms.get(replica_id, -1), self._leader_since_ms)

    def note_leadership_start(self, now_ms: int) -> None:
        """The ReplicaManager tells when this broker became leader (the followers' grace starts then)."""
        if self._leader_since_ms < 0 and self.state.leader == self.broker_id:
            self._leader_since_ms = now_ms

    def out_of_sync_replicas(self, now_ms: int, max_lag_ms: int) -> tuple[int, ...]:
        """ISR members (the leader excepted) not caught up for longer than `max_lag_ms` (leader only)."""
        if self.state.leader != self.broker_id or self.log is None:
            return ()
        return tuple(r for r in self.state.isr if r != self.broker_id
                     and now_ms - self.last_caught_up_ms(r, now_ms) > max_lag_ms)

    def can_join_isr(self, replica_id: int) -> bool:
        """A replica outside the ISR that has everything committed and this leader epoch's start
        (Kafka's `isFollowerInSync`): the leader may add it (leader only)."""
        state = self.state
        if state.leader != self.broker_id or self.log is None or replica_id in self._maximal_isr \
                or replica_id not in state.replicas:
            return False
        if replica_id in state.removing and all(r in state.isr for r in state.replicas if r not in state.removing):
            return False  # the reassignment is completing: the controller is taking it out of the ISR
        leo = self._follower_leo.get(replica_id, UNKNOWN)
        return leo >= self.log.high_watermark and leo >= self._epoch_start

    # -- follower ----------------------------------------------------------------------------------
    def append_records_to_follower(self, records: bytes | memoryview, leader_high_watermark: int) -> AppendResult | None:
        """Append the leader's batches verbatim (same offsets, same bytes, the idempotent-producer state
        rebuilt from them), then take the leader's high watermark capped by the local log end offset.
        None when `records` is empty."""
        log = self.log
        if log is None or self.state.leader == self.broker_id:
            raise KafkaError(ErrorCode.not_leader_or_follower,
                             f"broker {self.broker_id} is not a follower of {self.topic}-{self.partition}")
        result = log.append(records, assign_offsets=False) if records else None
        self.update_follower_high_watermark(leader_high_watermark)
        return result

    def restart_offset_for(self, records: bytes | memoryview) -> int | None:
        """After `append_records_to_follower` refused `records`: the offset to restart this replica's log at
        before appending them again, or None when the refusal stands (Kafka's
        `appendRecordsToFollowerOrFutureReplica` on UnexpectedAppendOffsetException). That is the first
        batch's base offset when the log is empty (log end == log start) and that batch holds the log end
        past its base offset: the log start lies inside the leader's batch (DeleteRecords put it there
        on the leader, or a truncation to it removed that batch here), and the batch cannot be appended
        after it. The restart itself deletes segments and writes checkpoints: the caller runs it off the
        event loop (`Log.truncate_fully_and_start_at`).
        Only the first batch's header is read (on the event loop: the refused set may be a whole fetch
        answer, and it is validated again by the append that follows the restart anyway); the CRC covers
        neither its base offset nor its length, so checking it would protect nothing used here."""
        log = self.log
        if log is None or self.state.leader == self.broker_id or not records:
            return None
        end = log.log_end_offset
        if end != log.log_start_offset:
            return None  # records here that the batch overlaps: a real divergence, truncation decides
        try:
            head = RecordBatchView.parse(memoryview(records).cast("B"))  # (raises unless the first batch is whole)
        except KafkaError:
            return None  # truncated: the refusal stands
        if head.magic != MAGIC_V2:
            return None
        first = head.base_offset
        return first if first < end <= head.last_offset else None

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        log = self.log
        if log is not None and self.state.leader != self.broker_id and leader_high_watermark >= 0:
            self._leader_hw = leader_high_watermark
            log.update_high_watermark(min(leader_high_watermark, log.log_end_offset))

    def offset_lag(self) -> int:
        """DescribeLogDirs' offset_lag of this replica: a follower, how many offsets its log end is behind
        the high watermark its leader last answered (what it must still copy to be committed up to date);
        the leader, max(high watermark - log end offset, 0), Kafka's formula (0). -1 without a local log.
        (Kafka applies its formula to followers too, where the local high watermark never passes the log
        end, so it always answers 0 for them; kaflite's follower figure is the one an operator wants.)"""
        log = self.log
        if log is None:
            return UNKNOWN
        if self.state.leader != self.broker_id and self._leader_hw >= 0:
            return max(self._leader_hw - log.log_end_offset, 0)
        return max(log.high_watermark - log.log_end_offset, 0)

    # -- append ------------------------------------------------------------------------------------
    def append_records_to_leader(self, records: bytes | memoryview, required_acks: int, now_ms: int) -> AppendResult:
        """Append a producer's (or coordinator's) batches as leader, stamped with the leader epoch; then
        advance the high watermark. Raises NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, or the log's
        own refusals."""
        log = self.log
        state = self.state
        if state.leader != self.broker_id or log is None:
            raise KafkaError(ErrorCode.not_leader_or_follower,
                             f"broker {self.broker_id} is not the leader of {self.topic}-{self.partition}")
        if required_acks == -1 and len(state.isr) < self.min_insync_replicas:
            raise KafkaError(
                ErrorCode.not_enough_replicas,
                f"The size of the current ISR {list(state.isr)} is insufficient to satisfy the min.isr "
                f"requirement of {self.min_insync_replicas} for partition {self.topic}-{self.partition}",
            )
        if not records:
            raise KafkaError(ErrorCode.corrupt_message, "no record batch")
        result = log.append(records, leader_epoch=state.leader_epoch, now_ms=now_ms)
        if self._single and not self.under_min_isr:  # the whole ISR is this broker: all appended is committed
            log.update_high_watermark(log.log_end_offset)
        else:
            self.maybe_increment_high_watermark()
        return result

    def append_txn_marker_to_leader(self, producer_id: int, producer_epoch: int, commit: bool,
                                    coordinator_epoch: int, now_ms: int) -> AppendResult:
        """Write a transaction marker as leader (WriteTxnMarkers, acks=-1), then advance the high watermark.
        A retry of the marker this leader appended last for the producer (same epochs and result, nothing
        written by the producer since) returns that marker's offset instead of appending it again; below
        min.insync.replicas nothing is appended (NOT_ENOUGH_REPLICAS), as Kafka's appendRecordsToLeader."""
        log = self.log
        if self.state.leader != self.broker_id or log is None:
            raise KafkaError(ErrorCode.not_leader_or_follower,
                             f"broker {self.broker_id} is not the leader of {self.topic}-{self.partition}")
        last = self._markers.get(producer_id)
        if last is not None and last[:3] == (producer_epoch, commit, coordinator_epoch) \
                and last[3] < log.log_end_offset and producer_id not in log.producer_state.ongoing:
            # appended, then answered NOT_ENOUGH_REPLICAS_AFTER_APPEND (or the answer was lost): the
            # coordinator sends it again; the caller waits for that marker to be committed instead
            return AppendResult(last[3], last[3], -1, log.log_start_offset, False)
        if len(self.state.isr) < self.min_insync_replicas:
            raise KafkaError(
                ErrorCode.not_enough_replicas,
                f"The size of the current ISR {list(self.state.isr)} is insufficient to satisfy the min.isr "
                f"requirement of {self.min_insync_replicas} for partition {self.topic}-{self.partition}",
            )
        result = log.append_marker(producer_id, producer_epoch, commit, coordinator_epoch,
                                   leader_epoch=self.state.leader_epoch, now_ms=now_ms)
        self._markers[producer_id] = (producer_epoch, commit, coordinator_epoch, result.last_offset)
        if self._single and not self.under_min_isr:
            log.update_high_watermark(log.log_end_offset)
        else:
            self.maybe_increment_high_watermark()
        return result

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """For a delayed acks=-1 produce: (done, error). Done once the high watermark reached
        `required_offset` (the batch's last offset + 1) or this broker stopped leading."""
        log = self.log
        if log is None or self.state.leader != self.broker_id:
            return True, ErrorCode.not_leader_or_follower
        if log.high_watermark >= required_offset:
            if len(self._maximal_isr) < self.min_insync_replicas:
                return True, ErrorCode.not_enough_replicas_after_append
            return True, ErrorCode.none
        return False, ErrorCode.none

    # -- reads and admin -----------------------------------------------------------------------------
    def epoch_for_offset(self, offset: int) -> int:
        """The leader epoch the record at `offset` was written in (the leader-epoch cache), -1 unknown."""
        if self.log is None or offset < 0:
            return UNKNOWN
        epoch = UNKNOWN
        for e, start in self.log.leader_epoch_cache.entries:
            if start > offset:
                break
            epoch = e
        return epoch

    def delete_records_on_leader(self, offset: int) -> int:
        """DeleteRecords: move the log start offset to `offset` (-1: the high watermark); beyond the high
        watermark is OFFSET_OUT_OF_RANGE. Returns the new low watermark (log start offset)."""
        log = self.log
        if log is None:
            raise KafkaError(ErrorCode.not_leader_or_follower, f"no replica of {self.topic}-{self.partition}")
        hw = log.high_watermark
        before = hw if offset == -1 else offset
        if before < 0 or before > hw:
            raise KafkaError(ErrorCode.offset_out_of_range,
                             f"Cannot delete before {before}: the high watermark is {hw}")
        if before > log.log_start_offset:
            log.delete_records(before)
        return log.log_start_offset
