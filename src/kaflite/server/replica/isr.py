"""ZkIsrWriter: how a leader records an ISR change in a ZooKeeper cluster (Kafka's ZooKeeper-mode path,
`Partition.updateIsr` through `ReplicationUtils.updateLeaderAndIsr`, before AlterPartition existed).

Rules:
- the write is a compare-and-set of the partition's state znode at the version (partition epoch) this
  leader holds, keeping the leader, the leader epoch and the controller epoch ZooKeeper has; it is refused
  (None) when the znode moved (the controller or another write got there first: the newer state reaches
  the broker through its watch, and the leader decides again from there) or no longer names this broker
  as leader of the same epoch; nothing is retried blindly, so the controller and the leader never
  overwrite each other silently;
- after a successful write, /isr_change_notification/isr_change_<seq> names the partition (Kafka's
  notification to the controller);
- ZooKeeper calls are blocking (kazoo), and while ZooKeeper is unreachable they wait for it: they run in
  the executor given (the broker's bounded ZooKeeper write pool, `ZkMetadata.zk_writes`), never on the event
  loop nor in asyncio's default executor, whose threads an outage would otherwise all hold.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Executor
from dataclasses import replace

from kaflite.cluster.zk import KafkaZkClient
from kaflite.cluster.zkdata import LeaderAndIsr
from kaflite.server.replica.partition import PartitionState

__all__ = ["ZkIsrWriter"]

log = logging.getLogger("kaflite.replica")


class ZkIsrWriter:
    def __init__(self, zk: KafkaZkClient, broker_id: int, executor: Executor) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.executor = executor

    async def __call__(self, topic: str, partition: int, state: PartitionState,
                       isr: tuple[int, ...]) -> PartitionState | None:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, self.write, topic, partition, state, isr)

    def write(self, topic: str, partition: int, state: PartitionState, isr: tuple[int, ...]) -> PartitionState | None:
        tp = (topic, partition)
        current = self.zk.get_partition_states([tp]).get(tp)
        if current is None or current.zk_version != state.partition_epoch or current.leader != self.broker_id \
                or current.leader_epoch != state.leader_epoch:
            return None
        new = LeaderAndIsr(self.broker_id, state.leader_epoch, tuple(isr), current.controller_epoch,
                           current.zk_version)
        written, stale = self.zk.update_partition_states({tp: new}, None)
        if tp in stale or tp not in written:
            return None
        try:
            self.zk.propagate_isr_changes([tp])
        except Exception as e:  # noqa: BLE001 - the state is written; the notification is advisory
            log.warning("%s-%d: ISR change notification not written: %s", topic, partition, e)
        return replace(state, leader=self.broker_id, partition_epoch=written[tp].zk_version, isr=tuple(isr))
