"""The coordinators' internal topics (`__consumer_offsets`, `__transaction_state`, `__share_group_state`)
as one spec each: the topic's name and the broker settings of its partition count, replication factor and
topic configs, and the two ways a coordinator service makes sure the topic exists.

Rules:
- every internal topic is compacted; its `segment.bytes` is its segment setting's value, and
  `min.insync.replicas` its min-ISR setting's when it has one (`__consumer_offsets` has none: Kafka creates it
  with the broker's default);
- `InternalTopic.ensure(broker, n)` is `Broker.ensure_internal_topic`: the topic when it is in the image,
  else None while its creation (started by this call when none is under way) runs off the event loop;
- `ensure_async(broker, spec)` waits for the creation on a single node (the request handlers that can
  wait, FindCoordinator and ShareGroupHeartbeat), so the topic is in the image when it returns; in a cluster
  it returns at once (the creation is the admin thread's, asked by `ensure`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kaflite.coordinator import OFFSETS_TOPIC
from kaflite.coordinator.share.state_records import SHARE_GROUP_STATE_TOPIC
from kaflite.coordinator.transaction.txn_log import TRANSACTION_STATE_TOPIC
from kaflite.server.coordinators.broker_api import CoordinatorBroker

__all__ = ["OFFSETS", "SHARE_GROUP_STATE", "TRANSACTION_STATE", "InternalTopic", "ensure_async"]


@dataclass(frozen=True, slots=True)
class InternalTopic:
    """An internal topic and the broker settings (keys) it is created with."""

    name: str
    partitions_key: str
    replication_key: str
    segment_bytes_key: str
    min_isr_key: str | None = None

    def num_partitions(self, broker: CoordinatorBroker) -> int:
        return int(broker.setting(self.partitions_key))

    def configs(self, broker: CoordinatorBroker) -> dict[str, str]:
        out = {"cleanup.policy": "compact", "segment.bytes": str(int(broker.setting(self.segment_bytes_key)))}
        if self.min_isr_key is not None:
            out["min.insync.replicas"] = str(int(broker.setting(self.min_isr_key)))
        return out

    def ensure(self, broker: CoordinatorBroker, num_partitions: int) -> Any:
        """The topic's image, or None while it is being created (`Broker.ensure_internal_topic`)."""
        return broker.ensure_internal_topic(self.name, num_partitions, self.configs(broker), self.replication_key)


async def ensure_async(broker: CoordinatorBroker, spec: InternalTopic) -> None:
    """On a single node, the topic created (in a worker thread) when missing, before this returns
    (`Broker.create_internal_topic_async`); nothing in a cluster or when it exists."""
    if spec.name not in broker.metadata.topics:
        await broker.create_internal_topic_async(spec.name, spec.num_partitions(broker), spec.configs(broker))


OFFSETS = InternalTopic(OFFSETS_TOPIC, "offsets.topic.num.partitions", "offsets.topic.replication.factor",
                        "offsets.topic.segment.bytes")
TRANSACTION_STATE = InternalTopic(TRANSACTION_STATE_TOPIC, "transaction.state.log.num.partitions",
                                  "transaction.state.log.replication.factor", "transaction.state.log.segment.bytes",
                                  "transaction.state.log.min.isr")
SHARE_GROUP_STATE = InternalTopic(SHARE_GROUP_STATE_TOPIC, "share.coordinator.state.topic.num.partitions",
                                  "share.coordinator.state.topic.replication.factor",
                                  "share.coordinator.state.topic.segment.bytes", "share.coordinator.state.topic.min.isr")
