"""The follower side of replication without sockets: a ReplicaFetcher driven round by round against a fake
leader backed by a real Log (answering OffsetForLeaderEpoch and Fetch v12 as a leader does): truncation
until the epochs agree (KIP-101 / KIP-279, several rounds when one is not enough), truncation to the high
watermark without epoch history (and no OFFSET_OUT_OF_RANGE loop), a Fetch answered with a diverging
epoch (KIP-595), and the leader's log start offset adopted from each answer (DeleteRecords, then a
failover: the records below it are gone from the new leader too); also a stopped fetcher's task kept and
awaited, and the broker-to-broker drain bounded."""

from __future__ import annotations

import asyncio
import datetime
import threading
from itertools import pairwise
from pathlib import Path
from typing import Any

from kio.schema.fetch.v12.request import FetchRequest
from kio.schema.fetch.v12.response import EpochEndOffset as Diverging
from kio.schema.fetch.v12.response import FetchableTopicResponse, FetchResponse, PartitionData
from kio.schema.offset_for_leader_epoch.v4.request import OffsetForLeaderEpochRequest
from kio.schema.offset_for_leader_epoch.v4.response import (
    EpochEndOffset,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from helpers import FetchThroughKio
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.record_batch import build_record_batch
from kaflite.server.replica import Partition, PartitionState
from kaflite.server.replica.fetcher import (
    TRUNCATION_SLICE,
    FetcherConfig,
    ReplicaFetcher,
    ReplicaFetcherManager,
    _FetchState,
    epoch_end_offset,
    truncation_target,
)
from kaflite.storage.config import LogConfig
from kaflite.storage.log import Log

LEADER, ME = 1, 2
TP = ("t", 0)
_ZERO = i32Timedelta.parse(datetime.timedelta(0))


def batch(n: int, tag: str) -> bytes:
    return build_record_batch([(None, f"{tag}{i}".encode(), []) for i in range(n)])


def append(log: Log, epoch: int, batches: int, tag: str, size: int = 5) -> None:
    for b in range(batches):
        log.append(batch(size, f"{tag}{b}-"), leader_epoch=epoch)


def read_all(log: Log, start: int, upto: int) -> list[bytes]:
    """The batches in [start, upto), one piece per segment (a read stops at its segment's end)."""
    out: list[bytes] = []
    offset = start
    while offset < upto:
        info = log.read(offset, 1 << 24, max_offset=upto, min_one_message=True)
        chunk = b"".join(bytes(r) for r in info.records)
        assert chunk, f"nothing read at {offset}"
        out.append(chunk)
        offset = log.segments[-1].next_offset if offset >= log.segments[-1].base_offset else next(
            s.base_offset for s in log.segments if s.base_offset > offset)
    return out


def all_bytes(log: Log) -> bytes:
    return b"".join(read_all(log, log.log_start_offset, log.log_end_offset))


def copy(src: Log, dst: Log, upto: int) -> None:
    """What a follower fetched earlier: the leader's batches below `upto`, verbatim."""
    for piece in read_all(src, 0, upto):
        dst.append(piece, assign_offsets=False)


class FakeLeader(FetchThroughKio):
    """The leader as the fetcher's connection sees it: OffsetForLeaderEpoch from the leader's epoch cache
    (`Log.end_offset_for_epoch`, what kaflite's leader answers) and Fetch v12 from its log; with
    `diverging`, a fetch whose last fetched epoch does not match answers a diverging epoch as Kafka's
    leader does (Partition.fetchRecords: epoch older than asked, or its end below the fetch offset)."""

    def __init__(self, log: Log, diverging: bool = False) -> None:
        self.log = log
        self.diverging = diverging
        self.asked: list[int] = []  # epochs asked with OffsetForLeaderEpoch
        self.fetched: list[tuple[int, int]] = []  # (fetch offset, last fetched epoch) of each Fetch

    async def request(self, req: Any, _schema: Any, _timeout: float) -> Any:
        if isinstance(req, OffsetForLeaderEpochRequest):
            parts = []
            for p in req.topics[0].partitions:
                self.asked.append(int(p.leader_epoch))
                epoch, end = self.log.end_offset_for_epoch(int(p.leader_epoch))
                parts.append(EpochEndOffset(error_code=ErrorCode.none, partition=p.partition,
                                            leader_epoch=i32(epoch), end_offset=i64(end)))
            return OffsetForLeaderEpochResponse(throttle_time=_ZERO, topics=(
                OffsetForLeaderTopicResult(topic=TopicName("t"), partitions=tuple(parts)),))
        assert isinstance(req, FetchRequest)
        fetch: Any = req
        (p,) = fetch.topics[0].partitions
        fo, lfe = int(p.fetch_offset), int(p.last_fetched_epoch)
        self.fetched.append((fo, lfe))
        log = self.log
        common = dict(partition_index=p.partition, high_watermark=i64(log.high_watermark),
                      last_stable_offset=i64(log.high_watermark), log_start_offset=i64(log.log_start_offset),
                      aborted_transactions=None)
        data: PartitionData
        diverged = self.log.end_offset_for_epoch(lfe) if self.diverging and lfe >= 0 else None
        if diverged is not None and (diverged[0] < lfe or diverged[1] < fo):
            data = PartitionData(error_code=ErrorCode.none, records=None, **common,  # type: ignore[arg-type]
                                 diverging_epoch=Diverging(epoch=i32(diverged[0]), end_offset=i64(diverged[1])))
        elif fo < log.log_start_offset or fo > log.log_end_offset:
            data = PartitionData(error_code=ErrorCode.offset_out_of_range, records=None, **common)  # type: ignore[arg-type]
        else:
            info = log.read(fo, 1 << 24, max_offset=log.log_end_offset, min_one_message=True)
            records: Any = b"".join(bytes(r) for r in info.records) or None
            data = PartitionData(error_code=ErrorCode.none, **common, records=records)  # type: ignore[arg-type]
        return FetchResponse(throttle_time=_ZERO, error_code=ErrorCode.none, session_id=i32(0), responses=(
            FetchableTopicResponse(topic=TopicName("t"), partitions=(data,)),))

    def close(self) -> None:
        pass


class Replicas:
    def __init__(self, part: Partition) -> None:
        self.part = part

    def partition_or_none(self, topic: str, partition: int) -> Partition | None:
        return self.part if (topic, partition) == TP else None


def follower(log: Log, leader_epoch: int) -> Partition:
    part = Partition("t", 0, ME, log)
    part.apply_state(PartitionState(LEADER, leader_epoch, 0, (LEADER, ME), (LEADER, ME)))
    return part


def run(part: Partition, leader: FakeLeader, leader_epoch: int, rounds: int = 8,
        truncating: bool = True) -> _FetchState:
    """`rounds` rounds of the fetcher (each: truncation of the marked partitions, then one Fetch)."""
    async def scenario() -> _FetchState:
        manager = ReplicaFetcherManager(ME, Replicas(part), FetcherConfig(), lambda: None)  # type: ignore[arg-type]
        fetcher = ReplicaFetcher(manager, LEADER, 0)
        fetcher._conn = leader  # type: ignore[assignment]
        fetcher.partitions[TP] = state = _FetchState(leader_epoch, truncating=truncating)
        for _ in range(rounds):
            await fetcher.do_work()
        return state

    return asyncio.run(scenario())


def unclean_history(tmp: Path) -> tuple[Log, Log]:
    """Broker 1 led epoch 1 and wrote 0-94; broker 2 copied 0-89. Broker 2 led epoch 2 (90-109) while 1
    was down; then 1 led epoch 3 uncleanly (95-99) while 2 was down; now 2 leads epoch 4 (110-119) and 1
    follows it. Records 90-94 differ (epoch 1 on the follower, epoch 2 on the leader)."""
    lead, mine = Log(tmp / "leader" / "t-0"), Log(tmp / "follower" / "t-0")
    append(lead, 1, 18, "a")  # 0-89, epoch 1, on both
    copy(lead, mine, 90)
    append(mine, 1, 1, "lost")  # 90-94, epoch 1, only the old leader had them
    append(lead, 2, 4, "b")  # 90-109, epoch 2
    append(mine, 3, 1, "unclean")  # 95-99, epoch 3
    append(lead, 4, 2, "c")  # 110-119, epoch 4
    lead.update_high_watermark(120)
    mine.update_high_watermark(90)
    assert mine.leader_epoch_cache.entries == [(1, 0), (3, 95)]
    assert lead.leader_epoch_cache.entries == [(1, 0), (2, 90), (4, 110)]
    return lead, mine


def test_follower_end_offsets_are_kafkas() -> None:
    entries = [(1, 0), (3, 95)]
    assert epoch_end_offset(entries, 100, 3) == (3, 100)  # the latest: the log end
    assert epoch_end_offset(entries, 100, 2) == (1, 95)  # unknown here: the largest below, where it ends
    assert epoch_end_offset(entries, 100, 0) == (0, 0)  # below every entry: the first one's start
    assert epoch_end_offset(entries, 100, 4) is None  # above the latest: unknown
    assert epoch_end_offset([], 100, 1) is None


def test_one_round_is_not_enough_after_an_unclean_election() -> None:
    entries = [(1, 0), (3, 95)]
    # the leader's epoch 2 (asked about 3) is unknown here: truncate to where epoch 1 ends, ask about 1
    first = truncation_target(entries, 100, 90, 3, 2, 110)
    assert (first.offset, first.complete, first.next_epoch) == (95, False, 1)
    # the leader's epoch 1 ended at 90: that is the answer
    second = truncation_target([(1, 0)], 95, 90, 1, 1, 90)
    assert (second.offset, second.complete) == (90, True)
    assert truncation_target(entries, 100, 90, 3, -1, -1).offset == 90  # no epoch known there: the HW


def test_multi_round_truncation_leaves_the_replicas_identical(tmp_path: Path) -> None:
    """The issue's reproduction: one OffsetForLeaderEpoch round truncated to 95 where Kafka ends at 90,
    leaving offsets 90-94 with different records on the two replicas."""
    lead, mine = unclean_history(tmp_path)
    leader = FakeLeader(lead)
    run(follower(mine, 4), leader, 4)
    assert leader.asked == [3, 1]  # two rounds: the second about the epoch the first truncated back to
    assert leader.fetched[0] == (90, 1)
    assert mine.log_end_offset == 120
    assert all_bytes(mine) == all_bytes(lead)
    assert mine.leader_epoch_cache.entries == lead.leader_epoch_cache.entries


def test_a_diverging_epoch_in_a_fetch_answer_truncates(tmp_path: Path) -> None:
    """A follower fetching straight away (no OffsetForLeaderEpoch first, as Kafka's with truncation on
    fetch) sends its last fetched epoch; the leader's diverging epoch makes it truncate, as far as needed."""
    lead, mine = unclean_history(tmp_path)
    leader = FakeLeader(lead, diverging=True)
    run(follower(mine, 4), leader, 4, truncating=False)
    assert leader.fetched[0] == (100, 3)  # the local latest epoch goes with the fetch
    # answered diverging (2, 110): truncated to 95, then asked about epoch 1 (90), then fetched from there
    assert leader.asked == [1]
    assert (90, 1) in leader.fetched
    assert all_bytes(mine) == all_bytes(lead)


def test_a_diverging_answer_appends_nothing_and_moves_no_watermark(tmp_path: Path) -> None:
    lead, mine = unclean_history(tmp_path)
    leader = FakeLeader(lead, diverging=True)
    part = follower(mine, 4)
    state = run(part, leader, 4, rounds=1, truncating=False)
    assert mine.log_end_offset == 95 and mine.high_watermark == 90  # not the leader's 120
    assert state.truncating and state.ask_epoch == 1


def test_without_epochs_the_follower_truncates_to_its_high_watermark_then_within_the_leader(
        tmp_path: Path) -> None:
    """No leader-epoch history (records of epoch -1): Kafka truncates to the high watermark. Here the
    new leader (uncleanly elected) ends below that high watermark too: the OFFSET_OUT_OF_RANGE answer
    truncates to the leader's high watermark instead of marking the partition for a truncation that
    does nothing (which looped forever)."""
    lead, mine = Log(tmp_path / "leader" / "t-0"), Log(tmp_path / "follower" / "t-0")
    append(lead, -1, 5, "a", size=1)  # 0-4
    copy(lead, mine, 5)
    append(mine, -1, 5, "lost", size=1)  # 5-9, only here
    lead.update_high_watermark(5)
    mine.update_high_watermark(8)
    assert mine.leader_epoch_cache.entries == [] and lead.leader_epoch_cache.entries == []
    leader = FakeLeader(lead)
    run(follower(mine, 2), leader, 2, rounds=4)
    assert leader.asked == []  # nothing to ask about
    assert [fo for fo, _e in leader.fetched[:2]] == [8, 5]  # to the high watermark, then to the leader's
    assert mine.log_end_offset == 5 and all_bytes(mine) == all_bytes(lead)
    # and it goes on following: new records on the leader arrive
    append(lead, -1, 2, "b", size=1)
    lead.update_high_watermark(7)
    run(follower(mine, 2), leader, 2, rounds=2, truncating=False)
    assert mine.log_end_offset == 7 and all_bytes(mine) == all_bytes(lead)


def test_without_epochs_records_past_the_high_watermark_are_refetched(tmp_path: Path) -> None:
    lead, mine = Log(tmp_path / "leader" / "t-0"), Log(tmp_path / "follower" / "t-0")
    append(lead, -1, 8, "a", size=1)
    copy(lead, mine, 8)
    append(mine, -1, 2, "lost", size=1)  # 8-9 here, other records there
    append(lead, -1, 4, "b", size=1)  # 8-11
    lead.update_high_watermark(12)
    mine.update_high_watermark(8)
    leader = FakeLeader(lead)
    run(follower(mine, 2), leader, 2, rounds=2)
    assert leader.fetched[0][0] == 8
    assert all_bytes(mine) == all_bytes(lead)


def test_the_follower_adopts_the_leaders_log_start_offset_and_a_new_leader_keeps_it(tmp_path: Path) -> None:
    """DeleteRecords on the leader moves its log start offset to 6; the follower's next fetch answer
    carries it and the follower deletes below it too (whole segments, in a worker thread). After a
    failover to that follower, the deleted records are not readable there either."""
    small = LogConfig(segment_bytes=200)  # two batches per segment
    lead = Log(tmp_path / "leader" / "t-0", small)
    mine = Log(tmp_path / "follower" / "t-0", small)
    append(lead, 0, 10, "a", size=1)
    copy(lead, mine, 10)
    lead.update_high_watermark(10)
    mine.update_high_watermark(10)
    assert lead.delete_records(6) == 6
    assert mine.log_start_offset == 0 and [s.base_offset for s in mine.segments] == [0, 2, 4, 6, 8]
    part = follower(mine, 0)
    run(part, FakeLeader(lead), 0, rounds=2, truncating=False)
    assert mine.log_start_offset == 6
    assert [s.base_offset for s in mine.segments] == [6, 8]  # the segments wholly below 6 are gone
    assert len(list(mine.dir.glob("*.log"))) == len(mine.segments)
    # failover: the follower leads the next epoch
    part.apply_state(PartitionState(ME, 1, 1, (LEADER, ME), (ME,)))
    assert part.is_leader and part.log_start_offset == 6
    try:
        mine.read(2, 1 << 20)
        raise AssertionError("offset 2 was deleted on the old leader but is readable on the new one")
    except KafkaError as e:
        assert e.code is ErrorCode.offset_out_of_range
    assert all_bytes(mine) == all_bytes(lead)


def test_the_leaders_log_start_is_capped_by_the_local_high_watermark(tmp_path: Path) -> None:
    """A log start offset never passes the high watermark (Kafka's maybeIncrementLogStartOffset refuses
    that): a follower whose high watermark is behind takes the leader's log start only up to it."""
    mine = Log(tmp_path / "follower" / "t-0")
    append(mine, 0, 10, "a", size=1)
    mine.update_high_watermark(5)
    part = follower(mine, 0)

    async def scenario() -> None:
        manager = ReplicaFetcherManager(ME, Replicas(part), FetcherConfig(), lambda: None)  # type: ignore[arg-type]
        fetcher = ReplicaFetcher(manager, LEADER, 0)
        await fetcher._adopt_log_start(part, 8)
        assert mine.log_start_offset == 5
        await fetcher._adopt_log_start(part, 3)  # never backwards
        assert mine.log_start_offset == 5

    asyncio.run(scenario())


def test_a_stopped_fetcher_task_is_kept_until_done_and_awaited_by_stop() -> None:
    """A fetcher left without partitions is stopped in a task the manager keeps (the event loop holds
    tasks weakly, so an unreferenced one may vanish mid-stop) and that the manager's stop() awaits."""
    class NoPartitions:
        partitions: dict[Any, Any] = {}

    async def scenario() -> None:
        manager = ReplicaFetcherManager(ME, NoPartitions(), FetcherConfig(), lambda: None)  # type: ignore[arg-type]
        fetcher = ReplicaFetcher(manager, LEADER, 0)
        manager.fetchers[(LEADER, 0)] = fetcher
        manager.on_image(None, None)  # type: ignore[arg-type]
        assert not manager.fetchers and len(manager._stopping) == 1
        await manager.stop()
        assert not manager._stopping

    asyncio.run(scenario())


def test_a_request_to_a_broker_that_stops_reading_times_out() -> None:
    """The broker-to-broker connection bounds the drain too: a peer that stops reading (a paused broker,
    a full socket buffer) held the sender forever."""
    import time

    from kaflite.server.broker_connection import BrokerConnection

    class Stuck:
        def write(self, _data: bytes) -> None:
            pass

        async def drain(self) -> None:
            await asyncio.Event().wait()  # never drained

    async def scenario() -> float:
        conn = BrokerConnection(asyncio.StreamReader(), Stuck(), "t")  # type: ignore[arg-type]
        req = OffsetForLeaderEpochRequest(replica_id=i32(ME), topics=())  # type: ignore[arg-type]
        start = time.monotonic()
        try:
            await asyncio.wait_for(conn.request(req, OffsetForLeaderEpochResponse, 0.1), 3)
        except TimeoutError:
            pass
        return time.monotonic() - start

    assert asyncio.run(scenario()) < 1.5


def test_truncation_runs_in_a_worker_thread_not_on_the_event_loop(tmp_path: Path) -> None:
    """A follower's truncation (segment renames, producer state rebuilt, checkpoints rewritten) ran on the
    event loop, once per partition; now each round's truncations run in a worker thread while the fetcher
    waits (so the partition is not fetched meanwhile), through the LogManager when there is one
    (`truncate_logs`: one checkpoint write for the round)."""
    lead, mine = unclean_history(tmp_path)
    callers: list[int] = []
    real = mine.truncate_to

    def recording(offset: int, **kw: Any) -> bool:
        callers.append(threading.get_ident())
        return real(offset, **kw)

    mine.truncate_to = recording  # type: ignore[method-assign]
    rounds: list[tuple[int, int]] = []

    class Manager:
        def truncate_logs(self, targets: list[tuple[Log, int]]) -> list[Log]:
            rounds.append((threading.get_ident(), len(targets)))
            return [lg for lg, offset in targets if lg.truncate_to(offset, checkpoint=False)]

    part = follower(mine, 4)
    replicas = Replicas(part)
    replicas.log_manager = Manager()  # type: ignore[attr-defined]

    async def scenario() -> int:
        manager = ReplicaFetcherManager(ME, replicas, FetcherConfig(), lambda: None)  # type: ignore[arg-type]
        fetcher = ReplicaFetcher(manager, LEADER, 0)
        fetcher._conn = FakeLeader(lead)  # type: ignore[assignment]
        fetcher.partitions[TP] = _FetchState(4, truncating=True)
        for _ in range(8):
            await fetcher.do_work()
        return threading.get_ident()

    loop_thread = asyncio.run(scenario())
    assert all_bytes(mine) == all_bytes(lead)  # the same outcome as on the loop
    assert callers and loop_thread not in callers
    assert rounds and all(thread != loop_thread for thread, _n in rounds)


def test_a_truncation_of_many_partitions_goes_in_slices_with_the_loop_free_between_them(tmp_path: Path) -> None:
    """A failover truncating 1,000 partitions built one OffsetForLeaderEpoch of all of them, then decided,
    logged and handed off every truncation, in one turn of the event loop (128 ms on a loaded machine,
    bench/follower_truncation_bench.py). Now a round goes in slices of TRUNCATION_SLICE partitions, each its
    own request and worker-thread truncation, and the loop runs other work between two slices."""
    n = 2 * TRUNCATION_SLICE + 10
    parts: dict[tuple[str, int], Partition] = {}
    for i in range(n):
        lg = Log(tmp_path / f"t-{i}")
        lg.append(batch(5, "a"), leader_epoch=0)  # 0-4, epoch 0: the new leader's epoch 0 ended at 3
        part = Partition("t", i, ME, lg)
        part.apply_state(PartitionState(LEADER, 1, 0, (LEADER, ME), (LEADER, ME)))
        parts[("t", i)] = part
    events: list[tuple[str, int]] = []

    class Leader(FetchThroughKio):
        async def request(self, req: Any, _schema: Any, _timeout: float) -> Any:
            assert isinstance(req, OffsetForLeaderEpochRequest)
            ps = req.topics[0].partitions
            events.append(("request", len(ps)))
            return OffsetForLeaderEpochResponse(throttle_time=_ZERO, topics=(OffsetForLeaderTopicResult(
                topic=TopicName("t"), partitions=tuple(EpochEndOffset(
                    error_code=ErrorCode.none, partition=p.partition, leader_epoch=i32(0), end_offset=i64(3))
                    for p in ps)),))

        def close(self) -> None:
            pass

    class Many:
        def partition_or_none(self, topic: str, partition: int) -> Partition | None:
            return parts.get((topic, partition))

    async def scenario() -> None:
        manager = ReplicaFetcherManager(ME, Many(), FetcherConfig(), lambda: None)  # type: ignore[arg-type]
        fetcher = ReplicaFetcher(manager, LEADER, 0)
        fetcher._conn = Leader()  # type: ignore[assignment]
        for tp in parts:
            fetcher.partitions[tp] = _FetchState(1, truncating=True)

        async def other_work() -> None:  # another client's request, due on the loop meanwhile
            while True:
                events.append(("other", 0))
                await asyncio.sleep(0)

        task = asyncio.create_task(other_work())
        await asyncio.sleep(0)
        await fetcher._truncate(list(parts))
        task.cancel()

    asyncio.run(scenario())
    requests = [i for i, (kind, _n) in enumerate(events) if kind == "request"]
    assert sorted(events[i][1] for i in requests) == [10, TRUNCATION_SLICE, TRUNCATION_SLICE]
    # between two requests, the loop ran the other work
    assert all(any(kind == "other" for kind, _n in events[a:b]) for a, b in pairwise(requests))
    assert all(p.log is not None and p.log.log_end_offset == 0 for p in parts.values())  # each truncated


def test_a_deposed_leaders_election_entry_is_dropped_and_it_catches_up(tmp_path: Path) -> None:
    """A leader deposed before it wrote anything in its epoch keeps that epoch's election entry (recorded
    in memory at its log end, no batch carries it). As a follower its fetch claims that epoch as its last
    fetched one; the new leader, which never had it, answers diverging at the follower's own log end. The
    truncation then removes nothing but must drop that entry (Kafka's truncateTo at the log end); before,
    the follower skipped a truncation to its own log end, and was answered diverging, fetch after fetch,
    never catching up (a __consumer_offsets partition moved by a preferred election never got its old
    leader back into the ISR)."""
    lead, mine = Log(tmp_path / "leader" / "t-0"), Log(tmp_path / "follower" / "t-0")
    append(lead, 0, 2, "a")  # 0-9, epoch 0, on both
    copy(lead, mine, 10)
    assert mine.leader_epoch_cache.assign_unwritten(1, 10)  # the follower led epoch 1 and wrote nothing
    append(lead, 2, 1, "b")  # 10-14: the new leader's epoch 2
    lead.update_high_watermark(15)
    leader = FakeLeader(lead, diverging=True)
    run(follower(mine, 2), leader, 2, rounds=4, truncating=False)
    assert leader.fetched[0] == (10, 1)  # the claimed epoch 1, answered diverging (0, 10)
    assert (10, 0) in leader.fetched  # then fetched with the epoch its records carry
    assert all_bytes(mine) == all_bytes(lead) and mine.leader_epoch_cache.entries == [(0, 0), (2, 10)]
