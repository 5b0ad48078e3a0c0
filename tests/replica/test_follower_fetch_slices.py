"""The leader's side of a follower's fetch of many partitions (fetch.py's rules): read FOLLOWER_READ_SLICE
partitions per loop turn, with the same answer as one pass, and an append during the pass to a partition
read in an earlier slice ends the long poll at once. In-process: a real broker, leadership published as a
cluster writer would."""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kaflite.protocol.messages import RequestHeader
from kaflite.protocol.record_batch import build_record_batch
from kaflite.server.context import RequestContext
from kaflite.server.handlers import fetch as fetch_handler
from kaflite.server.handlers.fetch import handle_fetch
from replica.test_handlers_inprocess import OTHER, Harness, lead_with_follower

FOLLOWER_READ_SLICE = 30  # the handler's, made smaller here: a smaller topic to create (see `slices`)
N = 2 * FOLLOWER_READ_SLICE + 10
BATCH = build_record_batch([(None, b"x" * 100, []) for _ in range(5)])


@pytest.fixture(autouse=True)
def slices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fetch_handler, "FOLLOWER_READ_SLICE", FOLLOWER_READ_SLICE)


def leader(tmp: Path) -> Harness:
    """A broker leading `big` (N partitions, OTHER its follower), a batch in one partition of three."""
    harness = Harness(tmp)
    harness.broker.create_topic("big", N, None)
    lead_with_follower(harness, "big", 1, (harness.broker.node_id, OTHER))
    for p in range(0, N, 3):
        harness.broker.replica_manager.append_records("big", p, BATCH, 1)
    return harness


@pytest.fixture
def h(tmp_path: Path) -> Iterator[Harness]:
    harness = leader(tmp_path)
    yield harness
    harness.close()


def request(h: Harness, offsets: dict[int, int], max_bytes: int = 10 << 20, max_wait_ms: int = 0) -> Any:
    q = h.req(1, 12)
    return q.FetchRequest(
        replica_id=OTHER, max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1, max_bytes=max_bytes,
        isolation_level=0, session_id=0, session_epoch=-1, topics=(q.FetchTopic(topic="big", partitions=tuple(
            q.FetchPartition(partition=p, current_leader_epoch=1, fetch_offset=off, last_fetched_epoch=-1,
                             log_start_offset=0, partition_max_bytes=1 << 20) for p, off in offsets.items())),),
        forgotten_topics_data=(), rack_id="")


def call(h: Harness, req: Any) -> Any:
    return handle_fetch(RequestContext(h.broker, RequestHeader(1, 12, 1, "inproc")), req)


def summary(h: Harness, req: Any) -> list[tuple[int, int, int, int]]:
    """(partition, error, high watermark, bytes) of each partition of the answer, decoded as a client."""
    out = h.call(1, 12, handle_fetch, req)
    return [(int(p.partition_index), int(p.error_code), int(p.high_watermark), len(p.records or b""))
            for t in out.responses for p in t.partitions]


def test_a_sliced_pass_answers_as_one_pass(h: Harness, tmp_path_factory: pytest.TempPathFactory,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Same errors, watermarks and records, the byte budget and min_one_message over the whole pass: a budget
    of 15.5 batches reads 15 (10 in the first slice, 5 in the second); with the first slice caught up and a
    budget of 1 byte, the first partition with data, in the second slice, still gets its batch."""
    at_zero = dict.fromkeys(range(N), 0)
    first_caught_up = {p: (5 if p % 3 == 0 and p < FOLLOWER_READ_SLICE else 0) for p in range(N)}
    cases = [request(h, at_zero, max_bytes=len(BATCH) * 31 // 2), request(h, first_caught_up, max_bytes=1),
             request(h, at_zero)]
    sliced = [summary(h, req) for req in cases]
    monkeypatch.setattr(fetch_handler, "FOLLOWER_READ_SLICE", 10 * N)  # the same on another broker, unsliced
    other = leader(tmp_path_factory.mktemp("whole"))
    try:
        assert [summary(other, req) for req in cases] == sliced
    finally:
        other.close()
    budgeted, tiny, everything = sliced
    assert len(budgeted) == N and sum(1 for *_x, size in budgeted if size) == 15
    assert [p for p, *_x, size in tiny if size] == [FOLLOWER_READ_SLICE]
    assert sum(1 for *_x, size in everything if size) == len(range(0, N, 3))
    # reported at the log end everywhere: the answer carries the high watermarks moved by the reports
    caught_up = {p: (5 if p % 3 == 0 else 0) for p in range(N)}
    monkeypatch.setattr(fetch_handler, "FOLLOWER_READ_SLICE", FOLLOWER_READ_SLICE)
    assert [hw for _p, _e, hw, _s in summary(h, request(h, caught_up))] == [caught_up[p] for p in range(N)]


def test_the_loop_runs_between_two_slices(h: Harness) -> None:
    async def scenario() -> int:
        turns = 0
        done = False

        async def other() -> None:
            nonlocal turns
            while not done:
                turns += 1
                await asyncio.sleep(0)

        task = asyncio.ensure_future(other())
        await asyncio.sleep(0)
        before = turns
        await call(h, request(h, dict.fromkeys(range(N), 0)))
        done = True
        await task
        return turns - before

    assert h.loop.run_until_complete(scenario()) >= 2  # N is three slices: two yields


def test_an_append_during_the_pass_ends_the_long_poll(h: Harness) -> None:
    """All caught up, long-polled 5 s: an append to partition 0 (read in the first slice) made while a later
    slice is read is not missed: the answer comes at once, with it."""
    caught_up = {p: (5 if p % 3 == 0 else 0) for p in range(N)}
    summary(h, request(h, caught_up))  # the follower's report: committed everywhere

    async def scenario() -> tuple[float, Any]:
        fetching = asyncio.ensure_future(call(h, request(h, caught_up, max_wait_ms=5000)))
        await asyncio.sleep(0)  # the fetch reads its first slice, then yields
        h.broker.replica_manager.append_records("big", 0, BATCH, 1)
        started = time.monotonic()
        out = await fetching
        return time.monotonic() - started, out

    elapsed, out = h.loop.run_until_complete(scenario())
    assert elapsed < 2.5, f"the append was missed: answered after {elapsed:.1f} s"
    assert out is not None
