"""Replication without sockets: a follower's catch-up time (Kafka's Replica.updateFetchState), the ISR
shrinking after replica.lag.time.max.ms and expanding once caught up, ISR changes applied only once
written (a stale write is not applied), follower appends verbatim with the leader's high watermark, and
the follower's truncation rule (KIP-279)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from helpers import FetchThroughKio
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.record_batch import build_record_batch
from kaflite.server.purgatory import Purgatory
from kaflite.server.replica import Partition, PartitionState, ReplicaManager, TopicSettings
from kaflite.server.replica.fetcher import (
    FetcherConfig,
    ReplicaFetcher,
    ReplicaFetcherManager,
    truncation_target,
)
from kaflite.server.replica.partition import ISR_RETRY_BACKOFF_MS
from kaflite.storage import LogManager
from kaflite.storage.config import LogConfig
from kaflite.storage.log import Log

ME, F1, F2 = 1, 2, 3


def batch(n: int = 1) -> bytes:
    return build_record_batch([(None, b"v%d" % i, []) for i in range(n)])


def leader(tmp: Path, isr: tuple[int, ...] = (ME, F1, F2), epoch: int = 0) -> Partition:
    p = Partition("t", 0, ME, Log(tmp / "leader-0"))
    p.apply_state(PartitionState(ME, epoch, 0, (ME, F1, F2), isr))
    return p


def test_catch_up_time_and_out_of_sync(tmp_path: Path) -> None:
    p = leader(tmp_path)
    p.append_records_to_leader(batch(5), 1, 0)
    assert p.out_of_sync_replicas(1_000, 4_000) == ()  # the election's grace: counted from now
    p.update_follower_fetch_state(F1, 5, 2_000)  # at the leader's end: caught up at 2,000
    p.update_follower_fetch_state(F2, 3, 2_000)  # behind
    assert p.out_of_sync_replicas(5_500, 4_000) == (F2,)  # F2 last caught up at the grace start (1,000)
    p.append_records_to_leader(batch(2), 1, 0)  # leader now at 7
    # F2 reaches what the leader had at its previous fetch (5): caught up as of that fetch (2,000)
    p.update_follower_fetch_state(F2, 5, 6_000)
    assert p.out_of_sync_replicas(5_500, 4_000) == ()  # 3,500 ms since 2,000: both in sync
    assert p.out_of_sync_replicas(6_500, 4_000) == (F1, F2)  # neither caught up since 2,000


def test_can_join_isr_needs_the_high_watermark_and_the_epoch_start(tmp_path: Path) -> None:
    p = leader(tmp_path, isr=(ME, F1))
    p.append_records_to_leader(batch(4), 1, 0)
    p.update_follower_fetch_state(F1, 4, 10)
    assert p.high_watermark == 4
    p.update_follower_fetch_state(F2, 3, 10)
    assert not p.can_join_isr(F2)
    p.update_follower_fetch_state(F2, 4, 20)
    assert p.can_join_isr(F2)
    assert not p.can_join_isr(F1)  # already in
    assert not p.can_join_isr(99)  # not a replica


def test_follower_appends_verbatim_and_caps_the_leaders_high_watermark(tmp_path: Path) -> None:
    lead = leader(tmp_path, isr=(ME,))
    lead.append_records_to_leader(batch(3), 1, 0)
    lead.append_records_to_leader(batch(2), 1, 0)
    assert lead.log is not None
    data = b"".join(bytes(r) for r in lead.log.read(0, 1 << 20, min_one_message=True).records)
    f = Partition("t", 0, F1, Log(tmp_path / "follower-0"))
    f.apply_state(PartitionState(ME, 0, 0, (ME, F1), (ME, F1)))
    f.append_records_to_follower(data, 4)
    assert f.log is not None and f.log.log_end_offset == 5 and f.high_watermark == 4
    again = b"".join(bytes(r) for r in f.log.read(0, 1 << 20, min_one_message=True).records)
    assert again == data  # same offsets, same bytes
    f.append_records_to_follower(b"", 9)
    assert f.high_watermark == 5  # capped by its own log end offset
    with pytest.raises(KafkaError) as e:
        lead.append_records_to_follower(data, 0)
    assert e.value.code is ErrorCode.not_leader_or_follower


def _rm(tmp: Path, writer: Any, min_isr: int = 2) -> tuple[ReplicaManager, LogManager]:
    mgr = LogManager([tmp])
    clock = {"now": 0}
    rm = ReplicaManager(ME, mgr, Purgatory(), lambda: clock["now"],
                        lambda _t: TopicSettings(LogConfig(), min_isr, None))
    rm.isr_writer = writer
    rm.replica_lag_time_max_ms = 1_000
    rm.clock = clock  # type: ignore[attr-defined]
    return rm, mgr


def _publish(rm: ReplicaManager, isr: tuple[int, ...]) -> Partition:
    import uuid

    from kaflite.cluster.metadata import PartitionRegistration, TopicImage

    t = TopicImage("t", uuid.uuid5(uuid.NAMESPACE_DNS, "t"), (PartitionRegistration((ME, F1, F2), isr, ME, 0, 0),), {})
    rm.on_image(rm.image, rm.image.evolve(topics={"t": t}))
    return rm.get_partition("t", 0)


def test_isr_shrinks_and_expands_only_once_written(tmp_path: Path) -> None:
    calls: list[tuple[tuple[int, ...], int]] = []
    answers: list[bool] = []

    async def writer(topic: str, partition: int, state: PartitionState, isr: tuple[int, ...]) -> PartitionState | None:
        calls.append((isr, state.partition_epoch))
        ok = answers.pop(0)
        return PartitionState(state.leader, state.leader_epoch, state.partition_epoch + 1, state.replicas, isr) \
            if ok else None

    async def scenario() -> None:
        rm, mgr = _rm(tmp_path, writer)
        try:
            part = _publish(rm, (ME, F1, F2))
            rm.append_records("t", 0, batch(2), 1)
            clock = rm.clock  # type: ignore[attr-defined]
            clock["now"] = 1_000
            rm.record_follower_fetch(part, F1, 2)  # caught up at 1,000; F2 never fetched (grace from 0)
            clock["now"] = 1_500
            answers.append(False)  # the first write finds the znode moved: not applied
            assert rm.maybe_shrink_isr() == 1
            await asyncio.sleep(0.01)
            assert calls == [((ME, F1), 0)] and part.isr == (ME, F1, F2)
            rm.record_follower_fetch(part, F1, 2)
            assert rm.maybe_shrink_isr() == 0  # refused a moment ago: not proposed again before the backoff
            clock["now"] = 1_500 + ISR_RETRY_BACKOFF_MS
            answers.append(True)
            assert rm.maybe_shrink_isr() == 1
            await asyncio.sleep(0.01)
            assert part.isr == (ME, F1) and part.state.partition_epoch == 1
            assert part.high_watermark == 2  # F2 no longer holds it back
            # F2 catches up: it rejoins (assignment order)
            answers.append(True)
            rm.record_follower_fetch(part, F2, 2)
            await asyncio.sleep(0.01)
            assert part.isr == (ME, F1, F2) and calls[-1] == ((ME, F1, F2), 1)
        finally:
            mgr.close()

    asyncio.run(scenario())


@pytest.mark.parametrize(("asked", "leader_epoch", "end", "expected"), [
    (2, 2, 7, 7),  # same epoch: its end at the leader
    (2, 2, 99, 10),  # never beyond our own end
    (2, 1, 6, 5),  # an older epoch: where it ended here (5) caps the leader's answer
    (2, -1, -1, 3),  # the leader knows nothing of it: back to our high watermark
])
def test_truncation_rule(tmp_path: Path, asked: int, leader_epoch: int, end: int, expected: int) -> None:
    log = Log(tmp_path / "t-0")
    for epoch in (1, 1, 1, 1, 1, 2, 2, 2, 2, 2):  # one record per batch: offsets 0-4 in epoch 1, 5-9 in 2
        log.append(batch(), leader_epoch=epoch)
    log.update_high_watermark(3)
    part = Partition("t", 0, F1, log)
    part.apply_state(PartitionState(ME, 3, 0, (ME, F1), (ME, F1)))
    target = truncation_target(log.leader_epoch_cache.entries, log.log_end_offset, log.high_watermark, asked,
                               leader_epoch, end)
    assert target.complete and target.offset == expected


def test_a_reassignment_replica_set_is_adopted_at_the_same_epochs(tmp_path: Path) -> None:
    # the replica set comes from the topic znode (no epoch of its own): a reassignment's new set is
    # adopted without a new leader or partition epoch; an older state still is not
    p = Partition("t", 0, ME, Log(tmp_path / "t-0"))
    p.apply_state(PartitionState(ME, 3, 7, (ME, F1), (ME, F1)))
    p.append_records_to_leader(batch(2), 1, 0)
    p.update_follower_fetch_state(F1, 2, 10)
    assert p.apply_state(PartitionState(ME, 3, 7, (F2, ME, F1), (ME, F1), removing=(F1,)))
    assert p.state.replicas == (F2, ME, F1) and p.state.removing == (F1,) and p.state.isr == (ME, F1)
    assert not p.apply_state(PartitionState(ME, 3, 7, (F2, ME, F1), (ME, F1), removing=(F1,)))  # nothing new
    assert not p.apply_state(PartitionState(ME, 2, 9, (ME,), (ME,)))  # older leader epoch
    # the move completes: F1 leaves the set, its reported offset is forgotten
    assert p.apply_state(PartitionState(ME, 3, 7, (F2, ME), (ME, F1)))
    assert p.follower_log_end_offset(F1) == -1


def test_a_replica_being_removed_does_not_rejoin_once_the_targets_are_in_sync(tmp_path: Path) -> None:
    # RS [F2, ME, F1] moving from [ME, F1] to [F2, ME]: F1 may come back while F2 is still catching up
    # (Kafka's leader would take it), but not once every target replica is in the ISR, when the controller
    # is completing the move and takes F1 out
    p = Partition("t", 0, ME, Log(tmp_path / "t-0"))
    p.apply_state(PartitionState(ME, 1, 0, (F2, ME, F1), (ME,), removing=(F1,)))
    p.append_records_to_leader(batch(3), 1, 0)
    p.update_follower_fetch_state(F1, 3, 10)
    assert p.can_join_isr(F1)  # the target replica F2 is not in sync yet
    p.apply_state(PartitionState(ME, 1, 1, (F2, ME, F1), (ME, F2), removing=(F1,)))
    p.update_follower_fetch_state(F1, 3, 20)
    assert not p.can_join_isr(F1)
    p.update_follower_fetch_state(F2, 3, 20)
    assert not p.can_join_isr(F2)  # already in


def test_an_isr_write_in_flight_keeps_a_replica_set_adopted_meanwhile(tmp_path: Path) -> None:
    # the leader writes an ISR while a reassignment's new replica set (same epochs) arrives: the written
    # state must not bring the old replica set back
    import uuid

    from kaflite.cluster.metadata import PartitionRegistration, TopicImage

    gate: asyncio.Event | None = None

    async def writer(topic: str, partition: int, state: PartitionState, isr: tuple[int, ...]) -> PartitionState | None:
        assert gate is not None
        await gate.wait()
        return PartitionState(state.leader, state.leader_epoch, state.partition_epoch + 1, state.replicas, isr)

    async def scenario() -> None:
        nonlocal gate
        gate = asyncio.Event()
        rm, mgr = _rm(tmp_path, writer)
        try:
            part = _publish(rm, (ME, F1))
            rm.append_records("t", 0, batch(2), 1)
            rm.record_follower_fetch(part, F1, 2)
            rm.record_follower_fetch(part, F2, 2)  # F2 caught up: its ISR write starts
            moved = TopicImage("t", uuid.uuid5(uuid.NAMESPACE_DNS, "t"),
                               (PartitionRegistration((ME, F1), (ME, F1), ME, 0, 0),), {})
            rm.on_image(rm.image, rm.image.evolve(topics={"t": moved}))  # F2 removed, same epochs
            assert part.state.replicas == (ME, F1)
            gate.set()
            await asyncio.sleep(0.01)
            assert part.state.partition_epoch == 1 and part.state.replicas == (ME, F1)
        finally:
            mgr.close()

    asyncio.run(scenario())


def test_a_leader_behind_the_followers_epoch_is_retried_soon_other_errors_after_the_backoff() -> None:
    from kaflite.server.replica.fetcher import LEADER_BEHIND_RETRY_MS, error_delay_ms, idle_wait_s

    # UNKNOWN_LEADER_EPOCH: the leader has not applied the newer state yet (it will within milliseconds)
    assert error_delay_ms(ErrorCode.unknown_leader_epoch, 1000) == LEADER_BEHIND_RETRY_MS < 1000
    assert error_delay_ms(ErrorCode.unknown_leader_epoch, 10) == 10  # never longer than the backoff
    for code in (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch, ErrorCode.unknown_topic_or_partition):
        assert error_delay_ms(code, 1000) == 1000
    # an idle fetcher sleeps until its first delayed partition is due, at most the backoff
    assert idle_wait_s([], 100.0, 1000) == 1.0
    assert idle_wait_s([100.05, 100.5], 100.0, 1000) == pytest.approx(0.05)
    assert idle_wait_s([99.0], 100.0, 1000) == 1.0  # already due: the next round fetches it
    assert idle_wait_s([103.0], 100.0, 1000) == 1.0


@pytest.mark.parametrize(("code", "delay_s"), [
    (ErrorCode.unknown_leader_epoch, 0.05),  # the new leader has not applied its election yet: soon
    (ErrorCode.not_leader_or_follower, 1.0),  # the image will move the partition: the backoff
])
def test_truncation_answered_a_leader_behind_is_retried_soon(tmp_path: Path, code: ErrorCode, delay_s: float) -> None:
    """The OffsetForLeaderEpoch of a follower's truncation answered UNKNOWN_LEADER_EPOCH is retried after
    50 ms, as a Fetch answered so: with replica.fetch.backoff.ms (1 s) every acks=all produce on the new
    leader waited a second after a controlled shutdown (test_cluster_clients measured it)."""
    import datetime

    from kio.schema.offset_for_leader_epoch.v4.response import (
        EpochEndOffset,
        OffsetForLeaderEpochResponse,
        OffsetForLeaderTopicResult,
    )
    from kio.schema.types import TopicName
    from kio.static.primitive import i32, i32Timedelta

    from kaflite.server.replica.fetcher import _FetchState

    log = Log(tmp_path / "t-0")
    log.append(batch(), leader_epoch=0)
    part = Partition("t", 0, F1, log)
    part.apply_state(PartitionState(ME, 1, 1, (ME, F1), (ME, F1)))

    class Leader(FetchThroughKio):  # the new leader's answer, as BrokerConnection.request returns it
        async def request(self, req: Any, schema: Any, timeout: float) -> Any:
            return OffsetForLeaderEpochResponse(
                throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
                topics=(OffsetForLeaderTopicResult(topic=TopicName("t"), partitions=(
                    EpochEndOffset(error_code=code, partition=i32(0)),)),))  # fmt: skip

        def close(self) -> None:
            pass

    class Replicas:
        def partition_or_none(self, topic: str, partition: int) -> Partition:
            return part

    async def scenario() -> float:
        manager = ReplicaFetcherManager(F1, Replicas(), FetcherConfig(), lambda: None)  # type: ignore[arg-type]
        fetcher = ReplicaFetcher(manager, ME, 0)
        fetcher._conn = Leader()  # type: ignore[assignment]
        fetcher.partitions[("t", 0)] = state = _FetchState(1)
        now = asyncio.get_running_loop().time()
        await fetcher._truncate([("t", 0)])
        assert state.truncating and log.log_end_offset == 1  # not truncated: asked again later
        return state.delayed_until - now

    assert asyncio.run(scenario()) == pytest.approx(delay_s, abs=0.02)


# -- issue 24 finding 1: an ISR expansion in flight ------------------------------------------------------
def _gated_writer(gate: list[asyncio.Event], calls: list[tuple[int, ...]], ok: list[bool]) -> Any:
    async def writer(topic: str, partition: int, state: PartitionState, isr: tuple[int, ...]) -> PartitionState | None:
        calls.append(isr)
        await gate[0].wait()
        if not ok.pop(0):
            raise ConnectionError("ZooKeeper unreachable")
        return PartitionState(state.leader, state.leader_epoch, state.partition_epoch + 1, state.replicas, isr)
    return writer


def test_a_joining_replica_holds_the_high_watermark_while_its_isr_write_is_in_flight(tmp_path: Path) -> None:
    """The reproduction of issue 24 finding 1: ISR (ME) and F1 caught up at 5 starts the expansion; before,
    while the write was in flight, the ISR of the leader alone moved the high watermark to the log end (20)
    and answered acks=all at once, and the write then left F1 in the ISR 15 offsets behind the high
    watermark (electing it would lose committed records). Now F1 counts from the proposal on (Kafka's
    maximal ISR): the high watermark stays at F1's log end offset and acks=all waits for F1."""
    gate: list[asyncio.Event] = []
    calls: list[tuple[int, ...]] = []

    async def scenario() -> None:
        gate.append(asyncio.Event())
        rm, mgr = _rm(tmp_path, _gated_writer(gate, calls, [True]), min_isr=1)
        try:
            part = _publish(rm, (ME,))
            rm.append_records("t", 0, batch(5), 1)
            assert part.high_watermark == 5
            rm.record_follower_fetch(part, F1, 5)  # caught up: the expansion to (ME, F1) is being written
            await asyncio.sleep(0)
            assert calls == [(ME, F1)] and part.isr == (ME,)
            _p, result = rm.append_records("t", 0, batch(15), -1)  # acks=all while the write is in flight
            waiter = asyncio.ensure_future(rm.wait_committed(part, result.last_offset + 1, 10_000))
            await asyncio.sleep(0.01)
            assert part.high_watermark == 5  # not 20: F1 has only 5
            assert not waiter.done()  # acks=all waits for F1
            gate[0].set()
            await asyncio.sleep(0.01)
            assert part.isr == (ME, F1)
            assert part.high_watermark <= part.follower_log_end_offset(F1) == 5  # no member behind the HW
            assert not waiter.done()
            rm.record_follower_fetch(part, F1, 20)
            assert part.high_watermark == 20
            assert await asyncio.wait_for(waiter, 1) is ErrorCode.none
        finally:
            mgr.close()

    asyncio.run(scenario())


def test_a_failed_expansion_falls_back_to_the_written_isr_and_backs_off(tmp_path: Path) -> None:
    """A write that fails (ZooKeeper unreachable) leaves the written ISR as it was: the joining replica no
    longer holds the high watermark, and the leader proposes again only after ISR_RETRY_BACKOFF_MS (before,
    every follower fetch re-proposed it at once)."""
    gate: list[asyncio.Event] = []
    calls: list[tuple[int, ...]] = []

    async def scenario() -> None:
        gate.append(asyncio.Event())
        gate[0].set()
        rm, mgr = _rm(tmp_path, _gated_writer(gate, calls, [False, True]), min_isr=1)
        try:
            clock = rm.clock  # type: ignore[attr-defined]
            part = _publish(rm, (ME,))
            rm.append_records("t", 0, batch(5), 1)
            rm.record_follower_fetch(part, F1, 5)
            rm.append_records("t", 0, batch(3), 1)
            assert part.high_watermark == 5  # held by F1 while proposed
            await asyncio.sleep(0.01)
            assert calls == [(ME, F1)] and part.isr == (ME,)
            assert part.high_watermark == 8  # the written ISR is the leader alone again
            clock["now"] = ISR_RETRY_BACKOFF_MS - 1
            rm.record_follower_fetch(part, F1, 8)
            await asyncio.sleep(0.01)
            assert calls == [(ME, F1)]  # backing off: no second write yet
            clock["now"] = ISR_RETRY_BACKOFF_MS
            rm.record_follower_fetch(part, F1, 8)
            await asyncio.sleep(0.01)
            assert calls == [(ME, F1), (ME, F1)] and part.isr == (ME, F1)
        finally:
            mgr.close()

    asyncio.run(scenario())


# -- the safety invariants over random interleavings -------------------------------------------------------
_steps = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 5)),
    # at the leader's log end (-1: caught up, joins the ISR), or its own log end + k (may pass the leader's)
    st.tuples(st.just("fetch"), st.sampled_from([F1, F2]), st.sampled_from([-1, -1, 0, 1, 2, 5, 9])),
    st.tuples(st.just("tick"), st.integers(100, 900)),  # time passes, then the shrink check runs
    st.tuples(st.just("answer"), st.sampled_from(["written", "refused", "failed"])),
    st.tuples(st.just("controller_drops"), st.sampled_from([F1, F2])),  # e.g. its session expired
    st.tuples(st.just("image"),),  # the leader's watch delivers ZooKeeper's state
), max_size=20)


# the reproduction of finding 1 (before: the high watermark passed the joining replica, 5 > 3)
@example(steps=[("append", 3), ("fetch", F1, -1), ("append", 2), ("answer", "written")], min_isr=1, start_isr=(ME,))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=_steps, min_isr=st.sampled_from([1, 1, 2, 3]), start_isr=st.sampled_from([(ME,), (ME, F1), (ME, F1, F2)]))
def test_isr_and_high_watermark_invariants(tmp_path_factory: pytest.TempPathFactory, steps: list,
                                           min_isr: int, start_isr: tuple[int, ...]) -> None:
    """A leader driven through random interleavings of appends, follower fetches (some beyond its log
    end), shrink checks, ISR writes answered written / refused (the znode moved) / failed, the controller
    dropping a replica, and images: the high watermark never goes back, never passes what a member of the
    maximal ISR or of ZooKeeper's ISR (whom the controller may elect) has, never passes the leader's log end,
    and moves only with enough replicas in the written ISR; a fetch beyond the log end changes nothing."""
    import uuid

    from hypothesis import note

    from kaflite.cluster.metadata import PartitionRegistration, TopicImage

    tmp = tmp_path_factory.mktemp("inv")
    zk = {"epoch": 0, "isr": start_isr}  # the state znode: version and ISR
    writes: list[tuple[asyncio.Future[str], PartitionState, tuple[int, ...]]] = []

    async def writer(topic: str, partition: int, state: PartitionState, isr: tuple[int, ...]) -> PartitionState | None:
        fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        writes.append((fut, state, isr))
        how = await fut
        if how == "failed":
            raise ConnectionError("ZooKeeper unreachable")
        if how == "refused" or zk["epoch"] != state.partition_epoch:  # compare-and-set at the version held
            return None
        zk["epoch"], zk["isr"] = zk["epoch"] + 1, isr
        return PartitionState(state.leader, state.leader_epoch, zk["epoch"], state.replicas, isr)

    def publish(rm: ReplicaManager) -> None:
        t = TopicImage("t", uuid.uuid5(uuid.NAMESPACE_DNS, "t"),
                       (PartitionRegistration((ME, F1, F2), zk["isr"], ME, 0, zk["epoch"]),), {})
        rm.on_image(rm.image, rm.image.evolve(topics={"t": t}))

    async def scenario() -> None:
        rm, mgr = _rm(tmp, writer, min_isr=min_isr)
        clock = rm.clock  # type: ignore[attr-defined]
        try:
            publish(rm)
            part = rm.get_partition("t", 0)
            leo = {F1: 0, F2: 0}  # each follower's log end offset (what it last reported)
            seen = part.high_watermark
            for step in steps:
                note(f"{step} -> isr {part.isr} maximal {part.maximal_isr} zk {zk} hw {part.high_watermark} "
                     f"leader leo {part.log_end_offset} followers {leo}")
                if step[0] == "append":
                    rm.append_records("t", 0, batch(step[1]), 1)
                elif step[0] == "fetch":
                    f = step[1]
                    offset = part.log_end_offset if step[2] < 0 else leo[f] + step[2]
                    if offset > part.log_end_offset:
                        before = (part.high_watermark, part.follower_log_end_offset(f), part.isr)
                        with pytest.raises(KafkaError) as e:
                            rm.record_follower_fetch(part, f, offset)
                        assert e.value.code is ErrorCode.offset_out_of_range
                        assert (part.high_watermark, part.follower_log_end_offset(f), part.isr) == before
                    else:
                        leo[f] = offset
                        rm.record_follower_fetch(part, f, offset)
                elif step[0] == "tick":
                    clock["now"] += step[1]
                    rm.maybe_shrink_isr()
                elif step[0] == "answer":
                    waiting = [w for w in writes if not w[0].done()]
                    if waiting:
                        waiting[0][0].set_result(step[1])
                elif step[0] == "controller_drops":
                    if step[1] in zk["isr"]:
                        zk["epoch"], zk["isr"] = zk["epoch"] + 1, tuple(r for r in zk["isr"] if r != step[1])
                        publish(rm)
                else:
                    publish(rm)
                for _ in range(3):  # let the write tasks run
                    await asyncio.sleep(0)
                hw = part.high_watermark
                assert hw >= seen, f"the high watermark went back from {seen} to {hw}"
                assert hw <= part.log_end_offset
                for r in set(part.maximal_isr) | set(zk["isr"]):
                    if r != ME:
                        assert hw <= leo[r], \
                            f"hw {hw} passes replica {r} (log end {leo[r]}) of ISR {part.maximal_isr} / {zk['isr']}"
                if hw > seen:
                    assert len(part.isr) >= min(min_isr, 3), f"the high watermark moved under min ISR {part.isr}"
                seen = hw
            for fut, _s, _i in writes:  # end the tasks still waiting
                if not fut.done():
                    fut.set_result("refused")
            await asyncio.sleep(0)
        finally:
            mgr.close()

    asyncio.run(scenario())
