"""aiokafka's transactional producer (InitProducerId / AddPartitionsToTxn / EndTxn v0-v1, its own
FindCoordinator) against a real broker: a committed transaction is read by a read_committed consumer,
an aborted one is not; send_offsets_to_transaction commits the group's offsets with the transaction."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import pytest

aiokafka = pytest.importorskip("aiokafka")


async def _consume(bootstrap: str, topic: str, isolation: str, n: int, timeout_s: float = 8.0) -> list[bytes]:
    c = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                  isolation_level=isolation, group_id=None, enable_auto_commit=False)
    await c.start()
    out: list[bytes] = []
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline:
            batch = await c.getmany(timeout_ms=300)
            for msgs in batch.values():
                out += [m.value for m in msgs]
            if len(out) >= n and not batch:
                break
    finally:
        await c.stop()
    return out


def test_aiokafka_commit_abort_and_offsets(broker: Any, topic_factory: Callable[[int], str]) -> None:
    topic = topic_factory(1)
    bootstrap = broker.bootstrap

    async def run() -> None:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"aio-{uuid.uuid4().hex[:6]}")
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait(topic, b"committed", partition=0)
            await p.begin_transaction()
            await p.send_and_wait(topic, b"aborted", partition=0)
            await p.abort_transaction()
            group = f"aio-{uuid.uuid4().hex[:6]}"
            async with p.transaction():
                await p.send_and_wait(topic, b"with-offsets", partition=0)
                await p.send_offsets_to_transaction({aiokafka.TopicPartition(topic, 0): 3}, group)
        finally:
            await p.stop()
        assert await _consume(bootstrap, topic, "read_committed", 2) == [b"committed", b"with-offsets"]
        assert await _consume(bootstrap, topic, "read_uncommitted", 3) == [b"committed", b"aborted", b"with-offsets"]
        admin_consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                                   enable_auto_commit=False)
        await admin_consumer.start()
        try:
            assert await admin_consumer.committed(aiokafka.TopicPartition(topic, 0)) == 3
        finally:
            await admin_consumer.stop()

    asyncio.run(run())
