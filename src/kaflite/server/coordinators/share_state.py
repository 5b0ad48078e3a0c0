"""`ShareStateService`, the share coordinator of one broker (Kafka's ShareCoordinatorService): the pure
shards of kaflite.coordinator.share.state_shard on the coordinator runtime over `__share_group_state`, and
what the share-group handlers (handlers/share.py) call to read and write the share partitions' durable
state; the share coordinator's RPCs (83-87) are kaflite.server.handlers.share_state.

Rules of the service:
- one ShareStateService per broker (`broker.services`, slot `SHARE_STATE_SERVICE`), created at start-up when
  `__share_group_state` exists (handlers/share.py's `on_start`), else when a share partition is first used: it
  creates the compacted topic (share.coordinator.state.topic.num.partitions, .replication.factor - in a
  cluster; 1 on a single node -, .min.isr, .segment.bytes: internal_topic.SHARE_GROUP_STATE) and loads a
  shard per partition this broker leads; leadership changes load / unload shards
  (kaflite.coordinator.leadership);
- a share partition's state lives in the shard of `partition_for(key)`; `write` runs a step there whose
  records are appended as one batch, and its future resolves once they are committed (the runtime's rule),
  within share.coordinator.write.timeout.ms;
- `read` answers the state the shard holds (None for a share partition never written); a partition still
  loading raises COORDINATOR_LOAD_IN_PROGRESS; a partition this broker does not lead (a cluster: the
  state is another broker's) answers `NOT_HERE` from `read` and `write` returns None: handlers/share.py
  then reads and writes that state through the persister (server/share_persister.py).
- A deleted topic (gone from the metadata image, or its name now another topic id's) takes its share
  partitions with it: the share-group coordinator forgets them (a topic created again under the name
  starts from `share.auto.offset.reset`) and every group's record of them as initialized (key 15, written
  without waiting: it is initialized again before being assigned), and their states in the partitions this broker leads get
  tombstones (not waited for: a failure is logged, the state stays until the group is deleted).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, cast

from kaflite.coordinator.leadership import leadership_changes
from kaflite.coordinator.runtime import CoordinatorRuntime, ShardState
from kaflite.coordinator.share.group import ShareGroupCoordinator
from kaflite.coordinator.share.partition import ShareSnapshot
from kaflite.coordinator.share.state_records import SHARE_GROUP_STATE_TOPIC, ShareStateKey, partition_for
from kaflite.coordinator.share.state_shard import ShareStateShard
from kaflite.server.coordinators import share_membership
from kaflite.server.coordinators.broker_api import CoordinatorBroker, ShareBroker
from kaflite.server.coordinators.internal_topic import SHARE_GROUP_STATE, ensure_async
from kaflite.server.coordinators.writer import InternalTopicWriter
from kaflite.server.services import Slot

# SHARE_GROUP_STATE_TOPIC: handlers/share.py names the topic through this module
__all__ = ["NOT_HERE", "SHARE_COORDINATOR", "SHARE_GROUP_STATE_TOPIC", "SHARE_STATE_SERVICE", "ShareStateService",
           "load_at_start"]

log = logging.getLogger("kaflite.coordinator")

SHARE_STATE_SERVICE: Slot[ShareStateService] = Slot("share_state")
# the share-group coordinator (made by handlers/share.py's `coordinator`), declared here: this service drops the
# share partitions of deleted topics from it, and the services never import the handlers
SHARE_COORDINATOR: Slot[ShareGroupCoordinator] = Slot("share_coordinator")
NOT_HERE = object()  # read(): the state partition is led by another broker


class ShareStateService:
    def __init__(self, broker: CoordinatorBroker) -> None:
        self.broker = broker
        setting = broker.setting
        self.num_partitions = int(setting("share.coordinator.state.topic.num.partitions"))
        self.snapshot_every = int(setting("share.coordinator.snapshot.update.records.per.snapshot"))
        self.write_timeout_ms = int(setting("share.coordinator.write.timeout.ms"))
        self.load_buffer_size = int(setting("share.coordinator.load.buffer.size"))
        self.writer = InternalTopicWriter(broker, SHARE_GROUP_STATE_TOPIC, self.write_timeout_ms,
                                          self.load_buffer_size)
        self.runtime: CoordinatorRuntime[ShareStateShard] = CoordinatorRuntime(
            lambda _p: ShareStateShard(self.snapshot_every), self.writer, broker.now_ms, "share coordinator")
        self.loaded: asyncio.Future[Any] | None = None

    @classmethod
    def of(cls, broker: CoordinatorBroker) -> ShareStateService:
        """The broker's ShareStateService, started on first use."""
        return broker.services.start(SHARE_STATE_SERVICE, lambda: cls(broker), ShareStateService.start)

    @classmethod
    async def prepare(cls, broker: CoordinatorBroker) -> None:
        """On a single node, `__share_group_state` created in a worker thread when missing (`ensure_async`),
        so that `of` and `ensure_topic` then find it: awaited by ShareGroupHeartbeat, a share consumer's first
        request (50 partition logs created on the event loop at the first ShareFetch stalled every client for
        about 0.3 s)."""
        await ensure_async(broker, SHARE_GROUP_STATE)

    def ensure_topic(self) -> Any:
        """`__share_group_state`, created first when missing; None in a cluster while it is not in the image
        (being created, or refused while fewer brokers are alive: asked again at the next call)."""
        topic = SHARE_GROUP_STATE.ensure(self.broker, self.num_partitions)
        if topic is not None:
            self._adopt(topic)
        return topic

    def start(self) -> None:
        self.ensure_topic()
        loads = []
        if getattr(self.broker, "log_manager", None) is not None:
            for partition in range(self.num_partitions):
                reg = self.broker.metadata.partition(SHARE_GROUP_STATE_TOPIC, partition)
                if reg is not None and reg.leader == self.broker.node_id:
                    loads.append(self.runtime.load(partition, reg.leader_epoch))
            self.broker.metadata_writer.subscribe(self._on_image)
        self.loaded = asyncio.gather(*loads)
        self.loaded.add_done_callback(lambda _f: log.info(
            "share coordinator loaded %d partition(s): %d share partition state(s)", len(self.runtime.partitions()),
            sum(len(s.states) for _p, s in self.runtime.active_shards())))

    def _adopt(self, topic: Any) -> None:
        if topic.num_partitions != self.num_partitions:
            log.warning("%s has %d partitions; share.coordinator.state.topic.num.partitions=%d is ignored",
                        SHARE_GROUP_STATE_TOPIC, topic.num_partitions, self.num_partitions)
            self.num_partitions = topic.num_partitions

    def _on_image(self, old: Any, new: Any) -> None:
        gone = {t.topic_id: name for name, t in old.topics.items()
                if name not in new.topics or new.topics[name].topic_id != t.topic_id}
        if gone:
            self._forget_topics(gone)
        changes = leadership_changes(old, new, SHARE_GROUP_STATE_TOPIC, self.broker.node_id)
        if changes.appeared is not None:
            self._adopt(changes.appeared)
        for partition, epoch in changes.unloads:
            self.runtime.unload(partition, epoch)
        for partition, epoch in changes.loads:
            self.runtime.load(partition, epoch)

    def _forget_topics(self, gone: dict[uuid.UUID, str]) -> None:
        coord = self.broker.services.get(SHARE_COORDINATOR)
        if coord is not None:
            names = set(gone.values())
            for k in [k for k in coord.partitions if k[1] in names]:
                del coord.partitions[k]
            # nor initialized any more (key 15): a topic created again under the name is initialized again
            coord.uninitialize_topics(names)
            share_membership.flush_soon(cast(ShareBroker, self.broker), coord)  # the broker is one
        ids = set(gone)
        for partition, shard in self.runtime.active_shards():
            keys = shard.keys_of_topics(ids)
            if keys:
                done = self.runtime.write(partition, _delete(keys))
                done.add_done_callback(_log_failure(partition))

    # --- state ----------------------------------------------------------------------------------------

    def key(self, group_id: str, topic: str, partition: int) -> ShareStateKey | None:
        image = self.broker.metadata.topics.get(topic)
        return None if image is None else ShareStateKey(group_id, image.topic_id, partition)

    def partition_for(self, key: ShareStateKey) -> int:
        return partition_for(key, self.num_partitions)

    def here(self, partition: int) -> bool:
        """This broker coordinates the state partition (loaded or loading); False: another broker does,
        or (a cluster) the topic is not in the image yet."""
        return self.runtime.state(partition) not in (None, ShardState.CLOSED)

    def read(self, key: ShareStateKey) -> ShareSnapshot | None | object:
        partition = self.partition_for(key)
        if not self.here(partition):
            return NOT_HERE
        return self.runtime.shard(partition).read(key)  # raises COORDINATOR_LOAD_IN_PROGRESS while loading

    def write(self, key: ShareStateKey, snapshot: Any) -> asyncio.Future[Any] | None:
        """Persist the share partition's state (`snapshot()` is called in the step, so it is the state of
        that moment); the future resolves once committed. None when another broker coordinates it."""
        partition = self.partition_for(key)
        if not self.here(partition):
            return None
        return self.runtime.write(partition, lambda shard, now: shard.write(key, snapshot(), now))

    async def delete_group(self, group_id: str) -> None:
        """Tombstones for every share partition state of the group this broker holds."""
        writes = [self.runtime.write(p, lambda shard, _now: shard.delete(shard.keys_of_group(group_id)))
                  for p, shard in self.runtime.active_shards() if shard.keys_of_group(group_id)]
        for w in writes:
            await w


def _delete(keys: list[ShareStateKey]) -> Callable[[ShareStateShard, int], Any]:
    return lambda shard, _now: shard.delete(keys)


def _log_failure(partition: int) -> Callable[[asyncio.Future[Any]], None]:
    def done(f: asyncio.Future[Any]) -> None:
        if not f.cancelled() and f.exception() is not None:
            log.warning("%s-%d: deleting the share state of deleted topics failed: %s", SHARE_GROUP_STATE_TOPIC,
                        partition, f.exception())
    return done


def load_at_start(broker: CoordinatorBroker) -> Awaitable[Any] | None:
    """At start-up (share.py's on_start): when `__share_group_state` exists, load it before the broker
    listens."""
    if SHARE_GROUP_STATE_TOPIC in broker.metadata.topics:
        return ShareStateService.of(broker).loaded
    return None
