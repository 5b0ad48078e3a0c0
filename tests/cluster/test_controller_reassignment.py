"""Partition reassignment in the pure controller (Kafka 3.x ZooKeeper mode, KIP-455), event by event without
ZooKeeper: RS = target + original while the new replicas catch up, the switch once every target replica
is in the ISR (reported by an AlterPartition or by a leader's own ISR write), the leader moved off a
removed replica, cancellation, a replaced move, a new order, Kafka's refusals and error codes, the znode
and the API paths, listing, and a controller failover in the middle of a move."""

from __future__ import annotations

import uuid

from cluster.controller_sim import SimZk
from cluster.test_controller import _cluster, _down, _isr, _of, _up
from kaflite.cluster.controller import Controller, ReplicaState
from kaflite.cluster.controller.events import (
    CompleteReassignments,
    ControllerStartup,
    Decision,
    ListReassignments,
    Log,
    OngoingReassignments,
    PartitionReassignment,
    ReassignmentResults,
    TopicDeletion,
    UpdatePartitionStates,
    WriteOutcome,
    WriteTopicAssignment,
)
from kaflite.cluster.zkdata import LeaderAndIsr, TopicAssignment
from kaflite.protocol.errors import ErrorCode

TP = ("t", 0)


def _api(zk: SimZk, c: Controller, moves: dict) -> tuple[dict, list[Decision]]:  # type: ignore[type-arg]
    out = zk.run(c, PartitionReassignment(moves, from_api=True))
    res = _of(out, ReassignmentResults)
    assert len(res) == 1 and res[0].error is None
    return dict(res[0].results), out


def _ongoing(zk: SimZk, c: Controller, partitions: frozenset | None = None) -> dict:  # type: ignore[type-arg]
    out = zk.run(c, ListReassignments(partitions))
    return dict(_of(out, OngoingReassignments)[0].reassignments)


def _leader_writes_isr(zk: SimZk, c: Controller, tp: tuple[str, int], isr: tuple[int, ...]) -> list[Decision]:
    """The leader's own compare-and-set of the state znode, then /isr_change_notification: the
    controller re-reads the state (WriteOutcome), as the shell does for IsrChangesNotified."""
    s = zk.states[tp]
    zk.states[tp] = LeaderAndIsr(s.leader, s.leader_epoch, isr, s.controller_epoch, s.zk_version + 1)
    return zk.run(c, WriteOutcome({tp: zk.states[tp]}))


def test_a_move_copies_first_then_switches_when_the_targets_are_in_sync() -> None:
    zk, c = _cluster(brokers=(1, 2, 3), topics={"t": {0: (1, 2)}})
    assert zk.states[TP] == LeaderAndIsr(1, 0, (1, 2), 1, 0)
    results, out = _api(zk, c, {TP: (2, 3)})
    assert results == {TP: (None, None)}
    # the API's partitions leave /admin/reassign_partitions first (the latest request wins)
    kinds = [type(d) for d in out]
    assert kinds.index(CompleteReassignments) < kinds.index(WriteTopicAssignment)
    a = zk.topics["t"]
    assert a.partitions == {0: (2, 3, 1)} and a.adding_replicas == {0: (3,)} and a.removing_replicas == {0: (1,)}
    assert zk.states[TP] == LeaderAndIsr(1, 1, (1, 2), 1, 1)  # leader epoch + 1: the replicas learn RS
    assert c.replica_states[(TP, 3)] is ReplicaState.NEW
    assert _ongoing(zk, c) == {TP: ((2, 3, 1), (3,), (1,))}
    # 3 caught up: its leader writes the ISR itself and notifies (ZooKeeper mode)
    out = _leader_writes_isr(zk, c, TP, (1, 2, 3))
    s = zk.states[TP]
    assert s.leader == 2 and s.isr == (2, 3) and s.leader_epoch == 2  # one write: new leader, 1 out
    assert zk.topics["t"].partitions == {0: (2, 3)} and not zk.topics["t"].adding_replicas
    assert not zk.topics["t"].removing_replicas
    # the state (leader in the target, 1 out of the ISR) is written before the assignment drops 1
    writes = [d for d in out if isinstance(d, UpdatePartitionStates | WriteTopicAssignment)]
    assert isinstance(writes[0], UpdatePartitionStates) and isinstance(writes[-1], WriteTopicAssignment)
    assert _of(out, CompleteReassignments)[0].partitions == {TP}
    assert (TP, 1) not in c.replica_states and c.replica_states[(TP, 3)] is ReplicaState.ONLINE
    assert _ongoing(zk, c) == {}


def test_the_leader_stays_when_it_is_kept_and_alter_partition_completes_too() -> None:
    zk, c = _cluster(brokers=(1, 2, 3), topics={"t": {0: (1, 2)}})
    _api(zk, c, {TP: (1, 3)})
    assert zk.topics["t"].partitions == {0: (1, 3, 2)}
    _isr(zk, c, TP, (1, 2, 3))  # AlterPartition from the leader
    s = zk.states[TP]
    assert s.leader == 1 and s.isr == (1, 3) and s.leader_epoch == 2
    assert zk.topics["t"].partitions == {0: (1, 3)}


def test_kafkas_refusals() -> None:
    zk, c = _cluster(brokers=(1, 2, 3), topics={"t": {0: (1, 2), 1: (2, 3)}})
    _down(zk, c, 3)
    bad = ErrorCode.invalid_replica_assignment
    results, _ = _api(zk, c, {
        ("t", 0): (),
        ("t", 1): (2, 2),
        ("t", 5): None,
        ("u", 0): (1,),
        ("t", 2): (1, -1),
    })
    assert results[("t", 0)] == (bad, "Empty replica list specified in partition reassignment.")
    assert results[("t", 1)] == (bad, "Duplicate replica ids in partition reassignment replica list: [2, 2]")
    assert results[("t", 2)] == (bad, "Invalid broker id in replica list: [1, -1]")
    assert results[("t", 5)] == (ErrorCode.no_reassignment_in_progress, None)  # nothing to cancel
    assert results[("u", 0)] == (ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
    # an added replica must be alive; one kept from the original may be dead
    results, _ = _api(zk, c, {("t", 0): (1, 3)})
    assert results[("t", 0)][0] is bad and "not alive. Replica list: [3]" in str(results[("t", 0)][1])
    results, _ = _api(zk, c, {("t", 1): (3, 1)})
    assert results[("t", 1)] == (None, None)
    assert _ongoing(zk, c) == {("t", 1): ((3, 1, 2), (1,), (2,))}
    # a topic queued for deletion: the partition does not exist (and its deletion waits for the move)
    zk.run(c, TopicDeletion(frozenset({"t"})))
    results, _ = _api(zk, c, {("t", 0): (2, 1)})
    assert results[("t", 0)] == (ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
    assert "t" in zk.topics


def test_cancel_reverts_to_the_original_replicas() -> None:
    zk, c = _cluster(brokers=(1, 2, 3, 4), topics={"t": {0: (1, 2)}})
    _api(zk, c, {TP: (3, 4)})
    _leader_writes_isr(zk, c, TP, (1, 2, 3))  # 3 caught up, 4 not yet
    assert zk.topics["t"].partitions == {0: (3, 4, 1, 2)}
    results, out = _api(zk, c, {TP: None})
    assert results == {TP: (None, None)}
    a = zk.topics["t"]
    assert a.partitions == {0: (1, 2)} and not a.adding_replicas and not a.removing_replicas
    s = zk.states[TP]
    assert s.leader == 1 and s.isr == (1, 2)  # 3 left the ISR: it is no replica any more
    # the assignment is written before the ISR drops 3 (3 can never rejoin an ISR it is not a replica of)
    writes = [d for d in out if isinstance(d, UpdatePartitionStates | WriteTopicAssignment)]
    assert isinstance(writes[0], WriteTopicAssignment)
    assert (TP, 3) not in c.replica_states and (TP, 4) not in c.replica_states
    assert _ongoing(zk, c) == {}
    results, _ = _api(zk, c, {TP: None})
    assert results == {TP: (ErrorCode.no_reassignment_in_progress, None)}


def test_a_new_target_replaces_a_move_under_way_and_keeps_the_original() -> None:
    zk, c = _cluster(brokers=(1, 2, 3, 4), topics={"t": {0: (1, 2)}})
    _api(zk, c, {TP: (3, 4)})
    _leader_writes_isr(zk, c, TP, (1, 2, 4))
    _api(zk, c, {TP: (1, 3)})
    assert _ongoing(zk, c) == {TP: ((1, 3, 2), (3,), (2,))}  # original still [1, 2]; 4 dropped
    assert zk.states[TP].isr == (1, 2)
    assert (TP, 4) not in c.replica_states
    _leader_writes_isr(zk, c, TP, (1, 2, 3))
    assert zk.topics["t"].partitions == {0: (1, 3)} and zk.states[TP].isr == (1, 3)


def test_a_new_order_completes_at_once() -> None:
    zk, c = _cluster(brokers=(1, 2), topics={"t": {0: (1, 2)}})
    results, out = _api(zk, c, {TP: (2, 1)})
    assert results == {TP: (None, None)}
    assert zk.topics["t"].partitions == {0: (2, 1)}
    assert zk.states[TP].leader == 1  # the leader is kept (a preferred election would move it)
    assert _of(out, CompleteReassignments)[-1].partitions == {TP}
    assert _ongoing(zk, c) == {}


def test_the_znode_path_refuses_in_the_log_and_ignores_a_repeat() -> None:
    zk, c = _cluster(brokers=(1, 2, 3), topics={"t": {0: (1, 2)}})
    out = zk.run(c, PartitionReassignment({TP: (2, 3), ("t", 9): (1,), ("t", 1 - 1 + 1): (9,)}))
    assert not _of(out, ReassignmentResults)  # no requester to answer
    refused = _of(out, CompleteReassignments)
    assert refused[-1].partitions == {("t", 9), ("t", 1)}
    assert sum("refused" in d.message for d in _of(out, Log)) == 2
    assert zk.topics["t"].partitions == {0: (2, 3, 1)}
    epoch = zk.states[TP].leader_epoch
    # the znode's watch fires again when other entries leave it: the same move is not restarted
    out = zk.run(c, PartitionReassignment({TP: (2, 3)}))
    assert out == [] and zk.states[TP].leader_epoch == epoch


def test_a_dead_target_replica_holds_the_move_until_it_is_back_in_sync() -> None:
    zk, c = _cluster(brokers=(1, 2, 3), topics={"t": {0: (1, 2)}})
    _api(zk, c, {TP: (2, 3)})
    _down(zk, c, 3)
    _leader_writes_isr(zk, c, TP, (1, 2))
    assert _ongoing(zk, c)[TP] == ((2, 3, 1), (3,), (1,))
    _up(zk, c, 3)
    assert _ongoing(zk, c)  # alive again but not in sync yet
    _leader_writes_isr(zk, c, TP, (1, 2, 3))
    assert zk.topics["t"].partitions == {0: (2, 3)} and zk.states[TP].leader == 2


def test_a_new_controller_resumes_a_move_from_the_topic_znode() -> None:
    zk, c = _cluster(brokers=(1, 2, 3), topics={"t": {0: (1, 2)}, "u": {0: (1, 2)}})
    _api(zk, c, {TP: (2, 3), ("u", 0): (3, 1)})
    _leader_writes_isr(zk, c, ("u", 0), (1, 2, 3))  # u-0 completes
    assert zk.topics["u"].partitions == {0: (3, 1)}
    # t-0's new replica caught up while no controller was there to see it
    s = zk.states[TP]
    zk.states[TP] = LeaderAndIsr(s.leader, s.leader_epoch, (1, 2, 3), s.controller_epoch, s.zk_version + 1)
    c2 = Controller(2)
    zk.controller_epoch += 1
    startup = ControllerStartup(zk.controller_epoch, dict(zk.live), dict(zk.topics), dict(zk.states))
    assert startup.topics["t"].adding_replicas == {0: (3,)}
    zk.run(c2, startup)
    assert zk.topics["t"].partitions == {0: (2, 3)} and zk.states[TP].leader == 2
    assert zk.states[TP].controller_epoch == 2
    # one still catching up is resumed as it was, and a request pending in the znode starts
    zk2, c3 = _cluster(brokers=(1, 2, 3), topics={"t": {0: (1, 2)}, "v": {0: (1, 2)}})
    _api(zk2, c3, {TP: (2, 3)})
    c4 = Controller(3)
    zk2.controller_epoch += 1
    zk2.run(c4, ControllerStartup(zk2.controller_epoch, dict(zk2.live), dict(zk2.topics), dict(zk2.states),
                                  reassignments={("v", 0): (3,), TP: (2, 3)}))
    assert _ongoing(zk2, c4) == {TP: ((2, 3, 1), (3,), (1,)), ("v", 0): ((3, 1, 2), (3,), (1, 2))}


def test_listing_named_partitions_and_a_controller_that_is_not_active() -> None:
    zk, c = _cluster(brokers=(1, 2, 3), topics={"t": {0: (1, 2), 1: (2, 3)}})
    _api(zk, c, {TP: (2, 3)})
    assert _ongoing(zk, c, frozenset({TP, ("t", 1), ("x", 0)})) == {TP: ((2, 3, 1), (3,), (1,))}
    idle = Controller(9)
    out = idle.handle(PartitionReassignment({TP: (1,)}, from_api=True))
    assert out == [ReassignmentResults(0, {}, ErrorCode.not_controller)]
    assert idle.handle(ListReassignments(None)) == [OngoingReassignments(0, {}, ErrorCode.not_controller)]
    assert idle.handle(PartitionReassignment({TP: (1,)})) == []  # the znode: not its business


def test_a_move_whose_topic_does_not_exist_in_the_startup_view() -> None:
    zk = SimZk(live={1: 101, 2: 102})
    zk.topics["t"] = TopicAssignment("t", {0: (1,)}, uuid.uuid4())
    c = Controller(1)
    zk.controller_epoch = 1
    out = zk.run(c, ControllerStartup(1, dict(zk.live), dict(zk.topics), {}, reassignments={("gone", 0): (1,)}))
    assert _of(out, CompleteReassignments)[-1].partitions == {("gone", 0)}


def test_a_completion_whose_state_write_was_stale_is_repaired() -> None:
    # the switch's state write (leader 2, ISR without 1) finds another version (the leader changed the ISR
    # meanwhile) while the assignment write lands: the controller re-reads the state and takes the removed
    # leader 1 out, electing a target replica
    zk, c = _cluster(brokers=(1, 2, 3), topics={"t": {0: (1, 2)}})
    _api(zk, c, {TP: (2, 3)})
    s = zk.states[TP]
    zk.states[TP] = LeaderAndIsr(1, s.leader_epoch, (1, 2, 3), s.controller_epoch, s.zk_version + 1)
    out = c.handle(WriteOutcome({TP: zk.states[TP]}))  # the notification of 3 joining
    s = zk.states[TP]
    zk.states[TP] = LeaderAndIsr(1, s.leader_epoch, (1, 3, 2), s.controller_epoch, s.zk_version + 1)  # a race
    stale = zk.apply(out)
    assert stale == {TP: zk.states[TP]} and zk.topics["t"].partitions == {0: (2, 3)}
    out = zk.run(c, WriteOutcome(stale))
    s = zk.states[TP]
    assert s.leader == 2 and s.isr == (3, 2) and s.leader_epoch == 2
    assert any("taken out" in d.message for d in _of(out, Log))
    # a new controller finding the same leftovers (died between the two writes) repairs them too
    zk.states[TP] = LeaderAndIsr(1, 5, (1, 2, 3), zk.controller_epoch, s.zk_version + 1)
    zk.elect(Controller(3))
    s = zk.states[TP]
    assert s.leader == 2 and s.isr == (2, 3) and s.leader_epoch == 6


def test_a_request_that_does_not_allow_a_replication_factor_change() -> None:
    """AlterPartitionReassignments v1 with allow_replication_factor_change false (KIP-860): a valid target of
    another size than the replica set is INVALID_REPLICATION_FACTOR, during a move the size it moves to
    counts; the same size moves, a cancel is not concerned, an invalid list keeps its own error first."""
    zk, c = _cluster(brokers=(1, 2, 3, 4), topics={"t": {0: (1, 2), 1: (2, 3)}})

    def api(moves: dict, allow: bool = False) -> dict:  # type: ignore[type-arg]
        out = zk.run(c, PartitionReassignment(moves, from_api=True, allow_replication_factor_change=allow))
        return dict(_of(out, ReassignmentResults)[0].results)

    rf = ErrorCode.invalid_replication_factor
    results = api({("t", 0): (1, 2, 3), ("t", 1): (4,), ("t", 2): (1, 2, 3)})
    assert results[("t", 0)] == (rf, "The replication factor of t-0 would change from 2 to 3, which this request "
                                     "does not allow.")
    assert results[("t", 1)][0] is rf and "from 2 to 1" in str(results[("t", 1)][1])
    assert results[("t", 2)] == (ErrorCode.unknown_topic_or_partition, "The partition does not exist.")
    assert _ongoing(zk, c) == {}
    assert api({("t", 0): (1, 1, 2)})[("t", 0)][0] is ErrorCode.invalid_replica_assignment
    # the same size moves; during the move its target's size is the one compared
    assert api({("t", 0): (3, 4)}) == {("t", 0): (None, None)}
    assert api({("t", 0): (2, 3, 4)})[("t", 0)][0] is rf
    assert api({("t", 0): (2, 4)}) == {("t", 0): (None, None)}
    assert api({("t", 0): None}) == {("t", 0): (None, None)}  # a cancel has no target to compare
    # allowed (v0, or v1 with the flag true): any size
    assert api({("t", 1): (2, 3, 4)}, allow=True) == {("t", 1): (None, None)}
    assert _ongoing(zk, c)[("t", 1)][0] == (2, 3, 4)
