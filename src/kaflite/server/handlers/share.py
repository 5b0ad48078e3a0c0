"""Share groups (KIP-932): ShareGroupHeartbeat (76), ShareGroupDescribe (77), ShareFetch (78) and
ShareAcknowledge (79), v1 each: kio 0.6.5 also has ShareFetch / ShareAcknowledge v2 (Kafka 4.2: KIP-1206's
acquire mode, KIP-1222's RENEW), which are not served, as nothing beyond Kafka 4.1.0's advertised versions is
(tests/server/test_kafka_versions.py); librdkafka 2.15 sends v1.

Rules (the decisions are kaflite.coordinator.share.group's and .partition's; this shell reads the log):
- group.share.enable=false answers every one of these APIs UNSUPPORTED_VERSION (ApiVersions then does not
  advertise them); the ACL checks are acl.rules' SHARE_* (READ on the group, READ on each topic fetched or
  acknowledged: a refused topic's partitions are TOPIC_AUTHORIZATION_FAILED, DESCRIBE on a described group).
- The coordinator is one `ShareGroupCoordinator` per broker, in memory, built from the group.share.* keys
  the first time a share API is used; its clock is the broker's `now_ms`. Its share partitions are durable
  (share_state.py, `__share_group_state`): one is created from the state written there when there is one;
  every share partition whose state changed other than by an acquisition (`SharePartition.changed`) is
  written there before the request that changed it is answered: acknowledgements (ShareFetch,
  ShareAcknowledge), releases and archivals by lock ends or members leaving, start-offset moves, and a new
  share partition's start offset. A failed write answers the acknowledgements of that partition (or its
  fetch) with the write's error, and the share partition is dropped from memory, to be rebuilt from what
  was written (locks included: as after a restart, its ACQUIRED records are AVAILABLE again). On a
  partition of `__share_group_state` another broker leads (a cluster), the state is read and written
  there through the persister (server/share_persister.py: Read/WriteShareGroupState), with the same
  rule: answered once written.
- The membership is durable (server/coordinators/share_membership.py): a heartbeat's changes (and
  expiries, DeleteGroups) are written to the group's `__consumer_offsets` partition before the answer, a
  failed write answered with its error; the groups are rebuilt from those records when a partition's
  shard becomes active here, and dropped when it is unloaded (`share_membership.follow`, registered when
  the coordinator is made: no request reconciles).
- A share group's partitions are assigned once their share state is initialized (Kafka 4.1+): the
  heartbeat that finds new subscribed partitions records them initializing (key 15, written with its other
  changes) and is answered without them; once answered, server/coordinators/share_initialize.py initializes
  them at the share coordinator in the background and records them initialized, and a later heartbeat
  assigns them.
- A cluster (Kafka's split): the group coordinator, the leader of the group's `__consumer_offsets`
  partition, holds the membership: ShareGroupHeartbeat elsewhere is NOT_COORDINATOR. ShareFetch /
  ShareAcknowledge go to each partition's leader, which checks the member id against the membership only
  when it is the group coordinator; elsewhere any member id may open a share session (Kafka's
  share-partition leaders do not ask the group coordinator either). Before an acquisition, a share
  partition held for a partition this broker no longer leads, or led at another leader epoch, is dropped
  (its state is where the leader since then wrote it), and one not in memory is read from its state
  (`_prepare`); `persist` never writes a share partition of a partition this broker no longer leads at
  the leader epoch it was made at: it is dropped, its acknowledgements NOT_LEADER_OR_FOLLOWER (a local
  write carries no leader epoch to be fenced by). A share-state failure the share coordinator calls retriable (loading, moving) answers the
  fetch partition with nothing (no error: librdkafka raises unknown partition errors to the application).
- ShareFetch: a request with share session epoch 0 carrying acknowledgements is INVALID_REQUEST, as in
  Kafka; otherwise the session step (open / continue / close) comes first, then the acknowledgements
  (per partition, all of a partition's batches or none); a closed session (-1, ShareAcknowledge too) then
  releases what the member still holds in its partitions; then, unless the session was closed, the
  acquisition over every partition of the session: the log is read from the share partition's
  fetch_offset() up to the high watermark (the last stable offset when the group's share.isolation.level
  is read_committed: then transaction markers and aborted transactions' batches are named to the state
  machine, which archives them undelivered), the batches read are offered to the state machine, and the answer carries the batches read with the acquired
  ranges (the client delivers only those). At most `max_records` records are acquired per request. The
  read is in memory on the event loop (the batch headers decide what is acquired, so it cannot be a lazy
  file slice as Fetch's), capped at 1 MiB a partition plus one whole batch beyond it.
- When nothing was acquired and nothing failed, the request waits (purgatory keys of its partitions'
  appends) until `max_wait`, or until the earliest lock deadline of its partitions, then tries again.
- Acknowledgement types per batch: one type for the whole range, or one per offset. RENEW (4, KIP-1222)
  is not served: INVALID_REQUEST for that partition.
- IncrementalAlterConfigs on a GROUP resource (admin.py calls `alter_group_configs`): the share-group
  keys only (INVALID_CONFIG otherwise); every group's configs are kept in
  `<first log dir>/share-group-configs.json`, replaced atomically (fsync, in a worker thread, one change
  at a time) before the change applies and is answered, and read when the coordinator is made (at
  start-up, before the broker listens). In a cluster they are kept in ZooKeeper instead, as topic
  configs: /config/groups/<group> ({"version":1,"config":{..}}), changed by compare-and-set on the znode
  as stored, each write followed by a /config/changes notification ("groups/<group>"); every broker
  watches the notifications and applies the znode as read (read at start-up before it listens). Every
  ZooKeeper call runs in a worker thread or ZooKeeper's watch thread, never on the event loop.
- DeleteGroups of a share group also writes tombstones for its share partitions' state (those whose
  `__share_group_state` partition another broker leads through the persister: DeleteShareGroupState),
  and deletes a share group this broker only knows from `__share_group_state` (after a restart, before
  any member joined).
- ListGroups lists share groups (type "share", handlers/groups.py calls `listed_share_groups`); DeleteGroups
  deletes an empty share group with its share-partition state (`share_admin.delete_share_group`), NON_EMPTY_GROUP
  while it has members.
- ShareAcknowledge: epoch 0 is INVALID_SHARE_SESSION_EPOCH (a session is opened by ShareFetch only);
  otherwise the session step, then the acknowledgements.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import struct
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from kaflite.coordinator.messages import ListedGroup
from kaflite.coordinator.offsets_topic import OFFSETS_TOPIC
from kaflite.coordinator.offsets_topic import partition_for as offsets_partition_for
from kaflite.coordinator.share.group import ShareGroupCoordinator
from kaflite.coordinator.share.partition import (
    ShareConfig,
    ShareEpochs,
    SharePartition,
    ShareSnapshot,
    StateBatch,
)
from kaflite.coordinator.timeline import RebalanceEvent
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.acl import rules
from kaflite.server.context import RequestContext, build
from kaflite.server.coordinators import share_initialize, share_membership, share_state
from kaflite.server.coordinators.broker_api import ShareBroker
from kaflite.server.dispatcher import CONNECTION_CLOSED
from kaflite.server.handlers import ApiTable
from kaflite.server.replica import fetch_key
from kaflite.server.services import Slot
from kaflite.server.share_persister import RETRIABLE, SHARE_PERSISTER, SharePersister
from kaflite.storage.checkpoint import atomic_write
from kaflite.storage.file_slice import FileSlice

__all__ = ["APIS", "alter_group_configs", "coordinator", "listed_share_groups",
           "on_start", "persist", "share_enabled", "share_group_history", "share_group_view"]

log = logging.getLogger("kaflite.share")



_ZERO = datetime.timedelta(0)
_NO_ID = uuid.UUID(int=0)
_RENEW = 4
_PARTITION_READ_BYTES = 1 << 20  # a consumer's max.partition.fetch.bytes default
_GROUP_CONFIGS_LOCK: Slot[asyncio.Lock] = Slot("share_group_configs_lock")  # one group-config change at a time
# the end of share sessions at this broker: (group, member) -> the connection its session was opened on; the
# hook run when a connection closes; the queue of groups whose releases the one writer task writes
_SESSION_CONNECTIONS: Slot[dict[tuple[str, str], int]] = Slot("share_session_connections")
_DISCONNECT_HOOK: Slot[Callable[[int], None]] = Slot("share_disconnect_hook")
_RELEASE_QUEUE: Slot[asyncio.Queue[set[str]]] = Slot("share_release_queue")


def share_enabled(broker: ShareBroker) -> bool:
    return bool(broker.setting("group.share.enable"))


def coordinator(broker: ShareBroker) -> ShareGroupCoordinator:
    """The broker's share-group coordinator, made from the group.share.* keys on first use."""
    coord = broker.services.get(share_state.SHARE_COORDINATOR)
    if coord is None:
        config = ShareConfig(
            record_lock_duration_ms=int(broker.setting("group.share.record.lock.duration.ms")),
            delivery_count_limit=int(broker.setting("group.share.delivery.count.limit")),
            max_record_locks=int(broker.setting("group.share.partition.max.record.locks")),
        )
        coord = ShareGroupCoordinator(
            config, session_timeout_ms=int(broker.setting("group.share.session.timeout.ms")),
            heartbeat_interval_ms=int(broker.setting("group.share.heartbeat.interval.ms")),
            max_size=int(broker.setting("group.share.max.size")),
            history_size=int(broker.setting("kaflite.group.rebalance.history.size")),
            initialize_partitions=True)  # assigned once their state is initialized (share_initialize.py)
        broker.services.set(share_state.SHARE_COORDINATOR, coord)
        coord.load_state = _state_loader(broker)
        for group_id, configs in _read_group_configs(broker).items():
            try:
                coord.set_group_configs(group_id, configs)
            except ValueError as e:  # a file edited by hand: the group keeps the broker's keys
                log.warning("%s: group %r: %s; its configs are ignored", GROUP_CONFIGS_FILE, group_id, e)
        # its groups follow the __consumer_offsets shards from now on (after the group configs: an imported
        # member's session deadline is its group's session timeout)
        share_membership.follow(broker, coord)
    return coord


GROUP_CONFIGS_FILE = "share-group-configs.json"


def _group_configs_path(broker: ShareBroker) -> Any:
    dirs = getattr(broker, "log_dirs", None)
    return dirs[0] / GROUP_CONFIGS_FILE if dirs else None


def _read_group_configs(broker: ShareBroker) -> dict[str, dict[str, str]]:
    """The groups' configs kept by `alter_group_configs`; none when there is no file yet (or in a cluster,
    whose configs are in ZooKeeper, read by `_watch_cluster_group_configs`)."""
    path = _group_configs_path(broker)
    if path is None or _zk(broker) is not None:
        return {}
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        log.error("%s cannot be read (%s): share groups have the broker's keys only", path, e)
        return {}
    groups = data.get("groups", {}) if isinstance(data, dict) else {}
    return {str(g): {str(k): str(v) for k, v in c.items()} for g, c in groups.items() if isinstance(c, dict)}


GROUP_CONFIG_ENTITY = "groups"  # /config/groups/<group> in a cluster's ZooKeeper


def _zk(broker: Any) -> Any | None:
    """A cluster member's ZooKeeper client (cluster.zk.KafkaZkClient), None on a single node."""
    if not getattr(broker, "in_cluster", False):
        return None
    return broker.metadata_writer.zk


def _apply_group_configs(broker: Any, group_id: str, configs: dict[str, str]) -> None:
    """A group's configs as stored in ZooKeeper now, on the event loop."""
    try:
        coordinator(broker).set_group_configs(group_id, configs)
    except ValueError as e:  # written by hand, or by another version: the group keeps the broker's keys
        log.warning("/config/%s/%s: %s; its configs are ignored", GROUP_CONFIG_ENTITY, group_id, e)
        return
    # said once applied: when a change reached every broker is in their logs (and a test waits on it)
    log.info("share group %s: configs applied from /config/%s: %s", group_id, GROUP_CONFIG_ENTITY,
             ", ".join(f"{k}={v}" for k, v in sorted(configs.items())) or "(none: the broker's keys)")


async def _watch_cluster_group_configs(broker: Any, zk: Any) -> None:
    """A cluster member, at start-up: the watch on /config/changes first, then every /config/groups/<g>
    (a change between the two is read twice, never missed), all in worker threads. Each znode read is
    handed to the event loop in the order read (a lock orders the start-up reads and the watch's), so a
    newer read is never applied before an older one."""
    from kaflite.cluster.zk import ConfigChanged

    loop = asyncio.get_running_loop()
    order = threading.Lock()

    def publish(group_id: str) -> None:  # a worker or ZooKeeper's watch thread
        with order:
            configs = zk.get_entity_config(GROUP_CONFIG_ENTITY, group_id)
            loop.call_soon_threadsafe(_apply_group_configs, broker, group_id, configs)

    def on_change(event: Any) -> None:
        if isinstance(event, ConfigChanged) and event.entity_type == GROUP_CONFIG_ENTITY:
            publish(event.name)

    def start() -> None:
        zk.watch_config_changes(on_change)
        for group_id in zk.get_children(f"/config/{GROUP_CONFIG_ENTITY}"):
            publish(group_id)
    await asyncio.to_thread(start)


async def _start_in_cluster(broker: Any, zk: Any, state: Any) -> None:
    await _watch_cluster_group_configs(broker, zk)
    if state is not None:
        await state


def on_start(broker: ShareBroker) -> Any:
    """At start-up (before the broker listens): the coordinator with the groups' configs read from their
    file (a cluster: from ZooKeeper, watched for every broker's changes), and `__share_group_state` loaded
    when it exists."""
    if not share_enabled(broker):
        return None
    coordinator(broker)
    state = share_state.load_at_start(broker)
    zk = _zk(broker)
    return state if zk is None else _start_in_cluster(broker, zk, state)


def _state_loader(broker: ShareBroker) -> Callable[[str, str, int], ShareSnapshot | None]:
    def load(group_id: str, topic: str, partition: int) -> ShareSnapshot | None:
        svc = share_state.ShareStateService.of(broker)  # creates __share_group_state on first need
        key = svc.key(group_id, topic, partition)
        if key is None:
            return None
        state = svc.read(key)  # COORDINATOR_LOAD_IN_PROGRESS while its partition loads
        if state is share_state.NOT_HERE:
            # another broker's share coordinator holds it: read through the persister by `_prepare`
            # before any acquisition; not read yet (a race with a leadership change): asked again
            raise KafkaError(ErrorCode.coordinator_load_in_progress,
                             f"the share state of {group_id}:{topic}:{partition} is being read")
        if not isinstance(state, ShareSnapshot) or state.start_offset < 0:
            return None  # start offset -1 (AlterShareGroupOffsets): uninitialized, from share.auto.offset.reset
        return _without_holes(state)
    return load


def _without_holes(snapshot: ShareSnapshot) -> ShareSnapshot:
    """The state with the offsets no batch covers (WriteShareGroupState may leave such holes; kaflite's own
    writes never do) as AVAILABLE, never delivered, as Kafka reads them: from_state needs it contiguous."""
    out: list[StateBatch] = []
    expected = snapshot.start_offset
    for b in snapshot.batches:
        if b.first_offset > expected:
            out.append(StateBatch(expected, b.first_offset - 1, 0, 0))
        out.append(b)
        expected = max(expected, b.last_offset + 1)
    return ShareSnapshot(snapshot.start_offset, tuple(out))


def group_coordinator_here(broker: ShareBroker, group_id: str) -> bool:
    """This broker is the share group's coordinator (the leader of the group's `__consumer_offsets`
    partition, as for consumer groups and as FindCoordinator answers): it holds the group's membership.
    True while the image has no such partition (a single node before the topic exists)."""
    topic = broker.metadata.topics.get(OFFSETS_TOPIC)
    if topic is None:
        return True
    reg = broker.metadata.partition(OFFSETS_TOPIC, offsets_partition_for(group_id, topic.num_partitions))
    return reg is None or int(reg.leader) == int(broker.node_id)


def persister(broker: ShareBroker) -> SharePersister:
    """The broker's persister for share partitions whose `__share_group_state` partition another broker
    leads (share_persister.py), made on first use."""
    per = broker.services.get(SHARE_PERSISTER)
    if per is None:
        svc = share_state.ShareStateService.of(broker)
        per = SharePersister(
            int(broker.node_id), lambda: broker.metadata, svc.partition_for,
            listener=broker.config.inter_broker_listener_name,
            connector=getattr(broker, "inter_broker_connector", None),
            timeout_ms=int(broker.setting("share.coordinator.write.timeout.ms")))
        broker.services.set(SHARE_PERSISTER, per)
    return per


async def _prepare(broker: ShareBroker, coord: ShareGroupCoordinator, group_id: str,
                   partitions: Sequence[tuple[str, int]]
                   ) -> tuple[dict[tuple[str, int], ErrorCode], dict[tuple[str, int], int]]:
    """Before an acquisition: drop the share partitions this broker does not lead any more, or led with
    another leader epoch (what memory holds of them is stale: the leader since then wrote the state), and
    read the state of those not in memory whose `__share_group_state` partition another broker leads (the
    persister, concurrently). The errors of the reads that failed, per partition, and the leader epoch of
    each partition whose share partition the acquisition will make from this broker's shard (its
    `epochs`, set by `_acquire_pass` once made)."""
    made_here: dict[tuple[str, int], int] = {}
    me = int(broker.node_id)
    reads: list[tuple[tuple[str, int], Any, int, Any]] = []
    svc = share_state.ShareStateService.of(broker)
    for topic, partition in partitions:
        k = (group_id, topic, partition)
        part = broker.replica_manager.partition_or_none(topic, partition)
        if part is None or int(part.state.leader) != me:
            coord.partitions.pop(k, None)  # a leader elsewhere now: its next state there, not here
            continue
        leader_epoch = int(part.state.leader_epoch)
        held = coord.partitions.get(k)
        if held is not None and held.epochs is not None and held.epochs.leader_epoch != leader_epoch:
            del coord.partitions[k]
        if k in coord.partitions:
            continue
        key = svc.key(group_id, topic, partition)
        if key is None:
            continue
        if svc.here(svc.partition_for(key)):
            made_here[(topic, partition)] = leader_epoch  # made from this broker's shard by the state loader
            continue
        reads.append(((topic, partition), key, leader_epoch,
                      asyncio.ensure_future(persister(broker).read(key, leader_epoch))))
    errors: dict[tuple[str, int], ErrorCode] = {}
    for (topic, partition), _key, leader_epoch, fut in reads:
        k = (group_id, topic, partition)
        try:
            state = await fut
        except KafkaError as e:
            errors[(topic, partition)] = e.code
            continue
        part = broker.replica_manager.partition_or_none(topic, partition)
        if k in coord.partitions or part is None or part.log is None or int(part.state.leader_epoch) != leader_epoch:
            continue  # made meanwhile by another request, or the leadership moved: nothing installed
        snapshot = state.snapshot()
        high_watermark, _ = part.fetch_offsets()
        sp = coord.install(group_id, topic, partition, None if snapshot is None else _without_holes(snapshot),
                           part.log.log_start_offset, high_watermark)
        sp.epochs = ShareEpochs(leader_epoch, state.state_epoch, state_elsewhere=True)
    return errors, made_here


def _still_leader(broker: ShareBroker, k: tuple[str, str, int], sp: SharePartition) -> bool:
    """This broker leads the share partition's partition, at the leader epoch it was made at (when known)."""
    part = broker.replica_manager.partition_or_none(k[1], k[2])
    if part is None or int(part.state.leader) != int(broker.node_id):
        return False
    return sp.epochs is None or sp.epochs.leader_epoch == int(part.state.leader_epoch)


async def persist(broker: ShareBroker, coord: ShareGroupCoordinator) -> dict[tuple[str, str, int], ErrorCode]:
    """Write every share partition whose state changed (other than by acquisitions) to
    `__share_group_state`, and wait until it is committed. The error per (group, topic, partition) whose
    write failed: such a share partition is dropped from memory (rebuilt from what was written)."""
    writes: list[tuple[tuple[str, str, int], Any, Any]] = []
    errors: dict[tuple[str, str, int], ErrorCode] = {}
    for k, sp in list(coord.partitions.items()):
        if not sp.changed:
            continue
        sp.changed = False
        if not _still_leader(broker, k, sp):
            # what this broker holds is stale (the leader since then has the state): never written over it
            errors[k] = ErrorCode.not_leader_or_follower
            del coord.partitions[k]
            continue
        svc = share_state.ShareStateService.of(broker)
        key = svc.key(*k)
        if key is None:
            continue  # the topic is gone: nothing of it will be fetched again
        held = sp.epochs
        # on this broker's shard when it leads the key's state partition and the state was read here
        fut: asyncio.Future[Any] | None = None if held is not None and held.state_elsewhere else svc.write(key, sp.export)
        if fut is None:  # another broker's share coordinator: through the persister (RPC 85)
            leader_epoch, state_epoch = (held.leader_epoch, held.state_epoch) if held is not None else (-1, 0)
            fut = asyncio.ensure_future(persister(broker).write(key, state_epoch, leader_epoch, sp.export()))
        writes.append((k, sp, fut))
    for k, sp, fut in writes:
        try:
            await fut
        except KafkaError as e:
            log.warning("share partition %s: writing its state failed (%s); rebuilt from %s at its next use", k,
                        e.code.name.upper(), share_state.SHARE_GROUP_STATE_TOPIC)
            errors[k] = e.code
            if coord.partitions.get(k) is sp:
                del coord.partitions[k]
    return errors


async def alter_group_configs(broker: ShareBroker, group_id: str,
                              change: Callable[[dict[str, str]], dict[str, str | None]], validate_only: bool) -> None:
    """IncrementalAlterConfigs on a GROUP resource: the share-group keys of GROUP_CONFIG_KEYS. A key that
    is not one of them (consumer-group keys included) or a bad value is INVALID_CONFIG for the resource,
    nothing changes. A change is written to the groups' config file (fsync'd, in a worker thread) before
    it applies; a failed write is KAFKA_STORAGE_ERROR and changes nothing."""
    if not group_id:
        raise KafkaError(ErrorCode.invalid_request, "Group name must not be empty.")
    coord = coordinator(broker)
    zk = _zk(broker)
    if zk is not None:
        await _alter_cluster_group_configs(broker, zk, group_id, change, validate_only)
        return
    lock = broker.services.get_or_make(_GROUP_CONFIGS_LOCK, asyncio.Lock)
    async with lock:  # one change at a time: the file written last is the configs applied last
        new = change(dict(coord.group_configs.get(group_id, {})))
        probe = ShareGroupCoordinator(coord.share_config)  # validate without touching the real one
        try:
            probe.set_group_configs(group_id, new)
        except ValueError as e:
            raise KafkaError(ErrorCode.invalid_config, str(e)) from None
        if validate_only:
            return
        path = _group_configs_path(broker)
        if path is not None:
            groups = {g: dict(c) for g, c in coord.group_configs.items() if g != group_id}
            kept = probe.group_configs.get(group_id)
            if kept:
                groups[group_id] = dict(kept)
            body = json.dumps({"version": 1, "groups": groups}, sort_keys=True, indent=1).encode()
            try:
                await asyncio.to_thread(atomic_write, path, body)
            except OSError as e:
                raise KafkaError(ErrorCode.kafka_storage_error, f"{path} cannot be written: {e}") from None
        coord.set_group_configs(group_id, new)


async def _alter_cluster_group_configs(broker: Any, zk: Any, group_id: str,
                                      change: Callable[[dict[str, str]], dict[str, str | None]],
                                      validate_only: bool) -> None:
    """A cluster: the change applies to the group's znode as stored now (another broker may have changed
    it), by compare-and-set in a worker thread, followed by the config-change notification that every
    broker applies (`_watch_cluster_group_configs`); applied here once written. A refused change writes
    nothing (INVALID_CONFIG); a failure of ZooKeeper is KAFKA_STORAGE_ERROR."""
    share_config = coordinator(broker).share_config

    def validated(current: dict[str, str]) -> dict[str, str]:
        probe = ShareGroupCoordinator(share_config)
        try:
            probe.set_group_configs(group_id, change(dict(current)))
        except ValueError as e:
            raise KafkaError(ErrorCode.invalid_config, str(e)) from None
        return dict(probe.group_configs.get(group_id, {}))
    try:
        if validate_only:
            validated(await asyncio.to_thread(zk.get_entity_config, GROUP_CONFIG_ENTITY, group_id))
            return
        new = await asyncio.to_thread(zk.update_entity_config, GROUP_CONFIG_ENTITY, group_id, validated)
    except KafkaError:
        raise
    except Exception as e:  # noqa: BLE001 - ZooKeeper unreachable or its session lost: nothing was applied
        raise KafkaError(ErrorCode.kafka_storage_error,
                         f"/config/{GROUP_CONFIG_ENTITY}/{group_id} cannot be written: {e}") from None
    _apply_group_configs(broker, group_id, new)


def share_group_history(broker: ShareBroker, group_id: str) -> list[RebalanceEvent] | None:
    """The rebalance timeline of share group `group_id` (in memory, as its membership); None when this
    broker knows no share group of that id (the group coordinator's timeline answers then)."""
    coord = broker.services.get(share_state.SHARE_COORDINATOR)
    if coord is None:
        return None
    coord.expire(broker.now_ms())  # a member whose session ended is in the history before it is read
    share_membership.flush_soon(broker, coord)
    return coord.history(group_id)


def share_group_view(broker: ShareBroker, group_id: str, max_ranges: int = 100) -> list[tuple[str, dict[str, Any]]]:
    """What the console's share-group page shows (kaflite.cluster.share_group_view asks for it): the group
    (state, epochs, members with their subscriptions and partitions, the broker's clock) named "group",
    then one "partition:<topic>:<p>" per share partition (start offset, end offset, the first
    `max_ranges` ranges of records in flight with delivery count, holder and lock deadline). KafkaError
    GROUP_ID_NOT_FOUND when no share group has this id here."""
    coord = broker.services.get(share_state.SHARE_COORDINATOR)
    group = coord.groups.get(group_id) if coord is not None else None
    if coord is None or group is None:
        raise KafkaError(ErrorCode.group_id_not_found, f"Share group {group_id} not found.")
    now = broker.now_ms()
    coord.expire(now)
    members = [{"member_id": m.member_id, "member_epoch": m.member_epoch, "client_id": m.client_id,
                "client_host": m.client_host, "rack_id": m.rack_id, "subscribed": sorted(m.subscribed),
                "assignment": [[t, p] for t, ps in sorted(m.assigned.items()) for p in sorted(ps)]}
               for m in group.members.values()]
    out: list[tuple[str, dict[str, Any]]] = [("group", {
        "group_id": group_id, "state": group.state, "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch, "now_ms": now, "members": members})]
    for (g, topic, partition), sp in sorted(coord.partitions.items()):
        if g != group_id:
            continue
        ranges, total = sp.in_flight_ranges(max_ranges)
        out.append((f"partition:{topic}:{partition}", {
            "topic": topic, "partition": partition, "start_offset": sp.start_offset, "end_offset": sp.end_offset,
            "in_flight": [[first, last, state.name, count, member or "", deadline]
                          for first, last, state, count, member, deadline in ranges],
            "ranges_total": total}))
    return out


def listed_share_groups(broker: ShareBroker, states: Sequence[str]) -> list[ListedGroup]:
    """ListGroups' share groups (group type and protocol type "share"), filtered by state (any case)."""
    coord = broker.services.get(share_state.SHARE_COORDINATOR)
    if coord is None:
        return []
    coord.expire(broker.now_ms())
    share_membership.flush_soon(broker, coord)
    wanted = {s.lower() for s in states}
    return [ListedGroup(g.group_id, "share", g.state, "share") for g in coord.groups.values()
            if not wanted or g.state.lower() in wanted]


def _ms(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)


# --- ShareGroupHeartbeat (76) ---------------------------------------------------------------------

async def handle_share_group_heartbeat(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response

    def failed(code: ErrorCode, message: str | None = None) -> Any:
        return build(R.ShareGroupHeartbeatResponse, throttle_time=_ZERO, error_code=code, error_message=message,
                     member_id=None, member_epoch=-1, heartbeat_interval=_ZERO, assignment=None)
    if not share_enabled(ctx.broker):
        return failed(ErrorCode.unsupported_version, "Share groups are not enabled (group.share.enable).")
    if not ctx.allowed(rules.SHARE_GROUP_HEARTBEAT, request.group_id):
        return failed(rules.SHARE_GROUP_HEARTBEAT.error)
    broker = ctx.broker
    if not group_coordinator_here(broker, request.group_id):  # the membership lives at the group coordinator
        return failed(ErrorCode.not_coordinator, f"broker {broker.node_id} is not the coordinator of "
                      f"share group {request.group_id}.")
    await share_state.ShareStateService.prepare(broker)  # its topic created off the loop before any fetch needs it
    not_here = await share_membership.prepare(broker, coordinator(broker), request.group_id)
    if not_here is not None:  # the group's __consumer_offsets partition is not (yet) loaded here
        return failed(not_here)
    metadata = broker.metadata
    topics = {name: t.num_partitions for name, t in metadata.topics.items() if not t.internal}
    subscribed = None if request.subscribed_topic_names is None else list(request.subscribed_topic_names)
    answer = coordinator(broker).heartbeat(
        request.group_id, request.member_id, int(request.member_epoch), subscribed, topics, broker.now_ms(),
        rack_id=request.rack_id, client_id=ctx.client_id or "",
        client_host="/" + (ctx.client_host or "127.0.0.1"))
    # the membership written first: its step runs now, on the change just made (answered once committed)
    changed = request.group_id in coordinator(broker).touched
    written = await share_membership.write_touched(broker, coordinator(broker))
    await persist(broker, coordinator(broker))  # a leave or a session timeout released records
    if request.group_id in written:
        return failed(written[request.group_id])
    if not changed:  # nothing of this member written: answered after the group's earlier writes commit
        barrier = await share_membership.after_pending_writes(broker, request.group_id)
        if barrier is not None:
            return failed(barrier)
    if answer.error is not ErrorCode.none:
        return failed(answer.error, answer.error_message)
    # the partitions this heartbeat moved to initializing (key 15, written above): their state initialized
    # in the background; this answer and those before it is done do not assign them
    share_initialize.start(broker, coordinator(broker), request.group_id, answer.initialize, answer.state_epoch,
                           lambda: persister(broker))
    assignment = None
    if answer.assignment is not None:
        parts = tuple(build(R.TopicPartitions, topic_id=metadata.topics[t].topic_id, partitions=tuple(sorted(ps)))
                      for t, ps in sorted(answer.assignment.items()) if t in metadata.topics)
        assignment = build(R.Assignment, topic_partitions=parts)
    return build(R.ShareGroupHeartbeatResponse, throttle_time=_ZERO, error_code=ErrorCode.none,
                 error_message=None, member_id=answer.member_id, member_epoch=answer.member_epoch,
                 heartbeat_interval=_ms(answer.heartbeat_interval_ms), assignment=assignment)


# --- ShareGroupDescribe (77) ----------------------------------------------------------------------

async def handle_share_group_describe(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    broker = ctx.broker
    metadata = broker.metadata
    enabled = share_enabled(broker)
    coord = coordinator(broker) if enabled else None
    if coord is not None:
        coord.expire(broker.now_ms())
        await share_membership.write_touched(broker, coord)  # members whose session ended

    def assignment(a: dict[str, frozenset[int]]) -> Any:
        parts = tuple(build(R.TopicPartitions, topic_id=metadata.topics[t].topic_id, topic_name=t,
                            partitions=tuple(sorted(ps)))
                      for t, ps in sorted(a.items()) if t in metadata.topics and ps)
        return build(R.Assignment, topic_partitions=parts)

    groups = []
    for group_id in request.group_ids:
        def empty(code: ErrorCode, message: str | None = None, group_id: str = group_id) -> Any:
            return build(R.DescribedGroup, error_code=code, error_message=message, group_id=group_id,
                         group_state="", group_epoch=-1, assignment_epoch=-1, assignor_name="", members=())
        if coord is None:
            groups.append(empty(ErrorCode.unsupported_version, "Share groups are not enabled."))
            continue
        if not ctx.allowed(rules.SHARE_GROUP_DESCRIBE, group_id):
            groups.append(empty(rules.SHARE_GROUP_DESCRIBE.error))
            continue
        group = coord.groups.get(group_id)
        if group is None:
            groups.append(empty(ErrorCode.group_id_not_found, f"Group {group_id} not found."))
            continue
        members = tuple(
            build(R.Member, member_id=mb.member_id, rack_id=mb.rack_id, member_epoch=mb.member_epoch,
                  client_id=mb.client_id, client_host=mb.client_host,
                  subscribed_topic_names=tuple(sorted(mb.subscribed)), assignment=assignment(mb.assigned))
            for mb in group.members.values())
        groups.append(build(R.DescribedGroup, error_code=ErrorCode.none, error_message=None, group_id=group_id,
                            group_state=group.state, group_epoch=group.group_epoch,
                            assignment_epoch=group.assignment_epoch, assignor_name="simple", members=members))
    return build(R.ShareGroupDescribeResponse, throttle_time=_ZERO, groups=tuple(groups))


# --- acknowledgements shared by ShareFetch and ShareAcknowledge ------------------------------------

def _ack_ranges(batches: Sequence[Any]) -> list[tuple[int, int, int]] | None:
    """The wire's AcknowledgementBatches as (first, last, type) ranges; None when malformed (a types array
    neither of length 1 nor of the range's length, or RENEW, which kaflite does not serve)."""
    out: list[tuple[int, int, int]] = []
    for b in batches:
        first, last, types = int(b.first_offset), int(b.last_offset), [int(t) for t in b.acknowledge_types]
        if _RENEW in types or not types:
            return None
        if len(types) == 1:
            out.append((first, last, types[0]))
        elif len(types) == last - first + 1:
            for i, kind in enumerate(types):
                off = first + i
                if out and out[-1][1] == off - 1 and out[-1][2] == kind and out[-1][0] >= first:
                    out[-1] = (out[-1][0], off, kind)
                else:
                    out.append((off, off, kind))
        else:
            return None
    return out


def _acknowledge(ctx: RequestContext, coord: ShareGroupCoordinator, group_id: str, member_id: str,
                 topics: Sequence[Any], names: dict[uuid.UUID, str], topic_check: rules.Check,
                 now: int) -> dict[tuple[uuid.UUID, int], ErrorCode]:
    """Apply the request's acknowledgements; the error per (topic id, partition) acknowledged."""
    answers: dict[tuple[uuid.UUID, int], ErrorCode] = {}
    for t in topics:
        topic_id = t.topic_id or _NO_ID
        name = names.get(topic_id)
        for p in t.partitions:
            batches = p.acknowledgement_batches
            if not batches:
                continue
            key = (topic_id, int(p.partition_index))
            if name is None:
                answers[key] = ErrorCode.unknown_topic_id
                continue
            if not ctx.allowed(topic_check, name):
                answers[key] = topic_check.error
                continue
            acks = _ack_ranges(batches)
            if acks is None:
                answers[key] = ErrorCode.invalid_request
                continue
            result = coord.acknowledge(group_id, member_id, name, int(p.partition_index), acks, now)
            answers[key] = ErrorCode(result.error_code)
    return answers


def _durable(failed: dict[tuple[str, str, int], ErrorCode], group_id: str, names: dict[uuid.UUID, str],
             answers: dict[tuple[uuid.UUID, int], ErrorCode]) -> None:
    """Put the errors of the state writes that failed (`persist`'s) into the acknowledgement answers: an
    acknowledgement is answered as applied only once it is durable."""
    for (topic_id, partition), code in answers.items():
        name = names.get(topic_id)
        failure = failed.get((group_id, name, partition)) if name is not None else None
        if code is ErrorCode.none and failure is not None:
            answers[(topic_id, partition)] = failure


def _names(broker: ShareBroker, topic_ids: Sequence[uuid.UUID | None]) -> dict[uuid.UUID, str]:
    out: dict[uuid.UUID, str] = {}
    for topic_id in topic_ids:
        if topic_id is None or topic_id == _NO_ID:
            continue
        topic = broker.metadata.topic_by_id(topic_id)
        if topic is not None:
            out[topic_id] = topic.name
    return out


def _leader(ctx: RequestContext, topic: str, partition: int) -> tuple[int, int]:
    part = ctx.broker.replica_manager.partition_or_none(topic, partition)
    if part is None:
        return -1, -1
    return int(part.state.leader), int(part.state.leader_epoch)


def _batches(data: bytes) -> list[tuple[int, int, int, int]]:
    """(first offset, last offset, attributes, producer id) of each record batch in `data` (Kafka's batch
    header v2: base offset at 0, batch length at 8, attributes at 21, last offset delta at 23, producer id
    at 43)."""
    out: list[tuple[int, int, int, int]] = []
    pos = 0
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        (attributes,) = struct.unpack_from(">h", data, pos + 21)
        (delta,) = struct.unpack_from(">i", data, pos + 23)
        (producer_id,) = struct.unpack_from(">q", data, pos + 43)
        if pos + 12 + length > len(data):
            break  # a partial batch at the end of the read: not offered
        out.append((base, base + delta, attributes, producer_id))
        pos += 12 + length
    return out


_TRANSACTIONAL, _CONTROL = 0x10, 0x20


def _aborted_ranges(batches: Sequence[tuple[int, int, int, int]],
                    aborted: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Under read_committed, the offsets never to deliver: control batches (transaction markers) and the
    batches of aborted transactions ((producer id, first offset) from the log's transaction index): a
    transactional batch of a producer whose aborted transaction began at or before it, until that
    producer's marker (Kafka's fetch-side filtering of aborted transactions)."""
    pending = sorted(aborted, key=lambda a: a[1])
    active: set[int] = set()
    out: list[tuple[int, int]] = []
    for first, last, attributes, producer_id in batches:
        while pending and pending[0][1] <= first:
            active.add(pending.pop(0)[0])
        if attributes & _CONTROL:
            active.discard(producer_id)
            out.append((first, last))
        elif attributes & _TRANSACTIONAL and producer_id in active:
            out.append((first, last))
    return out


# --- ShareFetch (78) ------------------------------------------------------------------------------

def _failed(response: type[Any]) -> Callable[..., Any]:
    """The whole-request error answer of ShareFetch or ShareAcknowledge (`response` their kio class)."""

    def failed(code: ErrorCode, message: str | None = None) -> Any:
        return build(response, throttle_time=_ZERO, error_code=code, error_message=message,
                     acquisition_lock_timeout=_ZERO, responses=(), node_endpoints=())
    return failed


def _refused(ctx: RequestContext, request: Any, rule: Any, failed: Callable[..., Any]) -> Any | None:
    """The checks ShareFetch and ShareAcknowledge make first, in Kafka's order (share groups enabled, group
    and member ids set, READ on the group): the answer of the first that fails, or None."""
    if not share_enabled(ctx.broker):
        return failed(ErrorCode.unsupported_version, "Share groups are not enabled (group.share.enable).")
    if not request.group_id or not request.member_id:
        return failed(ErrorCode.invalid_request, "GroupId and MemberId must be set.")
    if not ctx.allowed(rule, request.group_id):
        return failed(rule.error)
    return None


# --- the end of a share session at this broker (Kafka's releaseSession and ShareGroupListener) ---------

def _session_connections(broker: ShareBroker) -> dict[tuple[str, str], int]:
    """(group, member) -> the connection its share session here was opened on (Kafka's ShareSessionCache
    keeps the connection id of each session, to end it when that connection closes)."""
    return broker.services.get_or_make(_SESSION_CONNECTIONS, dict)


def _session_opened(broker: ShareBroker, connection_id: int, group_id: str, member_id: str) -> None:
    conns = _session_connections(broker)
    if broker.services.get(_DISCONNECT_HOOK) is None:
        def hook(cid: int) -> None:
            _connection_closed(broker, cid)
        broker.services.set(_DISCONNECT_HOOK, hook)
        broker.services.get_or_make(CONNECTION_CLOSED, list).append(hook)
    conns[(group_id, member_id)] = connection_id


def _session_ended(broker: ShareBroker, coord: ShareGroupCoordinator, group_id: str, member_id: str,
                   partitions: Sequence[tuple[str, int]] | None = None) -> None:
    """The member's share session here ended: what it holds in the session's partitions here is released
    (written by the caller's `persist`), and ShareFetches waiting on those partitions wake."""
    _session_connections(broker).pop((group_id, member_id), None)
    for topic, partition in coord.release_session(group_id, member_id, partitions):
        broker.purgatory.complete(fetch_key(topic, partition))


def _maybe_group_empty(broker: ShareBroker, coord: ShareGroupCoordinator, group_id: str) -> None:
    """No share session of the group left here (Kafka's onGroupEmpty): a broker that is not the group
    coordinator drops the group's share partitions, written already, from memory, so that their next use
    reads the durable state (which AlterShareGroupOffsets / DeleteShareGroupOffsets may change while the
    group is empty) rather than write stale state over it. The group coordinator keeps them (it forgets
    them itself when it alters or deletes their state)."""
    if coord.has_sessions(group_id) or group_coordinator_here(broker, group_id):
        return
    coord.forget_share_partitions(group_id)  # their epochs (SharePartition.epochs) go with them


def _connection_closed(broker: ShareBroker, connection_id: int) -> None:
    """A client connection closed (after its last request was answered): the share sessions opened on it
    end as if closed with epoch -1 (Kafka 4.1's ShareSessionCache on a disconnect), so the records their
    members hold here are released at once rather than when their locks end."""
    conns = _session_connections(broker)
    ended = [gm for gm, cid in conns.items() if cid == connection_id]
    coord = broker.services.get(share_state.SHARE_COORDINATOR)
    if not ended or coord is None:
        return
    for group_id, member_id in ended:
        _session_ended(broker, coord, group_id, member_id)
    queue = broker.services.get(_RELEASE_QUEUE)
    if queue is None:  # one writer task for the broker's life, cancelled when the broker stops
        queue = asyncio.Queue()
        broker.services.set(_RELEASE_QUEUE, queue)
        broker.add_task(asyncio.ensure_future(_release_writer(broker, coord, queue)))
    queue.put_nowait({g for g, _m in ended})


async def _release_writer(broker: ShareBroker, coord: ShareGroupCoordinator, queue: asyncio.Queue[set[str]]) -> None:
    """Writes the releases of closed connections' sessions (`persist`: a failure is logged there and the
    share partition rebuilt from its state), then lets the groups left without a session here go."""
    while True:
        groups = await queue.get()
        try:
            await persist(broker, coord)
        except Exception:  # noqa: BLE001 - the writer must outlive one failure; the next release writes again
            log.exception("writing the share-partition releases of a closed connection failed")
        for group_id in groups:
            _maybe_group_empty(broker, coord, group_id)


async def handle_share_fetch(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    broker = ctx.broker
    failed = _failed(R.ShareFetchResponse)
    refused = _refused(ctx, request, rules.SHARE_FETCH_GROUP, failed)
    if refused is not None:
        return refused
    group_id, member_id = request.group_id, request.member_id
    epoch = int(request.share_session_epoch)
    has_acks = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    if epoch == 0 and has_acks:
        return failed(ErrorCode.invalid_request, "Acknowledgements cannot be sent when opening a share session.")
    coord = coordinator(broker)
    lock_ms = coord.share_config.record_lock_duration_ms
    names = _names(broker, [t.topic_id for t in request.topics]
                   + [f.topic_id for f in request.forgotten_topics_data])
    unknown = [(t.topic_id or _NO_ID, int(p.partition_index)) for t in request.topics
               if (t.topic_id or _NO_ID) not in names for p in t.partitions]
    add = [(names[t.topic_id], int(p.partition_index)) for t in request.topics if t.topic_id in names
           for p in t.partitions]
    forget = [(names[f.topic_id], int(p)) for f in request.forgotten_topics_data if f.topic_id in names
              for p in f.partitions]
    now = broker.now_ms()
    session = coord.session(group_id, member_id, epoch, add, forget, now,
                            check_member=group_coordinator_here(broker, group_id))
    if session.error is not ErrorCode.none:
        return failed(session.error)
    if epoch == 0:
        _session_opened(broker, ctx.connection_id, group_id, member_id)
    ack_errors = _acknowledge(ctx, coord, group_id, member_id, request.topics, names, rules.SHARE_FETCH_TOPIC,
                              now)
    if session.closed:  # after its acknowledgements, what the member still holds in the session goes back
        _session_ended(broker, coord, group_id, member_id, session.partitions)
    _durable(await persist(broker, coord), group_id, names, ack_errors)  # answered once written
    if session.closed:
        _maybe_group_empty(broker, coord, group_id)
    ids = {name: topic_id for topic_id, name in names.items()}
    # partition answers: (topic, partition) -> [error, ack error, records, acquired]
    results: dict[tuple[str | uuid.UUID, int], list[Any]] = {}
    for (topic_id, partition), code in ack_errors.items():
        results[(names.get(topic_id, topic_id), partition)] = [ErrorCode.none, code, b"", []]
    for topic_id, partition in unknown:
        results[(topic_id, partition)] = [ErrorCode.unknown_topic_id, ErrorCode.none, b"", []]
    if not session.closed:
        max_wait = request.max_wait.total_seconds() * 1000.0
        deadline = broker.now_ms() + max_wait
        budget = max(1, int(request.max_records))
        max_bytes = max(1, min(int(request.max_bytes), int(broker.setting("fetch.max.bytes"))))
        keys = [fetch_key(t, p) for t, p in session.partitions]
        # each request starts at the next partition, so MaxRecords does not always go to the first ones
        turn = max(epoch, 0) % max(1, len(session.partitions))
        order = session.partitions[turn:] + session.partitions[:turn]
        unread, made_here = await _prepare(broker, coord, group_id, order)
        for tp, code in unread.items():  # its state could not be read: nothing acquired there this time
            results.setdefault(tp, [ErrorCode.none, ErrorCode.none, b"", []])[0] = _partition_error(code)
        order = tuple(tp for tp in order if tp not in unread)
        while coord.has_session(group_id, member_id):  # not when its connection closed meanwhile
            acquired_any, any_error = _acquire_pass(ctx, coord, group_id, member_id, order, budget,
                                                    max_bytes, results, made_here)
            remaining = deadline - broker.now_ms()
            if acquired_any or any_error or unread or remaining <= 0 or not keys:
                break
            # wake on an append to one of the partitions, or when the earliest lock here ends
            lock_ends = [sp.next_deadline() for (g, t, p), sp in coord.partitions.items()
                         if g == group_id and (t, p) in session.partitions]
            due = [d - broker.now_ms() for d in lock_ends if d is not None]
            await broker.purgatory.wait(keys, max(1.0, min([remaining, *due])))
        for (g, failed_topic, failed_partition), code in (await persist(broker, coord)).items():
            entry = results.get((failed_topic, failed_partition)) if g == group_id else None
            if entry is not None:  # what was acquired there is not locked any more: not handed out
                entry[0], entry[2], entry[3] = _partition_error(code), b"", []
    topics: dict[str | uuid.UUID, list[Any]] = {}
    acknowledged = {(names.get(tid, tid), p) for tid, p in ack_errors}
    for (topic, partition), (error, ack_error, records, acquired) in results.items():
        if error is ErrorCode.none and not acquired and (topic, partition) not in acknowledged:
            continue  # nothing to say about it (Kafka's incremental answer leaves it out too)
        leader_id, leader_epoch = _leader(ctx, topic, partition) if isinstance(topic, str) else (-1, -1)
        topics.setdefault(topic, []).append(build(
            R.PartitionData, partition_index=partition, error_code=error, error_message=None,
            acknowledge_error_code=ack_error.value, acknowledge_error_message=None,
            current_leader=build(R.LeaderIdAndEpoch, leader_id=leader_id, leader_epoch=leader_epoch),
            records=records,
            acquired_records=tuple(build(R.AcquiredRecords, first_offset=a.first_offset, last_offset=a.last_offset,
                                         delivery_count=a.delivery_count) for a in acquired)))
    responses = tuple(
        build(R.ShareFetchableTopicResponse,
              topic_id=topic if isinstance(topic, uuid.UUID) else ids.get(topic) or _topic_id(broker, topic),
              partitions=tuple(parts))
        for topic, parts in topics.items())
    return build(R.ShareFetchResponse, throttle_time=_ZERO, error_code=ErrorCode.none, error_message=None,
                 acquisition_lock_timeout=_ms(lock_ms), responses=responses, node_endpoints=())


def _partition_error(code: ErrorCode) -> ErrorCode:
    """A ShareFetch partition's error for a failure of its share state: the share coordinator's
    retriable errors are no error (nothing acquired there this time; librdkafka raises a partition error
    it does not know to the application, and Kafka's leader answers a partition still initializing with
    nothing), a fenced leader epoch is NOT_LEADER_OR_FOLLOWER (a newer leader has it), others as they are."""
    if code in RETRIABLE:
        return ErrorCode.none
    if code is ErrorCode.fenced_leader_epoch:
        return ErrorCode.not_leader_or_follower
    return code


def _topic_id(broker: ShareBroker, name: str) -> uuid.UUID:
    topic = broker.metadata.topics.get(name)
    return topic.topic_id if topic is not None else _NO_ID


def _acquire_pass(ctx: RequestContext, coord: ShareGroupCoordinator, group_id: str, member_id: str,
                  partitions: Sequence[tuple[str, int]], budget: int, max_bytes: int,
                  results: dict[tuple[str | uuid.UUID, int], list[Any]],
                  made_here: dict[tuple[str, int], int]) -> tuple[bool, bool]:
    """One pass over the session's partitions: read, acquire, note the answers. (acquired any, any error).
    A share partition made here from this broker's shard gets the leader epoch `_prepare` saw (`made_here`,
    once: one made again later in the request, after a failed write dropped it, has none, as before)."""
    broker = ctx.broker
    acquired_any = any_error = False
    for topic, partition in partitions:
        entry = results.setdefault((topic, partition), [ErrorCode.none, ErrorCode.none, b"", []])
        if budget <= 0 or max_bytes <= 0:
            continue
        try:
            if not ctx.allowed(rules.SHARE_FETCH_TOPIC, topic):
                raise KafkaError(rules.SHARE_FETCH_TOPIC.error)
            part = broker.replica_manager.get_partition(topic, partition)
            plog = part.log
            assert plog is not None  # get_partition checked it
            high_watermark, last_stable = part.fetch_offsets()
            now = broker.now_ms()
            sp = coord.share_partition(group_id, topic, partition, plog.log_start_offset, high_watermark)
            made_at = made_here.pop((topic, partition), None)
            if made_at is not None and sp.epochs is None:
                sp.epochs = ShareEpochs(made_at)
            sp.move_log_start(plog.log_start_offset)
            sp.expire(now)
            committed = sp.config.isolation_level == "read_committed"
            upper = min(high_watermark, last_stable) if committed else high_watermark
            offset = sp.fetch_offset()
            if offset >= upper:
                continue
            # read in memory on the loop (the batch headers decide what is acquired), so at most
            # _PARTITION_READ_BYTES a partition (beyond it only one whole batch, min_one_message)
            info = plog.read(offset, min(max_bytes, _PARTITION_READ_BYTES), max_offset=upper, min_one_message=True)
            data = b"".join(bytes(r) for r in info.records if not isinstance(r, FileSlice))  # lazy=False
            batches = _batches(data)
            if not batches:
                continue
            aborted: list[tuple[int, int]] = []
            if committed:
                aborted = _aborted_ranges(batches, plog.collect_aborted_transactions(offset, upper))
            acquired = coord.acquire(group_id, member_id, topic, partition, [(b[0], b[1]) for b in batches],
                                     log_start_offset=plog.log_start_offset, high_watermark=high_watermark,
                                     max_records=budget, now=now, last_stable_offset=last_stable,
                                     aborted=aborted)
        except KafkaError as e:
            if e.code in RETRIABLE:  # its state is loading or moving: nothing there yet, asked again
                continue
            entry[0] = e.code
            any_error = True
            continue
        if acquired:
            entry[2], entry[3] = data, acquired
            acquired_any = True
            budget -= sum(a.last_offset - a.first_offset + 1 for a in acquired)
            max_bytes -= len(data)
    return acquired_any, any_error


# --- ShareAcknowledge (79) ------------------------------------------------------------------------

async def handle_share_acknowledge(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    broker = ctx.broker
    failed = _failed(R.ShareAcknowledgeResponse)
    refused = _refused(ctx, request, rules.SHARE_ACKNOWLEDGE_GROUP, failed)
    if refused is not None:
        return refused
    group_id, member_id = request.group_id, request.member_id
    epoch = int(request.share_session_epoch)
    if epoch == 0:
        return failed(ErrorCode.invalid_share_session_epoch, "A share session is opened by ShareFetch.")
    coord = coordinator(broker)
    now = broker.now_ms()
    session = coord.session(group_id, member_id, epoch, (), (), now,
                            check_member=group_coordinator_here(broker, group_id))
    if session.error is not ErrorCode.none:
        return failed(session.error)
    names = _names(broker, [t.topic_id for t in request.topics])
    answers = _acknowledge(ctx, coord, group_id, member_id, request.topics, names, rules.SHARE_ACKNOWLEDGE_TOPIC,
                           now)
    if session.closed:  # after its acknowledgements, what the member still holds in the session goes back
        _session_ended(broker, coord, group_id, member_id, session.partitions)
    _durable(await persist(broker, coord), group_id, names, answers)  # answered once written
    if session.closed:
        _maybe_group_empty(broker, coord, group_id)
    topics: dict[uuid.UUID, list[Any]] = {}
    for (topic_id, partition), code in answers.items():
        name = names.get(topic_id)
        leader_id, leader_epoch = _leader(ctx, name, partition) if name is not None else (-1, -1)
        topics.setdefault(topic_id, []).append(build(
            R.PartitionData, partition_index=partition, error_code=code, error_message=None,
            current_leader=build(R.LeaderIdAndEpoch, leader_id=leader_id, leader_epoch=leader_epoch)))
    responses = tuple(build(R.ShareAcknowledgeTopicResponse, topic_id=tid, partitions=tuple(parts))
                      for tid, parts in topics.items())
    return build(R.ShareAcknowledgeResponse, throttle_time=_ZERO, error_code=ErrorCode.none, error_message=None,
                 acquisition_lock_timeout=_ms(coord.share_config.record_lock_duration_ms), responses=responses,
                 node_endpoints=())


APIS: ApiTable = {
    76: (1, 1, handle_share_group_heartbeat),
    77: (1, 1, handle_share_group_describe),
    78: (1, 1, handle_share_fetch),
    79: (1, 1, handle_share_acknowledge),
}
