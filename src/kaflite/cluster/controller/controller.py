"""The cluster controller as a pure state machine (Kafka's KafkaController with its ControllerContext,
PartitionStateMachine, ReplicaStateMachine and TopicDeletionManager), driven by events, answering with
decisions. No ZooKeeper, no clock, no I/O: the shell turns watches into events and decisions into
guarded znode writes.

Rules:
- nothing is decided before `ControllerStartup` (the election won, with its epoch and the cluster read
  from ZooKeeper); every decision carries that epoch, and every LeaderAndIsr written carries it as its
  controller_epoch, so brokers can ignore a deposed controller and ZooKeeper refuses its writes;
- leader = the first assigned replica that is alive, not in controlled shutdown, and in the ISR (see
  `election`); a new partition is led by its first such replica with every such replica in its ISR,
  leader epoch 0; no election of any kind (offline, unclean, new partition, reassignment, preferred,
  ElectLeaders) picks a broker in controlled shutdown (Kafka's liveBrokerIds leaves them out);
- when brokers die: every partition they led gets a new leader from the live ISR with leader_epoch + 1;
  they leave every ISR (leader epoch + 1), except that the last ISR member is kept, with leader -1, when
  no live replica is in sync (Kafka keeps it so the partition comes back cleanly when that broker
  returns); unclean election (broker default, or the topic's override) then elects the first live
  assigned replica, alone in the ISR, and says so in the log;
- when brokers start (or a broker bounces: a new registration epoch counts as a death then a start),
  offline and new partitions elect again;
- the ISR otherwise changes only by AlterPartition from the current leader, checked against the broker
  epoch, the leader epoch and the partition epoch (the state znode version); the leader epoch does not
  change; every member must be an assigned, live, not shutting down replica;
- preferred election moves leadership to the first assigned replica only when it is alive and in the
  ISR; auto rebalance does it for the partitions of a broker whose share of "not led by its preferred
  replica" exceeds leader.imbalance.per.broker.percentage, and never while a reassignment runs;
- controlled shutdown moves leadership off the broker (to a live ISR member not shutting down) and takes
  it out of every ISR; the partitions of several replicas it still leads (no other live in-sync replica)
  are reported (Kafka's replicatedPartitionsBrokerLeads: a partition of one replica, or of a topic being
  deleted, is not: nothing is to be moved there);
- reassignment (KIP-455, Kafka's onPartitionReassignment): a request (the /admin/reassign_partitions
  znode, or AlterPartitionReassignments where the latest request wins and takes the partition out of the
  znode) is checked as Kafka checks it (a non-empty list of distinct ids >= 0 whose added replicas are
  alive, else INVALID_REPLICA_ASSIGNMENT; a partition that does not exist or whose topic is being deleted
  is UNKNOWN_TOPIC_OR_PARTITION; cancelling (no target) where nothing moves is NO_REASSIGNMENT_IN_PROGRESS;
  a request that does not allow replication factor changes, KIP-860, refuses a valid target whose size
  differs from the replica set the partition has or is moving to with INVALID_REPLICATION_FACTOR).
  The assignment is written first as RS = target + original with adding / removing (so a new controller
  can resume), replicas an earlier move was adding and this one drops are stopped (out of the ISR, then
  deleted); while some target replica is not in the ISR the leader epoch is bumped (the replicas learn
  the replica set) and added replicas are New; once every target replica is in the ISR (checked on every
  ISR change, broker start and controller start) a leader outside the target (or dead) is replaced by the
  first live in-sync target replica, the removed replicas leave the ISR in that same state write and are
  deleted, and only then the assignment becomes the target (ZooKeeper holds the original until the end).
  A cancel is a move back to the original replicas; a new order alone completes at once; a state that
  names a leader or ISR members outside the assignment (a stale switch write, a controller that died
  between the two writes) has them taken out as removed replicas;
- a topic is deleted once none of its replicas is on a dead broker and no reassignment touches it
  (otherwise it waits, ReplicaDeletionIneligible); partitions never shrink;
- the context follows ZooKeeper, never leads it: what an event changes is provisional until the shell
  `confirm()`s that every write it led to succeeded; `rollback()` (and an exception raised while handling,
  e.g. an illegal state transition) restores the context as it was after the last confirm, so a decision
  whose writes failed is never taken for done (Kafka updates its ControllerContext only after a write
  succeeded); the shell then resigns and a new controller reads everything from ZooKeeper;
- within one event each partition gets at most one state write (later changes merge into it, keeping
  the version expected in ZooKeeper); a write that finds another version comes back as WriteOutcome,
  and the partition is re-evaluated from what ZooKeeper holds.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kaflite.cluster.controller.election import (
    Election,
    controlled_shutdown_election,
    offline_election,
    preferred_election,
    reassignment_election,
)
from kaflite.cluster.controller.events import (
    AlterPartition,
    AlterPartitionResult,
    AutoLeaderRebalance,
    BrokerChange,
    CancelTopicDeletions,
    CompletePreferredElection,
    CompleteReassignments,
    ControlledShutdown,
    ControlledShutdownResult,
    ControllerEvent,
    ControllerStartup,
    CreatePartitionStates,
    Decision,
    DeleteTopic,
    ElectionResults,
    ElectionType,
    ElectLeaders,
    ListReassignments,
    Log,
    OngoingReassignments,
    PartitionModifications,
    PartitionReassignment,
    ReassignmentResults,
    TopicChange,
    TopicDeletion,
    TopicPartition,
    TopicUncleanElectionChange,
    UpdatePartitionStates,
    WriteOutcome,
    WriteTopicAssignment,
)
from kaflite.cluster.controller.states import PartitionState, ReplicaState, check_partition, check_replica
from kaflite.cluster.zkdata import LeaderAndIsr, TopicAssignment
from kaflite.protocol.errors import ErrorCode

__all__ = ["Controller", "ControllerConfig"]

NO_LEADER = -1
P, R = PartitionState, ReplicaState


@dataclass(frozen=True)
class ControllerConfig:
    """The broker settings the controller reads (Kafka's names and defaults)."""

    unclean_leader_election_enable: bool = False
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_seconds: float = 300  # the shell's AutoLeaderRebalance timer
    delete_topic_enable: bool = True


@dataclass(frozen=True)
class _Reassignment:
    target: tuple[int, ...]
    original: tuple[int, ...]

    @property
    def replicas(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(self.target + self.original))

    @property
    def adding(self) -> tuple[int, ...]:
        return tuple(r for r in self.target if r not in self.original)

    @property
    def removing(self) -> tuple[int, ...]:
        return tuple(r for r in self.original if r not in self.target)

    @property
    def moving(self) -> bool:
        """Kafka's isBeingReassigned: some replica is added or removed (a new order alone is not)."""
        return bool(self.adding or self.removing)


class Controller:
    """The controller of one broker: inactive until it wins an election (ControllerStartup)."""

    def __init__(self, broker_id: int, config: ControllerConfig | None = None) -> None:
        self.broker_id = broker_id
        self.config = config or ControllerConfig()
        self.active = False
        self.epoch = 0
        self._confirmed: dict[str, Any] | None = None  # the context at the last confirm, while unconfirmed
        self._reset()

    # the context: what a rollback restores (every other attribute is per-event scratch or configuration)
    _CONTEXT = ("active", "epoch", "live_brokers", "shutting_down", "assignments", "topic_ids", "leadership",
                "partition_states", "replica_states", "reassignments", "topics_to_delete", "topic_unclean")

    def _snapshot(self) -> dict[str, Any]:
        # shallow copies suffice: the values are immutable (tuples, frozen dataclasses, enums) except the
        # per-topic assignment dicts, copied one level down
        snap: dict[str, Any] = {}
        for name in self._CONTEXT:
            value = getattr(self, name)
            if name == "assignments":
                value = {t: dict(parts) for t, parts in value.items()}
            elif isinstance(value, dict | set):
                value = value.copy()
            snap[name] = value
        return snap

    def confirm(self) -> None:
        """Every write of the decisions handed out since the last confirm succeeded: the context is
        ZooKeeper's now."""
        self._confirmed = None

    def rollback(self) -> None:
        """Some write of the decisions handed out since the last confirm failed (or was never made): the
        context goes back to what it was at the last confirm, never ahead of ZooKeeper."""
        snap, self._confirmed = self._confirmed, None
        if snap is not None:
            for name, value in snap.items():
                setattr(self, name, value)

    @property
    def unconfirmed(self) -> bool:
        """Decisions were handed out whose writes the shell has not confirmed yet."""
        return self._confirmed is not None

    def _reset(self) -> None:
        self.live_brokers: dict[int, int] = {}
        self.shutting_down: set[int] = set()
        self.assignments: dict[str, dict[int, tuple[int, ...]]] = {}
        self.topic_ids: dict[str, uuid.UUID | None] = {}
        self.leadership: dict[TopicPartition, LeaderAndIsr] = {}
        self.partition_states: dict[TopicPartition, PartitionState] = {}
        self.replica_states: dict[tuple[TopicPartition, int], ReplicaState] = {}
        self.reassignments: dict[TopicPartition, _Reassignment] = {}
        self.topics_to_delete: set[str] = set()
        self.topic_unclean: dict[str, bool] = {}
        self._out: list[Decision] = []
        self._creates: dict[TopicPartition, LeaderAndIsr] = {}
        self._updates: dict[TopicPartition, LeaderAndIsr] = {}
        self._bumped: set[TopicPartition] = set()

    # --- entry point ------------------------------------------------------------------------------------
    def handle(self, event: ControllerEvent) -> list[Decision]:
        """Apply one event; the decisions to carry out, in order. The context changes provisionally until
        `confirm()`; an exception leaves it as at the last confirm."""
        if self._confirmed is None and (self.active or isinstance(event, ControllerStartup)):
            self._confirmed = self._snapshot()  # (an inactive controller only answers NOT_CONTROLLER)
        try:
            return self._handle(event)
        except BaseException:
            self.rollback()
            raise

    def _handle(self, event: ControllerEvent) -> list[Decision]:
        self._out, self._creates, self._updates = [], {}, {}
        if isinstance(event, ControllerStartup):
            self._startup(event)
        elif not self.active:
            self._inactive(event)
        elif isinstance(event, BrokerChange):
            self._broker_change(event)
        elif isinstance(event, TopicChange):
            self._topic_change(event)
        elif isinstance(event, PartitionModifications):
            self._partition_modifications(event)
        elif isinstance(event, TopicDeletion):
            self._topic_deletion(event)
        elif isinstance(event, PartitionReassignment):
            self._reassignment(event)
        elif isinstance(event, ListReassignments):
            self._list_reassignments(event)
        elif isinstance(event, ElectLeaders):
            self._elect_leaders(event)
        elif isinstance(event, AlterPartition):
            self._alter_partition(event)
        elif isinstance(event, ControlledShutdown):
            self._controlled_shutdown(event)
        elif isinstance(event, TopicUncleanElectionChange):
            self._unclean_change(event)
        elif isinstance(event, AutoLeaderRebalance):
            self._auto_rebalance()
        elif isinstance(event, WriteOutcome):
            self._write_outcome(event)
        self._flush()
        return self._out

    def resign(self) -> None:
        """Another broker became controller (or our session ended, or a write failed): forget everything,
        decide nothing."""
        self.active = False
        self._confirmed = None
        self._reset()

    def _inactive(self, event: ControllerEvent) -> None:
        # answers that must still be given: the requester retries against the real controller
        if isinstance(event, AlterPartition):
            self._emit(AlterPartitionResult(self.epoch, event.partition, ErrorCode.not_controller, None))
        elif isinstance(event, ElectLeaders):
            self._emit(
                ElectionResults(self.epoch, {tp: ErrorCode.not_controller for tp in event.partitions or ()})
            )
        elif isinstance(event, PartitionReassignment) and event.from_api:
            self._emit(ReassignmentResults(self.epoch, {}, ErrorCode.not_controller))
        elif isinstance(event, ListReassignments):
            self._emit(OngoingReassignments(self.epoch, {}, ErrorCode.not_controller))

    # --- writes -------------------------------------------------------------------------------------------
    def _emit(self, decision: Decision) -> None:
        self._flush()
        self._out.append(decision)

    def _flush(self) -> None:
        if self._creates:
            self._out.append(CreatePartitionStates(self.epoch, dict(self._creates)))
        if self._updates:
            self._out.append(UpdatePartitionStates(self.epoch, dict(self._updates)))
        self._creates, self._updates = {}, {}
        self._bumped = set()

    def _next_epoch(self, tp: TopicPartition) -> int:
        """The leader epoch for a reassignment write: + 1, unless the write still pending for this
        partition in this event bumped it already (one write, one bump)."""
        st = self.leadership[tp]
        if tp in self._bumped and (tp in self._updates or tp in self._creates):
            return st.leader_epoch
        self._bumped.add(tp)
        return st.leader_epoch + 1

    def _log(self, level: str, message: str) -> None:
        self._emit(Log(self.epoch, level, message))

    def _write(self, tp: TopicPartition, leader: int, leader_epoch: int, isr: Iterable[int]) -> None:
        """Record the partition's new leader and ISR; one write per partition per event."""
        new = LeaderAndIsr(leader, leader_epoch, tuple(isr), self.epoch)
        if tp in self._creates:
            self._creates[tp] = new
            self.leadership[tp] = _versioned(new, 0)
        elif tp in self._updates:
            expected = self._updates[tp].zk_version
            self._updates[tp] = _versioned(new, expected)
            self.leadership[tp] = _versioned(new, expected + 1)
        elif tp in self.leadership:
            expected = self.leadership[tp].zk_version
            self._updates[tp] = _versioned(new, expected)
            self.leadership[tp] = _versioned(new, expected + 1)
        else:
            self._creates[tp] = new
            self.leadership[tp] = _versioned(new, 0)

    def _write_assignment(self, topic: str) -> None:
        parts = self.assignments.get(topic, {})
        adding = {p: r.adding for (t, p), r in self.reassignments.items() if t == topic and r.adding}
        removing = {p: r.removing for (t, p), r in self.reassignments.items() if t == topic and r.removing}
        assignment = TopicAssignment(topic, dict(parts), self.topic_ids.get(topic), adding, removing)
        self._emit(WriteTopicAssignment(self.epoch, assignment))

    # --- state machines -------------------------------------------------------------------------------------
    def _set_partition(self, tp: TopicPartition, target: PartitionState) -> None:
        check_partition(tp, self.partition_states.get(tp, P.NON_EXISTENT), target)
        if target is P.NON_EXISTENT:
            self.partition_states.pop(tp, None)
        else:
            self.partition_states[tp] = target

    def _set_replica(self, tp: TopicPartition, replica: int, target: ReplicaState) -> None:
        key = (tp, replica)
        current = self.replica_states.get(key, R.NON_EXISTENT)
        if current is target and target is not R.ONLINE and target is not R.OFFLINE:
            return
        check_replica(key, current, target)
        if target is R.NON_EXISTENT:
            self.replica_states.pop(key, None)
        else:
            self.replica_states[key] = target

    def _unclean(self, topic: str) -> bool:
        return self.topic_unclean.get(topic, self.config.unclean_leader_election_enable)

    def _replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.assignments.get(tp[0], {}).get(tp[1], ())

    def _partitions(self) -> list[TopicPartition]:
        return sorted((t, p) for t, parts in self.assignments.items() for p in parts)

    def _is_live(self, broker: int) -> bool:
        return broker in self.live_brokers

    def _electable(self) -> set[int]:
        """The brokers a leader may be elected from: alive and not in controlled shutdown (Kafka's
        ControllerContext.liveBrokerIds leaves the shutting-down brokers out)."""
        return set(self.live_brokers) - self.shutting_down

    # --- startup ------------------------------------------------------------------------------------------
    def _startup(self, ev: ControllerStartup) -> None:
        self._reset()
        self.active = True
        self.epoch = ev.epoch
        self.live_brokers = dict(ev.live_brokers)
        self.topic_unclean = {t: v for t, v in ev.topic_unclean.items() if t in ev.topics}
        for topic, a in ev.topics.items():
            self.assignments[topic] = dict(a.partitions)
            self.topic_ids[topic] = a.topic_id
            for p, target in a.partitions.items():
                # an interrupted reassignment: the znode holds RS with adding/removing
                adding, removing = a.adding_replicas.get(p, ()), a.removing_replicas.get(p, ())
                if adding or removing:
                    original = tuple(r for r in target if r not in adding)
                    tgt = tuple(r for r in target if r not in removing)
                    self.reassignments[(topic, p)] = _Reassignment(tgt, original)
        for tp in self._partitions():
            state = ev.states.get(tp)
            if state is None:
                self.partition_states[tp] = P.NEW
            else:
                self.leadership[tp] = state
                self.partition_states[tp] = P.ONLINE if self._is_live(state.leader) else P.OFFLINE
            for r in self._replicas(tp):
                self.replica_states[(tp, r)] = R.ONLINE if self._is_live(r) else R.OFFLINE
        self._log("info", f"broker {self.broker_id} is controller with epoch {self.epoch}")
        if ev.topics_to_delete:
            self._topic_deletion(TopicDeletion(ev.topics_to_delete))
        # what the previous controller may have left undone: leaders on dead brokers, dead ISR members
        dead = {r for tp in self._partitions() for r in self._replicas(tp) if not self._is_live(r)}
        self._trigger_online_partitions()
        self._replicas_offline(dead)
        for tp in self._partitions():
            self._repair_outside_replicas(tp)
        # moves under way resume (Kafka's initializePartitionReassignments), then the znode's requests
        # (one naming a move under way with the same target is that move, already resumed)
        zk_moves = dict(ev.reassignments)
        for tp, moving in sorted(self.reassignments.items()):
            if tp not in zk_moves or tuple(zk_moves[tp]) == moving.target:
                self._on_partition_reassignment(tp, moving)
        if zk_moves:
            self._reassignment(PartitionReassignment(zk_moves))
        self._resume_deletions()
        if ev.preferred_elections:
            self._elect_leaders(ElectLeaders(ev.preferred_elections, ElectionType.PREFERRED, from_znode=True))

    # --- brokers --------------------------------------------------------------------------------------------
    def _broker_change(self, ev: BrokerChange) -> None:
        old, new = self.live_brokers, dict(ev.live_brokers)
        started = {b for b in new if b not in old}
        dead = {b for b in old if b not in new}
        # died and came back between two events (a new registration epoch): both transitions, in order
        bounced = {b for b in new if b in old and new[b] != old[b]}
        self.shutting_down -= dead | bounced
        if dead | bounced:
            self.live_brokers = {b: e for b, e in new.items() if b not in bounced}
            self._on_brokers_failed(dead | bounced)
        self.live_brokers = new
        if started | bounced:
            self._on_brokers_started(started | bounced)

    def _on_brokers_failed(self, dead: set[int]) -> None:
        self._log("info", f"brokers {sorted(dead)} failed")
        for tp in self._partitions():
            st = self.leadership.get(tp)
            if st is not None and st.leader in dead and tp[0] not in self.topics_to_delete:
                self._set_partition(tp, P.OFFLINE)
        self._trigger_online_partitions()
        self._replicas_offline(dead)
        self._resume_deletions()  # a topic being deleted with a replica on a dead broker must wait

    def _on_brokers_started(self, started: set[int]) -> None:
        self._log("info", f"brokers {sorted(started)} started")
        for tp in self._partitions():
            for r in self._replicas(tp):
                if r in started:
                    state = self.replica_states.get((tp, r), R.NON_EXISTENT)
                    if state in (R.OFFLINE, R.DELETION_INELIGIBLE, R.NEW, R.ONLINE):
                        self._set_replica(tp, r, R.ONLINE)
        self._trigger_online_partitions()
        for tp in list(self.reassignments):
            self._maybe_complete_reassignment(tp)
        self._resume_deletions()

    def _trigger_online_partitions(self, only: Iterable[TopicPartition] | None = None) -> None:
        """Elect a leader for every New or Offline partition (Kafka's triggerOnlinePartitionStateChange)."""
        candidates = sorted(only) if only is not None else self._partitions()
        for tp in candidates:
            state = self.partition_states.get(tp)
            if state not in (P.NEW, P.OFFLINE) or tp[0] in self.topics_to_delete:
                continue
            if state is P.NEW and tp not in self.leadership:
                self._initialize_leader(tp)
            else:
                self._offline_election(tp)

    def _initialize_leader(self, tp: TopicPartition) -> None:
        electable = self._electable()
        live = [r for r in self._replicas(tp) if r in electable]
        if not live:
            self._log(
                "error",
                f"no leader for new partition {tp[0]}-{tp[1]}: none of {list(self._replicas(tp))} is alive "
                "(and not shutting down)",
            )
            return
        self._write(tp, live[0], 0, live)
        self._set_partition(tp, P.ONLINE)

    def _offline_election(self, tp: TopicPartition) -> None:
        current = self.leadership[tp]
        if current.leader != NO_LEADER and self._is_live(current.leader):
            self._set_partition(tp, P.ONLINE)  # its leader is alive after all (a stale read)
            return
        e = offline_election(self._replicas(tp), current.isr, self._electable(), self._unclean(tp[0]))
        if e is None:
            self._set_partition(tp, P.OFFLINE)
            return
        if e.unclean:
            self._log(
                "warning",
                f"unclean leader election for {tp[0]}-{tp[1]}: broker {e.leader} leads although it was not "
                f"in the ISR {list(current.isr)}; records only those replicas had are lost",
            )
        self._write(tp, e.leader, current.leader_epoch + 1, e.isr)
        self._set_partition(tp, P.ONLINE)

    def _replicas_offline(self, dead: set[int], scope: Iterable[TopicPartition] | None = None) -> None:
        """Dead (or shutting down) replicas leave every ISR; a leader among them leaves its partition
        leaderless. The last ISR member stays in the ISR (Kafka keeps it for a clean election later)."""
        if not dead:
            return
        for tp in sorted(scope) if scope is not None else self._partitions():
            for r in self._replicas(tp):
                if r in dead and tp[0] not in self.topics_to_delete:
                    self._set_replica(tp, r, R.OFFLINE)
            st = self.leadership.get(tp)
            if st is None or tp[0] in self.topics_to_delete or not any(r in dead for r in st.isr):
                continue
            isr = tuple(r for r in st.isr if r not in dead)
            if not isr:
                order = {r: i for i, r in enumerate(self._replicas(tp))}
                isr = (min(st.isr, key=lambda r: order.get(r, len(order))),)
            leader = NO_LEADER if st.leader in dead else st.leader
            if isr == st.isr and leader == st.leader:
                continue
            self._write(tp, leader, st.leader_epoch + 1, isr)
            if leader == NO_LEADER:
                self._set_partition(tp, P.OFFLINE)

    # --- topics ------------------------------------------------------------------------------------------------
    def _topic_change(self, ev: TopicChange) -> None:
        for topic in sorted(set(self.assignments) - ev.topics):
            self._forget_topic(topic)  # removed from ZooKeeper (our deletion, or by hand)
        for topic, a in sorted(ev.new_assignments.items()):
            if topic in self.assignments or topic not in ev.topics:
                continue
            self.topic_ids[topic] = a.topic_id
            self.assignments[topic] = {}
            if topic in ev.new_unclean:  # before its first elections, which may need it
                self.topic_unclean[topic] = ev.new_unclean[topic]
            self._new_partitions(topic, a.partitions)

    def _partition_modifications(self, ev: PartitionModifications) -> None:
        topic = ev.assignment.topic
        if topic not in self.assignments:
            return
        if topic in self.topics_to_delete:
            self._log("info", f"partitions of {topic} changed while it is being deleted: ignored")
            return
        known = self.assignments[topic]
        missing = sorted(set(known) - set(ev.assignment.partitions))
        if missing:
            self._log(
                "error",
                f"topic {topic} lost partitions {missing} in ZooKeeper: partitions never shrink, ignored",
            )
        added = {p: r for p, r in ev.assignment.partitions.items() if p not in known}
        if added:
            self._new_partitions(topic, added)

    def _new_partitions(self, topic: str, partitions: Mapping[int, tuple[int, ...]]) -> None:
        """Kafka's onNewPartitionCreation: New partitions and replicas, then a leader each."""
        tps = []
        for p, replicas in sorted(partitions.items()):
            tp = (topic, p)
            self.assignments[topic][p] = tuple(replicas)
            self._set_partition(tp, P.NEW)
            for r in replicas:
                self._set_replica(tp, r, R.NEW)
            tps.append(tp)
        self._trigger_online_partitions(tps)
        for tp in tps:
            for r in self._replicas(tp):
                self._set_replica(tp, r, R.ONLINE if self._is_live(r) else R.OFFLINE)

    def _forget_topic(self, topic: str) -> None:
        for p in self.assignments.pop(topic, {}):
            tp = (topic, p)
            self.leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
            self.reassignments.pop(tp, None)
        self.replica_states = {k: v for k, v in self.replica_states.items() if k[0][0] != topic}
        self.topic_ids.pop(topic, None)
        self.topics_to_delete.discard(topic)
        self.topic_unclean.pop(topic, None)

    def _topic_deletion(self, ev: TopicDeletion) -> None:
        cancelled = set()
        for topic in sorted(ev.topics):
            if topic not in self.assignments:
                cancelled.add(topic)  # a marker for a topic that does not exist
            elif not self.config.delete_topic_enable:
                self._log("warning", f"topic {topic} not deleted: delete.topic.enable is false")
                cancelled.add(topic)
            else:
                self.topics_to_delete.add(topic)
        if cancelled:
            self._emit(CancelTopicDeletions(self.epoch, frozenset(cancelled)))
        self._resume_deletions()

    def _resume_deletions(self) -> None:
        for topic in sorted(self.topics_to_delete):
            parts = self.assignments.get(topic, {})
            dead = sorted({r for replicas in parts.values() for r in replicas if not self._is_live(r)})
            if dead or any(t == topic for t, _ in self.reassignments):
                for p, replicas in parts.items():
                    for r in replicas:
                        if not self._is_live(r):
                            self._set_replica((topic, p), r, R.OFFLINE)
                            self._set_replica((topic, p), r, R.DELETION_INELIGIBLE)
                continue
            for p, replicas in sorted(parts.items()):
                tp = (topic, p)
                if self.partition_states.get(tp, P.NON_EXISTENT) is not P.NON_EXISTENT:
                    self._set_partition(tp, P.OFFLINE)
                    self._set_partition(tp, P.NON_EXISTENT)
                for r in replicas:
                    for step in (R.OFFLINE, R.DELETION_STARTED, R.DELETION_SUCCESSFUL, R.NON_EXISTENT):
                        self._set_replica(tp, r, step)
            self._forget_topic(topic)
            self._emit(DeleteTopic(self.epoch, topic))
            self._log("info", f"topic {topic} deleted")

    def _unclean_change(self, ev: TopicUncleanElectionChange) -> None:
        if ev.enabled is None:
            self.topic_unclean.pop(ev.topic, None)
        else:
            self.topic_unclean[ev.topic] = ev.enabled
        if self._unclean(ev.topic):
            self._trigger_online_partitions([(ev.topic, p) for p in self.assignments.get(ev.topic, {})])

    # --- elections on request ---------------------------------------------------------------------------------
    def _elect_leaders(self, ev: ElectLeaders) -> None:
        results: dict[TopicPartition, ErrorCode | None] = {}
        targets = sorted(ev.partitions) if ev.partitions is not None else self._partitions()
        live = set(self.live_brokers)
        for tp in targets:
            st = self.leadership.get(tp)
            if (
                tp[0] not in self.assignments
                or tp[1] not in self.assignments[tp[0]]
                or tp[0] in self.topics_to_delete
            ):
                results[tp] = ErrorCode.unknown_topic_or_partition
                continue
            replicas = self._replicas(tp)
            if ev.election_type is ElectionType.PREFERRED:
                if st is not None and replicas and st.leader == replicas[0]:
                    results[tp] = ErrorCode.election_not_needed
                    continue
                e: Election | None = preferred_election(
                    replicas, st.isr if st else (), live - self.shutting_down
                )
                if e is None or st is None:
                    results[tp] = ErrorCode.preferred_leader_not_available
                    continue
            else:
                if st is not None and st.leader != NO_LEADER and self._is_live(st.leader):
                    results[tp] = ErrorCode.election_not_needed
                    continue
                e = offline_election(replicas, st.isr if st else (), self._electable(), unclean_allowed=True)
                if e is None or st is None:
                    results[tp] = ErrorCode.eligible_leaders_not_available
                    continue
                if e.unclean:
                    self._log(
                        "warning",
                        f"unclean leader election for {tp[0]}-{tp[1]} (ElectLeaders): broker "
                        f"{e.leader} leads, the ISR was {list(st.isr)}; records only they had are lost",
                    )
            self._write(tp, e.leader, st.leader_epoch + 1, e.isr)
            self._set_partition(tp, P.ONLINE)
            results[tp] = None
        if ev.partitions is None:
            # "every partition": not needed is not an error worth reporting per partition
            results = {tp: r for tp, r in results.items() if r is not ErrorCode.election_not_needed}
        self._emit(ElectionResults(self.epoch, results))
        if ev.from_znode:
            self._emit(CompletePreferredElection(self.epoch))

    def _auto_rebalance(self) -> None:
        if not self.config.auto_leader_rebalance_enable or self.reassignments:
            return
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp in self._partitions():
            replicas = self._replicas(tp)
            if replicas and tp[0] not in self.topics_to_delete:
                by_preferred.setdefault(replicas[0], []).append(tp)
        threshold = self.config.leader_imbalance_per_broker_percentage
        for broker, tps in sorted(by_preferred.items()):
            not_led = [tp for tp in tps if (st := self.leadership.get(tp)) is None or st.leader != broker]
            if not not_led or len(not_led) * 100 <= threshold * len(tps):
                continue
            if not self._is_live(broker) or broker in self.shutting_down:
                continue
            moved = []
            for tp in not_led:
                st = self.leadership.get(tp)
                if st is not None and broker in st.isr:
                    self._write(tp, broker, st.leader_epoch + 1, st.isr)
                    self._set_partition(tp, P.ONLINE)
                    moved.append(tp)
            if moved:
                self._log(
                    "info", f"auto rebalance: broker {broker} leads again {len(moved)} partitions it prefers"
                )

    # --- AlterPartition ---------------------------------------------------------------------------------------
    def _alter_partition(self, ev: AlterPartition) -> None:
        tp = ev.partition

        def answer(error: ErrorCode | None, state: LeaderAndIsr | None = None) -> None:
            self._emit(AlterPartitionResult(self.epoch, tp, error, state))

        if self.live_brokers.get(ev.broker_id) != ev.broker_epoch:
            return answer(ErrorCode.stale_broker_epoch)
        st = self.leadership.get(tp)
        if st is None or tp[0] in self.topics_to_delete:
            return answer(ErrorCode.unknown_topic_or_partition)
        if ev.leader_epoch != st.leader_epoch or st.leader != ev.broker_id:
            return answer(ErrorCode.fenced_leader_epoch)
        if ev.partition_epoch != st.zk_version:
            return answer(ErrorCode.invalid_update_version)
        replicas = self._replicas(tp)
        if not ev.new_isr or st.leader not in ev.new_isr or len(set(ev.new_isr)) != len(ev.new_isr):
            return answer(ErrorCode.invalid_request)
        if any(r not in replicas or not self._is_live(r) or r in self.shutting_down for r in ev.new_isr):
            return answer(ErrorCode.ineligible_replica)
        if tuple(ev.new_isr) != st.isr:
            self._write(tp, st.leader, st.leader_epoch, ev.new_isr)
        answer(None, self.leadership[tp])
        self._maybe_complete_reassignment(tp)

    # --- controlled shutdown --------------------------------------------------------------------------------------
    def _controlled_shutdown(self, ev: ControlledShutdown) -> None:
        b = ev.broker_id
        if self.live_brokers.get(b) != ev.broker_epoch:
            self._log(
                "warning", f"controlled shutdown of broker {b} refused: stale broker epoch {ev.broker_epoch}"
            )
            self._emit(ControlledShutdownResult(self.epoch, b, frozenset()))
            return
        self.shutting_down.add(b)
        live = set(self.live_brokers)
        followers = []
        remaining: set[TopicPartition] = set()
        moved = unreplicated = 0
        for tp in self._partitions():
            replicas = self._replicas(tp)
            st = self.leadership.get(tp)
            if b not in replicas or st is None or tp[0] in self.topics_to_delete:
                continue
            if len(replicas) < 2:  # nobody else could lead it, and no ISR to leave: left alone
                if st.leader == b:
                    unreplicated += 1
                continue
            if st.leader == b:
                e = controlled_shutdown_election(replicas, st.isr, live, self.shutting_down)
                if e is None:
                    remaining.add(tp)
                else:
                    self._write(tp, e.leader, st.leader_epoch + 1, e.isr)
                    moved += 1
            elif b in st.isr:
                followers.append(tp)
        self._replicas_offline({b}, followers)
        # (a partition of one replica has nobody to hand off to: counted apart, neither moved nor left behind)
        single = f"; {unreplicated} partition(s) of a single replica stay led there" if unreplicated else ""
        self._log("info", f"controlled shutdown of broker {b}: {len(remaining)} partition(s) left led there, "
                          f"leadership of {moved} moved{single}")
        self._emit(ControlledShutdownResult(self.epoch, b, frozenset(remaining)))

    # --- reassignment (Kafka's onPartitionReassignment, KIP-455) ------------------------------------------------
    def _reassignment(self, ev: PartitionReassignment) -> None:
        results: dict[TopicPartition, tuple[ErrorCode | None, str | None]] = {}
        to_start: dict[TopicPartition, _Reassignment] = {}
        for tp, target in sorted(ev.moves.items()):
            target = None if target is None else tuple(target)
            invalid = self._validate_replicas(tp, target) if target is not None else None
            if invalid is not None:
                results[tp] = invalid
                continue
            current = self.reassignments.get(tp)
            if target is not None and not ev.allow_replication_factor_change:
                now = len(current.target) if current is not None else len(self._replicas(tp))
                if now and len(target) != now:  # (no replicas: the partition does not exist, answered below)
                    results[tp] = (ErrorCode.invalid_replication_factor,
                                   f"The replication factor of {tp[0]}-{tp[1]} would change from {now} to "
                                   f"{len(target)}, which this request does not allow.")
                    continue
            if current is None and target is None:
                results[tp] = (ErrorCode.no_reassignment_in_progress, None)
                continue
            if not ev.from_api and current is not None and current.target == target:
                continue  # the znode's watch fired again for a move already under way
            original = current.original if current is not None else self._replicas(tp)
            to_start[tp] = _Reassignment(target if target is not None else original, original)
        if ev.from_api and to_start:
            # the latest request wins: the znode forgets the partitions the API now moves
            self._emit(CompleteReassignments(self.epoch, frozenset(to_start)))
        for tp, r in to_start.items():
            if tp[0] in self.topics_to_delete or not self._replicas(tp):
                results[tp] = (ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
                continue
            self._on_partition_reassignment(tp, r)
            results[tp] = (None, None)
        if ev.from_api:
            self._emit(ReassignmentResults(self.epoch, results))
            return
        failed = {tp: res for tp, res in results.items() if res[0] is not None}
        for tp, (error, message) in sorted(failed.items()):
            name = error.name.upper() if error is not None else "?"
            self._log("error", f"reassignment of {tp[0]}-{tp[1]} refused: {name}: {message or ''}".rstrip(": "))
        if failed:
            self._emit(CompleteReassignments(self.epoch, frozenset(failed)))

    def _validate_replicas(
        self, tp: TopicPartition, target: tuple[int, ...]
    ) -> tuple[ErrorCode, str] | None:
        """Kafka's validateReplicas: a non-empty list of distinct broker ids >= 0 whose added replicas are
        on live brokers."""
        bad = ErrorCode.invalid_replica_assignment
        if not target:
            return bad, "Empty replica list specified in partition reassignment."
        if len(set(target)) != len(target):
            return bad, f"Duplicate replica ids in partition reassignment replica list: {list(target)}"
        if any(r < 0 for r in target):
            return bad, f"Invalid broker id in replica list: {list(target)}"
        current = self.reassignments.get(tp)
        original = current.original if current is not None else self._replicas(tp)
        adding = [r for r in target if r not in original]
        if any(not self._is_live(r) for r in adding):
            return bad, (
                f"Replica assignment has brokers that are not alive. Replica list: {adding}, "
                f"live broker list: {sorted(self.live_brokers)}"
            )
        return None

    def _on_partition_reassignment(self, tp: TopicPartition, r: _Reassignment) -> None:
        """Phase U (record RS = target + original with adding / removing; stop the replicas an earlier
        move was adding that this one drops), then phase A (not every target replica in the ISR: leader
        epoch + 1, added replicas New) or phase B (complete)."""
        current = self.reassignments.get(tp)
        before = self._replicas(tp)
        if r.replicas != before or (current is not None and current != r) or (current is None and r.moving):
            self.assignments[tp[0]][tp[1]] = r.replicas
            if r.moving:
                self.reassignments[tp] = r
            else:
                self.reassignments.pop(tp, None)
            self._write_assignment(tp[0])  # U1: ZooKeeper first, so a new controller can resume
            unneeded = [x for x in before if x not in r.replicas]
            if unneeded:  # U3: a cancelled or replaced move drops replicas it was adding
                self._stop_removed_replicas(tp, unneeded)
        elif r.moving:
            self.reassignments[tp] = r
        st = self.leadership.get(tp)
        if r.moving and (st is None or not all(t in st.isr for t in r.target)):
            if st is not None:  # A1: the replicas learn the new replica set with a newer epoch
                self._write(tp, st.leader, self._next_epoch(tp), st.isr)
            for a in r.adding:  # A2
                if self.replica_states.get((tp, a), R.NON_EXISTENT) is R.NON_EXISTENT:
                    self._set_replica(tp, a, R.NEW)
            return
        self._complete_reassignment(tp, r)

    def _complete_reassignment(self, tp: TopicPartition, r: _Reassignment) -> None:
        """Phase B: every target replica is in the ISR (or nothing was moving: a new order, a cancel)."""
        for a in r.adding:  # B1
            self._set_replica(tp, a, R.ONLINE if self._is_live(a) else R.OFFLINE)
        self.assignments[tp[0]][tp[1]] = r.target  # B2
        self.reassignments.pop(tp, None)
        st = self.leadership.get(tp)
        if st is not None:  # B3: a leader outside the target (or dead) is replaced by a target replica
            if st.leader not in r.target or not self._is_live(st.leader):
                e = reassignment_election(r.target, st.isr, self._electable())
                if e is not None:
                    self._write(tp, e.leader, self._next_epoch(tp), e.isr)
                    self._set_partition(tp, P.ONLINE)
                else:
                    self._log("error", f"reassignment of {tp[0]}-{tp[1]}: no live target replica in the ISR")
            else:
                self._write(tp, st.leader, self._next_epoch(tp), st.isr)
        if r.removing:  # B4, B5: out of the ISR (in the same state write), then deleted on their brokers
            self._stop_removed_replicas(tp, r.removing)
        if r.moving:  # B6 (a cancel or a new order was written in phase U already)
            self._write_assignment(tp[0])
        self._emit(CompleteReassignments(self.epoch, frozenset({tp})))  # B7
        self._log("info", f"reassignment of {tp[0]}-{tp[1]} to {list(r.target)} completed")

    def _stop_removed_replicas(self, tp: TopicPartition, removed: Iterable[int]) -> None:
        """Removed replicas leave the ISR (Kafka's OfflineReplica: the last member stays, leaderless)
        and go through deletion to NonExistent; their brokers delete the log when the assignment no
        longer names them."""
        removed = set(removed)
        st = self.leadership.get(tp)
        if st is not None and any(x in st.isr for x in removed):
            isr = tuple(x for x in st.isr if x not in removed) or st.isr
            leader = st.leader
            if leader in removed:
                e = offline_election(self._replicas(tp), isr, self._electable(), unclean_allowed=False)
                leader, isr = (e.leader, e.isr) if e is not None else (NO_LEADER, isr)
                if leader == NO_LEADER:
                    self._set_partition(tp, P.OFFLINE)
            self._write(tp, leader, self._next_epoch(tp), isr)
        for x in sorted(removed):
            if self.replica_states.get((tp, x), R.NON_EXISTENT) is R.NON_EXISTENT:
                continue
            for step in (R.OFFLINE, R.DELETION_STARTED, R.DELETION_SUCCESSFUL, R.NON_EXISTENT):
                self._set_replica(tp, x, step)

    def _repair_outside_replicas(self, tp: TopicPartition) -> None:
        """A state naming a leader or ISR members the assignment no longer has (a reassignment's state write
        found another version while its assignment write landed, or a controller died between the two):
        they leave, as removed replicas do."""
        st = self.leadership.get(tp)
        replicas = self._replicas(tp)
        if st is None or not replicas or tp[0] in self.topics_to_delete:
            return
        outside = [r for r in st.isr if r not in replicas]
        if st.leader != NO_LEADER and st.leader not in replicas and st.leader not in outside:
            outside.append(st.leader)
        if outside and st.leader == NO_LEADER and all(r in outside for r in st.isr):
            return  # nothing in sync is left among the replicas: kept as it is, offline (as Kafka keeps it)
        if outside:
            self._log("warning", f"{tp[0]}-{tp[1]}: {outside} led or were in sync outside the replicas "
                                 f"{list(replicas)}: taken out")
            self._stop_removed_replicas(tp, outside)

    def _maybe_complete_reassignment(self, tp: TopicPartition) -> None:
        """An ISR changed (or a broker came back): complete the move once every target replica is in sync."""
        r = self.reassignments.get(tp)
        st = self.leadership.get(tp)
        if r is not None and st is not None and all(t in st.isr for t in r.target):
            self._on_partition_reassignment(tp, r)

    def _list_reassignments(self, ev: ListReassignments) -> None:
        wanted = self.reassignments if ev.partitions is None else ev.partitions
        out = {
            tp: (r.replicas, r.adding, r.removing)
            for tp in sorted(wanted)
            if (r := self.reassignments.get(tp)) is not None
        }
        self._emit(OngoingReassignments(self.epoch, out))

    # --- write feedback -----------------------------------------------------------------------------------------
    def _write_outcome(self, ev: WriteOutcome) -> None:
        for tp, current in sorted(ev.stale.items(), key=lambda kv: kv[0]):
            if tp not in self.partition_states:
                continue
            if current is None:
                self.leadership.pop(tp, None)
                self.partition_states[tp] = P.NEW
                self._trigger_online_partitions([tp])
                continue
            self.leadership[tp] = current
            live_leader = current.leader != NO_LEADER and self._is_live(current.leader)
            self.partition_states[tp] = P.ONLINE if live_leader else P.OFFLINE
            self._trigger_online_partitions([tp])
            dead = {r for r in self.leadership[tp].isr if not self._is_live(r)}
            self._replicas_offline(dead, [tp])
            self._repair_outside_replicas(tp)
            # a leader's ISR change (IsrChangeNotification) may complete a reassignment
            self._maybe_complete_reassignment(tp)


def _versioned(state: LeaderAndIsr, zk_version: int) -> LeaderAndIsr:
    return LeaderAndIsr(state.leader, state.leader_epoch, state.isr, state.controller_epoch, zk_version)
