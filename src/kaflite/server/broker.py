"""The broker: everything handlers share (config, storage, metadata, replicas, purgatory, clock).

Rules:
- the metadata image has one writer (`metadata_writer`, the single-node `LocalMetadata` today), which also
  carries out topic admin (`topic_admin`); the `ReplicaManager` follows its images: it opens the logs of
  the partitions this broker hosts and holds their leader, ISR, epochs and high watermark
  (`server.replica`); leadership and the high watermark are decided there, not here;
- topics are created in the metadata image (persisted) before their logs, and deleted from the image
  before their logs are removed, so a crash in between never leaves a half-visible topic;
- a topic's configs are validated here (they need the broker's config) before the writer sees them;
- all state is touched only from the event loop thread, except the storage housekeeping (flush, retention,
  compaction), which runs in a worker thread under each Log's lock, and a cluster's topic admin
  (`admin_call`, the coordinators' internal topics included), which only reads and writes ZooKeeper, in the
  writer's admin thread.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from kaflite.cluster.local_metadata import LocalMetadata
from kaflite.cluster.metadata import (
    BrokerRegistration,
    Endpoint,
    MetadataImage,
    TopicAdmin,
    TopicImage,
    read_meta_properties,
    validate_topic_name,
    write_meta_properties,
)
from kaflite.cluster.producer_ids import ZkProducerIdManager
from kaflite.cluster.zk import BrokerIdInUseError, ZkConnectionError
from kaflite.cluster.zk_metadata import ClusterIdMismatch, ZkMetadata
from kaflite.cluster.zkconfig import zookeeper_settings
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.acl import AclManager, authorizer_for
from kaflite.server.acl.authorizer import AclAuthorizer
from kaflite.server.acl.store import FILE_NAME as ACL_FILE_NAME
from kaflite.server.acl.store import LocalAclStore, ZkAclStore
from kaflite.server.authorizer import AllowAllAuthorizer, Authorizer
from kaflite.server.config import BROKER_CONFIGS, BrokerConfig, ConfigError, Listener
from kaflite.server.dynamic_config import (
    DEFAULT_ENTITY,
    LIVE_KEYS,
    DynamicConfigStore,
    ZkDynamicConfigStore,
    validate_dynamic,
)
from kaflite.server.logconfig import log_config_for
from kaflite.server.metadata_waiters import MetadataWaiters
from kaflite.server.metrics import BrokerMetrics
from kaflite.server.purgatory import Purgatory
from kaflite.server.quota import QuotaEntity, QuotaManager
from kaflite.server.quota.store import FILE_NAME as QUOTA_FILE_NAME
from kaflite.server.quota.store import QuotaFile, QuotaStore, ZkQuotaStore
from kaflite.server.replica import ReplicaManager, TopicSettings, fetch_key
from kaflite.server.security.client import BrokerConnector, broker_connector
from kaflite.server.security.scram import FILE_NAME as SCRAM_FILE_NAME
from kaflite.server.security.scram import CredentialStore
from kaflite.server.services import BrokerServices, Slot
from kaflite.server.share_persister import SHARE_PERSISTER
from kaflite.server.stopping import cancel_until_done
from kaflite.storage.config import LogConfig
from kaflite.storage.log import AppendResult, Log
from kaflite.storage.manager import LogManager

if TYPE_CHECKING:
    from kaflite.server.coordinators.broker_api import ShareBroker
    from kaflite.server.replica.fetcher import ReplicaFetcherManager

__all__ = ["Broker", "REPLICA_FETCHERS", "fetch_key"]

log = logging.getLogger("kaflite.server")
T = TypeVar("T")
# a cluster's replica fetchers (made at start, `_start_replication`; stopped first at a controlled shutdown)
REPLICA_FETCHERS: Slot[ReplicaFetcherManager] = Slot("replica_fetchers")


class Broker:
    """Shared state of one broker process. Create, `await start()`, serve, `await stop()`."""

    def __init__(self, config: BrokerConfig, *, clock: Callable[[], float] = time.time) -> None:
        if not isinstance(config, BrokerConfig):
            raise TypeError(f"Broker needs a BrokerConfig (BrokerConfig.load), got {type(config).__name__}")
        self.config = config
        # dynamic broker configs (single node): {entity: {key: value}}, entity a broker id or "<default>"
        self.dynamic_store: DynamicConfigStore | ZkDynamicConfigStore | None = None
        self._dynamic_entities: dict[str, dict[str, str]] = {}
        self._dynamic_lock = asyncio.Lock()
        self._clock = clock
        self.node_id = max(0, config.broker_id)
        self.log_dirs = [d.expanduser() for d in config.log_dirs]
        # the one writer of the metadata image; also the topic admin: ZooKeeper's in a cluster
        # (zookeeper.connect), else the single-node writer persisted in the data directory
        zookeeper = zookeeper_settings(config)
        self.metadata_writer: LocalMetadata | ZkMetadata
        # how this broker connects to the others (TLS, SASL login of the inter-broker listener): one
        # connector shared by every broker-to-broker sender; its files are read here, at start-up
        self.inter_broker_connector: BrokerConnector | None = None
        if zookeeper is not None:
            self.inter_broker_connector = broker_connector(config)
            self.metadata_writer = ZkMetadata(zookeeper, self.node_id, config)
        else:
            self.metadata_writer = LocalMetadata(self.log_dirs[0] if self.log_dirs else None, self.node_id)
        self.topic_admin: TopicAdmin = self.metadata_writer
        self.purgatory = Purgatory()
        self.log_manager: LogManager | None = None
        self.replica_manager = ReplicaManager(self.node_id, None, self.purgatory, self.now_ms, self._topic_settings)
        # The address of each client listener as clients see it (set once bound), and this broker's
        # address in the cluster (its inter-broker listener's).
        # Until bound, the configured listeners stand in for the bound ones, so a registration made before
        # the sockets are bound already names `advertised.listeners` (a client given the listener's own
        # address instead would bypass whatever the advertised address routes through).
        self.advertised_listeners: dict[str, Listener] = self._advertise(config.client_listeners)
        first = config.client_listeners[0]
        self.advertised: Listener = self.advertised_listeners.get(config.inter_broker_listener_name) or \
            self.advertised_listeners.get(first.name) or \
            Listener(first.name, first.host or "127.0.0.1", first.port, first.security_protocol)
        self.authorizer: Authorizer = AllowAllAuthorizer()
        # Kafka's AclAuthorizer when authorizer.class.name names it (its ACLs are loaded at start), else None
        self.acls: AclManager | None = None
        acl_authorizer = authorizer_for(config)
        if acl_authorizer is not None:
            self.authorizer = acl_authorizer
        # client quotas (server/quota): what AlterClientQuotas set, and each client's measured rates
        self.quotas = QuotaManager(int(config["quota.window.num"]), int(config["quota.window.size.seconds"]),
                                   int(config["controller.quota.window.num"]),
                                   int(config["controller.quota.window.size.seconds"]))
        self.quota_store: QuotaStore | None = None  # where AlterClientQuotas writes (set at start)
        # SCRAM users (single node: a file in the data directory, read at start, server/security/scram.py;
        # a cluster: ZooKeeper, server/security/zk_credentials.py)
        self.scram_credentials = CredentialStore(None)
        self._tasks: list[asyncio.Task[None]] = []
        self._storage_job: asyncio.Future[None] | None = None  # the housekeeping pass in its thread
        self._controlled_shutdown_done = False
        # producer ids: from blocks claimed in ZooKeeper in a cluster (unique across brokers), else local
        self.producer_ids: ProducerIdManager | ZkProducerIdManager
        if isinstance(self.metadata_writer, ZkMetadata):
            writer = self.metadata_writer
            # the next block is claimed ahead in the ZooKeeper write threads, never on the event loop
            self.producer_ids = ZkProducerIdManager(lambda: writer.zk.allocate_producer_ids(self.node_id),
                                                    writer.zk_writes)
        else:
            self.producer_ids = ProducerIdManager()
        # the per-broker services (coordinators, the share persister, the replica fetchers) and the state
        # handlers keep between requests, each in a typed slot its module declares (server/services.py)
        self.services = BrokerServices()
        self.rack: str | None = config["broker.rack"]
        self.registry: Any = None  # the handler Registry, set by the server (ApiVersions reads it)
        # Prometheus counters (server.metrics), set by the server when metrics.listener is configured
        self.metrics: BrokerMetrics | None = None
        # fault injection for tests (server/faults.py's FaultInjector), set by the server when
        # kaflite.faults.enable=true; None otherwise (the dispatcher then asks nothing)
        self.faults: Any = None
        # internal topics whose creation was refused, with the live broker count then (warned once per count)
        self._internal_refused: dict[str, int] = {}
        # single node: DeleteTopics under way (their renames run in a worker thread), by topic name
        self._topic_deletions: dict[str, asyncio.Future[TopicImage]] = {}
        # single node: one topic creation at a time through `create_topic_async` (its file work runs in a
        # worker thread: the name's check and the publication must not interleave with another's)
        self._topic_creation_lock = asyncio.Lock()
        # internal topics being created (in a cluster, in the admin thread), each one's task
        self._internal_creating: dict[str, asyncio.Task[None]] = {}
        # CreateTopics / CreatePartitions waiting for this broker's image to show their partitions' leaders
        self.metadata_waiters = MetadataWaiters(lambda: self.metadata)

    # -- config ------------------------------------------------------------------------------------
    def setting(self, key: str) -> Any:
        """The typed value of a broker config key (`self.config[key]`); an unknown key raises
        UnknownConfigKey with Kafka's close names ("did you mean ...")."""
        return self.config[key]

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        self._load_dynamic_config()  # before the logs open: they start with the dynamic topic defaults
        if self.log_dirs:
            self.scram_credentials = CredentialStore(self.log_dirs[0] / SCRAM_FILE_NAME)
        self.log_manager = LogManager(
            self.log_dirs, self._default_log_config(), self.now_ms,
            cleaner_io_max_bytes_per_second=float(self.setting("log.cleaner.io.max.bytes.per.second")))
        try:
            try:
                self._start_logs_and_metadata()
            except (ZkConnectionError, BrokerIdInUseError, ClusterIdMismatch) as e:
                # one clear line naming the key (python -m kaflite.server / kaflite serve print it)
                key = {ZkConnectionError: "zookeeper.connect", BrokerIdInUseError: "broker.id"}
                raise ConfigError(str(e), key.get(type(e), "cluster.id")) from None
        except BaseException:
            if isinstance(self.metadata_writer, ZkMetadata):  # its controller thread joined, its session
                await asyncio.to_thread(self.metadata_writer.close)  # closed: not on the event loop
            self.log_manager.close()
            self.log_manager = None
            raise
        await self._start_acls()
        await self._start_quotas()
        self._tasks.append(asyncio.ensure_future(self._housekeeping()))

    async def _start_acls(self) -> None:
        """Load the ACLs (in a thread: a file on a single node, ZooKeeper in a cluster) and, in a cluster,
        watch the other brokers' changes."""
        if not isinstance(self.authorizer, AclAuthorizer):
            return
        store: LocalAclStore | ZkAclStore
        if isinstance(self.metadata_writer, ZkMetadata):
            store = ZkAclStore(self.metadata_writer.zk, self._clock)
        else:
            store = LocalAclStore(self.log_dirs[0] / ACL_FILE_NAME if self.log_dirs else None)
        self.acls = AclManager(self.authorizer, store)
        await self.acls.start()

    async def _start_quotas(self) -> None:
        """The client quotas AlterClientQuotas stored (single node: quotas.json; a cluster: Kafka's
        /config/users|clients znodes, watched for every broker's changes), read in a thread. The store
        publishes each table it reads or writes from its thread; they are applied on the event loop in
        the order published."""
        loop = asyncio.get_running_loop()

        def publish(configs: dict[QuotaEntity, dict[str, float]], whole: bool) -> None:
            loop.call_soon_threadsafe(self.quotas.apply, configs, whole)

        if isinstance(self.metadata_writer, ZkMetadata):
            self.quota_store = ZkQuotaStore(self.metadata_writer.zk, publish)
        else:
            self.quota_store = QuotaFile(self.log_dirs[0] / QUOTA_FILE_NAME if self.log_dirs else None, publish)
        await asyncio.to_thread(self.quota_store.start)

    def _start_logs_and_metadata(self) -> None:
        manager = self.log_manager
        assert manager is not None  # start() created it
        manager.load()
        on_disk = list(manager.logs())
        self.replica_manager.log_manager = manager
        self.metadata_writer.load(on_disk)
        if isinstance(self.metadata_writer, ZkMetadata):
            # a cluster's SCRAM users live in ZooKeeper (/config/users), shared by every broker
            from kaflite.server.security.zk_credentials import ZkCredentialStore

            store = ZkCredentialStore(self.metadata_writer.zk)
            store.load()
            self.scram_credentials = store
            # dynamic broker configs before the partitions open: their logs start with the dynamic defaults
            self._load_zk_dynamic_config(self.metadata_writer.zk)
        self._complete_pending_deletions()
        self._settle_cluster_id()
        # from here on the ReplicaManager follows the image: it opens every hosted partition now (each
        # one's high watermark starts at its checkpoint and only advances; with one replica, to the log
        # end offset) and whatever changes later
        self.metadata_writer.subscribe(self.replica_manager.on_image)
        self.replica_manager.on_image(None, self.metadata)
        # after the ReplicaManager: a request waiting for a topic is answered once its partitions are open
        self.metadata_writer.subscribe(self.metadata_waiters.on_image)
        self._register()
        if isinstance(self.metadata_writer, ZkMetadata):  # once registered (a refused id starts nothing)
            self._start_replication(self.metadata_writer)
            # Kafka's ZooKeeper-mode order: the first producer id block at start (the next ones are claimed
            # ahead, off the event loop), so InitProducerId has ids at hand while ZooKeeper is down
            assert isinstance(self.producer_ids, ZkProducerIdManager)
            self.producer_ids.claim_first_block()

    def _start_replication(self, writer: ZkMetadata) -> None:
        """In a cluster: followers fetch from their leaders (after the ReplicaManager applied each image),
        leaders write their ISR changes to ZooKeeper and shrink the ISR of lagging followers."""
        from kaflite.server.replica.fetcher import FetcherConfig, ReplicaFetcherManager
        from kaflite.server.replica.isr import ZkIsrWriter

        rm = self.replica_manager
        rm.replica_lag_time_max_ms = int(self.setting("replica.lag.time.max.ms"))
        rm.isr_writer = ZkIsrWriter(writer.zk, self.node_id, writer.zk_writes)
        rm.leadership_confirmed = writer.leadership_confirmed
        config = FetcherConfig(
            num_fetchers=int(self.setting("num.replica.fetchers")),
            max_bytes=int(self.setting("replica.fetch.max.bytes")),
            response_max_bytes=int(self.setting("replica.fetch.response.max.bytes")),
            wait_max_ms=int(self.setting("replica.fetch.wait.max.ms")),
            min_bytes=int(self.setting("replica.fetch.min.bytes")),
            backoff_ms=int(self.setting("replica.fetch.backoff.ms")),
            socket_timeout_ms=int(self.setting("replica.socket.timeout.ms")),
            listener=self.config.inter_broker_listener_name,
            connector=self.inter_broker_connector,
        )
        fetchers = ReplicaFetcherManager(self.node_id, rm, config, lambda: self.metadata)
        self.services.set(REPLICA_FETCHERS, fetchers)
        writer.subscribe(fetchers.on_image)
        fetchers.on_image(None, self.metadata)
        # from here on a new replica's log opens in a worker thread, not on the event loop (the start's
        # image opened the logs above, before anything was served); the fetchers follow each slice opened
        rm.opened_listeners.append(lambda: fetchers.on_image(None, self.metadata))
        rm.open_logs_off_loop = True
        self._tasks.append(asyncio.ensure_future(self._isr_expiration(max(10, rm.replica_lag_time_max_ms // 2))))

    async def _isr_expiration(self, every_ms: int) -> None:
        """Kafka's isr-expiration task: every replica.lag.time.max.ms / 2, drop lagging followers."""
        while True:
            await asyncio.sleep(every_ms / 1000.0)
            try:
                self.replica_manager.maybe_shrink_isr()
            except Exception:  # noqa: BLE001 - logged; the next round tries again
                log.exception("ISR expiration failed")

    def add_task(self, task: asyncio.Future[Any]) -> None:
        """A background task of a subsystem (e.g. the group coordinator's timers), cancelled on stop."""
        self._tasks.append(task)  # type: ignore[arg-type]

    def _settle_cluster_id(self) -> None:
        """The cluster id: `cluster.id` from the config, else the one in the data directory's
        meta.properties (Kafka's file), else the generated one; a config that contradicts the data
        directory refuses to start (Kafka's InconsistentClusterIdException)."""
        if not self.log_dirs:
            return
        directory = self.log_dirs[0]
        stored = read_meta_properties(directory).get("cluster.id")
        configured = self.setting("cluster.id")
        if configured and stored and configured != stored:
            raise ConfigError(
                f"cluster.id: {configured} in the configuration does not match cluster.id={stored} in "
                f"{directory / 'meta.properties'}: this data directory belongs to another cluster",
                "cluster.id",
            )
        cluster_id = configured or stored or self.metadata.cluster_id
        self.metadata_writer.set_cluster_id(cluster_id)
        if stored != cluster_id or read_meta_properties(directory).get("node.id") != str(self.node_id):
            write_meta_properties(directory, cluster_id, self.node_id)

    async def controlled_shutdown(self) -> None:
        """Kafka's first step of a clean stop in a cluster (`controlled.shutdown.enable`): ask the controller
        to move leadership off this broker and wait, bounded, until it has. It runs while the listeners still
        serve (the caller closes them after), as Kafka's KafkaServer.shutdown does: producers talking to this
        broker get NOT_LEADER_OR_FOLLOWER and follow the new leader instead of a closed connection, and the
        event loop keeps serving during the wait (the wait runs in a worker thread). Once per broker.

        The replica fetchers stop first, as Kafka's controller stops the replicas of a broker shutting down:
        a stopping broker that kept fetching the partitions it was just relieved of would rejoin their ISR
        (an ISR change, and one more leader epoch when it then dies) for nothing."""
        if self._controlled_shutdown_done or not isinstance(self.metadata_writer, ZkMetadata):
            return
        self._controlled_shutdown_done = True
        if self.setting("controlled.shutdown.enable"):
            fetchers = self.services.pop(REPLICA_FETCHERS)
            if fetchers is not None:
                await fetchers.stop()
            await asyncio.to_thread(self.metadata_writer.controlled_shutdown)

    async def stop(self) -> None:
        await self.controlled_shutdown()  # no-op when the server did it before closing its listeners
        fetchers = self.services.pop(REPLICA_FETCHERS)
        if fetchers is not None:
            await fetchers.stop()
        # the services' background jobs (membership writes, share-state initializations, transaction
        # markers) before what they use (the persister, the logs) closes
        for task in self.services.close_spawned():
            await cancel_until_done(task)
        persister = self.services.pop(SHARE_PERSISTER)  # handlers/share.py's, made on first use
        if persister is not None:
            persister.close()
        await self.replica_manager.stop()  # no log opens after this (a call in flight is waited for)
        tasks = [*self._tasks, *self._internal_creating.values()]
        for t in tasks:
            t.cancel()
        for t in tasks:  # again until done: a cancellation can be swallowed (kaflite.server.stopping)
            await cancel_until_done(t)
        self._tasks.clear()
        job, self._storage_job = self._storage_job, None
        if job is not None:  # a housekeeping pass still running in its thread: the logs close after it
            try:
                await job
            except Exception:  # noqa: BLE001 - logged by the pass's own reporting; closing goes on
                pass
        if isinstance(self.metadata_writer, ZkMetadata):  # leave the cluster: registration and controllership
            # go at once; the controller thread's join and the session's close wait: not on the event loop
            await asyncio.to_thread(self.metadata_writer.close)
        if self.log_manager is not None:
            self.log_manager.close()
            self.log_manager = None

    async def _housekeeping(self) -> None:
        """Flush due logs, retention, producer-id expiration and compaction, every pass in a worker thread
        (fsync, file deletion and the cleaner's rewrite must not stall the event loop; each Log's lock makes
        the concurrent appends and reads of the loop safe: one of them waits only for the partition being
        worked on)."""
        retention_every = max(100, int(self.setting("log.retention.check.interval.ms")))
        flush_every = max(10, min(1000, int(self.setting("log.flush.scheduler.interval.ms"))))
        next_retention = self.now_ms() + retention_every
        cleaner = bool(self.setting("log.cleaner.enable"))
        last_compaction = self.now_ms()
        producers_every = max(100, int(self.setting("producer.id.expiration.check.interval.ms")))
        next_producers = self.now_ms() + producers_every
        while True:
            await asyncio.sleep(flush_every / 1000.0)
            now = self.now_ms()
            retention = now >= next_retention
            if retention:
                next_retention = now + retention_every
            # read on every pass: log.cleaner.backoff.ms is a dynamic broker config
            compaction = cleaner and now >= last_compaction + max(100, int(self.setting("log.cleaner.backoff.ms")))
            if compaction:
                last_compaction = now
            producers = now >= next_producers
            if producers:
                next_producers = now + producers_every
            job = asyncio.ensure_future(
                asyncio.to_thread(self._storage_pass, now, retention, compaction, producers))
            self._storage_job = job
            try:
                # shielded: a stop() cancels this task, then waits for the pass before closing the logs
                await asyncio.shield(job)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("housekeeping failed")

    def _storage_pass(self, now: int, retention: bool, compaction: bool, producers: bool = False) -> None:
        """One housekeeping pass (runs in a worker thread)."""
        manager = self.log_manager
        if manager is None:
            return
        manager.flush_due(now)
        manager.delete_due_segments(now)  # file.delete.delay.ms: cheap when nothing waits
        if retention:
            manager.run_retention(now)
        if producers:
            manager.remove_expired_producers(now)
        if compaction:
            manager.run_compaction(now)

    # -- dynamic broker configuration (single node; server/dynamic_config.py) ------------------------
    def _load_dynamic_config(self) -> None:
        """Read the single node's stored dynamic configs and lay them over the static configuration."""
        if self.in_cluster or not self.log_dirs:
            return  # a cluster member reads ZooKeeper once connected (_load_zk_dynamic_config)
        store = DynamicConfigStore(self.log_dirs[0])
        self._dynamic_entities = store.load()
        self.dynamic_store = store
        self._install_dynamic_config()

    def _load_zk_dynamic_config(self, zk: Any) -> None:
        """A cluster member: the watch first, then the znodes (a change between the two is read twice,
        never missed); blocking, at start-up."""
        store = ZkDynamicConfigStore(zk, self.node_id)
        loop = asyncio.get_running_loop()

        def on_entity(entity: str, config: dict[str, str]) -> None:  # ZooKeeper's watch thread
            loop.call_soon_threadsafe(self._apply_dynamic_entity, entity, config)

        store.watch(on_entity)
        self._dynamic_entities = store.load()
        self.dynamic_store = store
        self._install_dynamic_config()

    def _apply_dynamic_entity(self, entity: str, config: dict[str, str]) -> None:
        """Another broker (or this one) changed a dynamic entity of this broker: apply it now."""
        entities = dict(self._dynamic_entities)
        entities[entity] = dict(config)
        self._dynamic_entities = entities
        self._install_dynamic_config()
        self.replica_manager.reapply_settings()

    def _install_dynamic_config(self) -> None:
        layers = []
        skipped: dict[str, str] = {}
        for entity in (DEFAULT_ENTITY, str(self.node_id)):
            stored = self._dynamic_entities.get(entity, {})
            # a key written by another tool (kafka-configs.sh --zookeeper) that kaflite cannot apply while
            # running is left out, so DescribeConfigs never reports a value that is not in effect
            for key in stored:
                if key in BROKER_CONFIGS and BROKER_CONFIGS[key].mode != "read-only" and key not in LIVE_KEYS:
                    skipped[key] = "kaflite applies it only from server.properties, at start-up"
            layers.append({k: v for k, v in stored.items() if k not in skipped})
        config, invalid = self.config.static.with_dynamic(layers[0], layers[1])
        skipped.update(invalid)
        for key, why in skipped.items():
            log.warning("dynamic broker config %s ignored: %s", key, why)
        self.config = config

    async def alter_dynamic_config(
        self,
        entity: str,
        compute: Callable[[dict[str, str]], Mapping[str, str | None]],
        validate_only: bool,
    ) -> None:
        """Replace the dynamic configs of `entity` (this broker's id or DEFAULT_ENTITY) with
        `compute(current)` (None: removed), validated as Kafka's DynamicBrokerConfig.validateConfigs; stored
        in a worker thread, then applied to every hosted log at once. A refusal raises ConfigError."""
        async with self._dynamic_lock:  # one read-modify-write at a time: none loses another's change
            if isinstance(self.dynamic_store, ZkDynamicConfigStore):
                current = await asyncio.to_thread(self.dynamic_store.read, entity)
            else:
                current = dict(self._dynamic_entities.get(entity, {}))
            new = compute(current)
            validate_dynamic(new, per_broker=entity != DEFAULT_ENTITY)
            if validate_only:
                return
            entities = {e: dict(c) for e, c in self._dynamic_entities.items()}
            entities[entity] = {k: v for k, v in new.items() if v is not None}
            assert self.dynamic_store is not None
            await asyncio.to_thread(self.dynamic_store.save, entities, entity)
            self._dynamic_entities = entities
            self._install_dynamic_config()
            self.replica_manager.reapply_settings()

    # -- storage glue ------------------------------------------------------------------------------
    def _default_log_config(self) -> LogConfig:
        return log_config_for(self.config, {})

    def _log_config(self, topic: TopicImage) -> LogConfig:
        return log_config_for(self.config, topic.configs)

    def _topic_settings(self, topic: TopicImage) -> TopicSettings:
        """A topic's effective settings for its partitions (the ReplicaManager asks on every change)."""
        return TopicSettings(self._log_config(topic), self.min_insync_replicas(topic.name),
                             self.compression_codec(topic.name))

    @property
    def metadata(self) -> MetadataImage:
        """The current metadata image (immutable: hold it for a consistent view)."""
        return self.metadata_writer.image

    def get_log(self, topic: str, partition: int) -> Log:
        """The partition's local Log (leader or not), or raise the partition's access error."""
        log_ = self.replica_manager.get_partition(topic, partition, require_leader=False).log
        assert log_ is not None  # get_partition raises for a partition without a local log
        return log_

    def append(self, topic: str, partition: int, records: bytes | memoryview) -> AppendResult:
        """Append as leader (internal topics included: the coordinators' path, acks=1); advances the high
        watermark and wakes fetchers. Returns the log's AppendResult."""
        return self.replica_manager.append_records(topic, partition, records, 1, internal_topics_allowed=True)[1]

    # -- topics ------------------------------------------------------------------------------------
    def create_topic(
        self, name: str, num_partitions: int | None = None, configs: Mapping[str, str] | None = None,
        *, replication_factor: int | None = None, assignment: list[list[int]] | None = None,
    ) -> TopicImage:
        if num_partitions is None or num_partitions == -1:
            num_partitions = int(self.setting("num.partitions"))
        log_config_for(self.config, dict(configs or {}))  # a bad config refuses before the image changes
        topic = self.topic_admin.create_topic(name, num_partitions, replication_factor, dict(configs or {}),
                                              assignment)
        log.info("created topic %s with %d partition(s)", name, topic.num_partitions)
        return topic

    async def create_topic_async(
        self, name: str, num_partitions: int | None = None, configs: Mapping[str, str] | None = None,
        *, replication_factor: int | None = None, assignment: list[list[int]] | None = None,
    ) -> TopicImage:
        """The request handlers' `create_topic` (CreateTopics, Metadata's auto-creation). In a cluster it is
        `admin_call(create_topic)`. On a single node the file work runs in a worker thread, not on the event
        loop (a topic of 30 partitions stalled the loop for about 0.5 s: the metadata file's fsyncs, then
        each partition's directory and segment files): the metadata file is written, then the logs created
        (`ReplicaManager.prepare_logs`), then the image published on the loop, which finds the logs open.
        So when it returns the topic is durable, in the image and writable, as with `create_topic`.
        Creations take turns (`_topic_creation_lock`): of two concurrent creations of one name, the second
        finds the topic in the image and gets TOPIC_ALREADY_EXISTS. Shielded: a cancelled request does not
        leave a topic written to the file but never published."""
        writer = self.metadata_writer
        if not isinstance(writer, LocalMetadata):
            return await self.admin_call(partial(self.create_topic, name, num_partitions, configs,
                                                 replication_factor=replication_factor, assignment=assignment))
        task = asyncio.ensure_future(self._create_local_topic(writer, name, num_partitions, dict(configs or {}),
                                                              replication_factor, assignment))
        return await asyncio.shield(task)

    async def _create_local_topic(self, writer: LocalMetadata, name: str, num_partitions: int | None,
                                  configs: dict[str, str], replication_factor: int | None,
                                  assignment: list[list[int]] | None) -> TopicImage:
        if num_partitions is None or num_partitions == -1:
            num_partitions = int(self.setting("num.partitions"))
        log_config_for(self.config, configs)  # a bad config refuses before anything is written
        async with self._topic_creation_lock:
            topic = writer.create_topic(name, num_partitions, replication_factor, configs, assignment,
                                        validate_only=True)  # the checks (TOPIC_ALREADY_EXISTS) and the plan
            prepare = self.replica_manager.prepare_logs(topic)

            def file_work() -> MetadataImage:
                base = writer.persist_topic(topic)  # raises (OSError, TOPIC_ALREADY_EXISTS): nothing published
                if prepare is not None:
                    try:
                        prepare()
                    except (KafkaError, OSError):
                        # the storage error is reported by the LogManager; publishing creates the missing
                        # logs again (on the loop) and raises it to the request, as `create_topic` does
                        pass
                return base

            base = await asyncio.to_thread(file_work)
            writer.add_topic(topic, base)
        log.info("created topic %s with %d partition(s)", name, topic.num_partitions)
        return topic

    async def admin_call(self, call: Callable[[], T]) -> T:
        """Run `call`, a topic admin call from a request handler (create_topic, delete_topic,
        create_partitions, alter_topic_configs, the writer's validate_only plans). In a cluster it reads and
        writes ZooKeeper and, while ZooKeeper is unreachable, waits for it: it runs in the writer's admin
        thread, so this broker keeps serving every other request and replicating meanwhile (Kafka's ZooKeeper
        mode likewise blocks only the handler thread of that request). On a single node it changes the image,
        on the event loop, at once."""
        if isinstance(self.metadata_writer, ZkMetadata):
            return await self.metadata_writer.run_admin(call)
        return call()

    async def topic_for_admin(self, name: str, wait_s: float = 5.0) -> TopicImage | None:
        """The topic a configuration request names, with its config overrides as the writer holds them.

        In a cluster both come from ZooKeeper, as Kafka's ZooKeeper mode reads topic configs there for
        DescribeConfigs and AlterConfigs: this broker's image follows ZooKeeper by tens of milliseconds, so a
        topic created or reconfigured through another broker a moment ago would otherwise be unknown here or
        show its old configs. A topic ZooKeeper holds and the image does not show yet is waited for up to
        `wait_s`. None: no such topic (or still not in the image after `wait_s`)."""
        topic = self.metadata.topics.get(name)
        if not isinstance(self.metadata_writer, ZkMetadata):
            return topic
        zk = self.metadata_writer.zk
        held, configs = await self.admin_call(
            lambda: (zk.get_topic_assignment(name), zk.get_entity_config("topics", name)))
        if held is None:
            return None
        if topic is None and await self.metadata_waiters.wait(lambda image: name in image.topics, wait_s):
            topic = self.metadata.topics.get(name)
        return None if topic is None else dataclasses.replace(topic, configs=configs)

    def ensure_topic(
        self, name: str, num_partitions: int | None = None, configs: Mapping[str, str] | None = None
    ) -> TopicImage:
        """The topic, created first when missing (auto-create, internal topics)."""
        existing = self.metadata.topics.get(name)
        if existing is not None:
            return existing
        return self.create_topic(name, num_partitions, configs)

    @property
    def in_cluster(self) -> bool:
        """A member of a ZooKeeper cluster (zookeeper.connect), not the single-node broker."""
        return isinstance(self.metadata_writer, ZkMetadata)

    def ensure_internal_topic(
        self, name: str, num_partitions: int, configs: Mapping[str, str], replication_key: str
    ) -> TopicImage | None:
        """A coordinator's internal topic (`__consumer_offsets`, `__transaction_state`, `__share_group_state`)
        when it is in the image; else None, and its creation started off the event loop (one at a time per
        topic) when none is under way, as Kafka's FindCoordinator auto-creation: the coordinator is not
        available meanwhile (its callers answer COORDINATOR_NOT_AVAILABLE, or NOT_COORDINATOR from the
        runtime for a partition not loaded) and loads the partitions once the image has them.

        Single node: created with one replica, whatever `replication_key` says (the one broker holds the only
        replica; Kafka would refuse until that many brokers are alive, so a 1-broker Kafka needs the key set
        to 1), by `create_internal_topic_async` (the file work in a worker thread: 50 partition logs created
        on the event loop stalled every client for 0.1-0.3 s). In a cluster: with `replication_key` replicas,
        in the admin thread (`admin_call`: it writes ZooKeeper, and while ZooKeeper is unreachable it waits
        for it, which on the event loop stopped the whole broker). While fewer brokers are alive than the
        replication factor the creation is refused (Kafka's INVALID_REPLICATION_FACTOR), logged once per
        live count, and started again by the next caller."""
        existing = self.metadata.topics.get(name)
        if existing is not None:
            return existing
        if name not in self._internal_creating:
            if self.in_cluster:
                rf = int(self.setting(replication_key))
                call = partial(self.create_topic, name, num_partitions, dict(configs), replication_factor=rf)
                task = asyncio.ensure_future(self._create_internal_topic(name, call, replication_key, rf))
            else:
                task = asyncio.ensure_future(self._create_local_internal_topic(name, num_partitions, dict(configs)))
            self._internal_creating[name] = task
            task.add_done_callback(lambda _t: self._internal_creating.pop(name, None))
        return None

    async def create_internal_topic_async(self, name: str, num_partitions: int, configs: Mapping[str, str]) -> None:
        """Single node: the internal topic created when missing, its file work in a worker thread
        (`create_topic_async`), for the request handlers that can wait for it (FindCoordinator,
        ShareGroupHeartbeat): in the image when this returns, unless the creation failed (raised). A creation
        `ensure_internal_topic` started is waited for rather than repeated. Nothing to do when the topic
        exists or in a cluster (there the creation is in the admin thread). Two concurrent calls create it
        once (the second meets TOPIC_ALREADY_EXISTS)."""
        if self.in_cluster or name in self.metadata.topics:
            return
        started = self._internal_creating.get(name)
        if started is not None:
            await asyncio.shield(started)
            if name in self.metadata.topics:
                return
        try:
            await self.create_topic_async(name, num_partitions, configs, replication_factor=1)
        except KafkaError as e:
            if e.code is not ErrorCode.topic_already_exists:
                raise

    async def _create_local_internal_topic(self, name: str, num_partitions: int, configs: dict[str, str]) -> None:
        try:
            await self.create_topic_async(name, num_partitions, configs, replication_factor=1)
        except KafkaError as e:
            if e.code is not ErrorCode.topic_already_exists:  # else a concurrent creation won: it is in the image
                log.warning("cannot create internal topic %s: %s; tried again at its next use", name,
                            e.message or e.code.name)
        except Exception:  # noqa: BLE001 - a task's failure must be seen; the next caller tries again
            log.exception("creating internal topic %s failed", name)

    async def _create_internal_topic(self, name: str, call: Callable[[], TopicImage], replication_key: str,
                                     rf: int) -> None:
        try:
            await self.admin_call(call)
        except KafkaError as e:
            if e.code is ErrorCode.topic_already_exists:  # another broker created it: the watch brings it
                return
            if e.code is not ErrorCode.invalid_replication_factor:
                log.warning("cannot create internal topic %s: %s; tried again at the next FindCoordinator",
                            name, e.message or e.code.name)
                return
            alive = len(self.metadata.brokers)
            if self._internal_refused.get(name) != alive:
                self._internal_refused[name] = alive
                log.warning("cannot create internal topic %s yet: %d broker(s) alive, %s=%d (%s); the "
                            "coordinator is not available until enough brokers are up (expected while a "
                            "cluster starts)", name, alive, replication_key, rf, e.message or e.code.name)
            return
        except Exception:  # noqa: BLE001 - a task's failure must be seen; the next caller tries again
            log.exception("creating internal topic %s failed", name)
            return
        self._internal_refused.pop(name, None)

    def delete_topic(self, name: str) -> TopicImage:
        # In a cluster the controller decides (Kafka's order): the writer records the request and every
        # broker's ReplicaManager deletes its replicas when an image without the topic arrives.
        if not isinstance(self.metadata_writer, LocalMetadata):
            requested = self.topic_admin.delete_topic(name)
            log.info("asked the controller to delete topic %s", name)
            return requested
        # Single node: logs first, metadata after. Each partition directory is renamed `<dir>.<topic id>-delete`
        # at once and its files are removed after log.segment.delete.delay.ms by the housekeeping thread
        # (LogManager.delete); the directory stays as a marker until the metadata is written: a crash or a
        # failed write in between (a full disk: the space comes back only after the delay) is completed at
        # the next start (`_complete_pending_deletions`). The writer publishes the image without the topic
        # even when its file cannot be written (removed in memory).
        topic = self.metadata.topics.get(name)
        if topic is None:
            return self.topic_admin.delete_topic(name)  # raises UNKNOWN_TOPIC_OR_PARTITION
        tag = topic.topic_id.hex
        self.replica_manager.stop_replicas(topic, tag)
        return self._delete_topic_metadata(name, topic, tag)

    async def delete_topic_async(self, name: str) -> TopicImage:
        """DeleteTopics' path: `delete_topic`, with the single node's partition renames in a worker thread
        (not on the event loop: one rename per partition), awaited before the metadata is written (logs
        first, as `delete_topic`). Meanwhile the partitions are no longer hosted (NOT_LEADER_OR_FOLLOWER)."""
        if not isinstance(self.metadata_writer, LocalMetadata):
            return await self.admin_call(partial(self.delete_topic, name))
        running = self._topic_deletions.get(name)
        if running is not None:  # a second request for a deletion under way shares its outcome
            return await asyncio.shield(running)
        task = asyncio.ensure_future(self._delete_local_topic(name))
        self._topic_deletions[name] = task

        def forget(done: asyncio.Future[TopicImage]) -> None:
            if self._topic_deletions.get(name) is done:
                del self._topic_deletions[name]

        task.add_done_callback(forget)
        return await asyncio.shield(task)

    async def _delete_local_topic(self, name: str) -> TopicImage:
        topic = self.metadata.topics.get(name)
        if topic is None:
            return self.topic_admin.delete_topic(name)  # raises UNKNOWN_TOPIC_OR_PARTITION
        tag = topic.topic_id.hex
        works = self.replica_manager.detach_replicas(topic, tag)
        if works:
            await asyncio.get_running_loop().run_in_executor(None, lambda: [work() for work in works])
        if self.metadata.topics.get(name) is not topic:  # deleted (or replaced) meanwhile by another request
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic {name} was deleted meanwhile")
        return self._delete_topic_metadata(name, topic, tag)

    def _delete_topic_metadata(self, name: str, topic: TopicImage, tag: str) -> TopicImage:
        try:
            self.topic_admin.delete_topic(name)
        except OSError as e:  # removed in memory; the markers finish the job at the next start
            log.warning("deleted topic %s's logs, but the metadata file could not be written (%s): the next "
                        "start completes the deletion", name, e.strerror or e)
        else:
            if self.log_manager is not None:
                self.log_manager.forget_deletions(tag)
        log.info("deleted topic %s", name)
        return topic

    def _complete_pending_deletions(self) -> None:
        """Topics whose logs were deleted but whose removal from the metadata file was not written (crash,
        full disk) are removed now; then the markers go."""
        if self.log_manager is None:
            return
        for tag in list(self.log_manager.pending_deletions):
            try:
                topic = self.metadata.topic_by_id(uuid.UUID(hex=tag))
            except ValueError:  # a marker of a deletion without topic id (older kaflite): nothing to do
                topic = None
            if topic is not None:
                try:
                    self.topic_admin.delete_topic(topic.name)
                except OSError as e:  # still no space: removed in memory, the markers stay for next time
                    log.warning("topic %s: its deletion is still not written to the metadata file (%s)",
                                topic.name, e.strerror or e)
                    continue
                log.info("completed the deletion of topic %s (interrupted before its metadata was written)",
                         topic.name)
            self.log_manager.forget_deletions(tag)

    def create_partitions(self, name: str, count: int, assignment: list[list[int]] | None = None) -> None:
        self.topic_admin.create_partitions(name, count, assignment)

    def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace a topic's config overrides (its logs pick them up when the image is published)."""
        self.topic_admin.alter_topic_configs(name, dict(configs))

    def compression_codec(self, topic: str) -> int | None:
        """The codec a topic stores batches in (its `compression.type`, else the broker's), or None for
        `producer` (keep what the producer sent, the default)."""
        t = self.metadata.topics.get(topic)
        name = t.configs.get("compression.type") if t is not None else None
        if name is None:
            name = self.setting("compression.type")
        if name == "producer":
            return None
        from kaflite.protocol.compression import CODECS

        return CODECS["none" if name == "uncompressed" else str(name)]

    def min_insync_replicas(self, topic: str) -> int:
        """`min.insync.replicas` of a topic (its override, else the broker's)."""
        t = self.metadata.topics.get(topic)
        if t is not None and "min.insync.replicas" in t.configs:
            return int(t.configs["min.insync.replicas"])
        return int(self.setting("min.insync.replicas"))

    def can_auto_create(self, name: str) -> bool:
        if not self.setting("auto.create.topics.enable"):
            return False
        try:
            validate_topic_name(name)
        except KafkaError:
            return False
        return True

    # -- addresses ---------------------------------------------------------------------------------
    def set_bound_listeners(self, bound: list[Listener]) -> None:
        """Record the client listeners actually bound (port 0 resolved). Each is advertised as its
        `advertised.listeners` entry when there is one (port 0 there: the bound port), else as bound
        (every interface: this host's name), as Kafka does."""
        self.advertised_listeners = self._advertise(bound)
        inter = self.config.inter_broker_listener_name
        self.advertised = self.advertised_listeners.get(inter) or next(iter(self.advertised_listeners.values()))
        self._register()

    def _advertise(self, bound: list[Listener]) -> dict[str, Listener]:
        """Each listener as advertised: its `advertised.listeners` entry when there is one (port 0 there:
        the bound port), else as bound (every interface: this host's name)."""
        configured = {li.name: li for li in self.config.advertised_listeners or []}
        out: dict[str, Listener] = {}
        for li in bound:
            adv = configured.get(li.name)
            if adv is not None:
                out[li.name] = Listener(li.name, adv.host, adv.port or li.port, li.security_protocol)
            else:
                host = socket.getfqdn() if li.host in ("", "0.0.0.0", "::") else li.host
                out[li.name] = Listener(li.name, host, li.port, li.security_protocol)
        return out

    def advertised_for(self, listener_name: str) -> Listener:
        """This broker's address for clients of `listener_name` (Kafka answers Metadata with the
        endpoints of the listener the request came in on)."""
        return self.advertised_listeners.get(listener_name, self.advertised)

    def _register(self) -> None:
        """This broker's registration in the image, one endpoint per client listener (Metadata and
        DescribeCluster list brokers from there, with the endpoint of the request's listener)."""
        listeners = list(self.advertised_listeners.values()) or [self.advertised]
        self.metadata_writer.register_broker(BrokerRegistration(
            self.node_id, tuple(Endpoint(li.name, li.host, li.port, li.security_protocol or "PLAINTEXT")
                                   for li in listeners),
            self.rack))


class ProducerIdManager:
    """Hands out producer ids (InitProducerId). Single node: a counter seeded from the clock so ids from
    before a restart are not reused while their sequence state could still be in the logs."""

    def __init__(self) -> None:
        self._next = int(time.time() * 1000) & 0x0000_7FFF_FFFF_FFFF

    def next_id(self) -> int:
        pid = self._next
        self._next += 1
        return pid


if TYPE_CHECKING:
    def _broker_is_one(broker: Broker) -> ShareBroker:
        return broker  # mypy: the Broker has every member of ShareBroker (and CoordinatorBroker), with these types
