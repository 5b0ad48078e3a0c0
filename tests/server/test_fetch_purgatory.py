"""The fetch purgatory (server/delayed_fetch.py, fetch.py's rules): a parked fetch decides from offsets and
segment positions whether it may complete, and reads its partitions once more only then (or at max_wait),
never per append. The completion decision alone (pure), then against a real broker in-process (logs on disk,
leadership published as a cluster writer would), then with a real client."""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.index import load_response_schema
from kio.serial import entity_reader

from kaflite.protocol.errors import ErrorCode
from kaflite.protocol.messages import RequestHeader
from kaflite.protocol.record_batch import build_record_batch
from kaflite.server.context import RequestContext
from kaflite.server.delayed_fetch import DelayedFetch, available_bytes, enough
from kaflite.server.fetch_session import FetchTarget
from kaflite.server.handlers import EncodedBody
from kaflite.server.handlers.fetch import handle_fetch
from kaflite.storage.log import Log
from replica.test_handlers_inprocess import OTHER, Harness, lead_with_follower, move_leadership

BATCH = build_record_batch([(None, b"x" * 100, []) for _ in range(3)])


# -- the decision, pure ------------------------------------------------------------------------------------
def test_available_bytes_from_positions() -> None:
    # same segment: the position difference, capped by the partition's max bytes
    assert available_bytes(10, (0, 1000), 15, (0, 1600), 1 << 20) == 600
    assert available_bytes(10, (0, 1000), 15, (0, 1600), 256) == 256
    # caught up: nothing, even when the end moved to another segment (a roll right at the end offset)
    assert available_bytes(10, (0, 1000), 10, (10, 0), 1 << 20) == 0
    # the end below the fetch offset on the same segment (a consumer ahead of the high watermark): nothing
    assert available_bytes(10, (0, 1000), 8, (0, 700), 1 << 20) == 0
    # a segment rolled since (the fetch offset on an older segment), or the end offset on an older one
    # (truncated under the fetch): complete at once
    assert available_bytes(10, (0, 1000), 12, (10, 200), 1 << 20) is None
    assert available_bytes(10, (10, 0), 8, (0, 700), 1 << 20) is None


def test_enough_sums_partitions_up_to_min_bytes() -> None:
    assert not enough([0, 0], 1)
    assert enough([0, 1], 1)
    assert not enough([300, 300], 1000) and enough([300, 300, 400], 1000)
    assert enough([0, None, 0], 1 << 30)  # one partition that says "now" is enough
    assert enough([], 0) and not enough([], 1)


# -- against a broker, in-process ----------------------------------------------------------------------------
@pytest.fixture
def h(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path)
    yield harness
    harness.close()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Calls of Log.read per topic (the only way a fetch reads records)."""
    counts: dict[str, int] = {}
    real = Log.read

    def counting(self: Log, *args: Any, **kwargs: Any) -> Any:
        counts[self.topic] = counts.get(self.topic, 0) + 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Log, "read", counting)
    return counts


def request(h: Harness, topic: str, offset: int, *, min_bytes: int, max_wait_ms: int) -> Any:
    q = h.req(1, 12)
    return q.FetchRequest(max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=min_bytes,
                          max_bytes=10 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                          topics=(q.FetchTopic(topic=topic, partitions=(q.FetchPartition(
                              partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                              log_start_offset=-1, partition_max_bytes=1 << 20),)),),
                          forgotten_topics_data=(), rack_id="")


def decode(out: Any) -> Any:
    if isinstance(out, EncodedBody):
        frame = b"".join(p.tobytes() if hasattr(p, "tobytes") else bytes(p) for p in out.parts)
        out, _size = entity_reader(load_response_schema(1, 12))(frame, 0)
    return out.responses[0].partitions[0]


def start(h: Harness, req: Any) -> asyncio.Future[Any]:
    return asyncio.ensure_future(handle_fetch(RequestContext(h.broker, RequestHeader(1, 12, 1, "t")), req))


def append(h: Harness, topic: str, n: int = 1) -> None:
    for _ in range(n):
        h.broker.replica_manager.append_records(topic, 0, BATCH, 1)


def test_a_parked_fetch_reads_twice_however_many_appends(h: Harness, reads: dict[str, int]) -> None:
    """min_bytes of ten batches, one there at the start: the first pass reads (1), nine appends each wake
    it and it compares positions only, the ninth completes it, one read answers (2). Before the delayed
    fetch every append re-read the log (10 reads)."""
    h.broker.create_topic("p", 1, None)
    append(h, "p")

    async def scenario() -> tuple[float, Any, int]:
        fetching = start(h, request(h, "p", 0, min_bytes=10 * len(BATCH), max_wait_ms=5000))
        await asyncio.sleep(0)
        assert not fetching.done() and reads["p"] == 1
        began = time.monotonic()
        for _ in range(8):
            append(h, "p")
            await asyncio.sleep(0)
            await asyncio.sleep(0)
        assert not fetching.done()  # nine batches: below min_bytes
        append(h, "p")
        out = await fetching
        return time.monotonic() - began, decode(out), reads["p"]

    elapsed, got, count = h.loop.run_until_complete(scenario())
    assert elapsed < 2.5, "min_bytes was reached but the fetch waited out max_wait"
    assert len(got.records) == 10 * len(BATCH)
    assert count == 2, f"{count} reads of the log for one parked fetch"


def test_a_parked_fetch_answers_at_max_wait_with_one_more_read(h: Harness, reads: dict[str, int]) -> None:
    h.broker.create_topic("w", 1, None)

    async def scenario() -> tuple[float, Any]:
        req = request(h, "w", 0, min_bytes=1 << 20, max_wait_ms=300)
        began = time.monotonic()
        fetching = start(h, req)
        for _ in range(3):
            await asyncio.sleep(0.02)
            append(h, "w")
        out = await fetching
        return time.monotonic() - began, decode(out)

    elapsed, got = h.loop.run_until_complete(scenario())
    assert elapsed >= 0.28 and len(got.records) == 3 * len(BATCH)
    assert reads["w"] == 1  # caught up at the first pass (nothing read): only the answer read


def park(h: Harness, topic: str, offset: int, *, min_bytes: int, replica: int = -1, read_committed: bool = False,
         known_hw: int | None = None) -> DelayedFetch:
    delayed = DelayedFetch.park(h.broker.replica_manager, [((topic, 0), FetchTarget(offset, 1 << 20))], min_bytes,
                                replica, read_committed, None, None, {(topic, 0): known_hw} if known_hw is not None else None)
    assert delayed is not None
    return delayed


def test_a_roll_a_truncation_and_a_leader_change_complete_at_once(h: Harness) -> None:
    h.broker.create_topic("r", 1, None)
    append(h, "r", 2)
    log = h.broker.replica_manager.get_partition("r", 0).log
    assert log is not None
    caught_up = park(h, "r", 6, min_bytes=1 << 20)
    assert not caught_up.try_complete()
    append(h, "r")
    assert not caught_up.try_complete()  # one batch, far below min_bytes
    log.roll()
    append(h, "r")  # the end offset is now on a newer segment than the fetch offset
    assert caught_up.try_complete()

    behind = park(h, "r", 9, min_bytes=1 << 20)
    assert not behind.try_complete()
    log.truncate_to(6)
    assert behind.try_complete()

    moved = park(h, "r", log.log_end_offset, min_bytes=1 << 20)
    assert not moved.try_complete()
    move_leadership(h, "r", OTHER, 3)
    assert moved.try_complete()


def test_consumers_wait_for_the_high_watermark_followers_for_the_log_end(h: Harness) -> None:
    """With a follower that has not fetched, an acks=1 append moves the log end but not the high watermark:
    a consumer's parked fetch has nothing more to read, a follower's has. A follower's report moving the high
    watermark past the one a v18 follower knows completes that follower's fetch (KIP-1166)."""
    h.broker.create_topic("f", 1, None)
    lead_with_follower(h, "f", 1, (h.broker.node_id, OTHER))
    part = h.broker.replica_manager.get_partition("f", 0)
    consumer = park(h, "f", 0, min_bytes=1)
    follower = park(h, "f", 0, min_bytes=1, replica=OTHER)
    committed = park(h, "f", 0, min_bytes=1, read_committed=True)
    append(h, "f")
    assert part.high_watermark == 0 and part.log_end_offset == 3
    assert not consumer.try_complete() and not committed.try_complete()
    assert follower.try_complete()
    knows_zero = park(h, "f", 3, min_bytes=1 << 20, replica=OTHER, known_hw=0)
    assert not knows_zero.try_complete()
    h.broker.replica_manager.record_follower_fetch(part, OTHER, 3)
    assert part.high_watermark == 3
    assert consumer.try_complete() and committed.try_complete() and knows_zero.try_complete()


def test_an_isr_change_alone_keeps_the_fetch_parked(h: Harness) -> None:
    """A new PartitionState with the same leader and leader epoch (the ISR shrank) is checked in full once
    and the fetch stays parked; a new leader epoch completes it."""
    h.broker.create_topic("i", 1, None)
    me = h.broker.node_id
    lead_with_follower(h, "i", 1, (me, OTHER))
    parked = park(h, "i", 0, min_bytes=1 << 20)
    lead_with_follower(h, "i", 1, (me,), pepoch=1)
    assert not parked.try_complete()
    lead_with_follower(h, "i", 2, (me,), pepoch=2)
    assert parked.try_complete()


def test_a_leadership_lost_completes_the_parked_fetch_at_once(h: Harness) -> None:
    h.broker.create_topic("s", 1, None)

    async def scenario() -> tuple[float, Any]:
        fetching = start(h, request(h, "s", 0, min_bytes=1 << 20, max_wait_ms=5000))
        await asyncio.sleep(0)
        began = time.monotonic()
        move_leadership(h, "s", OTHER, 2)  # the image's leadership loss wakes the partition's fetches
        out = await fetching
        return time.monotonic() - began, decode(out)

    elapsed, got = h.loop.run_until_complete(scenario())
    assert elapsed < 2.5 and got.error_code == ErrorCode.not_leader_or_follower


# -- a real client -------------------------------------------------------------------------------------------
def test_confluent_consumer_with_a_large_fetch_min_bytes(broker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """librdkafka with fetch.min.bytes=100000 and fetch.wait.max.ms=500 on a topic receiving 40 small
    batches over about a second gets every record, and the broker reads the log at most twice per Fetch
    it parks (first pass, answer), fewer than the appends, where re-reading per append made one per batch."""
    topic = "purgatory-min-bytes"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=10)
    counts = {"reads": 0, "fetches": 0}
    real_read, real_park = Log.read, DelayedFetch.park

    def counting_read(self: Log, *args: Any, **kwargs: Any) -> Any:
        if self.topic == topic:
            counts["reads"] += 1
        return real_read(self, *args, **kwargs)

    def counting_park(*args: Any, **kwargs: Any) -> Any:
        counts["fetches"] += 1
        return real_park(*args, **kwargs)

    monkeypatch.setattr(Log, "read", counting_read)
    monkeypatch.setattr(DelayedFetch, "park", staticmethod(counting_park))
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "purgatory", "enable.auto.commit": False,
                         "fetch.min.bytes": 100_000, "fetch.wait.max.ms": 500})
    consumer.assign([TopicPartition(topic, 0, 0)])
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "acks": 1})
    got: list[bytes] = []
    try:
        consumer.consume(1, 0.3)  # joined the partition: its fetches park from here on
        for i in range(40):
            producer.produce(topic, value=b"small %d" % i)
            producer.flush(5)
            time.sleep(0.025)
        deadline = time.monotonic() + 10
        while len(got) < 40 and time.monotonic() < deadline:
            for m in consumer.consume(100, 0.5):
                assert m.error() is None, m.error()
                got.append(m.value())
    finally:
        consumer.close()
    assert got == [b"small %d" % i for i in range(40)]
    assert counts["fetches"] >= 2  # the fetches did park
    assert counts["reads"] <= 2 * counts["fetches"] + 2, counts
    assert counts["reads"] < 40, counts  # one read per append (the tree before: 43 in this run)
