"""The controller's shell (Kafka's ControllerEventManager + the ZooKeeper side of KafkaController): runs
for election through /controller and, while controller, feeds ZooKeeper's events to the pure
`cluster.controller.Controller` and carries out its decisions as guarded ZooKeeper writes.

Rules:
- one thread handles everything, one event at a time (the pure controller is not thread-safe and Kafka's
  controller is single-threaded too); watches and requesters only enqueue;
- every broker runs for controller when /controller is empty (at start and whenever it vanishes); the
  winner bumps /controller_epoch in the same multi-op (`KafkaZkClient`), reads the whole cluster and
  hands it to the controller as ControllerStartup;
- every write carries the election's guard: when ZooKeeper refuses one (a newer controller exists, e.g.
  after this process was frozen past its session), this broker resigns at once and decides nothing more;
  a lost session resigns too;
- ZooKeeper operations are retried while the session lives (`KafkaZkClient.retry_policy`), so a short
  disconnection delays a decision and does not lose it; the controller's context is confirmed only once
  every write of an event succeeded (`Controller.confirm`);
- any other failure while this broker holds /controller (the retries ran out, an illegal state transition,
  a bug, an unreadable znode) rolls the context back, resigns and deletes /controller (retried every
  RESIGN_RETRY_S until done or the session ends), so that an election follows and the new controller,
  maybe this broker again, reads the whole cluster from ZooKeeper (Kafka's triggerControllerMove on an
  illegal state); the requests of the failed event are answered NOT_CONTROLLER;
- compare-and-set failures go back to the controller as WriteOutcome with what ZooKeeper holds (a bounded
  number of rounds), and an AlterPartition answer whose write was stale becomes INVALID_UPDATE_VERSION;
- a leader's ISR change (its compare-and-set of a state znode, then /isr_change_notification/isr_change_<n>)
  makes the controller take the notifications and re-read those states, as after a stale write (Kafka's
  IsrChangeNotification), so the controller never decides from an ISR a leader has changed;
- `leader.imbalance.check.interval.seconds` (ControllerConfig) drives AutoLeaderRebalance while controller
  (the controller itself skips the check when auto.leader.rebalance.enable is false).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace

from kaflite.cluster.controller import Controller, ControllerConfig
from kaflite.cluster.controller.events import (
    AlterPartition,
    AlterPartitionResult,
    AutoLeaderRebalance,
    BrokerChange,
    CancelTopicDeletions,
    CompletePreferredElection,
    CompleteReassignments,
    ControlledShutdown,
    ControllerEvent,
    ControllerStartup,
    CreatePartitionStates,
    Decision,
    DeleteTopic,
    ElectionResults,
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
from kaflite.cluster.zk import (
    BrokersChanged,
    ConfigChanged,
    ControlledShutdownRequested,
    ControllerChanged,
    ControllerEpochZkVersion,
    ControllerMovedError,
    IsrChangesNotified,
    KafkaZkClient,
    PreferredElectionRequested,
    ReassignmentRequested,
    SessionStateChanged,
    TopicAssignmentChanged,
    TopicDeletionRequested,
    TopicsChanged,
    ZkEvent,
)
from kaflite.protocol.errors import ErrorCode

__all__ = ["ControllerService"]

log = logging.getLogger("kaflite.cluster.controller")

MAX_WRITE_ROUNDS = 5
RESIGN_RETRY_S = 1.0  # how soon a failed deletion of /controller (ZooKeeper still unreachable) is tried again


@dataclass(frozen=True)
class _Elect:
    """Run for controller (if /controller is empty)."""


@dataclass(frozen=True)
class _Resign:
    reason: str


@dataclass(frozen=True)
class _Stop:
    pass


@dataclass(frozen=True)
class _GiveUpAgain:
    """Try again to delete /controller, still ours after a failure."""


_Item = ControllerEvent | ZkEvent | _Elect | _Resign | _Stop | _GiveUpAgain


class ControllerService:
    """The controller role of one broker, on a thread of its own."""

    def __init__(
        self,
        zk: KafkaZkClient,
        broker_id: int,
        config: ControllerConfig | None = None,
        on_change: Callable[[int | None, int], None] | None = None,
    ) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.controller = Controller(broker_id, config)
        # leader.imbalance.check.interval.seconds: how often AutoLeaderRebalance fires while controller
        self.rebalance_interval_s = float(self.controller.config.leader_imbalance_check_interval_seconds)
        self.guard: ControllerEpochZkVersion | None = None
        self._on_change = on_change
        self._queue: queue.Queue[tuple[_Item, Future[list[Decision]] | None]] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=f"controller-{broker_id}", daemon=True)
        self._watching = False
        self._next_rebalance = 0.0
        self._retry_resign_at: float | None = None  # /controller still ours after a failure: delete it then

    # --- lifecycle ------------------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()
        self.zk.add_listener(self._enqueue_event)
        self.zk.watch_controller(self._enqueue_event)  # fires at once with the current controller

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._thread.is_alive():
            self._queue.put((_Stop(), None))
            self._thread.join(timeout_s)

    @property
    def is_active(self) -> bool:
        return self.controller.active

    @property
    def epoch(self) -> int:
        return self.controller.epoch if self.controller.active else 0

    def submit(self, event: ControllerEvent) -> Future[list[Decision]]:
        """Hand a request (AlterPartition, ElectLeaders, ControlledShutdown...) to the controller; the
        future holds the decisions it led to (answers included)."""
        fut: Future[list[Decision]] = Future()
        self._queue.put((event, fut))
        return fut

    def _enqueue_event(self, event: ZkEvent) -> None:
        self._queue.put((event, None))

    # --- the event thread ------------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            item, fut = self._next_item()
            if isinstance(item, _Stop):
                self._resign("stopping")
                return
            out = self.process(item)
            if fut is not None:
                if isinstance(out, BaseException):
                    fut.set_exception(out)
                else:
                    fut.set_result(out)

    def _next_item(self) -> tuple[_Item, Future[list[Decision]] | None]:
        deadlines = []
        if self.controller.active:
            deadlines.append(self._next_rebalance)
        if self._retry_resign_at is not None:
            deadlines.append(self._retry_resign_at)
        timeout = max(0.05, min(deadlines) - time.monotonic()) if deadlines else None
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            if self._retry_resign_at is not None and time.monotonic() >= self._retry_resign_at:
                return _GiveUpAgain(), None
            return AutoLeaderRebalance(), None

    def process(self, item: _Item) -> list[Decision] | Exception:
        """Handle one item on the event thread (tests call it directly): its decisions, or the exception
        that failed it, after which this broker is no controller (`_fail`)."""
        try:
            return self._process(item)
        except Exception as e:  # one bad event must not end the controller thread
            log.exception("controller event %s failed", type(item).__name__)
            if self.guard is not None:
                self._fail(f"{type(item).__name__} failed: {type(e).__name__}: {e}")
            return e

    def _fail(self, reason: str) -> None:
        """An unexpected failure while holding /controller: the context may be ahead of ZooKeeper (or
        half-updated), so it is dropped and /controller given up for an election whose winner reads the
        cluster again."""
        self.controller.rollback()
        self._resign(reason)
        self._give_up_controller()

    def _give_up_controller(self) -> None:
        try:
            self.zk.resign_controller(self.broker_id)
        except Exception as e:  # ZooKeeper still unreachable: again soon (the session's end also frees it)
            log.warning("could not delete /controller (%s: %s); trying again in %.0f s",
                        type(e).__name__, e, RESIGN_RETRY_S)
            self._retry_resign_at = time.monotonic() + RESIGN_RETRY_S
            return
        self._retry_resign_at = None

    def _process(self, item: _Item) -> list[Decision]:
        if isinstance(item, _Elect):
            self._elect()
            return []
        if isinstance(item, _Resign):
            self._resign(item.reason)
            return []
        if isinstance(item, _GiveUpAgain):
            if self.controller.active:  # elected again meanwhile (the session ended, /controller with it)
                self._retry_resign_at = None
            else:
                self._give_up_controller()
            return []
        if isinstance(item, ControllerChanged):
            if item.controller_id is None:
                self._elect()
            elif item.controller_id != self.broker_id and self.controller.active:
                self._resign(f"broker {item.controller_id} is controller now")
            return []
        if isinstance(item, SessionStateChanged):
            if item.state == "lost":
                self._retry_resign_at = None  # the ephemeral /controller went with the session
                self._resign("ZooKeeper session expired")
            elif item.state == "connected" and not self.controller.active:
                self._elect()
            return []
        if not self.controller.active:
            # a request still gets its answer (NOT_CONTROLLER): the requester retries elsewhere
            if isinstance(item, AlterPartition | ElectLeaders | ControlledShutdown | ListReassignments) or (
                isinstance(item, PartitionReassignment) and item.from_api
            ):
                return self.controller.handle(item)
            return []
        event = self._translate(item)
        if event is None:
            return []
        if isinstance(event, AutoLeaderRebalance):
            self._next_rebalance = time.monotonic() + self.rebalance_interval_s
        return self._handle(event)

    def _translate(self, item: _Item) -> ControllerEvent | None:
        if isinstance(item, BrokersChanged):
            return BrokerChange(dict(item.epochs))
        if isinstance(item, TopicsChanged):
            new = {}
            unclean: dict[str, bool] = {}
            for t in item.topics - set(self.controller.assignments):
                got = self.zk.get_topic_assignment(t)
                if got is not None:
                    new[t] = got[0]
                    # a topic created with the override: no config-change notification ever tells of it
                    override = self._unclean_override(t)
                    if override is not None:
                        unclean[t] = override
            return TopicChange(frozenset(item.topics), new, unclean)
        if isinstance(item, TopicAssignmentChanged):
            return PartitionModifications(item.assignment) if item.assignment is not None else None
        if isinstance(item, TopicDeletionRequested):
            # the markers as they are now, not as the watch saw them (Kafka's TopicDeletion event reads them
            # when it runs): a marker the watch listed may be gone with its topic, deleted meanwhile, and a
            # topic created again under that name must not be deleted by the stale listing
            return TopicDeletion(frozenset(self.zk.get_topics_marked_for_deletion()))
        if isinstance(item, ReassignmentRequested):
            return PartitionReassignment(dict(item.moves))
        if isinstance(item, PreferredElectionRequested):
            return ElectLeaders(item.partitions, from_znode=True)
        if isinstance(item, ControlledShutdownRequested):
            for b in sorted(item.broker_ids):
                epoch = self.controller.live_brokers.get(b)
                if epoch is not None and b not in self.controller.shutting_down:
                    self._handle(ControlledShutdown(b, epoch))
            return None
        if isinstance(item, IsrChangesNotified):
            # Kafka's IsrChangeNotification: a leader changed these ISRs by compare-and-set; the controller
            # re-reads their states (as after a stale write of its own) so it never decides from an old ISR
            changed = self.zk.take_isr_change_notifications(item.children)
            known = sorted(tp for tp in changed if tp[0] in self.controller.assignments)
            return WriteOutcome(self.zk.get_partition_states(known)) if known else None
        if isinstance(item, ConfigChanged):
            if item.entity_type != "topics":
                return None
            return TopicUncleanElectionChange(item.name, self._unclean_override(item.name))
        if isinstance(item, ControllerEvent):
            return item
        return None

    def _unclean_override(self, topic: str) -> bool | None:
        """The topic's unclean.leader.election.enable override in ZooKeeper (None: none, the broker's)."""
        value = self.zk.get_entity_config("topics", topic).get("unclean.leader.election.enable")
        return None if value is None else value.strip().lower() == "true"

    # --- election ---------------------------------------------------------------------------------------------
    def _elect(self) -> None:
        if self.controller.active:
            return
        try:
            guard = self.zk.register_controller_and_increment_epoch(self.broker_id)
        except ControllerMovedError:
            return  # another broker won: it is the controller, we watch /controller
        self.guard = guard
        self._retry_resign_at = None  # whatever /controller we failed to delete is gone: this one is new
        log.info("broker %d elected controller with epoch %d", self.broker_id, guard.epoch)
        startup = self._read_cluster(guard.epoch)  # a failure here: process() gives /controller up
        self._handle(startup)
        if not self.controller.active:
            return  # its writes failed: resigned, /controller given up
        if not self._watching:
            self._watching = True
            self.zk.watch_cluster(self._enqueue_event)
            self.zk.watch_config_changes(self._enqueue_event)
            self.zk.watch_controlled_shutdowns(self._enqueue_event)
        self._next_rebalance = time.monotonic() + self.rebalance_interval_s
        if self._on_change is not None:
            self._on_change(self.broker_id, guard.epoch)

    def _read_cluster(self, epoch: int) -> ControllerStartup:
        """Kafka's initializeControllerContext: brokers, topics, partition states, pending admin work."""
        _, epochs = self.zk.get_all_brokers_with_epochs()
        topics = {}
        unclean: dict[str, bool] = {}
        for t in sorted(self.zk.get_all_topics()):
            got = self.zk.get_topic_assignment(t)
            if got is not None:
                topics[t] = got[0]
            override = self._unclean_override(t)
            if override is not None:
                unclean[t] = override
        tps = [(t, p) for t, a in topics.items() for p in a.partitions]
        states = self.zk.get_partition_states(tps)
        return ControllerStartup(
            epoch=epoch,
            live_brokers=epochs,
            topics=topics,
            states=states,
            topics_to_delete=frozenset(self.zk.get_topics_marked_for_deletion()),
            reassignments=self.zk.get_reassignment(),
            preferred_elections=frozenset(self.zk.get_preferred_replica_election()),
            topic_unclean=unclean,
        )

    def _resign(self, reason: str) -> None:
        if self.controller.active:
            log.info(
                "broker %d resigns as controller (epoch %d): %s",
                self.broker_id,
                self.controller.epoch,
                reason,
            )
            self.controller.resign()
            if self._on_change is not None:
                self._on_change(None, 0)
        self.guard = None

    # --- carrying out decisions ------------------------------------------------------------------------------------
    def _handle(self, event: ControllerEvent) -> list[Decision]:
        """Hand the event to the controller, carry out its decisions (feeding stale compare-and-sets back),
        and confirm its context only once every write succeeded."""
        decisions = self.controller.handle(event)
        out: list[Decision] = []
        stale_writes: set[TopicPartition] = set()
        try:
            for _ in range(MAX_WRITE_ROUNDS):
                out += decisions
                stale = self._apply(decisions)
                if not stale:
                    break
                stale_writes |= stale
                current = self.zk.get_partition_states(sorted(stale))
                decisions = self.controller.handle(WriteOutcome(current))
            else:
                # the last round's writes are not known to have landed: the context may lead ZooKeeper
                raise RuntimeError(f"partition states still changing under the controller after "
                                   f"{MAX_WRITE_ROUNDS} rounds")
        except ControllerMovedError as e:
            self._resign(str(e))
            return [_not_controller(d) for d in out if _is_answer(d)]
        except Exception as e:
            # a write failed past its retries: some of the event's writes may have landed, so neither the
            # old context nor the new one is ZooKeeper's; resign, /controller goes, the next one reads all
            self._fail(f"{type(event).__name__}: {type(e).__name__}: {e}")
            return [_not_controller(d) for d in out if _is_answer(d)]
        self.controller.confirm()
        return [
            replace(d, error=ErrorCode.invalid_update_version, state=None)
            if isinstance(d, AlterPartitionResult) and d.error is None and d.partition in stale_writes
            else d
            for d in out
        ]

    def _apply(self, decisions: list[Decision]) -> set[TopicPartition]:
        """Perform the writes; the partitions whose compare-and-set found another version."""
        guard = self.guard
        stale: set[TopicPartition] = set()
        for d in decisions:
            if isinstance(d, CreatePartitionStates):
                _, existing = self.zk.create_partition_states(d.states, guard)
                stale |= existing
            elif isinstance(d, UpdatePartitionStates):
                _, bad = self.zk.update_partition_states(d.states, guard)
                stale |= bad
            elif isinstance(d, WriteTopicAssignment):
                self.zk.set_topic_assignment(d.assignment, -1, guard)
            elif isinstance(d, DeleteTopic):
                self.zk.delete_topic(d.topic, guard)
            elif isinstance(d, CancelTopicDeletions):
                self.zk.cancel_topic_deletions(d.topics, guard)
            elif isinstance(d, CompleteReassignments):
                self.zk.remove_reassignments(d.partitions, guard)
            elif isinstance(d, CompletePreferredElection):
                self.zk.delete_preferred_replica_election(guard)
            elif isinstance(d, Log):
                getattr(log, d.level if d.level in ("info", "warning", "error") else "info")(
                    "[controller epoch %d] %s", d.controller_epoch, d.message
                )
        return stale


def _is_answer(d: Decision) -> bool:
    return isinstance(d, AlterPartitionResult | ReassignmentResults | OngoingReassignments | ElectionResults)


def _not_controller(d: Decision) -> Decision:
    if isinstance(d, AlterPartitionResult):
        return replace(d, error=ErrorCode.not_controller, state=None)
    if isinstance(d, ReassignmentResults):
        return replace(d, results={}, error=ErrorCode.not_controller)
    if isinstance(d, ElectionResults):
        return replace(d, results=dict.fromkeys(d.results, ErrorCode.not_controller))
    if isinstance(d, OngoingReassignments):
        return replace(d, reassignments={}, error=ErrorCode.not_controller)
    return d
