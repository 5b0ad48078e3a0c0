"""ZkMetadata: the metadata writer of a broker in a ZooKeeper cluster (the second MetadataPublisher and
TopicAdmin, beside the single-node LocalMetadata).

Rules:
- the images are built from ZooKeeper only: live brokers (/brokers/ids), the controller (/controller),
  topics with their ids and assignments (/brokers/topics/<t>), their config overrides
  (/config/topics/<t>) and every partition's state znode (leader, leader epoch, ISR; the znode version
  is the partition epoch). A partition whose state is not written yet has no leader (-1) and an empty ISR;
- watches fire on kazoo's threads; they only record what changed and post one publication to the
  broker's event loop, where the new image is built and the subscribers (the ReplicaManager) are called:
  a burst of changes is published as one image, and a topic that did not change keeps its `TopicImage`;
- registering the broker (`register_broker`, called by the Broker once its listeners are known) creates
  /brokers/ids/<id> (refused while another live broker holds the id) and starts running for controller
  (`ControllerService`); `close()` ends the session, so the registration and /controller vanish at once;
- topic admin writes ZooKeeper (`ZkAdmin`) and returns at once: the topic appears in the image when the
  watches bring it back (with its leaders once the controller wrote them), as in Kafka. Its ZooKeeper calls
  block, and while ZooKeeper is unreachable they wait for it (kazoo holds a request until it reconnects):
  the broker runs them in this writer's admin thread (`run_admin`), never on its event loop;
- the broker's own ZooKeeper writes (its leaders' ISR changes, its producer id blocks) run in this
  writer's pool of `ZK_WRITE_THREADS` threads (`zk_writes`), never on the event loop nor in asyncio's
  default executor: a ZooKeeper outage holds at most these threads, not the pool that group loads and
  other worker-thread reads share;
- the cluster id is /cluster/id (the first broker's proposal wins); a data directory that belongs to
  another cluster refuses to start;
- a broker whose process was paused (SIGSTOP, a stalled VM) for half its session timeout or more may
  have lost its session, and with it the partitions it led, without knowing yet: until it has read the
  state of those partitions from ZooKeeper again and published the image, `leadership_confirmed()` is
  False and the ReplicaManager appends nothing as leader (NOT_LEADER_OR_FOLLOWER, retriable). The pause
  is seen by a thread that ticks every 100 ms, and by the append itself when that thread has not run
  since the resume; a ZooKeeper outage alone pauses nothing and refuses nothing. Kafka's ZooKeeper-mode
  broker acts on its old leadership until the controller's LeaderAndIsr reaches it, so a resumed leader
  acknowledges acks=1 writes that its truncation to the new leader then drops.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from kaflite.cluster.admin import TopicSpec, ZkAdmin
from kaflite.cluster.controller import ControllerConfig
from kaflite.cluster.metadata import (
    BrokerRegistration,
    Endpoint,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
    new_cluster_id,
)
from kaflite.cluster.zk import (
    BrokersChanged,
    ConfigChanged,
    ControllerChanged,
    KafkaZkClient,
    PartitionStateChanged,
    TopicAssignmentChanged,
    TopicsChanged,
    ZkError,
    ZkEvent,
)
from kaflite.cluster.zkconfig import ZooKeeperSettings
from kaflite.cluster.zkcontroller import ControllerService
from kaflite.cluster.zkdata import BrokerInfo, LeaderAndIsr, TopicAssignment, ZkEndpoint
from kaflite.protocol.errors import ErrorCode, KafkaError

__all__ = ["ClusterIdMismatch", "ZkMetadata"]

log = logging.getLogger("kaflite.cluster")

Listener = Callable[[MetadataImage, MetadataImage], None]
TopicPartition = tuple[str, int]
T = TypeVar("T")

# threads of a broker's own ZooKeeper writes (ISR compare-and-sets, producer id block claims): each write is
# a few round trips, kazoo pipelines the threads' requests on its one connection, and an outage holds them all
ZK_WRITE_THREADS = 4


class ClusterIdMismatch(RuntimeError):
    """The data directory belongs to another cluster than the one in ZooKeeper."""


def controller_config(config: Mapping[str, Any]) -> ControllerConfig:
    """The controller's settings from the broker's configuration (Kafka's keys and defaults)."""

    def get(key: str, default: Any) -> Any:
        try:
            value = config[key]
        except KeyError:
            return default
        return default if value is None else value

    return ControllerConfig(
        unclean_leader_election_enable=bool(get("unclean.leader.election.enable", False)),
        auto_leader_rebalance_enable=bool(get("auto.leader.rebalance.enable", True)),
        leader_imbalance_per_broker_percentage=int(get("leader.imbalance.per.broker.percentage", 10)),
        leader_imbalance_check_interval_seconds=int(get("leader.imbalance.check.interval.seconds", 300)),
        delete_topic_enable=bool(get("delete.topic.enable", True)),
    )


class ZkMetadata:
    """MetadataPublisher + TopicAdmin of a broker in a ZooKeeper cluster."""

    def __init__(
        self,
        settings: ZooKeeperSettings,
        node_id: int,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        cfg = config or {}
        self.settings = settings
        self.node_id = node_id
        self.zk = KafkaZkClient(settings.connect, settings.session_timeout_ms, settings.connection_timeout_ms)
        self.controller = ControllerService(self.zk, node_id, controller_config(cfg))
        self.admin = ZkAdmin(
            self.zk,
            default_partitions=int(cfg.get("num.partitions") or 1),
            default_replication_factor=int(cfg.get("default.replication.factor") or 1),
            rng=random.Random(),
        )
        self.broker_epoch = -1
        # Clients' topic admin (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs, auto-creation) in
        # one thread of its own: while ZooKeeper is unreachable its calls wait for it, and on the event loop
        # they stopped the whole broker (every client, every replica fetcher) until ZooKeeper came back;
        # Kafka's request handler threads wait the same way, one request each, while the others serve on
        self._admin_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"zk-admin-{node_id}")
        # This broker's own ZooKeeper writes (its leaders' ISR changes, producer id blocks), bounded: while
        # ZooKeeper is unreachable each waits for it, and in asyncio's default executor enough of them took
        # every worker thread that the group coordinator's loads and the storage housekeeping also use
        self.zk_writes = ThreadPoolExecutor(max_workers=ZK_WRITE_THREADS, thread_name_prefix=f"zk-write-{node_id}")
        self._image = MetadataImage(version=0)
        self._listeners: list[Listener] = []
        self._post: Callable[[Callable[[], None]], Any] | None = None
        self._started = False
        self._controller_running = False
        # what the watches reported (guarded by _lock: written on kazoo's threads, read on the loop)
        self._lock = threading.Lock()
        self._brokers: dict[int, BrokerRegistration] = {}
        self._controller_id = -1
        self._assignments: dict[str, TopicAssignment] = {}
        self._configs: dict[str, dict[str, str]] = {}
        self._states: dict[TopicPartition, LeaderAndIsr] = {}
        self._dirty_topics: set[str] = set()
        self._dirty = False
        self._scheduled = False
        # pauses of this process (see the rules): the watcher thread's last tick, the pauses seen, the
        # last one whose leaderships were read again (its image published), the one being read
        self._pause_s = settings.session_timeout_ms / 2000
        self._last_tick = time.monotonic()
        self._pauses = 0
        self._confirmed_pause = 0
        self._confirming = 0
        self._closing = threading.Event()
        self._pause_watcher: threading.Thread | None = None

    # -- MetadataPublisher ----------------------------------------------------------------------------------
    @property
    def image(self) -> MetadataImage:
        return self._image

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    # -- what the Broker calls -------------------------------------------------------------------------------
    def load(self, partitions_on_disk: Iterable[tuple[str, int]] = ()) -> MetadataImage:
        """Connect to ZooKeeper and build the first image (called on the broker's event loop).

        Logs on disk of partitions the cluster does not assign here are left alone (not adopted)."""
        try:
            loop = asyncio.get_running_loop()
            self._post = loop.call_soon_threadsafe
        except RuntimeError:  # no loop (tests, tools): publish on the calling thread
            self._post = lambda fn: fn()
        self.zk.start()
        self.zk.create_top_level_paths()
        cluster_id = self.zk.get_or_create_cluster_id(new_cluster_id())
        infos, _ = self.zk.get_all_brokers_with_epochs()
        with self._lock:
            self._brokers = {b: _registration(i) for b, i in infos.items()}
            self._controller_id = self.zk.get_controller_id() or -1
            for t in self.zk.get_all_topics():
                got = self.zk.get_topic_assignment(t)
                if got is not None:
                    self._assignments[t] = got[0]
                    self._configs[t] = self.zk.get_entity_config("topics", t)
            tps = [(t, p) for t, a in self._assignments.items() for p in a.partitions]
            self._states = {tp: s for tp, s in self.zk.get_partition_states(tps).items() if s is not None}
            self._dirty_topics = set(self._assignments)
            self._dirty = True
        self._image = self._image.evolve(cluster_id=cluster_id)
        self._publish()
        self._started = True
        self.zk.watch_brokers(self._on_event)
        self.zk.watch_controller(self._on_event)
        self.zk.watch_topics(self._on_event)
        self.zk.watch_config_changes(self._on_event)
        self.zk.watch_partition_states(tps, self._on_event)
        self._last_tick = time.monotonic()
        self._pause_watcher = threading.Thread(target=self._watch_pauses, name="zk-pause-watch", daemon=True)
        self._pause_watcher.start()
        return self._image

    # -- pauses -----------------------------------------------------------------------------------------------
    def leadership_confirmed(self) -> bool:
        """False while this process may hold a leadership ZooKeeper has moved: since a pause of half the
        session timeout or more (seen here first when the watcher thread has not run since the resume)
        until the partitions led here were read again and that image was published."""
        return self._confirmed_pause == self._pauses and time.monotonic() - self._last_tick < self._pause_s

    def _watch_pauses(self) -> None:
        """Tick every 100 ms until close(); a tick late by half the session timeout is a pause: the states
        of the partitions led here are read again (retried every tick until ZooKeeper answers)."""
        tick = min(0.1, self._pause_s / 4)
        while not self._closing.wait(tick):
            now = time.monotonic()
            if now - self._last_tick >= self._pause_s:
                self._pauses += 1  # before the tick below: leadership_confirmed() stays False throughout
                log.warning(
                    "this process was paused for %.1f s (zookeeper.session.timeout.ms=%d): it leads nothing "
                    "until ZooKeeper confirms its leaderships",
                    now - self._last_tick,
                    self.settings.session_timeout_ms,
                )
            self._last_tick = now
            if self._confirmed_pause != self._pauses and self._confirming != self._pauses:
                self._confirm_leaderships(self._pauses)

    def _confirm_leaderships(self, pause: int) -> None:
        with self._lock:
            led = [tp for tp, s in self._states.items() if s.leader == self.node_id]
        try:
            fresh = self.zk.get_partition_states(led)  # on this session, or the new one after an expiry
        except Exception as e:  # noqa: BLE001 - not answered yet (reconnecting): the next tick asks again
            log.debug("confirming %d leadership(s) after a pause: %s", len(led), e)
            return
        with self._lock:
            for tp, state in fresh.items():
                held = self._states.get(tp)
                if tp[0] not in self._assignments:
                    continue
                if state is None:
                    self._states.pop(tp, None)
                elif held is None or (state.leader_epoch, state.zk_version) > (
                    held.leader_epoch,
                    held.zk_version,
                ):
                    self._states[tp] = state
                self._dirty_topics.add(tp[0])
            self._confirming = pause
            self._dirty = True  # published even when nothing changed: the publication confirms
        self._schedule()

    def set_cluster_id(self, cluster_id: str) -> None:
        if self._image.cluster_id and cluster_id != self._image.cluster_id:
            raise ClusterIdMismatch(
                f"cluster.id {cluster_id} (configuration or meta.properties) does not match the cluster's id "
                f"{self._image.cluster_id} in ZooKeeper ({self.settings.connect}): this data directory belongs "
                "to another cluster"
            )

    def register_broker(self, registration: BrokerRegistration) -> None:
        """Register (or update) /brokers/ids/<id>; the first time, start running for controller."""
        info = BrokerInfo(
            registration.id,
            tuple(
                ZkEndpoint(e.listener, e.host, e.port, e.security_protocol) for e in registration.endpoints
            ),
            rack=registration.rack,
            timestamp_ms=int(time.time() * 1000),
        )
        self.broker_epoch = self.zk.register_broker(info)
        if not self._controller_running:
            self._controller_running = True
            self.controller.start()

    def controlled_shutdown(self, timeout_s: float = 10.0) -> bool:
        """Ask the controller to move leadership off this broker and wait (bounded) until no partition
        with another live in-sync replica is led here. True when done in time."""
        if self.broker_epoch < 0 or not self.zk.connected:
            return False
        log.info("controlled shutdown: asking the controller to move leadership off broker %d", self.node_id)
        self.zk.announce_controlled_shutdown(self.node_id)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                stuck = [
                    tp
                    for tp, s in self._states.items()
                    if s.leader == self.node_id
                    and any(r != self.node_id and r in self._brokers for r in s.isr)
                ]
            if not stuck:
                log.info("controlled shutdown: leadership moved off broker %d", self.node_id)
                return True
            time.sleep(0.05)
        log.warning("controlled shutdown: %d partition(s) still led here after %.0f s", len(stuck), timeout_s)
        return False

    async def run_admin(self, call: Callable[[], T]) -> T:
        """`call` (topic admin: it reads and writes ZooKeeper) in the admin thread, one at a time. A
        ZooKeeper failure (the connection lost while a request was out, the session expired while it waited)
        is the request's UNKNOWN_SERVER_ERROR, as Kafka answers a ZooKeeper exception, not a closed
        connection."""

        def run() -> T:
            try:
                return call()
            except ZkError as e:
                raise KafkaError(ErrorCode.unknown_server_error,
                                 f"ZooKeeper ({self.settings.connect}) failed: {type(e).__name__}") from e

        return await asyncio.get_running_loop().run_in_executor(self._admin_thread, run)

    def close(self) -> None:
        """Leave the cluster: stop the controller role, end the session (an admin call or a write still
        waiting for ZooKeeper then fails; queued writes are dropped)."""
        self._closing.set()
        self._admin_thread.shutdown(wait=False, cancel_futures=True)
        self.zk_writes.shutdown(wait=False, cancel_futures=True)
        try:
            self.controller.stop()
        finally:
            self.zk.close()

    # -- TopicAdmin ---------------------------------------------------------------------------------------------
    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int | None,
        configs: Mapping[str, str],
        assignment: Sequence[Sequence[int]] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicImage:
        n = -1 if assignment else num_partitions
        rf = -1 if assignment else replication_factor
        a = self.admin.create_topic(name, n, rf, configs, assignment, validate_only=validate_only)
        return _topic_image(a, dict(configs), {})

    def create_topics(self, specs: Sequence[TopicSpec], *, validate_only: bool = False) -> list[TopicImage | KafkaError]:
        """Many topics at once (one CreateTopics request): about one round of ZooKeeper work for the
        whole batch (`ZkAdmin.create_topics`), so a request of 100 topics holds the admin thread, and the
        requests queued behind it, for a fraction of a second, not for seconds."""
        return [a if isinstance(a, KafkaError) else _topic_image(a, dict(s.configs), {})
                for s, a in zip(specs, self.admin.create_topics(specs, validate_only=validate_only), strict=True)]

    def delete_topic(self, name: str) -> TopicImage:
        a = self.admin.delete_topic(name)
        existing = self._image.topics.get(name)
        return existing if existing is not None else _topic_image(a, {}, {})

    def create_partitions(
        self,
        name: str,
        count: int,
        assignment: Sequence[Sequence[int]] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicImage:
        a = self.admin.create_partitions(name, count, assignment, validate_only=validate_only)
        return _topic_image(a, dict(self._configs.get(name, {})), {})

    def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicImage:
        self.admin.alter_topic_configs(name, configs)
        existing = self._image.topics.get(name)
        if existing is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
        return existing

    # -- watches (kazoo's threads) --------------------------------------------------------------------------------
    def _on_event(self, event: ZkEvent) -> None:
        new_partitions: list[TopicPartition] = []
        with self._lock:
            if isinstance(event, BrokersChanged):
                self._brokers = {b: _registration(i) for b, i in event.brokers.items()}
                self._dirty = True
            elif isinstance(event, ControllerChanged):
                self._controller_id = event.controller_id if event.controller_id is not None else -1
                self._dirty = True
            elif isinstance(event, TopicsChanged):
                for gone in set(self._assignments) - set(event.topics):
                    self._forget(gone)
            elif isinstance(event, TopicAssignmentChanged):
                if event.assignment is None:
                    self._forget(event.topic)
                else:
                    before = self._assignments.get(event.topic)
                    self._assignments[event.topic] = event.assignment
                    if before is None or before.topic_id != event.assignment.topic_id:
                        self._configs[event.topic] = {}
                        # a topic created again under its name: its partitions start over at epoch 0
                        for tp in [tp for tp in self._states if tp[0] == event.topic]:
                            del self._states[tp]
                        new_partitions = [(event.topic, p) for p in event.assignment.partitions]
                    else:
                        new_partitions = [
                            (event.topic, p)
                            for p in event.assignment.partitions
                            if p not in before.partitions
                        ]
                    self._dirty_topics.add(event.topic)
                    self._dirty = True
            elif isinstance(event, PartitionStateChanged):
                tp = (event.topic, event.partition)
                if event.topic in self._assignments:
                    if event.state is None:
                        self._states.pop(tp, None)
                    else:
                        held = self._states.get(tp)
                        if held is None or (event.state.leader_epoch, event.state.zk_version) > (
                            held.leader_epoch,
                            held.zk_version,
                        ):
                            self._states[tp] = event.state
                    self._dirty_topics.add(event.topic)
                    self._dirty = True
            elif isinstance(event, ConfigChanged) and event.entity_type == "topics":
                self._dirty_topics.add(event.name)
                self._dirty = True
        if isinstance(event, TopicAssignmentChanged) and event.assignment is not None and new_partitions:
            configs = self.zk.get_entity_config("topics", event.topic)
            with self._lock:
                self._configs[event.topic] = configs
            self.zk.watch_partition_states(new_partitions, self._on_event)
        elif isinstance(event, ConfigChanged) and event.entity_type == "topics":
            configs = self.zk.get_entity_config("topics", event.name)
            with self._lock:
                if event.name in self._assignments:
                    self._configs[event.name] = configs
        self._schedule()

    def _forget(self, topic: str) -> None:
        if self._assignments.pop(topic, None) is not None:
            self._configs.pop(topic, None)
            self._states = {tp: s for tp, s in self._states.items() if tp[0] != topic}
            self._dirty_topics.add(topic)
            self._dirty = True

    def _schedule(self) -> None:
        with self._lock:
            if self._scheduled or not self._dirty or not self._started or self._post is None:
                return
            self._scheduled = True
        self._post(self._publish)

    # -- images (the broker's loop) -----------------------------------------------------------------------------
    def _publish(self) -> None:
        with self._lock:
            self._scheduled = False
            if not self._dirty:
                return
            self._dirty = False
            dirty, self._dirty_topics = self._dirty_topics, set()
            confirming = self._confirming
            topics = dict(self._image.topics)
            for name in dirty:
                a = self._assignments.get(name)
                if a is None:
                    topics.pop(name, None)
                else:
                    states = {p: self._states.get((name, p)) for p in a.partitions}
                    topics[name] = _topic_image(a, self._configs.get(name, {}), states)
            new = self._image.evolve(
                brokers=dict(self._brokers),
                controller_id=self._controller_id,
                topics=topics,
            )
        old, self._image = self._image, new
        for listener in list(self._listeners):
            try:
                listener(old, new)
            except Exception:
                log.exception("a metadata subscriber failed on image %d", new.version)
        if confirming > self._confirmed_pause:  # the ReplicaManager has applied the states read again
            self._confirmed_pause = confirming
            if confirming == self._pauses:
                log.info("leaderships confirmed by ZooKeeper after the pause")


def _registration(info: BrokerInfo) -> BrokerRegistration:
    return BrokerRegistration(
        info.id,
        tuple(Endpoint(e.listener, e.host, e.port, e.security_protocol) for e in info.endpoints),
        info.rack,
    )


def _topic_image(
    a: TopicAssignment, configs: Mapping[str, str], states: Mapping[int, LeaderAndIsr | None]
) -> TopicImage:
    parts = []
    for p in range(len(a.partitions)):
        replicas = a.partitions.get(p, ())
        adding, removing = tuple(a.adding_replicas.get(p, ())), tuple(a.removing_replicas.get(p, ()))
        s = states.get(p)
        if s is None:
            # no state written yet: no leader, epochs unknown (-1), so the first real state is newer
            parts.append(PartitionRegistration(tuple(replicas), (), -1, -1, -1, adding, removing))
        else:
            parts.append(
                PartitionRegistration(
                    tuple(replicas), tuple(s.isr), s.leader, s.leader_epoch, s.zk_version, adding, removing
                )
            )
    return TopicImage(a.topic, a.topic_id or uuid.UUID(int=0), tuple(parts), dict(configs))
