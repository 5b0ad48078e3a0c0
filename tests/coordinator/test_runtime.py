"""The coordinator runtime in-process: group shards over a writer whose commits the test completes by hand
(what the replica layer does when the high watermark moves), so every rule is checked without sockets."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Iterable, Sequence
from typing import Any

import pytest

from coordinator.coord_harness import RANGE_RR
from kaflite.coordinator import CoordinatorConfig, GroupCoordinator
from kaflite.coordinator import messages as m
from kaflite.coordinator.runtime import CoordinatorRuntime, Record, ShardState, coordinator_error
from kaflite.protocol.errors import ErrorCode, KafkaError


class HandWriter:
    """A log per partition; an append is written at once and committed when the test says so. Its position
    is a count of the changes made to the partition's log (appends, another leader's records, truncations)."""

    def __init__(self) -> None:
        self.logs: dict[int, list[Record]] = {}
        self.changes: dict[int, int] = {}
        self.uncommitted: list[tuple[int, asyncio.Future[None]]] = []
        self.fail_next: BaseException | None = None
        self.slow_reads: asyncio.Future[None] | None = None
        self.not_leader = False
        self.instant = False

    def append(self, partition: int, records: Sequence[Record]) -> Awaitable[None] | None:
        if self.fail_next is not None:
            exc, self.fail_next = self.fail_next, None
            raise exc
        self.logs.setdefault(partition, []).extend(records)
        self.changes[partition] = self.changes.get(partition, 0) + 1
        if self.instant:
            return None  # committed by the append (one replica)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.uncommitted.append((partition, fut))
        return fut

    def position(self, partition: int) -> int:
        return self.changes.get(partition, 0)

    def other_leader_wrote(self, partition: int, records: Sequence[Record]) -> None:
        """What replication brings while another broker leads: its records, committed there."""
        self.logs.setdefault(partition, []).extend(records)
        self.changes[partition] = self.changes.get(partition, 0) + 1

    def truncate(self, partition: int, length: int) -> None:
        """A follower's truncation to its new leader's log (records the leader never had are gone)."""
        del self.logs[partition][length:]
        self.changes[partition] = self.changes.get(partition, 0) + 1

    def commit_all(self) -> None:
        for _, fut in self.uncommitted:
            fut.set_result(None)
        self.uncommitted.clear()

    def committed_end(self, partition: int) -> Awaitable[None] | None:
        if self.not_leader:
            raise KafkaError(ErrorCode.not_leader_or_follower, "moved")
        if not any(p == partition for p, _ in self.uncommitted):
            return None
        return asyncio.gather(*(fut for p, fut in self.uncommitted if p == partition))

    def read(self, partition: int) -> Iterable[Record] | Awaitable[Iterable[Record]]:
        records = list(self.logs.get(partition, []))
        if self.slow_reads is None:
            return records

        async def later(gate: asyncio.Future[None]) -> Iterable[Record]:
            await gate
            return records
        return later(self.slow_reads)


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 10))


def make_runtime(writer: HandWriter) -> CoordinatorRuntime[GroupCoordinator]:
    counter = itertools.count(1)
    config = CoordinatorConfig(group_initial_rebalance_delay_ms=0, offsets_topic_num_partitions=1)
    return CoordinatorRuntime(lambda p: GroupCoordinator(config, new_uuid=lambda: f"u{next(counter)}", active=False),
                              writer, lambda: 0, "test coordinator")


def commit_req(offset: int, group: str = "g") -> m.OffsetCommitRequest:
    return m.OffsetCommitRequest(group, (("t", (m.OffsetCommitPartition(0, offset),)),))


def commit_req_record(offset: int, group: str = "g") -> Record:
    """The OffsetCommit record a coordinator writes for `commit_req(offset, group)`."""
    config = CoordinatorConfig(group_initial_rebalance_delay_ms=0, offsets_topic_num_partitions=1)
    (record,) = GroupCoordinator(config).handle_offset_commit(commit_req(offset, group), 0).records
    return record.key, record.value


def commit_step(offset: int, group: str = "g") -> Callable[[GroupCoordinator, int], Any]:
    return lambda shard, now: shard.handle_offset_commit(commit_req(offset, group), now)


def fetch_step(group: str = "g") -> Callable[[GroupCoordinator, int], Any]:
    return lambda shard, now: shard.handle_offset_fetch(m.OffsetFetchRequest(group, (("t", (0,)),)), now)


def join_step(token: Hashable, member_id: str = "", version: int = 3) -> Callable[[GroupCoordinator, int], Any]:
    req = m.JoinGroupRequest("g", member_id, "consumer", RANGE_RR, 10_000, 10_000, version=version, token=token)
    return lambda shard, now: shard.handle_join(req, now)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_answers_leave_only_once_the_write_is_committed() -> None:
    async def body() -> None:
        writer = HandWriter()
        rt = make_runtime(writer)
        await rt.load(0)
        answer = rt.write(0, commit_step(7))
        await settle()
        assert len(writer.logs[0]) == 1 and not answer.done()  # written, not committed: no answer yet
        later_read = rt.write(0, fetch_step())  # no records, but it read the pending write's state
        listed = rt.write(0, lambda shard, now: shard.handle_list_groups((), now))  # reads wait the same way
        await settle()
        assert not later_read.done() and not listed.done()
        writer.commit_all()
        assert [g.group_id for g in await listed] == ["g"]
        resp = await answer
        assert resp.topics == (("t", ((0, ErrorCode.none),)),)
        assert (await later_read).topics[0][1][0].offset == 7
    run(body)


def test_failed_write_answers_mapped_error_later_steps_not_coordinator_and_reloads() -> None:
    async def body() -> None:
        writer = HandWriter()
        rt = make_runtime(writer)
        await rt.load(0)
        first = rt.write(0, commit_step(5))
        writer.commit_all()
        await first
        pending = rt.write(0, commit_step(6))  # written, waits for its commit
        writer.fail_next = OSError(28, "No space left on device")
        failed = rt.write(0, commit_step(9))  # cannot be written
        with pytest.raises(KafkaError) as e:
            await failed
        assert e.value.code is ErrorCode.not_coordinator  # KAFKA_STORAGE_ERROR, as Kafka maps it
        with pytest.raises(KafkaError) as e:
            await pending  # its state was lost with the reload: not reported as committed
        assert e.value.code is ErrorCode.not_coordinator
        assert rt.state(0) is ShardState.ACTIVE  # reloaded from the log: 5, then the written 6
        writer.commit_all()
        assert (await rt.write(0, fetch_step())).topics[0][1][0].offset == 6
        assert 9 not in [v for _, v in writer.logs[0]]
    run(body)


def test_commit_wait_failure_and_unload_answer_every_parked_request() -> None:
    async def body() -> None:
        writer = HandWriter()
        rt = make_runtime(writer)
        await rt.load(0)
        token, parked = rt.park(0)
        rt.write(0, join_step(token), token)  # v3: added at once, parked until the join phase ends
        writer.commit_all()
        await settle()
        assert not parked.done()
        answer = rt.write(0, commit_step(4, group="simple"))
        _, fut = writer.uncommitted.pop()
        fut.set_exception(KafkaError(ErrorCode.not_enough_replicas))  # the commit wait fails
        with pytest.raises(KafkaError) as e:
            await answer
        assert e.value.code is ErrorCode.coordinator_not_available  # Kafka's mapping
        with pytest.raises(KafkaError) as e:
            await parked  # the shard was reloaded: what it held is answered, the client rejoins
        assert e.value.code is ErrorCode.not_coordinator
        # a request parked in a shard that is then unloaded (failover) is answered NOT_COORDINATOR
        token, parked = rt.park(0)
        rt.write(0, join_step(token, version=3), token)
        await settle()
        writer.commit_all()
        await settle()
        rt.unload(0)
        with pytest.raises(KafkaError) as e:
            await parked
        assert e.value.code is ErrorCode.not_coordinator
        with pytest.raises(KafkaError) as e:
            await rt.write(0, fetch_step())
        assert e.value.code is ErrorCode.not_coordinator
    run(body)


def test_load_in_progress_then_active_with_the_log_replayed() -> None:
    async def body() -> None:
        writer = HandWriter()
        rt = make_runtime(writer)
        await rt.load(0)
        fut = rt.write(0, commit_step(3))
        writer.commit_all()
        await fut
        writer.slow_reads = asyncio.get_running_loop().create_future()
        loading = rt.load(0)  # a reader off the event loop: the shard is LOADING meanwhile
        assert rt.state(0) is ShardState.LOADING
        with pytest.raises(KafkaError) as e:
            await rt.write(0, fetch_step())
        assert e.value.code is ErrorCode.coordinator_load_in_progress
        writer.slow_reads.set_result(None)
        await loading
        assert (await rt.write(0, fetch_step())).topics[0][1][0].offset == 3
    run(body)


def test_a_step_that_raises_answers_unknown_server_error_and_rebuilds_the_shard() -> None:
    async def body() -> None:
        writer = HandWriter()
        rt = make_runtime(writer)
        await rt.load(0)
        before = rt.shard(0)

        def broken(shard: GroupCoordinator, now: int) -> Any:
            shard.groups.clear()  # half-changed state ...
            raise RuntimeError("bug")  # ... then a bug
        with pytest.raises(KafkaError) as e:
            await rt.write(0, broken)
        assert e.value.code is ErrorCode.unknown_server_error
        assert rt.shard(0) is not before and rt.state(0) is ShardState.ACTIVE
    run(body)


@pytest.mark.parametrize(("raised", "answered"), [
    (OSError(5, "EIO"), ErrorCode.not_coordinator),
    (KafkaError(ErrorCode.kafka_storage_error), ErrorCode.not_coordinator),
    (KafkaError(ErrorCode.not_leader_or_follower), ErrorCode.not_coordinator),
    (KafkaError(ErrorCode.unknown_topic_or_partition), ErrorCode.coordinator_not_available),
    (KafkaError(ErrorCode.not_enough_replicas), ErrorCode.coordinator_not_available),
    (KafkaError(ErrorCode.not_enough_replicas_after_append), ErrorCode.coordinator_not_available),
    (KafkaError(ErrorCode.request_timed_out), ErrorCode.coordinator_not_available),
    (KafkaError(ErrorCode.message_too_large), ErrorCode.unknown_server_error),
    (KafkaError(ErrorCode.record_list_too_large), ErrorCode.unknown_server_error),
    (KafkaError(ErrorCode.coordinator_load_in_progress), ErrorCode.coordinator_load_in_progress),
    (RuntimeError("bug"), ErrorCode.unknown_server_error),
])
def test_error_mapping_is_kafkas(raised: BaseException, answered: ErrorCode) -> None:
    assert coordinator_error(raised) is answered


def test_leader_epochs_make_stale_load_and_unload_events_no_ops() -> None:
    """As Kafka's onElection / onResignation: an event older than the shard's epoch changes nothing; a
    resignation carries the epoch at which this broker stopped leading, so one at the shard's own epoch is
    honoured (the epoch it led at was what failover passed before, and every resignation was ignored)."""
    async def body() -> None:
        writer = HandWriter()
        rt = make_runtime(writer)
        await rt.load(0, leader_epoch=3)
        shard = rt.shard(0)
        await rt.load(0, leader_epoch=2)  # stale election
        rt.unload(0, leader_epoch=2)  # stale resignation: an election since superseded it
        assert rt.shard(0) is shard and rt.leader_epoch(0) == 3
        await rt.load(0, leader_epoch=5)  # re-elected, nothing written meanwhile: the shard stays
        assert rt.shard(0) is shard and rt.leader_epoch(0) == 5
        writer.fail_next = OSError(5, "EIO")
        with pytest.raises(KafkaError):
            await rt.write(0, commit_step(1))
        assert rt.shard(0) is not shard and rt.leader_epoch(0) == 5  # reloaded in the same epoch
        token, parked = rt.park(0)
        rt.unload(0, leader_epoch=5)  # no longer the leader as of the epoch it holds: resigned
        with pytest.raises(KafkaError) as e:
            await parked
        assert e.value.code is ErrorCode.not_coordinator and rt.state(0) is None
    run(body)


def test_an_election_replays_what_another_leader_wrote_since() -> None:
    """Issue 24: leadership went A -> B -> A and A never unloaded (a resignation it missed, or one it
    ignored): at the new epoch A's shard must be what the log says, B's commit included."""
    async def body() -> None:
        writer = HandWriter()
        writer.instant = True
        rt = make_runtime(writer)
        await rt.load(0, leader_epoch=1)
        await rt.write(0, commit_step(5))
        before = rt.shard(0)
        b_writer = HandWriter()  # B: a shard of its own over its replica, its records replicated into A's
        b_writer.logs[0] = list(writer.logs[0])
        b_writer.instant = True
        b = make_runtime(b_writer)
        await b.load(0, leader_epoch=2)
        await b.write(0, commit_step(9))
        writer.other_leader_wrote(0, b_writer.logs[0][len(writer.logs[0]):])
        await rt.load(0, leader_epoch=3)
        assert rt.shard(0) is not before and rt.leader_epoch(0) == 3
        assert (await rt.write(0, fetch_step())).topics[0][1][0].offset == 9
    run(body)


def test_an_election_after_a_truncation_drops_what_the_new_leader_never_had() -> None:
    """A wrote 7, not committed; B led without it (A truncated to B's log): re-elected, A must not answer 7."""
    async def body() -> None:
        writer = HandWriter()
        rt = make_runtime(writer)
        await rt.load(0, leader_epoch=1)
        first = rt.write(0, commit_step(5))
        writer.commit_all()
        await first
        lost = rt.write(0, commit_step(7))  # written, never committed: B was elected without it
        await settle()
        writer.truncate(0, 1)
        writer.uncommitted.clear()
        await rt.load(0, leader_epoch=3)
        with pytest.raises(KafkaError):
            await lost
        assert (await rt.write(0, fetch_step())).topics[0][1][0].offset == 5
    run(body)


def test_an_election_keeps_a_shard_that_holds_the_whole_log_and_only_that() -> None:
    """The epoch moved with this broker leading throughout (a follower left the ISR): the shard and the
    requests it holds stay. A record appended by another path (a transaction marker) since the shard's
    last read leaves its position unknown: the next election replays the log."""
    async def body() -> None:
        writer = HandWriter()
        rt = make_runtime(writer)
        await rt.load(0, leader_epoch=1)
        token, parked = rt.park(0)
        rt.write(0, join_step(token), token)  # v3: parked until the join phase ends
        writer.commit_all()
        await settle()
        shard = rt.shard(0)
        await rt.load(0, leader_epoch=2)
        assert rt.shard(0) is shard and rt.leader_epoch(0) == 2 and not parked.done()
        writer.other_leader_wrote(0, [])  # e.g. a marker appended by WriteTxnMarkers, not by this shard
        committed = rt.write(0, commit_step(3, group="simple"))  # its own append after that one
        writer.commit_all()
        await committed
        await rt.load(0, leader_epoch=3)
        assert rt.shard(0) is not shard
        with pytest.raises(KafkaError) as e:
            await parked
        assert e.value.code is ErrorCode.not_coordinator
        assert (await rt.write(0, fetch_step("simple"))).topics[0][1][0].offset == 3
    run(body)


def test_a_load_in_flight_is_kept_or_restarted_by_an_election() -> None:
    async def body() -> None:
        writer = HandWriter()
        rt = make_runtime(writer)
        writer.slow_reads = asyncio.get_running_loop().create_future()
        first = rt.load(0, leader_epoch=1)
        again = rt.load(0, leader_epoch=2)  # nothing changed: the same load goes on
        assert again is first and rt.leader_epoch(0) == 2
        writer.other_leader_wrote(0, [commit_req_record(4)])
        restarted = rt.load(0, leader_epoch=3)  # the log moved under the read: read it again
        assert restarted is not first
        writer.slow_reads.set_result(None)
        await restarted
        assert (await rt.write(0, fetch_step())).topics[0][1][0].offset == 4
    run(body)


def test_a_failed_write_after_a_resignation_does_not_bring_the_shard_back() -> None:
    async def body() -> None:
        writer = HandWriter()
        rt = make_runtime(writer)
        await rt.load(0, leader_epoch=1)
        pending = rt.write(0, commit_step(5))
        await settle()
        rt.unload(0, leader_epoch=2)
        _, fut = writer.uncommitted.pop()
        fut.set_exception(KafkaError(ErrorCode.not_leader_or_follower))
        with pytest.raises(KafkaError) as e:
            await pending
        assert e.value.code is ErrorCode.not_coordinator
        await settle()
        assert rt.state(0) is None
    run(body)


class CounterShard:
    """A state machine that is not a group coordinator at all: the runtime must run it unchanged (as it will
    run the transaction coordinator's shards)."""

    def __init__(self) -> None:
        self.counts: dict[bytes, int] = {}

    def replay(self, key: bytes, value: bytes | None) -> None:
        if value is None:
            self.counts.pop(key, None)
        else:
            self.counts[key] = int(value)

    def activate(self, now_ms: int) -> Any:
        return Step()

    def poll_timers(self, now_ms: int) -> Any:
        return Step()

    def next_deadline(self) -> int | None:
        return None

    def incr(self, key: bytes) -> Any:
        value = str(self.counts.get(key, 0) + 1).encode()
        self.replay(key, value)
        return Step([Rec(key, value)], [(None, int(value))])


class Rec:
    def __init__(self, key: bytes, value: bytes | None) -> None:
        self.key, self.value = key, value


class Step:
    def __init__(self, records: list[Rec] | None = None, responses: list[tuple[Hashable, Any]] | None = None) -> None:
        self.records = records or []
        self.responses = responses or []
        self.timers: list[Any] = []


def test_the_runtime_runs_any_state_machine() -> None:
    async def body() -> None:
        writer = HandWriter()
        rt: CoordinatorRuntime[CounterShard] = CoordinatorRuntime(lambda p: CounterShard(), writer, lambda: 0, "counter")
        await rt.load(3)
        answers = [rt.write(3, lambda shard, now: shard.incr(b"x")) for _ in range(3)]
        writer.commit_all()
        assert [await a for a in answers] == [1, 2, 3]
        writer.fail_next = OSError(28, "ENOSPC")
        with pytest.raises(KafkaError):
            await rt.write(3, lambda shard, now: shard.incr(b"x"))
        assert rt.shard(3).counts == {b"x": 3}  # reloaded: the unwritten 4 is gone
        assert writer.logs[3] == [(b"x", b"1"), (b"x", b"2"), (b"x", b"3")]
    run(body)


def test_a_reload_over_an_uncommitted_tail_answers_only_once_it_is_committed() -> None:
    """Records written but not committed are replayed (they are the last written state), but nothing read
    from them leaves before they are committed."""
    async def body() -> None:
        writer = HandWriter()
        rt = make_runtime(writer)
        await rt.load(0)
        first = rt.write(0, commit_step(2))
        writer.commit_all()
        await first
        tail = rt.write(0, commit_step(7))  # written, not committed ...
        await settle()
        await rt.load(0)  # ... when the shard is reloaded (its answer: NOT_COORDINATOR)
        with pytest.raises(KafkaError):
            await tail
        read = rt.write(0, fetch_step())
        await settle()
        assert not read.done()  # 7 is in the shard, but not committed: no answer yet
        writer.commit_all()
        assert (await read).topics[0][1][0].offset == 7
    run(body)


def test_a_load_that_cannot_finish_leaves_the_partition_unloaded() -> None:
    async def body() -> None:
        writer = HandWriter()
        rt = make_runtime(writer)
        writer.not_leader = True  # leadership moved while loading
        await rt.load(0)
        assert rt.state(0) is None
        with pytest.raises(KafkaError) as e:
            await rt.write(0, fetch_step())
        assert e.value.code is ErrorCode.not_coordinator
        writer.not_leader = False
        await rt.load(0)
        assert rt.state(0) is ShardState.ACTIVE
    run(body)


def test_a_write_committed_by_its_append_still_answers_after_earlier_writes() -> None:
    async def body() -> None:
        writer = HandWriter()
        rt = make_runtime(writer)
        await rt.load(0)
        first = rt.write(0, commit_step(1))  # waits for its commit
        writer.instant = True
        second = rt.write(0, commit_step(2))  # committed at once, but answers leave in order
        await settle()
        assert not first.done() and not second.done()
        writer.commit_all()
        await first
        assert (await second).topics == (("t", ((0, ErrorCode.none),)),)
        third = rt.write(0, commit_step(3))
        assert third.done()  # nothing pending: answered within the step, no task
        assert (await rt.write(0, fetch_step())).topics[0][1][0].offset == 3
    run(body)


def test_listeners_hear_each_shard_made_active_or_unloaded_and_nothing_else() -> None:
    """What state kept beside the shards (the share groups) follows: (partition, shard) once a shard is
    active, (partition, None) once an active shard goes; a shard kept by an election is no change, a load
    still reading is not active yet, a reload after a failed write is both, and a raising listener is
    logged without stopping the others or the load."""
    async def body() -> None:
        writer = HandWriter()
        rt = make_runtime(writer)
        heard: list[tuple[int, GroupCoordinator | None]] = []

        def broken(_p: int, _s: GroupCoordinator | None) -> None:
            raise RuntimeError("a listener's bug")
        rt.add_listener(broken)
        rt.add_listener(lambda p, s: heard.append((p, s)))
        writer.slow_reads = asyncio.get_running_loop().create_future()
        loading = rt.load(0, leader_epoch=1)
        assert heard == []  # still reading its log: not active
        writer.slow_reads.set_result(None)
        writer.slow_reads = None
        await loading
        first = rt.shard(0)
        assert heard == [(0, first)]
        await rt.load(0, leader_epoch=2)  # the shard holds the whole log: kept, no change
        assert heard == [(0, first)]
        writer.fail_next = OSError(28, "No space left on device")
        with pytest.raises(KafkaError):
            await rt.write(0, commit_step(5))
        await settle()
        second = rt.shard(0)
        assert second is not first and heard == [(0, first), (0, None), (0, second)]
        rt.unload(0, leader_epoch=3)
        rt.unload(0, leader_epoch=4)  # nothing loaded: nothing to hear
        assert heard[3:] == [(0, None)]
    run(body)
