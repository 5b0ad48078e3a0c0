"""The ZooKeeper client of a kaflite broker (Kafka's `KafkaZkClient`): every read and write of Kafka's znode
layout, over the session layer (`cluster.zk_session.ZooKeeperSession`: connection, retries, expiry,
session events, the zk-watch thread); these two modules are the only ones that import kazoo.

Rules:
- every znode and its JSON are Kafka's (`cluster.zkdata`); every path is relative to the chroot;
- a broker registers itself as an EPHEMERAL /brokers/ids/<id>; an id held by another live session is
  refused with `BrokerIdInUseError` (a retried create by our own session is not an error); after a session
  expiry the broker is registered again, and the partition state watches are armed again;
- controller election is one atomic multi-op: create the ephemeral /controller AND set
  /controller_epoch to epoch + 1 at the version just read; whoever loses gets `ControllerMovedError`;
- every write a controller makes carries a guard (`ControllerEpochZkVersion`): the multi-op first checks
  that /controller_epoch still has the version this controller wrote, so a deposed controller (a newer
  election changed it) cannot write anything: its write fails with `ControllerMovedError`;
- partition state znodes change by compare-and-set on their version: a write at a stale version is
  reported back (not retried blindly), so the controller and a leader never overwrite each other silently;
- every read, and every write whose repetition is harmless (compare-and-set, guarded multi-ops, deletes,
  idempotent creates), is `retried` while the session lives (the session layer's rule); a retried write
  that had landed shows as a stale version or an existing znode, which callers already handle, and an
  election whose multi-op landed is won on retry; creates that answer "already exists" to the caller
  (topics, reassignment and election requests) are not retried, since a retry of one that landed would
  refuse it;
- watches become typed events handed to a callback (`ZkEvent`); what kazoo calls on its single callback
  thread only enqueues: the reads an event needs (the brokers' registrations, a config change's entity,
  a new topic's watch) and the callback itself run on the session's `zk-watch` thread, one at a time in
  the order the watches fired; the callback must still hand the event over (e.g.
  `loop.call_soon_threadsafe`), never block (kazoo's DataWatch / ChildrenWatch recipes still re-read their
  own znode on kazoo's thread when a watch fires, as they are written).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    RolledBackError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from kaflite.cluster import zkdata as zd
from kaflite.cluster.zk_session import SessionStateChanged, ZkConnectionError, ZooKeeperSession, retried
from kaflite.cluster.zkdata import (
    BrokerInfo,
    ControllerInfo,
    LeaderAndIsr,
    ProducerIdsBlock,
    TopicAssignment,
)

__all__ = [
    "BrokerIdInUseError",
    "BrokersChanged",
    "ConfigChanged",
    "ControlledShutdownRequested",
    "ControllerChanged",
    "ControllerEpochZkVersion",
    "ControllerMovedError",
    "KafkaZkClient",
    "PartitionStateChanged",
    "PreferredElectionRequested",
    "ReassignmentRequested",
    "SessionStateChanged",
    "StaleZkVersionError",
    "TopicAssignmentChanged",
    "TopicDeletionRequested",
    "TopicExistsError",
    "TopicsChanged",
    "ZkConnectionError",
    "ZkEvent",
]

log = logging.getLogger("kaflite.cluster.zk")

TopicPartition = tuple[str, int]
# partition state writes per ZooKeeper multi-op (a few hundred bytes each, far below jute.maxbuffer)
BATCH_SIZE = 200


class BrokerIdInUseError(RuntimeError):
    """Another live broker holds /brokers/ids/<id>."""


class ControllerMovedError(RuntimeError):
    """This broker is not (or no longer) the controller: an election was lost or a newer one fenced it."""


class TopicExistsError(RuntimeError):
    """/brokers/topics/<t> already exists."""


class StaleZkVersionError(RuntimeError):
    """A compare-and-set found the znode at another version: someone else wrote first (re-read it)."""


@dataclass(frozen=True)
class ControllerEpochZkVersion:
    """What a controller won: its epoch and the /controller_epoch znode version its election wrote."""

    epoch: int
    zk_version: int


# --- events (what the watches report) -------------------------------------------------------------------
@dataclass(frozen=True)
class BrokersChanged:
    """The live brokers: registration and broker epoch (the czxid of /brokers/ids/<id>; a broker that
    registered again, e.g. after a session expiry, has a new one)."""

    brokers: Mapping[int, BrokerInfo]
    epochs: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ControllerChanged:
    controller_id: int | None


@dataclass(frozen=True)
class TopicsChanged:
    topics: frozenset[str]


@dataclass(frozen=True)
class TopicAssignmentChanged:
    """A topic's znode changed (partitions added, reassignment progress); None: the topic is gone."""

    topic: str
    assignment: TopicAssignment | None


@dataclass(frozen=True)
class TopicDeletionRequested:
    topics: frozenset[str]


@dataclass(frozen=True)
class ReassignmentRequested:
    moves: Mapping[TopicPartition, tuple[int, ...]]


@dataclass(frozen=True)
class PreferredElectionRequested:
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class PartitionStateChanged:
    topic: str
    partition: int
    state: LeaderAndIsr | None


@dataclass(frozen=True)
class ConfigChanged:
    """A /config/changes notification: the config of `entity_type`/`name` (e.g. topics/orders) changed."""

    entity_type: str
    name: str


@dataclass(frozen=True)
class ControlledShutdownRequested:
    """Brokers that announced they are stopping (children of /kaflite/controlled_shutdown)."""

    broker_ids: frozenset[int]


@dataclass(frozen=True)
class IsrChangesNotified:
    """Children of /isr_change_notification appeared: leaders changed ISRs (read with
    `take_isr_change_notifications`)."""

    children: frozenset[str]


ZkEvent = (
    BrokersChanged
    | ControllerChanged
    | TopicsChanged
    | TopicAssignmentChanged
    | TopicDeletionRequested
    | ReassignmentRequested
    | PreferredElectionRequested
    | PartitionStateChanged
    | ConfigChanged
    | ControlledShutdownRequested
    | IsrChangesNotified
    | SessionStateChanged
)
EventCallback = Callable[[ZkEvent], None]


class KafkaZkClient(ZooKeeperSession):
    """A broker's session with ZooKeeper and every read and write of Kafka's layout."""

    def __init__(
        self,
        connect: str,
        session_timeout_ms: int = 18000,
        connection_timeout_ms: int | None = None,
    ) -> None:
        super().__init__(connect, session_timeout_ms, connection_timeout_ms)
        self._registration: BrokerInfo | None = None
        self._state_lock = threading.Lock()
        self._state_watchers: dict[TopicPartition, Callable[[Any], None]] = {}
        self._state_callbacks: dict[TopicPartition, EventCallback] = {}

    def _on_connected(self, new_session: bool) -> None:
        if new_session and self._registration is not None:
            threading.Thread(target=self._reregister, name="zk-reregister", daemon=True).start()
        if self._state_watchers:
            # watches of a lost session are gone, and one armed while disconnected never was
            threading.Thread(target=self._rearm_state_watches, name="zk-rewatch", daemon=True).start()

    def _reregister(self) -> None:
        reg = self._registration
        if reg is None:
            return
        try:
            self.register_broker(reg)
            log.info("re-registered broker %d after a new ZooKeeper session", reg.id)
        except Exception:
            log.exception("could not re-register broker %d after a new ZooKeeper session", reg.id)

    # --- layout ----------------------------------------------------------------------------------------
    @retried
    def create_top_level_paths(self) -> None:
        """Kafka's persistent paths (ZkData.PersistentZkPaths), created empty when missing."""
        for path in zd.PERSISTENT_PATHS:
            self._zk.ensure_path(path)

    @retried
    def get_or_create_cluster_id(self, proposed: str) -> str:
        """The cluster id in /cluster/id, written with `proposed` by the first broker."""
        try:
            data, _ = self._zk.get(zd.CLUSTER_ID)
            return zd.decode_cluster_id(data)
        except NoNodeError:
            pass
        try:
            self._zk.create(zd.CLUSTER_ID, zd.encode_cluster_id(proposed), makepath=True)
            return proposed
        except NodeExistsError:
            data, _ = self._zk.get(zd.CLUSTER_ID)
            return zd.decode_cluster_id(data)

    # --- brokers -------------------------------------------------------------------------------------
    @retried
    def register_broker(self, info: BrokerInfo) -> int:
        """Create the ephemeral /brokers/ids/<id>; returns its czxid (Kafka's broker epoch)."""
        path = zd.broker_path(info.id)
        self._zk.ensure_path(zd.BROKER_IDS)
        try:
            self._zk.create(path, info.encode(), ephemeral=True)
        except NodeExistsError:
            _, stat = self._zk.get(path)
            if stat.ephemeralOwner != self.session_id:
                raise BrokerIdInUseError(
                    f"broker.id {info.id} is already registered in ZooKeeper by a live broker "
                    f"(session 0x{stat.ephemeralOwner:x}): give this broker another broker.id, or stop the other"
                ) from None
            self._zk.set(path, info.encode())
        self._registration = info
        _, stat = self._zk.get(path)
        return int(stat.czxid)

    @retried
    def get_broker_ids(self) -> list[int]:
        try:
            return sorted(int(c) for c in self._zk.get_children(zd.BROKER_IDS) if c.isdigit())
        except NoNodeError:
            return []

    @retried
    def get_broker(self, broker_id: int) -> BrokerInfo | None:
        try:
            data, _ = self._zk.get(zd.broker_path(broker_id))
        except NoNodeError:
            return None
        return BrokerInfo.decode(broker_id, data)

    def get_all_brokers(self) -> dict[int, BrokerInfo]:
        return self.get_all_brokers_with_epochs()[0]

    @retried
    def get_all_brokers_with_epochs(self) -> tuple[dict[int, BrokerInfo], dict[int, int]]:
        """Every live broker's registration and broker epoch (czxid)."""
        infos: dict[int, BrokerInfo] = {}
        epochs: dict[int, int] = {}
        for bid in self.get_broker_ids():
            try:
                data, stat = self._zk.get(zd.broker_path(bid))
            except NoNodeError:
                continue  # it went between the listing and the read
            infos[bid] = BrokerInfo.decode(bid, data)
            epochs[bid] = int(stat.czxid)
        return infos, epochs

    # --- controller ----------------------------------------------------------------------------------
    @retried
    def get_controller_id(self) -> int | None:
        try:
            data, _ = self._zk.get(zd.CONTROLLER)
        except NoNodeError:
            return None
        return ControllerInfo.decode(data).broker_id

    @retried
    def get_controller_epoch(self) -> ControllerEpochZkVersion | None:
        try:
            data, stat = self._zk.get(zd.CONTROLLER_EPOCH)
        except NoNodeError:
            return None
        return ControllerEpochZkVersion(zd.decode_controller_epoch(data), int(stat.version))

    @retried
    def register_controller_and_increment_epoch(
        self, broker_id: int, now_ms: int | None = None
    ) -> ControllerEpochZkVersion:
        """Become controller: create /controller and bump /controller_epoch in one multi-op.

        ControllerMovedError when another broker is controller or won the race.
        """
        ts = int(time.time() * 1000) if now_ms is None else now_ms
        current = self.get_controller_epoch()
        if current is None:
            try:
                self._zk.create(zd.CONTROLLER_EPOCH, zd.encode_controller_epoch(zd.INITIAL_CONTROLLER_EPOCH))
            except NodeExistsError:
                pass
            current = self.get_controller_epoch()
            assert current is not None
        new_epoch = current.epoch + 1
        tx = self._zk.transaction()
        tx.create(zd.CONTROLLER, ControllerInfo(broker_id, ts).encode(), ephemeral=True)
        tx.set_data(zd.CONTROLLER_EPOCH, zd.encode_controller_epoch(new_epoch), current.zk_version)
        results = tx.commit()
        if isinstance(results[0], NodeExistsError) and self._holds_controller(broker_id):
            # this session holds /controller already: an earlier try of this election landed before its
            # connection was lost (the retry read the epoch it wrote), as Kafka's checkControllerAndEpoch
            return current
        if isinstance(results[0], NodeExistsError) or isinstance(results[1], BadVersionError):
            holder = self.get_controller_id()
            raise ControllerMovedError(
                f"broker {broker_id} lost the controller election (controller is {holder}, epoch moved past "
                f"{current.epoch})"
            )
        _raise_first(results)
        stat = results[1]
        return ControllerEpochZkVersion(new_epoch, int(stat.version))

    def _holds_controller(self, broker_id: int) -> bool:
        try:
            data, stat = self._zk.get(zd.CONTROLLER)
        except NoNodeError:
            return False
        return ControllerInfo.decode(data).broker_id == broker_id and stat.ephemeralOwner == self.session_id

    @retried
    def resign_controller(self, broker_id: int) -> None:
        """Delete /controller if this broker holds it (controlled shutdown, tests)."""
        try:
            data, stat = self._zk.get(zd.CONTROLLER)
        except NoNodeError:
            return
        if ControllerInfo.decode(data).broker_id == broker_id and stat.ephemeralOwner == self.session_id:
            try:
                self._zk.delete(zd.CONTROLLER, version=stat.version)
            except (NoNodeError, BadVersionError):
                pass

    def _tx(self, guard: ControllerEpochZkVersion | None, build: Callable[[Any], None]) -> Any:
        """A transaction: the check of /controller_epoch when `guard` is given, then the ops of `build`."""
        tx = self._zk.transaction()
        if guard is not None:
            tx.check(zd.CONTROLLER_EPOCH, guard.zk_version)
        build(tx)
        return tx

    def _guarded(self, guard: ControllerEpochZkVersion | None, build: Callable[[Any], None]) -> list[Any]:
        """Commit the ops `build` adds, after a check of /controller_epoch when `guard` is given."""
        return self._check_guard(guard, self._tx(guard, build).commit())

    def _check_guard(self, guard: ControllerEpochZkVersion | None, results: list[Any]) -> list[Any]:
        """The results of a transaction's own ops; ControllerMovedError when its guard failed."""
        if guard is not None:
            first = results[0]
            if isinstance(first, BadVersionError | NoNodeError):
                raise ControllerMovedError(
                    f"controller epoch {guard.epoch} is fenced: /controller_epoch moved past version "
                    f"{guard.zk_version}"
                )
            return list(results[1:])
        return list(results)

    # --- topics ----------------------------------------------------------------------------------------
    @retried
    def get_all_topics(self) -> set[str]:
        try:
            return set(self._zk.get_children(zd.TOPICS))
        except NoNodeError:
            return set()

    @retried
    def get_topic_assignment(self, topic: str) -> tuple[TopicAssignment, int] | None:
        """The topic's assignment and its znode version (for a later conditional write), or None."""
        try:
            data, stat = self._zk.get(zd.topic_path(topic))
        except NoNodeError:
            return None
        return TopicAssignment.decode(topic, data), int(stat.version)

    def create_topic(self, assignment: TopicAssignment, configs: Mapping[str, str] | None = None) -> None:
        """Kafka's AdminZkClient.createTopicWithAssignment: configs first, then the assignment znode
        (whose creation is what the controller watches). TopicExistsError when it exists."""
        if self._zk.exists(zd.topic_path(assignment.topic)) is not None:
            raise TopicExistsError(f"Topic '{assignment.topic}' already exists.")
        self.set_entity_config("topics", assignment.topic, dict(configs or {}), notify=False)
        try:
            self._zk.create(zd.topic_path(assignment.topic), assignment.encode(), makepath=True)
        except NodeExistsError:
            raise TopicExistsError(f"Topic '{assignment.topic}' already exists.") from None

    def create_topics(
        self, topics: Sequence[tuple[TopicAssignment, Mapping[str, str]]]
    ) -> dict[str, TopicExistsError | None]:
        """`create_topic` for many topics in about one ZooKeeper round trip per step instead of one per
        topic and step (a CreateTopics of 100 topics took 8.5 s one topic after another): the existence
        checks, then the config znodes, then the assignment znodes, each step's requests sent together
        (kazoo's async calls are pipelined on the one session) and their answers collected. Same order per
        topic as `create_topic` (configs before the assignment, which the controller watches). Answers each
        topic's TopicExistsError or None (created). Not retried, as `create_topic`: a retry after a lost
        connection would find its own writes."""
        try:
            return self._create_topics(topics)
        except KazooTimeoutError as e:  # an answer that never came: a ZooKeeper error like the others
            raise OperationTimeoutError(str(e)) from e

    def _create_topics(
        self, topics: Sequence[tuple[TopicAssignment, Mapping[str, str]]]
    ) -> dict[str, TopicExistsError | None]:
        timeout = self._op_timeout_s
        exists = [(a, c, self._zk.exists_async(zd.topic_path(a.topic))) for a, c in topics]
        out: dict[str, TopicExistsError | None] = {}
        fresh: list[tuple[TopicAssignment, Mapping[str, str]]] = []
        for a, c, res in exists:
            if res.get(timeout=timeout) is not None:
                out[a.topic] = TopicExistsError(f"Topic '{a.topic}' already exists.")
            else:
                fresh.append((a, c))
        # a config znode is usually absent for a new topic (the controller deletes it with the topic)
        creating = []
        for a, c in fresh:
            path, data = zd.config_entity_path("topics", a.topic), zd.encode_config(dict(c))
            creating.append((a.topic, c, path, data, self._zk.create_async(path, data)))
        for name, c, path, data, res in creating:
            try:
                res.get(timeout=timeout)
            except NodeExistsError:  # left behind or written meanwhile: ours wins, as set_entity_config
                self._zk.set(path, data)
            except NoNodeError:  # no /config/topics yet
                self.set_entity_config("topics", name, dict(c), notify=False)
        assigning = [(a, self._zk.create_async(zd.topic_path(a.topic), a.encode())) for a, _c in fresh]
        for a, res in assigning:
            try:
                res.get(timeout=timeout)
                out[a.topic] = None
            except NodeExistsError:
                out[a.topic] = TopicExistsError(f"Topic '{a.topic}' already exists.")
            except NoNodeError:  # no /brokers/topics yet (a fresh cluster)
                try:
                    self._zk.create(zd.topic_path(a.topic), a.encode(), makepath=True)
                    out[a.topic] = None
                except NodeExistsError:
                    out[a.topic] = TopicExistsError(f"Topic '{a.topic}' already exists.")
        return out

    @retried
    def set_topic_assignment(
        self,
        assignment: TopicAssignment,
        expected_version: int,
        guard: ControllerEpochZkVersion | None = None,
    ) -> int:
        """Overwrite the topic znode at `expected_version` (partition growth, reassignment progress).

        Returns the new version; StaleZkVersionError when someone else wrote first.
        """
        path = zd.topic_path(assignment.topic)
        results = self._guarded(guard, lambda tx: tx.set_data(path, assignment.encode(), expected_version))
        if isinstance(results[0], BadVersionError):
            raise StaleZkVersionError(f"{path} is no longer at version {expected_version}")
        _raise_first(results)
        return int(results[0].version)

    @retried
    def mark_topic_for_deletion(self, topic: str) -> None:
        """/admin/delete_topics/<t> (what DeleteTopics writes; the controller does the deletion)."""
        try:
            self._zk.create(zd.delete_topic_path(topic), b"", makepath=True)
        except NodeExistsError:
            pass

    @retried
    def cancel_topic_deletions(self, topics: Iterable[str], guard: ControllerEpochZkVersion | None) -> None:
        """Remove /admin/delete_topics/<t> markers only (the topic, if any, stays)."""
        paths = [
            zd.delete_topic_path(t) for t in topics if self._zk.exists(zd.delete_topic_path(t)) is not None
        ]
        if not paths:
            return

        def build(tx: Any) -> None:
            for p in paths:
                tx.delete(p)

        _raise_first(self._guarded(guard, build))

    @retried
    def get_topics_marked_for_deletion(self) -> set[str]:
        try:
            return set(self._zk.get_children(zd.DELETE_TOPICS))
        except NoNodeError:
            return set()

    @retried
    def delete_topic(self, topic: str, guard: ControllerEpochZkVersion | None) -> None:
        """Remove every znode of a deleted topic (assignment, partition states, configs, the marker)."""
        paths = self._descendants(zd.topic_path(topic))
        for extra in (zd.topic_config_path(topic), zd.delete_topic_path(topic)):
            if self._zk.exists(extra) is not None:
                paths.append(extra)
        if not paths:
            return

        def build(tx: Any) -> None:
            for p in paths:
                tx.delete(p)

        _raise_first(self._guarded(guard, build))

    def _descendants(self, path: str) -> list[str]:
        """`path` and everything below it, deepest first (the order deletes must run in)."""
        try:
            children = self._zk.get_children(path)
        except NoNodeError:
            return []
        out: list[str] = []
        for c in children:
            out.extend(self._descendants(f"{path}/{c}"))
        out.append(path)
        return out

    # --- partition state ----------------------------------------------------------------------------------
    @retried
    def get_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderAndIsr | None]:
        pending = [(tp, self._zk.get_async(zd.partition_state_path(*tp))) for tp in partitions]
        out: dict[TopicPartition, LeaderAndIsr | None] = {}
        for tp, res in pending:
            try:
                data, stat = res.get(timeout=self._op_timeout_s)
            except NoNodeError:
                out[tp] = None
                continue
            out[tp] = LeaderAndIsr.decode(zd.partition_state_path(*tp), data, int(stat.version))
        return out

    @retried
    def create_partition_states(
        self, states: Mapping[TopicPartition, LeaderAndIsr], guard: ControllerEpochZkVersion | None
    ) -> tuple[dict[TopicPartition, LeaderAndIsr], set[TopicPartition]]:
        """Create the state znodes of new partitions (NewPartition -> OnlinePartition), with their
        /partitions/<p> parents.

        Returns (created, with zk_version 0; already existing). ControllerMovedError when fenced.
        Partitions go BATCH_SIZE to a multi-op (new partitions almost never exist already); a batch
        that fails is redone one partition at a time to find which did.
        """
        for topic in sorted({t for t, _ in states}):
            self._zk.ensure_path(zd.partitions_path(topic))
        created: dict[TopicPartition, LeaderAndIsr] = {}
        existing: set[TopicPartition] = set()
        items = sorted(states.items())

        def batch_ops(batch: list[tuple[TopicPartition, LeaderAndIsr]]) -> Callable[[Any], None]:
            def build(tx: Any) -> None:
                for tp, state in batch:
                    tx.create(zd.partition_path(*tp), b"")
                    tx.create(zd.partition_state_path(*tp), state.encode())

            return build

        pending = [
            (batch, self._tx(guard, batch_ops(batch)).commit_async())
            for batch in (items[i : i + BATCH_SIZE] for i in range(0, len(items), BATCH_SIZE))
        ]
        for batch, res in pending:
            results = self._check_guard(guard, res.get(timeout=self._op_timeout_s))
            if not any(isinstance(r, Exception) for r in results):
                created.update((tp, _with_version(state, 0)) for tp, state in batch)
                continue
            for tp, state in batch:  # redo one by one: which ones exist already?
                try:
                    self._zk.create(zd.partition_path(*tp), b"")
                except NodeExistsError:
                    pass
                one = self._guarded(guard, _op("create", zd.partition_state_path(*tp), state.encode()))
                if isinstance(one[0], NodeExistsError):
                    existing.add(tp)
                    continue
                _raise_first(one)
                created[tp] = _with_version(state, 0)
        return created, existing

    @retried
    def update_partition_states(
        self, states: Mapping[TopicPartition, LeaderAndIsr], guard: ControllerEpochZkVersion | None
    ) -> tuple[dict[TopicPartition, LeaderAndIsr], set[TopicPartition]]:
        """Compare-and-set each state znode at the `zk_version` carried by its new value.

        Returns (written, with their new zk_version; stale: someone else wrote first, re-read them).
        A guarded write that finds the controller epoch moved raises ControllerMovedError. Batched as
        create_partition_states; a batch with a stale partition is redone one partition at a time.
        """
        written: dict[TopicPartition, LeaderAndIsr] = {}
        stale: set[TopicPartition] = set()
        items = sorted(states.items())

        def batch_ops(batch: list[tuple[TopicPartition, LeaderAndIsr]]) -> Callable[[Any], None]:
            def build(tx: Any) -> None:
                for tp, state in batch:
                    tx.set_data(zd.partition_state_path(*tp), state.encode(), state.zk_version)

            return build

        pending = [
            (batch, self._tx(guard, batch_ops(batch)).commit_async())
            for batch in (items[i : i + BATCH_SIZE] for i in range(0, len(items), BATCH_SIZE))
        ]
        for batch, res in pending:
            results = self._check_guard(guard, res.get(timeout=self._op_timeout_s))
            if not any(isinstance(r, Exception) for r in results):
                for (tp, state), stat in zip(batch, results, strict=True):
                    written[tp] = _with_version(state, int(stat.version))
                continue
            for tp, state in batch:
                path, data = zd.partition_state_path(*tp), state.encode()
                one = self._guarded(guard, _op("set_data", path, data, state.zk_version))
                if isinstance(one[0], BadVersionError | NoNodeError):
                    stale.add(tp)
                    continue
                _raise_first(one)
                written[tp] = _with_version(state, int(one[0].version))
        return written, stale

    def take_isr_change_notifications(self, children: Iterable[str]) -> set[TopicPartition]:
        """Read and delete /isr_change_notification/<child> (the controller's side): the partitions named."""
        out: set[TopicPartition] = set()
        for child in sorted(children):
            path = f"{zd.ISR_CHANGE_NOTIFICATION}/{child}"
            try:  # each child retried on its own: one read and deleted before a lost connection stays read
                data, _stat = self.retry_policy.copy()(self._zk.get, path)
            except NoNodeError:
                continue
            try:
                self.retry_policy.copy()(self._zk.delete, path)
            except NoNodeError:
                pass  # a retried delete that had landed
            try:
                out |= zd.decode_partition_list(path, data)
            except zd.ZkDataError as e:
                log.warning("ignoring %s: %s", path, e)
        return out

    @retried
    def propagate_isr_changes(self, partitions: Iterable[TopicPartition]) -> None:
        """A leader changed these partitions' ISR: /isr_change_notification/isr_change_<seq> (Kafka's
        ZooKeeper-mode IsrChangeNotification, which tells the controller to re-read their states)."""
        self._zk.create(f"{zd.ISR_CHANGE_NOTIFICATION}/isr_change_", zd.encode_partition_list(partitions),
                        sequence=True, makepath=True)

    # --- configs ------------------------------------------------------------------------------------------
    @retried
    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        path = zd.config_entity_path(entity_type, name)
        try:
            data, _ = self._zk.get(path)
        except NoNodeError:
            return {}
        return zd.decode_config(path, data)

    def set_entity_config(
        self, entity_type: str, name: str, config: Mapping[str, str], notify: bool = True
    ) -> None:
        """Write /config/<type>/<name> and (notify) a /config/changes/config_change_<seq> for the brokers."""
        path = zd.config_entity_path(entity_type, name)
        data = zd.encode_config(config)
        try:
            self._zk.set(path, data)
        except NoNodeError:
            try:
                self._zk.create(path, data, makepath=True)
            except NodeExistsError:  # created meanwhile (two brokers creating one internal topic): ours wins
                self._zk.set(path, data)
        if notify:
            self._zk.create(
                f"{zd.CONFIG_CHANGES}/{zd.CONFIG_CHANGE_PREFIX}",
                zd.encode_config_change(entity_type, name),
                sequence=True,
                makepath=True,
            )

    @retried
    def update_entity_config(
        self, entity_type: str, name: str, change: Callable[[dict[str, str]], dict[str, str]]
    ) -> dict[str, str]:
        """Read-modify-write of /config/<type>/<name> by compare-and-set on the znode's version, then the
        notification; answers the config written. `change` gets the config as stored and may run more than
        once (another writer in between: it is applied again to what that one wrote), so two tools changing
        different keys of one entity (a user's SCRAM credential and its quota) both keep theirs. The znode
        stays with an empty config when `change` leaves none (as Kafka's AdminZkClient). The notification
        is written even when nothing changed: a retry after a lost connection may find its own write."""
        path = zd.config_entity_path(entity_type, name)
        for _ in range(100):
            try:
                data, stat = self._zk.get(path)
                current, version = zd.decode_config(path, data), int(stat.version)
            except NoNodeError:
                current, version = {}, -1
            new = change(dict(current))
            try:
                if version < 0:
                    self._zk.create(path, zd.encode_config(new), makepath=True)
                elif new != current:
                    self._zk.set(path, zd.encode_config(new), version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # written (or deleted) meanwhile: apply the change to what is there now
            self._zk.create(
                f"{zd.CONFIG_CHANGES}/{zd.CONFIG_CHANGE_PREFIX}",
                zd.encode_config_change(entity_type, name),
                sequence=True,
                makepath=True,
            )
            return new
        raise RuntimeError(f"could not update {path} after 100 tries (concurrent writers)")

    @retried
    def get_config_changes(self) -> list[tuple[str, str, str]]:
        """Pending notifications, oldest first: (znode name, entity type, entity name)."""
        try:
            names = sorted(self._zk.get_children(zd.CONFIG_CHANGES))
        except NoNodeError:
            return []
        out = []
        for n in names:
            path = f"{zd.CONFIG_CHANGES}/{n}"
            try:
                data, _ = self._zk.get(path)
            except NoNodeError:
                continue
            out.append((n, *zd.decode_config_change(path, data)))
        return out

    # --- admin requests ------------------------------------------------------------------------------------
    def create_reassignment(self, moves: Mapping[TopicPartition, Sequence[int]]) -> None:
        """/admin/reassign_partitions (Kafka refuses a second one while the first runs)."""
        try:
            self._zk.create(zd.REASSIGN_PARTITIONS, zd.encode_reassignment(moves), makepath=True)
        except NodeExistsError:
            raise RuntimeError("a partition reassignment is already in progress") from None

    @retried
    def get_reassignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        try:
            data, _ = self._zk.get(zd.REASSIGN_PARTITIONS)
        except NoNodeError:
            return {}
        return zd.decode_reassignment(data)

    @retried
    def remove_reassignments(
        self, partitions: Iterable[TopicPartition], guard: ControllerEpochZkVersion | None
    ) -> None:
        """Take finished partitions out of /admin/reassign_partitions (deleted once empty)."""
        try:
            data, stat = self._zk.get(zd.REASSIGN_PARTITIONS)
        except NoNodeError:
            return
        done = set(partitions)
        left = {tp: r for tp, r in zd.decode_reassignment(data).items() if tp not in done}
        if left:
            op = _op("set_data", zd.REASSIGN_PARTITIONS, zd.encode_reassignment(left), stat.version)
        else:
            op = _op("delete", zd.REASSIGN_PARTITIONS, stat.version)
        results = self._guarded(guard, op)
        if isinstance(results[0], BadVersionError | NoNodeError):
            return  # rewritten meanwhile: the controller sees the new content as a new request
        _raise_first(results)

    @retried
    def delete_reassignment(self, guard: ControllerEpochZkVersion | None) -> None:
        if self._zk.exists(zd.REASSIGN_PARTITIONS) is None:
            return
        _raise_first(self._guarded(guard, lambda tx: tx.delete(zd.REASSIGN_PARTITIONS)))

    def create_preferred_replica_election(self, partitions: Iterable[TopicPartition]) -> None:
        try:
            self._zk.create(
                zd.PREFERRED_REPLICA_ELECTION, zd.encode_partition_list(partitions), makepath=True
            )
        except NodeExistsError:
            raise RuntimeError("a preferred replica election is already in progress") from None

    @retried
    def get_preferred_replica_election(self) -> set[TopicPartition]:
        try:
            data, _ = self._zk.get(zd.PREFERRED_REPLICA_ELECTION)
        except NoNodeError:
            return set()
        return zd.decode_partition_list(zd.PREFERRED_REPLICA_ELECTION, data)

    @retried
    def delete_preferred_replica_election(self, guard: ControllerEpochZkVersion | None) -> None:
        if self._zk.exists(zd.PREFERRED_REPLICA_ELECTION) is None:
            return
        _raise_first(self._guarded(guard, lambda tx: tx.delete(zd.PREFERRED_REPLICA_ELECTION)))

    # --- producer ids ---------------------------------------------------------------------------------------
    @retried
    def allocate_producer_ids(self, broker_id: int, max_tries: int = 100) -> ProducerIdsBlock:
        """Claim the next block of 1000 producer ids (compare-and-set on /latest_producer_id_block)."""
        self._zk.ensure_path(zd.PRODUCER_ID_BLOCK)
        for _ in range(max_tries):
            data, stat = self._zk.get(zd.PRODUCER_ID_BLOCK)
            block = (
                ProducerIdsBlock.decode(data).next_block(broker_id)
                if data
                else ProducerIdsBlock(broker_id, 0)
            )
            try:
                self._zk.set(zd.PRODUCER_ID_BLOCK, block.encode(), version=stat.version)
                return block
            except BadVersionError:
                continue  # another broker claimed a block meanwhile: read again
        raise RuntimeError(f"could not claim a producer id block after {max_tries} tries")

    # --- watches ---------------------------------------------------------------------------------------------
    def watch_controller(self, callback: EventCallback) -> None:
        """ControllerChanged on every change of /controller (every broker watches it to run for election)."""

        def on_data(data: bytes | None, stat: Any) -> None:
            cid = ControllerInfo.decode(data).broker_id if data else None
            callback(ControllerChanged(cid))

        self._watches.append(DataWatch(self._zk, zd.CONTROLLER, self._safe(on_data)))

    def watch_topics(self, callback: EventCallback) -> None:
        """TopicsChanged on every change of /brokers/topics, and TopicAssignmentChanged on every write
        of each topic's znode (partitions added, reassignment progress; None when it is deleted)."""
        watched_topics: set[str] = set()
        lock = threading.Lock()

        def on_topic(topic: str) -> Callable[[bytes | None, Any], bool | None]:
            def deliver(data: bytes | None) -> None:
                if data is None:
                    callback(TopicAssignmentChanged(topic, None))
                else:
                    callback(TopicAssignmentChanged(topic, TopicAssignment.decode(topic, data)))

            def handler(data: bytes | None, stat: Any) -> bool | None:
                if self._closed:
                    return False
                if data is None:
                    # forgotten here, on kazoo's watch thread, before the next children listing runs (not
                    # later from the delivery queue): a topic deleted and at once created again was
                    # otherwise still "watched" when the listing showed it again, got no new watch, and
                    # its new partitions never reached this broker (CreateTopics then timed out waiting)
                    with lock:
                        watched_topics.discard(topic)
                self._enqueue(lambda: deliver(data))
                return False if data is None else None  # a topic gone: stop watching it

            return handler

        def on_topics(children: list[str]) -> None:
            callback(TopicsChanged(frozenset(children)))
            with lock:
                new = [t for t in children if t not in watched_topics]
                watched_topics.update(new)
            for t in new:  # (on the zk-watch thread: a DataWatch reads its znode as it starts)
                self._watches.append(DataWatch(self._zk, zd.topic_path(t), on_topic(t)))

        self._zk.ensure_path(zd.TOPICS)
        self._watches.append(ChildrenWatch(self._zk, zd.TOPICS, self._safe(on_topics)))

    def watch_brokers(self, callback: EventCallback) -> None:
        """BrokersChanged (registrations and broker epochs) on every change of /brokers/ids."""

        def on_brokers(children: list[str]) -> None:
            # (on the zk-watch thread) the registrations as they are now, read with retries
            brokers, epochs = self.get_all_brokers_with_epochs()
            callback(BrokersChanged(brokers, epochs))

        self._zk.ensure_path(zd.BROKER_IDS)
        self._watches.append(ChildrenWatch(self._zk, zd.BROKER_IDS, self._safe(on_brokers)))

    def watch_cluster(self, callback: EventCallback) -> None:
        """What the controller watches: brokers, topics (and each topic's partitions), deletions,
        reassignments, preferred elections."""

        def on_deletions(children: list[str]) -> None:
            if children:
                callback(TopicDeletionRequested(frozenset(children)))

        def on_reassign(data: bytes | None, stat: Any) -> None:
            if data:
                callback(ReassignmentRequested(zd.decode_reassignment(data)))

        def on_preferred(data: bytes | None, stat: Any) -> None:
            if data:
                callback(
                    PreferredElectionRequested(
                        frozenset(zd.decode_partition_list(zd.PREFERRED_REPLICA_ELECTION, data))
                    )
                )

        self.create_top_level_paths()
        self.watch_brokers(callback)
        self.watch_topics(callback)
        self._watches.append(ChildrenWatch(self._zk, zd.DELETE_TOPICS, self._safe(on_deletions)))
        self._watches.append(DataWatch(self._zk, zd.REASSIGN_PARTITIONS, self._safe(on_reassign)))
        self._watches.append(DataWatch(self._zk, zd.PREFERRED_REPLICA_ELECTION, self._safe(on_preferred)))

        def on_isr_changes(children: list[str]) -> None:
            if children:
                callback(IsrChangesNotified(frozenset(children)))

        self._watches.append(ChildrenWatch(self._zk, zd.ISR_CHANGE_NOTIFICATION, self._safe(on_isr_changes)))

    def announce_controlled_shutdown(self, broker_id: int) -> None:
        """Ask the controller to move leadership off this broker (an ephemeral znode: it goes with the
        session, so a broker that dies meanwhile leaves nothing behind)."""
        try:
            self._zk.create(f"{zd.CONTROLLED_SHUTDOWN}/{broker_id}", b"", ephemeral=True, makepath=True)
        except NodeExistsError:
            pass

    def watch_controlled_shutdowns(self, callback: EventCallback) -> None:
        def on_children(children: list[str]) -> None:
            ids = frozenset(int(c) for c in children if c.isdigit())
            if ids:
                callback(ControlledShutdownRequested(ids))

        self._zk.ensure_path(zd.CONTROLLED_SHUTDOWN)
        self._watches.append(ChildrenWatch(self._zk, zd.CONTROLLED_SHUTDOWN, self._safe(on_children)))

    def watch_config_changes(self, callback: EventCallback) -> None:
        """ConfigChanged for every notification under /config/changes created after this call (Kafka's
        ZkNodeChangeNotificationListener: notifications are processed in sequence order, once)."""
        self._zk.ensure_path(zd.CONFIG_CHANGES)
        existing = self.get_children(zd.CONFIG_CHANGES)
        last = [existing[-1] if existing else ""]
        lock = threading.Lock()

        def on_changes(children: list[str]) -> None:
            with lock:
                fresh = sorted(c for c in children if c > last[0])
                if fresh:
                    last[0] = fresh[-1]
            for name in fresh:
                got = self.get_data(f"{zd.CONFIG_CHANGES}/{name}")
                if got is not None:
                    kind, entity = zd.decode_config_change(f"{zd.CONFIG_CHANGES}/{name}", got[0])
                    callback(ConfigChanged(kind, entity))

        self._watches.append(ChildrenWatch(self._zk, zd.CONFIG_CHANGES, self._safe(on_changes)))

    def watch_partition_states(self, partitions: Iterable[TopicPartition], callback: EventCallback) -> None:
        """PartitionStateChanged with each partition's current state, then on every write (or deletion)
        of its state znode. The reads are pipelined (a broker with 10,000 partitions does not wait for
        10,000 round trips); each watch is a one-shot data watch (an `exists` watch while the znode is
        missing) re-armed when it fires, with one
        function per partition so re-arming never duplicates it, and all are re-armed after a new
        session (ZooKeeper drops the watches of an expired one)."""
        for tp in partitions:
            with self._state_lock:
                if tp not in self._state_watchers:
                    self._state_watchers[tp] = self._state_watcher(tp, callback)
            # read (and arm) even a partition already watched: a topic deleted and created again keeps its
            # partitions' watchers, and the new state may have come while the broker did not know the new
            # topic yet (and was dropped): the caller asks now because it knows the partition now
            self._arm_state_watch(tp)

    def _state_watcher(self, tp: TopicPartition, callback: EventCallback) -> Callable[[Any], None]:
        def on_event(_event: Any) -> None:
            if not self._closed:
                self._arm_state_watch(tp)

        self._state_callbacks[tp] = callback
        return on_event

    def _arm_state_watch(self, tp: TopicPartition) -> None:
        path = zd.partition_state_path(*tp)
        callback = self._state_callbacks[tp]

        def deliver(state: LeaderAndIsr | None) -> None:
            try:
                callback(PartitionStateChanged(tp[0], tp[1], state))
            except Exception:
                log.exception("partition state callback failed for %s-%d", *tp)

        watcher = self._state_watchers[tp]

        def on_exists(res: Any) -> None:
            try:
                stat = res.get()
            except KazooException:
                return  # connection lost: everything is re-armed with the next connection
            if stat is None:
                deliver(None)
            else:  # created between our two reads: read it (with the data watch) again
                self._zk.get_async(path, watch=watcher).rawlink(on_data)

        def on_data(res: Any) -> None:
            try:
                data, stat = res.get()
            except NoNodeError:
                # a get on a missing znode sets no watch: watch for its creation instead
                self._zk.exists_async(path, watch=watcher).rawlink(on_exists)
                return
            except KazooException:
                return
            try:
                deliver(LeaderAndIsr.decode(path, data, int(stat.version)))
            except zd.ZkDataError as e:
                log.error("unreadable znode: %s", e)

        try:
            self._zk.get_async(path, watch=watcher).rawlink(on_data)
        except KazooException:
            pass  # not connected: re-armed on the next connection

    def _rearm_state_watches(self) -> None:
        with self._state_lock:
            tps = list(self._state_watchers)
        for tp in tps:
            self._arm_state_watch(tp)

    def watch_partition_state(self, topic: str, partition: int, callback: EventCallback) -> None:
        """PartitionStateChanged on every write of the partition's state znode (how a broker learns
        the controller's leader-and-ISR decisions)."""
        path = zd.partition_state_path(topic, partition)

        def on_data(data: bytes | None, stat: Any) -> None:
            state = LeaderAndIsr.decode(path, data, int(stat.version)) if data else None
            callback(PartitionStateChanged(topic, partition, state))

        self._watches.append(DataWatch(self._zk, path, self._safe(on_data)))

    # --- raw access (tools, tests) ----------------------------------------------------------------------------
    @retried
    def get_data(self, path: str) -> tuple[bytes, int] | None:
        """(data, version) of any znode, or None."""
        try:
            data, stat = self._zk.get(path)
        except NoNodeError:
            return None
        return data, int(stat.version)

    @retried
    def get_children(self, path: str) -> list[str]:
        try:
            return sorted(self._zk.get_children(path))
        except NoNodeError:
            return []

    @retried
    def ephemeral_owner(self, path: str) -> int:
        stat = self._zk.exists(path)
        return int(stat.ephemeralOwner) if stat is not None else 0


def _op(name: str, *args: Any) -> Callable[[Any], None]:
    """One transaction operation bound to its arguments (`tx.create(...)`, `tx.set_data(...)`)."""

    def build(tx: Any) -> None:
        getattr(tx, name)(*args)

    return build


def _with_version(state: LeaderAndIsr, zk_version: int) -> LeaderAndIsr:
    return LeaderAndIsr(state.leader, state.leader_epoch, state.isr, state.controller_epoch, zk_version)


def _raise_first(results: Sequence[Any]) -> None:
    """A multi-op's results hold exceptions in place of results: raise the one that caused the rollback."""
    for r in results:
        if isinstance(r, Exception) and not isinstance(r, RolledBackError):
            raise r
    for r in results:
        if isinstance(r, Exception):
            raise r


# re-exported so callers handle any other ZooKeeper error without importing kazoo
ZkError = KazooException

