"""acks=all over several partitions (produce.py's rules, `ReplicaManager.wait_all_committed`, Kafka's
DelayedProduce): the partitions of one request are waited for together, with one deadline, each answered its
own code. In-process: a real broker leading with a follower (OTHER) that reports as a follower's fetch would."""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader

from kaflite.protocol.errors import ErrorCode
from kaflite.protocol.messages import RequestHeader
from kaflite.protocol.record_batch import build_record_batch
from kaflite.server.context import RequestContext
from kaflite.server.handlers import EncodedBody
from kaflite.server.handlers.produce import handle_produce
from kaflite.server.replica import produce_key
from replica.test_handlers_inprocess import OTHER, Harness, lead_with_follower, move_leadership


@pytest.fixture
def h(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path)
    yield harness
    harness.close()


def led(h: Harness, *topics: str) -> None:
    for topic in topics:
        h.broker.create_topic(topic, 2, None)
        lead_with_follower(h, topic, 1, (h.broker.node_id, OTHER))


def start(h: Harness, targets: list[tuple[str, int]], timeout_ms: int) -> asyncio.Future[Any]:
    q = h.req(0, 9)
    by_topic: dict[str, list[int]] = {}
    for topic, partition in targets:
        by_topic.setdefault(topic, []).append(partition)
    req = q.ProduceRequest(transactional_id=None, acks=-1, timeout=datetime.timedelta(milliseconds=timeout_ms),
                           topic_data=tuple(q.TopicProduceData(name=topic, partition_data=tuple(
                               q.PartitionProduceData(index=p, records=build_record_batch([(None, b"v", [])]))
                               for p in parts)) for topic, parts in by_topic.items()))
    return asyncio.ensure_future(handle_produce(RequestContext(h.broker, RequestHeader(0, 9, 1, "t")), req))


def codes(out: Any) -> dict[tuple[str, int], int]:
    if isinstance(out, EncodedBody):
        frame = b"".join(p.tobytes() if hasattr(p, "tobytes") else bytes(p) for p in out.parts)
        out, _size = entity_reader(load_response_schema(0, 9))(frame, 0)
    return {(t.name, int(p.index)): int(p.error_code) for t in out.responses for p in t.partition_responses}


def report(h: Harness, topic: str, partition: int, offset: int) -> None:
    """The follower's fetch at `offset` (its log end), as the leader's Fetch handler records it."""
    replicas = h.broker.replica_manager
    replicas.record_follower_fetch(replicas.get_partition(topic, partition), OTHER, offset)


def test_the_partitions_of_a_request_are_waited_for_together(h: Harness) -> None:
    """While partition 0 is not replicated, partition 1's produce key is watched too (one waiter on both:
    the wait before watched one partition at a time); replicated in the reverse order, both answer NONE as
    soon as the last one is."""
    led(h, "a")
    purgatory = h.broker.purgatory

    async def scenario() -> tuple[float, dict[tuple[str, int], int]]:
        producing = start(h, [("a", 0), ("a", 1)], 5000)
        await asyncio.sleep(0)
        assert purgatory.watching(produce_key("a", 0)) == 1
        assert purgatory.watching(produce_key("a", 1)) == 1
        assert purgatory.sizes().get("produce") == 1  # one waiter for the request
        began = time.monotonic()
        report(h, "a", 1, 1)
        await asyncio.sleep(0)
        assert not producing.done() and purgatory.watching(produce_key("a", 0)) == 1
        report(h, "a", 0, 1)
        out = await producing
        return time.monotonic() - began, codes(out)

    elapsed, got = h.loop.run_until_complete(scenario())
    assert got == {("a", 0): 0, ("a", 1): 0}
    assert elapsed < 2.5


def test_one_deadline_each_partition_its_own_answer(h: Harness) -> None:
    """Partition 0 replicated, partition 1 not: at the request's timeout (one deadline for the request, not
    one per partition) partition 0 is NONE and partition 1 REQUEST_TIMED_OUT; a partition whose leadership
    was lost meanwhile is NOT_LEADER_OR_FOLLOWER."""
    led(h, "a", "b")

    async def scenario() -> tuple[float, dict[tuple[str, int], int]]:
        began = time.monotonic()
        producing = start(h, [("a", 0), ("a", 1), ("b", 0)], 400)
        await asyncio.sleep(0)
        report(h, "a", 0, 1)
        move_leadership(h, "b", OTHER, 3)
        out = await producing
        return time.monotonic() - began, codes(out)

    elapsed, got = h.loop.run_until_complete(scenario())
    assert got == {("a", 0): ErrorCode.none.value, ("a", 1): ErrorCode.request_timed_out.value,
                   ("b", 0): ErrorCode.not_leader_or_follower.value}
    assert 0.35 <= elapsed < 2.0
