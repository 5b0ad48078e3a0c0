"""`GroupService`, the group coordinator of one broker: the pure group coordinator shards
(kaflite.coordinator) on the coordinator runtime over `__consumer_offsets`. The group APIs
(kaflite.server.handlers.groups, offsets.py, find_coordinator.py) parse and answer requests through it.

Rules of the service (the decisions are in `kaflite.coordinator`, the commit rule in its runtime):
- one GroupService per broker (`broker.services`, slot `GROUP_SERVICE`), created at broker start-up
  when `__consumer_offsets` exists (`load_at_start`), else on the first group request: it creates the
  compacted internal topic `__consumer_offsets` (internal_topic.OFFSETS: offsets.topic.num.partitions
  partitions; replication factor offsets.topic.replication.factor in a cluster, refused while fewer
  brokers are alive, 1 on a single node) and loads a shard per partition this broker leads (single node:
  all of them) by replaying that partition; as the image moves leadership (kaflite.coordinator.leadership)
  it unloads the shard of a partition this broker no longer leads (with the new leader's epoch) and loads
  one it now leads (the runtime keeps a shard of an older epoch only if it provably holds the whole log);
- a request goes to the shard of `partition_for(group)`; its step's records are appended to that
  partition as one batch and its answers (and those of requests it completes) leave only once the batch
  is committed; a failed write answers with Kafka's mapping (NOT_COORDINATOR for a storage error) and
  the shard is reloaded from its log, answering everything it still held NOT_COORDINATOR;
- a request that may park (JoinGroup / SyncGroup) runs through `call_parked`: its step gets a token, and
  the answer is the future a later step answers for that token;
- one runtime task fires the shards' session, rebalance and initial-delay timers with the broker's clock;
- every callable in the broker's `SHARD_LISTENERS` slot hears of each change of an active shard (the
  runtime's listeners: (partition, shard) once active, (partition, None) once unloaded), registered
  whether or not this service exists yet (share_membership keeps the share groups beside the shards).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar

from kaflite.coordinator import (
    OFFSETS_TOPIC,
    ClassicGroup,
    CoordinatorConfig,
    GroupCoordinator,
    partition_for,
)
from kaflite.coordinator.leadership import leadership_changes
from kaflite.coordinator.runtime import CoordinatorRuntime
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.coordinators.broker_api import CoordinatorBroker
from kaflite.server.coordinators.internal_topic import OFFSETS, ensure_async
from kaflite.server.coordinators.writer import OffsetsTopicWriter
from kaflite.server.services import Slot

__all__ = ["GROUP_SERVICE", "SHARD_LISTENERS", "GroupService", "load_at_start"]

log = logging.getLogger("kaflite.coordinator")

GROUP_SERVICE: Slot[GroupService] = Slot("group_coordinator")
# told of every change of an active shard (see the rules); a list in a slot of its own, so a service may
# register before the GroupService is made (it is made on the first group request)
SHARD_LISTENERS: Slot[list[Callable[[int, GroupCoordinator | None], None]]] = Slot("group_shard_listeners")
T = TypeVar("T")


class GroupService:
    """The group coordinator of one broker: a GroupCoordinator shard per `__consumer_offsets` partition
    on a CoordinatorRuntime, the requests routed to them, and the runtime's timer task."""

    def __init__(self, broker: CoordinatorBroker) -> None:
        self.broker = broker
        self.config = CoordinatorConfig.from_properties(broker.config)
        # offsets.topic.compression.codec: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd (Kafka's ids)
        self.codec = int(broker.setting("offsets.topic.compression.codec"))
        self.commit_timeout_ms = int(broker.setting("offsets.commit.timeout.ms"))
        self.load_buffer_size = int(broker.setting("offsets.load.buffer.size"))
        self.writer = OffsetsTopicWriter(self)
        self.runtime: CoordinatorRuntime[GroupCoordinator] = CoordinatorRuntime(
            self._new_shard, self.writer, broker.now_ms, "group coordinator")
        self.runtime.add_listener(self._shard_changed)

    def _shard_changed(self, partition: int, shard: GroupCoordinator | None) -> None:
        for listener in list(self.broker.services.get(SHARD_LISTENERS) or ()):
            listener(partition, shard)

    def _new_shard(self, partition: int) -> GroupCoordinator:
        shard = GroupCoordinator(self.config, active=False)
        # a classic member's JoinGroup into a consumer group recomputes its target from the broker's topics
        shard.consumer.topic_source = self._topics
        return shard

    def _topics(self) -> tuple[dict[str, int], dict[str, Any]]:
        topics = self.broker.metadata.topics
        return ({name: t.num_partitions for name, t in topics.items() if not t.internal},
                {name: t.topic_id for name, t in topics.items() if not t.internal})

    # --- lifecycle ------------------------------------------------------------------------------

    @classmethod
    def of(cls, broker: CoordinatorBroker) -> GroupService:
        """The broker's GroupService, started (loaded and active) on first use."""
        return broker.services.start(GROUP_SERVICE, lambda: cls(broker), GroupService.start)

    @classmethod
    async def of_async(cls, broker: CoordinatorBroker) -> GroupService:
        """`of`, with `__consumer_offsets` created first in a worker thread when missing on a single node
        (`ensure_async`), so that the service finds it when it starts."""
        await ensure_async(broker, OFFSETS)
        return cls.of(broker)

    def ensure_topic(self) -> Any:
        """`__consumer_offsets` (offsets.topic.num.partitions, compacted; its replication factor is
        offsets.topic.replication.factor in a cluster, 1 on a single node), or None while it is not in the
        metadata image (being created off the event loop, or refused in a cluster while fewer brokers are
        alive than its replication factor): FindCoordinator answers COORDINATOR_NOT_AVAILABLE and retries."""
        topic = OFFSETS.ensure(self.broker, self.config.offsets_topic_num_partitions)
        if topic is not None:
            self._adopt(topic)
        return topic

    def _adopt(self, topic: Any) -> None:
        if topic.num_partitions != self.config.offsets_topic_num_partitions:
            # As Kafka: the existing topic decides where groups live (changing the setting later would
            # otherwise strand every group in the wrong partition).
            log.warning("%s has %d partitions; offsets.topic.num.partitions=%d is ignored", OFFSETS_TOPIC,
                        topic.num_partitions, self.config.offsets_topic_num_partitions)
            self.config = dataclasses.replace(self.config, offsets_topic_num_partitions=topic.num_partitions)

    def start(self) -> None:
        self.ensure_topic()
        loads = []
        if getattr(self.broker, "log_manager", None) is not None:
            # the partitions this broker leads (single node: every one); in a cluster the others are
            # loaded and unloaded as leadership moves (_on_image)
            for partition in range(self.config.offsets_topic_num_partitions):
                reg = self.broker.metadata.partition(OFFSETS_TOPIC, partition)
                if reg is not None and reg.leader == self.broker.node_id:
                    loads.append(self.runtime.load(partition, reg.leader_epoch))
            self.broker.metadata_writer.subscribe(self._on_image)
        self.loaded: asyncio.Future[Any] = asyncio.gather(*loads)
        self.loaded.add_done_callback(
            lambda _f: log.info("group coordinator loaded %d partition(s): %d group(s)",
                                len(self.runtime.partitions()), len(self.groups())))
        self.broker.add_task(asyncio.ensure_future(self.runtime.run_timers()))  # cancelled on broker stop

    def _on_image(self, old: Any, new: Any) -> None:
        """Leadership of `__consumer_offsets` partitions moved (a cluster): load the ones this broker now
        leads, unload the ones it no longer leads (Kafka's onElection / onResignation), each with the
        new image's leader epoch (kaflite.coordinator.leadership's rules)."""
        changes = leadership_changes(old, new, OFFSETS_TOPIC, self.broker.node_id)
        if changes.appeared is not None:  # created (by any broker) since we started: its partition count decides
            self._adopt(changes.appeared)
        for partition, epoch in changes.unloads:
            self.on_resignation(partition, epoch)
        for partition, epoch in changes.loads:
            self.on_election(partition, epoch)

    def on_election(self, partition: int, leader_epoch: int | None = None) -> asyncio.Future[None]:
        """This broker became the leader of `__consumer_offsets-<partition>` at `leader_epoch` (Kafka's
        onElection): load its groups by replaying the partition (a shard still loaded from an older epoch
        is kept only if it provably holds the whole log). The future says when it is active."""
        return self.runtime.load(partition, leader_epoch)

    def on_resignation(self, partition: int, leader_epoch: int | None = None) -> None:
        """This broker no longer leads the partition, as of `leader_epoch` (the new leader's; Kafka's
        onResignation): drop its groups, answering their parked requests NOT_COORDINATOR so the clients
        find the new coordinator."""
        self.runtime.unload(partition, leader_epoch)

    # --- routing --------------------------------------------------------------------------------

    def partition_for(self, group_id: str | None) -> int:
        return partition_for(group_id or "", self.config.offsets_topic_num_partitions)

    def shard(self, group_id: str | None) -> GroupCoordinator:
        """The active shard coordinating `group_id` (reads), else KafkaError NOT_COORDINATOR / LOAD_IN_PROGRESS."""
        return self.runtime.shard(self.partition_for(group_id))

    async def call(self, group_id: str | None, op: Callable[[GroupCoordinator, int], Any],
                   on_error: Callable[[ErrorCode], T]) -> T:
        """Run a step on the group's shard; its answer once committed, or `on_error(code)`."""
        try:
            return await self.runtime.write(self.partition_for(group_id), op)  # type: ignore[no-any-return]
        except KafkaError as e:
            return on_error(e.code)

    async def call_parked(self, group_id: str | None, op: Callable[[Hashable], Callable[[GroupCoordinator, int], Any]],
                          on_error: Callable[[ErrorCode], T]) -> T:
        """Like `call` for a request that may park: `op(token)` is the step; the answer is the token's."""
        partition = self.partition_for(group_id)
        try:
            token, fut = self.runtime.park(partition)
            self.runtime.write(partition, op(token), token)
            return await fut  # type: ignore[no-any-return]
        except KafkaError as e:
            return on_error(e.code)

    def groups(self) -> dict[str, ClassicGroup]:
        """Every classic group of the loaded shards (tools and tests)."""
        out: dict[str, ClassicGroup] = {}
        for _, shard in self.runtime.active_shards():
            out.update(shard.groups)
        return out

    def group(self, group_id: str) -> ClassicGroup | None:
        try:
            return self.shard(group_id).groups.get(group_id)
        except KafkaError:
            return None


def load_at_start(broker: CoordinatorBroker) -> Awaitable[Any] | None:
    """At broker start-up: when `__consumer_offsets` exists, load the groups now (Kafka replays the
    topic as its partitions come online), so member session timers run and describe/list answers are
    ready before the first group request. A broker that never had a group creates the topic lazily, on
    the first FindCoordinator, as Kafka does."""
    if OFFSETS_TOPIC in broker.metadata.topics:
        return GroupService.of(broker).loaded  # the server listens once every partition is replayed
    return None
