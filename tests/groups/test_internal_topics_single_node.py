"""A single node (no zookeeper.connect) creates the coordinators' internal topics with one replica, whatever
offsets.topic.replication.factor / transaction.state.log.replication.factor say (Kafka's 3 by default):
the embedded broker works with no configuration (docs/configuration.md, "Where kaflite differs")."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kaflite.coordinator import OFFSETS_TOPIC
from kaflite.coordinator.transaction.txn_log import TRANSACTION_STATE_TOPIC
from kaflite.server.broker import Broker
from kaflite.server.coordinators.groups import GroupService
from kaflite.server.coordinators.transactions import TransactionService
from kaflite.server.embedded import load_broker_config


@pytest.mark.parametrize("explicit", [False, True])
def test_single_node_internal_topics_have_one_replica(tmp_path: Path, explicit: bool) -> None:
    props = {"log.dirs": str(tmp_path), "listeners": "PLAINTEXT://127.0.0.1:0",
             "offsets.topic.num.partitions": "4", "transaction.state.log.num.partitions": "2"}
    if explicit:
        props |= {"offsets.topic.replication.factor": "3", "transaction.state.log.replication.factor": "3"}
    cfg = load_broker_config(props, True)
    assert cfg["offsets.topic.replication.factor"] == 3  # Kafka's default, or the explicit 3
    loop = asyncio.new_event_loop()
    broker = Broker(cfg)

    async def run() -> None:
        await broker.start()
        try:
            assert not broker.in_cluster
            # as the first FindCoordinator: the topics created (in a worker thread), then the services started
            groups, txns = await GroupService.of_async(broker), await TransactionService.of_async(broker)
            await groups.loaded
            await txns.loaded
            for name, n in ((OFFSETS_TOPIC, 4), (TRANSACTION_STATE_TOPIC, 2)):
                topic = broker.metadata.topics[name]
                assert [p.replicas for p in topic.partitions] == [(broker.node_id,)] * n
                assert all(p.leader == broker.node_id for p in topic.partitions)
            assert sorted(groups.runtime.partitions()) == [0, 1, 2, 3]
        finally:
            await broker.stop()

    try:
        loop.run_until_complete(run())
    finally:
        loop.close()
