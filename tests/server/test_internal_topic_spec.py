"""kaflite.server.coordinators.internal_topic: the one spec per coordinator internal topic (name, the keys
of its partition count, replication factor and configs) and `ensure_async`, on a stand-in broker."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from kaflite.server.config import BROKER_CONFIGS
from kaflite.server.coordinators.internal_topic import (
    OFFSETS,
    SHARE_GROUP_STATE,
    TRANSACTION_STATE,
    ensure_async,
)

SETTINGS = {
    "offsets.topic.num.partitions": 7, "offsets.topic.segment.bytes": 1000,
    "transaction.state.log.num.partitions": 5, "transaction.state.log.segment.bytes": 2000,
    "transaction.state.log.min.isr": 2,
    "share.coordinator.state.topic.num.partitions": 3, "share.coordinator.state.topic.segment.bytes": 3000,
    "share.coordinator.state.topic.min.isr": 1,
}


class Broker:
    def __init__(self, topics: dict[str, Any] | None = None) -> None:
        self.metadata = SimpleNamespace(topics=topics or {})
        self.created: list[tuple[str, int, dict[str, str]]] = []
        self.ensured: list[tuple[str, int, dict[str, str], str]] = []

    def setting(self, key: str) -> Any:
        return SETTINGS[key]

    async def create_internal_topic_async(self, name: str, n: int, configs: dict[str, str]) -> None:
        self.created.append((name, n, configs))

    def ensure_internal_topic(self, name: str, n: int, configs: dict[str, str], replication_key: str) -> Any:
        self.ensured.append((name, n, configs, replication_key))
        return None


def test_each_topic_is_compacted_with_its_own_settings() -> None:
    b = Broker()
    assert OFFSETS.configs(b) == {"cleanup.policy": "compact", "segment.bytes": "1000"}  # no min ISR of its own
    assert TRANSACTION_STATE.configs(b) == {"cleanup.policy": "compact", "segment.bytes": "2000",
                                            "min.insync.replicas": "2"}
    assert SHARE_GROUP_STATE.configs(b) == {"cleanup.policy": "compact", "segment.bytes": "3000",
                                            "min.insync.replicas": "1"}
    assert [s.num_partitions(b) for s in (OFFSETS, TRANSACTION_STATE, SHARE_GROUP_STATE)] == [7, 5, 3]
    for spec in (OFFSETS, TRANSACTION_STATE, SHARE_GROUP_STATE):  # every key is a broker key
        keys = {spec.partitions_key, spec.replication_key, spec.segment_bytes_key, spec.min_isr_key} - {None}
        assert keys <= set(BROKER_CONFIGS), spec


def test_ensure_hands_the_replication_key_and_ensure_async_creates_only_a_missing_topic() -> None:
    b = Broker()
    assert TRANSACTION_STATE.ensure(b, 9) is None
    assert b.ensured == [("__transaction_state", 9, TRANSACTION_STATE.configs(b),
                          "transaction.state.log.replication.factor")]
    asyncio.run(ensure_async(b, SHARE_GROUP_STATE))
    assert b.created == [("__share_group_state", 3, SHARE_GROUP_STATE.configs(b))]
    present = Broker({"__consumer_offsets": object()})
    asyncio.run(ensure_async(present, OFFSETS))
    assert present.created == []
