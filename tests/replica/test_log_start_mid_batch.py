"""A follower whose log start offset lies inside a batch, without sockets (the fetcher driven round by round
against a fake leader backed by a real Log, tests/replica/test_follower_truncation.py): its fetch offset
below the leader's log start restarts its log at that start, inside the leader's batch, and the leader's
next answer is that batch, whose base offset is below the follower's log end. Kafka's follower
(`Partition.appendRecordsToFollowerOrFutureReplica` on UnexpectedAppendOffsetException) then restarts its
log at the batch's base offset and appends it; a refusal instead marks the partition for a truncation that
changes nothing, and the follower fetches the same batch forever."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from kaflite.protocol.errors import KafkaError
from kaflite.server.replica import PartitionState
from kaflite.server.replica.fetcher import FetcherConfig, ReplicaFetcher, ReplicaFetcherManager, _FetchState
from kaflite.storage.log import Log
from replica.test_follower_truncation import (
    LEADER,
    ME,
    FakeLeader,
    Replicas,
    all_bytes,
    append,
    copy,
    follower,
    run,
)


def leader_with_mid_batch_start(tmp: Path, epoch: int = 0, follower: Log | None = None) -> Log:
    """Offsets 0-19 in four batches of five, committed (and copied by `follower`); DeleteRecords to 12
    (inside the batch 10-14)."""
    lead = Log(tmp / "leader" / "t-0")
    append(lead, epoch, 4, "a")
    lead.update_high_watermark(20)
    if follower is not None:
        copy(lead, follower, 20)
    assert lead.delete_records(12) == 12
    return lead


def check_converged(mine: Log, lead: Log) -> None:
    assert mine.log_end_offset == lead.log_end_offset
    assert mine.log_start_offset == lead.log_start_offset == 12
    assert mine.log_start_offset <= mine.high_watermark <= mine.log_end_offset
    assert all_bytes(mine) == all_bytes(lead)  # from the batch holding the log start on, byte for byte


def test_a_follower_truncated_to_its_mid_batch_log_start_catches_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The brief's scenario: the follower copied 0-19 and adopted the leader's log start 12; it restarts with
    a high watermark checkpoint behind (the load holds it at the log start, 12) and, on the leader change,
    truncates to that high watermark (no epoch history to compare: records of epoch -1), which drops the
    batch 10-14: its log ends at 10, below its start. Then it must copy the leader's batches again."""
    mine = Log(tmp_path / "follower" / "t-0")
    lead = leader_with_mid_batch_start(tmp_path, epoch=-1, follower=mine)
    mine.update_high_watermark(20)
    assert mine.delete_records(12) == 12
    mine.close()
    mine = Log(
        tmp_path / "follower" / "t-0",
        log_start_offset=12,
        recovery_point=20,
        high_watermark=0,
        had_clean_shutdown=True,
    )
    assert (mine.log_start_offset, mine.high_watermark, mine.log_end_offset) == (12, 12, 20)
    append(lead, -1, 2, "after")  # 20-29, written by the new leader meanwhile
    lead.update_high_watermark(30)
    leader = FakeLeader(lead)
    with caplog.at_level(logging.INFO, logger="kaflite.replica"):
        run(follower(mine, 1), leader, 1, rounds=6)
    fetch_offsets = [fo for fo, _e in leader.fetched]
    assert fetch_offsets[:2] == [10, 12]  # below the leader's start, then at it
    check_converged(mine, lead)
    assert any(
        "restarting the local log at the batch's base offset 10" in r.getMessage() for r in caplog.records
    )


def test_a_new_follower_fetching_below_a_mid_batch_log_start_catches_up(tmp_path: Path) -> None:
    """KAFKA-6975: an empty follower (a new replica) restarts at the leader's log start 12, inside the batch
    10-14, and the leader answers that batch."""
    lead = leader_with_mid_batch_start(tmp_path)
    mine = Log(tmp_path / "follower" / "t-0")
    leader = FakeLeader(lead)
    run(follower(mine, 0), leader, 0, rounds=5, truncating=False)
    assert [fo for fo, _e in leader.fetched][:2] == [0, 12]
    check_converged(mine, lead)
    assert mine.leader_epoch_cache.entries == lead.leader_epoch_cache.entries


def test_an_append_below_the_log_end_is_still_refused_when_the_log_holds_records(tmp_path: Path) -> None:
    """Kafka restarts the log only when it is empty (log end == log start) and the batch holds the log end:
    a batch that overlaps records the follower has is an error, and the follower truncates."""
    lead = leader_with_mid_batch_start(tmp_path)
    mine = Log(tmp_path / "follower" / "t-0")
    mine.truncate_fully_and_start_at(10)
    held = lead.read(12, 1 << 20, max_offset=15, min_one_message=True)
    records = b"".join(bytes(r) for r in held.records)  # the batch 10-14
    mine.append(records, assign_offsets=False)
    part = follower(mine, 0)
    assert part.restart_offset_for(records) is None
    with pytest.raises(KafkaError):
        part.append_records_to_follower(records, 20)
    assert mine.log_end_offset == 15


def test_the_restart_offset_is_read_from_the_first_batch_header_alone(tmp_path: Path) -> None:
    """`restart_offset_for` runs on the event loop over a refused fetch answer: it reads the first batch's
    header only, so damage further on (a CRC mismatch in the second batch) neither costs a walk of the set
    nor changes its answer (the append after the restart refuses the damaged set, and the fetcher then
    truncates). A first batch that is cut short, or not magic 2, still leaves the refusal standing."""
    lead = leader_with_mid_batch_start(tmp_path)
    mine = Log(tmp_path / "follower" / "t-0")
    mine.truncate_fully_and_start_at(12)
    part = follower(mine, 0)
    held = lead.read(12, 1 << 20, max_offset=20, min_one_message=True)
    records = bytearray(b"".join(bytes(r) for r in held.records))  # the batches 10-14 and 15-19
    first_size = int.from_bytes(records[8:12], "big") + 12  # batchLength + the 12 bytes it does not count
    assert part.restart_offset_for(bytes(records)) == 10
    records[-1] ^= 0xFF  # the second batch's last record byte: its CRC no longer matches
    assert part.restart_offset_for(bytes(records)) == 10
    assert part.restart_offset_for(bytes(records[: first_size - 1])) is None  # the first batch cut short
    records[16] = 1  # the first batch's magic
    assert part.restart_offset_for(bytes(records)) is None
    mine.close()
    lead.close()


def test_the_restart_runs_off_the_event_loop_and_gives_up_when_the_partition_moved(tmp_path: Path) -> None:
    """The restart deletes segments and writes checkpoints: a worker thread does it. If the partition left
    this fetcher meanwhile (a new leader), the fetched batch is not appended."""
    lead = leader_with_mid_batch_start(tmp_path)
    mine = Log(tmp_path / "follower" / "t-0")
    part = follower(mine, 0)

    async def scenario() -> None:
        manager = ReplicaFetcherManager(ME, Replicas(part), FetcherConfig(), lambda: None)  # type: ignore[arg-type]
        fetcher = ReplicaFetcher(manager, LEADER, 0)
        fetcher._conn = FakeLeader(lead)  # type: ignore[assignment]
        fetcher.partitions[("t", 0)] = _FetchState(0, truncating=False)
        await fetcher.do_work()  # out of range: restart at 12
        assert mine.log_start_offset == mine.log_end_offset == 12
        real = fetcher._off_loop
        off_loop: list[tuple[object, tuple[int, ...]]] = []

        async def moved(fn, *args):  # type: ignore[no-untyped-def]
            off_loop.append((fn, args))
            await real(fn, *args)
            part.apply_state(PartitionState(ME, 1, 1, (LEADER, ME), (ME,)))  # this broker leads now

        fetcher._off_loop = moved  # type: ignore[method-assign]
        await fetcher.do_work()
        assert off_loop == [(mine.truncate_fully_and_start_at, (10,))]

    asyncio.run(scenario())
    assert part.is_leader
    assert mine.log_end_offset == mine.log_start_offset == 10  # restarted, nothing appended


def test_a_replica_ending_below_its_start_answers_listoffsets_as_kafka_when_it_leads(tmp_path: Path) -> None:
    """Truncated to its mid-batch log start and elected before it fetched again (its log ends at 10, starts
    at 12): ListOffsets answers the log start for earliest and latest alike (Kafka's high watermark is held
    at the log start), never a latest below the earliest; OffsetForLeaderEpoch answers its election epoch
    from the log end, where the epoch starts (Kafka's makeLeader)."""
    from kaflite.server.handlers.list_offsets import EARLIEST, LATEST, lookup_offset

    mine = Log(tmp_path / "follower" / "t-0")
    leader_with_mid_batch_start(tmp_path, follower=mine)
    mine.update_high_watermark(20)
    assert mine.delete_records(12) == 12
    part = follower(mine, 0)
    assert mine.truncate_to(12)
    part.apply_state(PartitionState(ME, 1, 1, (LEADER, ME), (ME,)))
    assert part.is_leader
    assert lookup_offset(part, EARLIEST)[0] == 12
    assert lookup_offset(part, LATEST)[0] == 12
    assert mine.end_offset_for_epoch(1) == (1, 10)
