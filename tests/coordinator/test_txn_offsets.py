"""Transactional offsets in the group coordinator (Kafka's pendingTransactionalOffsets): TxnOffsetCommit
writes OffsetCommit records as a transactional batch of the producer, pending until the transaction's
marker reaches the partition; a reload (a coordinator restart) replays them pending, and the marker replayed
or handed over live commits or drops them. In-process, over a writer that keeps each batch's producer."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from kaflite.coordinator import CoordinatorConfig, GroupCoordinator
from kaflite.coordinator import messages as m
from kaflite.coordinator.runtime import (
    CoordinatorRuntime,
    EndTransactionMarker,
    LoadedRecord,
    Producer,
    Record,
    TransactionalRecord,
)
from kaflite.protocol.errors import ErrorCode

PID = 7


class TxnLogWriter:
    """One partition's log as the runtime sees it: plain records, transactional ones, markers."""

    def __init__(self) -> None:
        self.log: list[LoadedRecord] = []

    def append(self, partition: int, records: Sequence[Record], producer: Producer | None = None) -> None:
        for key, value in records:
            self.log.append((key, value) if producer is None else TransactionalRecord(producer[0], key, value))

    def committed_end(self, partition: int) -> Awaitable[None] | None:
        return None

    def position(self, partition: int) -> int:
        return len(self.log)  # only ever appended to

    def read(self, partition: int) -> Iterable[LoadedRecord]:
        return list(self.log)


def _runtime(writer: TxnLogWriter) -> CoordinatorRuntime[GroupCoordinator]:
    config = CoordinatorConfig(offsets_topic_num_partitions=1)
    return CoordinatorRuntime(lambda p: GroupCoordinator(config, active=False), writer, lambda: 1000, "test")


def _fetch(stable: bool) -> Callable[[GroupCoordinator, int], Any]:
    return lambda s, now: s.handle_offset_fetch(m.OffsetFetchRequest("g", (("in", (0, 1)),), stable), now)


async def _offsets(rt: CoordinatorRuntime[GroupCoordinator], stable: bool) -> list[tuple[int, ErrorCode]]:
    resp = await rt.write(0, _fetch(stable))
    return [(f.offset, f.error) for f in resp.topics[0][1]]


def _txn_commit(offset: int) -> Callable[[GroupCoordinator, int], Any]:
    return lambda s, now: s.handle_txn_offset_commit("g", PID, {("in", 0): (offset, 3, "meta")}, now)


def test_pending_until_the_marker_also_across_reloads() -> None:
    async def body() -> None:
        writer = TxnLogWriter()
        rt = _runtime(writer)
        await rt.load(0)
        await rt.write(0, _txn_commit(5), producer=(PID, 0))
        assert writer.log and all(isinstance(r, TransactionalRecord) and r.producer_id == PID for r in writer.log)
        pending = (-1, ErrorCode.unstable_offset_commit)
        assert await _offsets(rt, True) == [pending, (-1, ErrorCode.none)]
        assert await _offsets(rt, False) == [(-1, ErrorCode.none), (-1, ErrorCode.none)]
        # a restart mid-transaction: the pending offset is replayed pending
        rt = _runtime(writer)
        await rt.load(0)
        assert await _offsets(rt, True) == [pending, (-1, ErrorCode.none)]
        # the COMMIT marker is written, then handed to the shard: committed
        writer.log.append(EndTransactionMarker(PID, True))
        await rt.write(0, lambda s, now: s.handle_end_transaction(PID, True, now))
        assert await _offsets(rt, True) == [(5, ErrorCode.none), (-1, ErrorCode.none)]
        # the next transaction is aborted after a restart: the offset stays 5
        await rt.write(0, _txn_commit(9), producer=(PID, 0))
        rt = _runtime(writer)
        await rt.load(0)
        assert await _offsets(rt, True) == [pending, (-1, ErrorCode.none)]
        assert await _offsets(rt, False) == [(5, ErrorCode.none), (-1, ErrorCode.none)]
        writer.log.append(EndTransactionMarker(PID, False))
        await rt.write(0, lambda s, now: s.handle_end_transaction(PID, False, now))
        assert await _offsets(rt, True) == [(5, ErrorCode.none), (-1, ErrorCode.none)]
        # and the whole log replays to the same state; a second marker changes nothing
        rt = _runtime(writer)
        await rt.load(0)
        await rt.write(0, lambda s, now: s.handle_end_transaction(PID, True, now))
        assert await _offsets(rt, True) == [(5, ErrorCode.none), (-1, ErrorCode.none)]
        assert rt.shard(0).offset_manager.pending == {}
    asyncio.run(asyncio.wait_for(body(), 10))


def test_a_marker_replayed_while_loading_commits_the_pending_offsets() -> None:
    shard = GroupCoordinator(CoordinatorConfig(offsets_topic_num_partitions=1))
    result = shard.handle_txn_offset_commit("g", PID, {("in", 1): (42, -1, "")}, 0)
    fresh = GroupCoordinator(CoordinatorConfig(offsets_topic_num_partitions=1), active=False)
    for r in result.records:
        fresh.replay_transactional(PID, r.key, r.value)
    assert fresh.offset_manager.pending_partitions("g") == {("in", 1)} and "g" not in fresh.offsets
    fresh.replay_end_transaction(PID + 1, True)  # another producer's marker: nothing of ours
    assert fresh.offset_manager.pending_partitions("g") == {("in", 1)}
    fresh.replay_end_transaction(PID, True)
    assert fresh.offsets["g"][("in", 1)].offset == 42 and not fresh.offset_manager.pending
