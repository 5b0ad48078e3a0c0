"""Partition without sockets: the high-watermark rule (min of the ISR's log end offsets, only forward,
restored from its checkpoint), leader-epoch fencing, acks=-1 completion, min.insync.replicas."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.record_batch import build_record_batch
from kaflite.server.replica import Partition, PartitionState
from kaflite.server.replica.partition import ISR_RETRY_BACKOFF_MS
from kaflite.storage import LogManager
from kaflite.storage.log import Log

ME, F1, F2 = 1, 2, 3


def batch(n: int = 1) -> bytes:
    return build_record_batch([(None, b"v%d" % i, []) for i in range(n)])


def leader(tmp: Path, isr: tuple[int, ...] = (ME,), replicas: tuple[int, ...] | None = None,
           epoch: int = 0, name: str = "t-0") -> Partition:
    p = Partition("t", 0, ME, Log(tmp / name))
    p.apply_state(PartitionState(ME, epoch, 0, replicas or isr, isr))
    return p


def test_single_replica_high_watermark_is_the_log_end(tmp_path: Path) -> None:
    p = leader(tmp_path)
    r = p.append_records_to_leader(batch(3), -1, 0)
    assert (r.base_offset, r.last_offset) == (0, 2)
    assert p.high_watermark == p.log_end_offset == 3
    assert p.check_enough_replicas_reach_offset(3) == (True, ErrorCode.none)
    assert p.last_stable_offset == 3


def test_high_watermark_is_the_smallest_isr_log_end_offset(tmp_path: Path) -> None:
    p = leader(tmp_path, isr=(ME, F1, F2))
    p.append_records_to_leader(batch(5), -1, 0)
    assert p.high_watermark == 0  # the followers have not reported: nothing is committed yet
    assert p.check_enough_replicas_reach_offset(5) == (False, ErrorCode.none)
    assert p.update_follower_fetch_state(F1, 5) is False  # F2 still unknown
    assert p.update_follower_fetch_state(F2, 3) is True
    assert p.high_watermark == 3
    assert p.update_follower_fetch_state(F2, 5) is True
    assert p.high_watermark == 5
    assert p.check_enough_replicas_reach_offset(5) == (True, ErrorCode.none)


def test_a_follower_outside_the_isr_does_not_hold_the_high_watermark(tmp_path: Path) -> None:
    p = leader(tmp_path, isr=(ME, F1), replicas=(ME, F1, F2))
    p.append_records_to_leader(batch(4), 1, 0)
    p.update_follower_fetch_state(F2, 0)
    assert p.high_watermark == 0
    p.update_follower_fetch_state(F1, 4)
    assert p.high_watermark == 4


def test_a_follower_going_back_never_lowers_the_high_watermark(tmp_path: Path) -> None:
    p = leader(tmp_path, isr=(ME, F1))
    p.append_records_to_leader(batch(4), 1, 0)
    p.update_follower_fetch_state(F1, 4)
    assert p.high_watermark == 4
    assert p.update_follower_fetch_state(F1, 1) is False
    assert p.high_watermark == 4


def test_isr_shrink_advances_the_high_watermark(tmp_path: Path) -> None:
    p = leader(tmp_path, isr=(ME, F1))
    p.append_records_to_leader(batch(2), 1, 0)
    assert p.high_watermark == 0
    assert p.apply_state(PartitionState(ME, 0, 1, (ME, F1), (ME,)))  # F1 left the ISR (partition epoch 1)
    assert p.high_watermark == 2


def test_stale_state_is_ignored(tmp_path: Path) -> None:
    p = leader(tmp_path, isr=(ME,), epoch=5)
    assert not p.apply_state(PartitionState(F1, 4, 9, (ME, F1), (F1,)))  # an older leader epoch
    assert not p.apply_state(PartitionState(F1, 5, 0, (ME, F1), (F1,)))  # same epochs: nothing new
    assert p.is_leader and p.leader_epoch == 5


def test_leader_epoch_fencing(tmp_path: Path) -> None:
    p = leader(tmp_path, epoch=3)
    assert p.check_current_leader_epoch(-1) == ErrorCode.none
    assert p.check_current_leader_epoch(3) == ErrorCode.none
    assert p.check_current_leader_epoch(2) == ErrorCode.fenced_leader_epoch
    assert p.check_current_leader_epoch(4) == ErrorCode.unknown_leader_epoch
    r = p.append_records_to_leader(batch(), 1, 0)
    assert p.epoch_for_offset(r.base_offset) == 3  # appends carry the leader epoch


def test_follower_refuses_leader_appends(tmp_path: Path) -> None:
    p = Partition("t", 0, ME, Log(tmp_path / "t-0"))
    p.apply_state(PartitionState(F1, 1, 0, (F1, ME), (F1, ME)))
    with pytest.raises(KafkaError) as e:
        p.append_records_to_leader(batch(), 1, 0)
    assert e.value.code == ErrorCode.not_leader_or_follower
    p.check_access(False, 1)  # a follower may serve what does not need the leader
    with pytest.raises(KafkaError) as e:
        p.check_access(True, -1)
    assert e.value.code == ErrorCode.not_leader_or_follower


def test_min_insync_replicas(tmp_path: Path) -> None:
    p = leader(tmp_path, isr=(ME,), replicas=(ME, F1))
    p.min_insync_replicas = 2
    with pytest.raises(KafkaError) as e:
        p.append_records_to_leader(batch(), -1, 0)
    assert e.value.code == ErrorCode.not_enough_replicas
    assert p.log_end_offset == 0  # refused before the append
    p.append_records_to_leader(batch(), 1, 0)  # acks=1 does not ask for the ISR
    # but the high watermark does not move under min ISR (Kafka 3.7+, KAFKA-15583): nothing is exposed to
    # consumers, nor acknowledged, that fewer than min.insync.replicas replicas hold
    assert p.high_watermark == 0 and p.check_enough_replicas_reach_offset(1) == (False, ErrorCode.none)
    assert p.under_min_isr and not p.commits_on_append
    p.update_follower_fetch_state(F1, 1)  # F1 has it, but is not in the ISR
    assert p.high_watermark == 0
    assert p.apply_state(PartitionState(ME, 0, 1, (ME, F1), (ME, F1)))  # F1 joined: two in sync
    assert p.high_watermark == 1 and p.check_enough_replicas_reach_offset(1) == (True, ErrorCode.none)
    p.append_records_to_leader(batch(), -1, 0)
    p.update_follower_fetch_state(F1, 2)
    assert p.high_watermark == 2
    # the ISR shrank before the parked acks=-1 produce looked again: appended, but too few replicas now
    assert p.apply_state(PartitionState(ME, 0, 2, (ME, F1), (ME,)))
    assert p.check_enough_replicas_reach_offset(2) == (True, ErrorCode.not_enough_replicas_after_append)


def test_min_insync_gate_is_capped_by_the_replication_factor(tmp_path: Path) -> None:
    # min.insync.replicas=2 on a single replica: Kafka's effectiveMinIsr is min(2, RF) = 1, so the high
    # watermark moves (the append itself still refuses acks=-1, kaflite's check uses the configured value)
    p = leader(tmp_path, isr=(ME,), replicas=(ME,))
    p.min_insync_replicas = 2
    p.append_records_to_leader(batch(2), 1, 0)
    assert p.high_watermark == 2 and not p.under_min_isr


# -- the pending ISR change (the rules' table) -------------------------------------------------------------
def test_pending_isr_change_table(tmp_path: Path) -> None:
    p = leader(tmp_path, isr=(ME, F1), replicas=(ME, F1, F2))
    p.append_records_to_leader(batch(5), 1, 0)
    p.update_follower_fetch_state(F1, 2, 0)
    assert p.high_watermark == 2 and p.maximal_isr == (ME, F1)
    # pending shrink: the leaver still holds the high watermark (the ISR as written)
    shrink = p.propose_isr((ME,), 10)
    assert shrink is not None and shrink.removed == (F1,) and p.maximal_isr == (ME, F1)
    assert p.propose_isr((ME, F1, F2), 10) is None  # one change in flight
    p.append_records_to_leader(batch(1), 1, 0)
    assert p.high_watermark == 2
    assert p.complete_isr_change(shrink, PartitionState(ME, 0, 1, (ME, F1, F2), (ME,)), 20)
    assert p.isr == (ME,) and p.pending_isr_change is None and p.high_watermark == 6
    # pending expansion: the joining replica counts from the proposal on
    p.update_follower_fetch_state(F2, 6, 30)
    assert p.can_join_isr(F2)
    expand = p.propose_isr((ME, F2), 30)
    assert expand is not None and expand.added == (F2,) and p.isr == (ME,) and p.maximal_isr == (ME, F2)
    assert not p.can_join_isr(F2) and not p.commits_on_append
    p.append_records_to_leader(batch(3), 1, 0)
    assert p.high_watermark == 6  # F2 has 6
    # refused (the znode moved): back to the written ISR, and no proposal during the backoff
    assert p.complete_isr_change(expand, None, 40)
    assert p.maximal_isr == (ME,) and p.high_watermark == 9
    assert p.propose_isr((ME, F2), 40 + ISR_RETRY_BACKOFF_MS - 1) is None
    # a newer state ends the backoff, and supersedes a change in flight: its answer is then ignored
    assert p.apply_state(PartitionState(ME, 0, 2, (ME, F1, F2), (ME,)))
    again = p.propose_isr((ME, F2), 41)
    assert again is not None
    assert p.apply_state(PartitionState(ME, 0, 3, (ME, F1, F2), (ME,)))  # e.g. the controller wrote first
    assert p.pending_isr_change is None and p.maximal_isr == (ME,)
    assert not p.complete_isr_change(again, PartitionState(ME, 0, 3, (ME, F1, F2), (ME, F2)), 50)
    assert p.isr == (ME,) and p.state.partition_epoch == 3
    # leadership lost: nothing may be proposed
    assert p.apply_state(PartitionState(F1, 1, 4, (ME, F1, F2), (F1, ME)))
    assert p.propose_isr((F1,), 60) is None


def test_a_fetch_report_outside_the_log_is_refused(tmp_path: Path) -> None:
    p = leader(tmp_path, isr=(ME, F1))
    p.append_records_to_leader(batch(3), 1, 0)
    for bad in (4, 10_000):
        with pytest.raises(KafkaError) as e:
            p.update_follower_fetch_state(F1, bad, 0)
        assert e.value.code is ErrorCode.offset_out_of_range
    assert p.follower_log_end_offset(F1) == -1 and p.high_watermark == 0
    with pytest.raises(KafkaError) as e:
        p.update_follower_fetch_state(F2, 1, 0)  # not a replica
    assert e.value.code is ErrorCode.not_leader_or_follower
    assert p.update_follower_fetch_state(F1, 3, 0) and p.high_watermark == 3



def test_a_marker_is_refused_below_min_isr_and_never_appended_twice(tmp_path: Path) -> None:
    """WriteTxnMarkers appends with acks=-1: below min.insync.replicas nothing is appended (Kafka's
    appendRecordsToLeader refuses it with NOT_ENOUGH_REPLICAS); a marker appended and then answered
    not committed (the ISR shrank before the follower had it) is, on the coordinator's retry, the same marker
    (its offset answered), not a second one; a new transaction of the producer gets its own marker."""
    p = leader(tmp_path, isr=(ME, F1), replicas=(ME, F1))
    p.min_insync_replicas = 2
    txn = build_record_batch([(None, b"v", [])], producer_id=7, producer_epoch=0, base_sequence=0,
                             is_transactional=True)
    p.append_records_to_leader(txn, -1, 0)
    p.update_follower_fetch_state(F1, 1)
    assert p.high_watermark == 1 and p.last_stable_offset == 0
    first = p.append_txn_marker_to_leader(7, 0, True, 3, 0)
    assert first.last_offset == 1 and p.log_end_offset == 2
    p.apply_state(PartitionState(ME, 0, 1, (ME, F1), (ME,)))  # F1 falls out of the ISR before it fetched
    # below min ISR the high watermark stays (KAFKA-15583): the marker's acks=-1 wait ends in a timeout,
    # after which the coordinator retries
    assert p.check_enough_replicas_reach_offset(2) == (False, ErrorCode.none) and p.high_watermark == 1
    again = p.append_txn_marker_to_leader(7, 0, True, 3, 0)  # the coordinator retries
    assert again.last_offset == 1 and p.log_end_offset == 2  # the same marker, nothing appended
    # another producer's marker below min ISR: refused before the append
    with pytest.raises(KafkaError) as e:
        p.append_txn_marker_to_leader(8, 0, False, 3, 0)
    assert e.value.code == ErrorCode.not_enough_replicas and p.log_end_offset == 2
    # the ISR is back; producer 7's next transaction gets a marker of its own
    p.apply_state(PartitionState(ME, 0, 2, (ME, F1), (ME, F1)))
    p.append_records_to_leader(build_record_batch([(None, b"w", [])], producer_id=7, producer_epoch=0,
                                                  base_sequence=1, is_transactional=True), -1, 0)
    assert p.append_txn_marker_to_leader(7, 0, True, 3, 0).last_offset == 3 and p.log_end_offset == 4


# -- the high watermark only moves forward ---------------------------------------------------------------
events = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 4)),
        st.tuples(st.just("report"), st.sampled_from([F1, F2]), st.integers(0, 60)),
        st.tuples(st.just("isr"), st.sampled_from([(ME,), (ME, F1), (ME, F2), (ME, F1, F2)])),
        st.tuples(st.just("lower"), st.integers(1, 80)),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=events)
def test_high_watermark_never_moves_backwards(tmp_path_factory: pytest.TempPathFactory, script: list) -> None:
    p = leader(tmp_path_factory.mktemp("hw"), isr=(ME, F1, F2))
    assert p.log is not None
    partition_epoch = 0
    seen = p.high_watermark
    for ev in script:
        if ev[0] == "append":
            p.append_records_to_leader(batch(ev[1]), 1, 0)
        elif ev[0] == "report":
            p.update_follower_fetch_state(ev[1], min(ev[2], p.log_end_offset))
        elif ev[0] == "isr":
            partition_epoch += 1
            p.apply_state(PartitionState(ME, 0, partition_epoch, (ME, F1, F2), ev[1]))
        else:
            p.log.update_high_watermark(p.high_watermark - ev[1])  # asking for a lower value changes nothing
        hw = p.high_watermark
        assert hw >= seen, f"high watermark went back from {seen} to {hw} after {ev}"
        assert p.log.log_start_offset <= hw <= p.log_end_offset
        # the rule: never beyond what every ISR member has
        for r in p.isr:
            if r != ME:
                assert hw <= max(p.follower_log_end_offset(r), seen)
        seen = hw


def test_log_update_high_watermark_only_advances(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0")
    for _ in range(5):
        log.append(batch())
    assert log.update_high_watermark(3) == 3
    assert log.update_high_watermark(1) == 3  # never backwards
    assert log.update_high_watermark(99) == 5  # clamped to the log end
    assert log.high_watermark == 5
    log.truncate_to(2)  # only a truncation of the log itself lowers it
    assert log.high_watermark == 2


# -- restart from the checkpoint -------------------------------------------------------------------------
def test_high_watermark_survives_a_restart_from_its_checkpoint(tmp_path: Path) -> None:
    """A leader whose followers have not reported since the restart keeps the checkpointed high watermark:
    neither 0 (consumers would see committed data vanish) nor the log end (uncommitted data exposed)."""
    mgr = LogManager([tmp_path])
    p = Partition("t", 0, ME, mgr.get_or_create("t", 0))
    p.apply_state(PartitionState(ME, 0, 0, (ME, F1), (ME, F1)))
    p.append_records_to_leader(batch(10), 1, 0)
    p.update_follower_fetch_state(F1, 6)
    assert p.high_watermark == 6
    mgr.close()

    mgr = LogManager([tmp_path])
    mgr.load()
    again = Partition("t", 0, ME, mgr.get("t", 0))
    assert again.high_watermark == 6  # restored from replication-offset-checkpoint by the log
    again.apply_state(PartitionState(ME, 1, 0, (ME, F1), (ME, F1)))  # leader again, new epoch
    assert again.high_watermark == 6  # not overwritten by the log end offset
    again.update_follower_fetch_state(F1, 2)  # a follower that lost data cannot pull it back
    assert again.high_watermark == 6
    again.update_follower_fetch_state(F1, 10)
    assert again.high_watermark == 10
    mgr.close()

    mgr = LogManager([tmp_path])
    mgr.load()
    single = Partition("t", 0, ME, mgr.get("t", 0))
    assert single.high_watermark == 10
    single.apply_state(PartitionState(ME, 2, 0, (ME,), (ME,)))
    assert single.high_watermark == 10
    mgr.close()
