"""The pure controller (cluster.controller): Kafka's leader election and partition/replica state rules,
event by event, without ZooKeeper (controller_sim.SimZk applies the decisions as cluster.zk would)."""

from __future__ import annotations

import uuid

import pytest

from cluster.controller_sim import Fenced, SimZk
from kaflite.cluster.controller import Controller, ControllerConfig, PartitionState, ReplicaState
from kaflite.cluster.controller.election import offline_election
from kaflite.cluster.controller.events import (
    AlterPartition,
    AlterPartitionResult,
    AutoLeaderRebalance,
    BrokerChange,
    CancelTopicDeletions,
    CompletePreferredElection,
    CompleteReassignments,
    ControlledShutdown,
    ControlledShutdownResult,
    CreatePartitionStates,
    Decision,
    DeleteTopic,
    ElectionResults,
    ElectionType,
    ElectLeaders,
    Log,
    PartitionModifications,
    PartitionReassignment,
    TopicChange,
    TopicDeletion,
    TopicUncleanElectionChange,
    UpdatePartitionStates,
    WriteOutcome,
    WriteTopicAssignment,
)
from kaflite.cluster.controller.states import IllegalStateTransition, check_partition, check_replica
from kaflite.cluster.zkdata import LeaderAndIsr, TopicAssignment
from kaflite.protocol.errors import ErrorCode


def _cluster(
    brokers: tuple[int, ...] = (0, 1, 2),
    topics: dict[str, dict[int, tuple[int, ...]]] | None = None,
    **config: object,
) -> tuple[SimZk, Controller]:
    zk = SimZk(live={b: 100 + b for b in brokers})
    c = Controller(0, ControllerConfig(**config))  # type: ignore[arg-type]
    zk.elect(c)
    if topics:
        for name, parts in topics.items():
            a = TopicAssignment(name, parts, uuid.uuid4())
            zk.topics[name] = a
            zk.run(c, TopicChange(frozenset(zk.topics), {name: a}))
    return zk, c


def _of(decisions: list[Decision], kind: type) -> list:  # type: ignore[type-arg]
    return [d for d in decisions if isinstance(d, kind)]


def _down(zk: SimZk, c: Controller, *brokers: int) -> list[Decision]:
    for b in brokers:
        del zk.live[b]
    return zk.run(c, BrokerChange(dict(zk.live)))


def _up(zk: SimZk, c: Controller, *brokers: int) -> list[Decision]:
    for b in brokers:
        zk.live[b] = 200 + b
    return zk.run(c, BrokerChange(dict(zk.live)))


def _isr(zk: SimZk, c: Controller, tp: tuple[str, int], isr: tuple[int, ...]) -> list[Decision]:
    """The partition's leader asks for `isr` (AlterPartition, as a leader that saw the znode)."""
    s = zk.states[tp]
    return zk.run(c, AlterPartition(s.leader, zk.live[s.leader], tp, s.leader_epoch, isr, s.zk_version))


def test_new_topic_leader_is_first_replica_with_every_live_replica_in_sync() -> None:
    zk, c = _cluster(topics={"t": {0: (0, 1, 2), 1: (1, 2, 0), 2: (2, 0, 1)}})
    assert zk.states[("t", 0)] == LeaderAndIsr(0, 0, (0, 1, 2), 1, 0)
    assert zk.states[("t", 1)] == LeaderAndIsr(1, 0, (1, 2, 0), 1, 0)
    assert zk.states[("t", 2)] == LeaderAndIsr(2, 0, (2, 0, 1), 1, 0)
    assert c.partition_states[("t", 0)] is PartitionState.ONLINE
    assert c.replica_states[(("t", 0), 2)] is ReplicaState.ONLINE


def test_new_partition_with_dead_replicas() -> None:
    zk, c = _cluster(brokers=(1, 2), topics={"t": {0: (0, 1, 2)}})
    assert zk.states[("t", 0)] == LeaderAndIsr(1, 0, (1, 2), 1, 0)
    assert c.replica_states[(("t", 0), 0)] is ReplicaState.OFFLINE
    # none alive: stays New, said in the log, nothing written
    a = TopicAssignment("u", {0: (5,)})
    out = zk.run(c, TopicChange(frozenset({"t", "u"}), {"u": a}))
    assert ("u", 0) not in zk.states and c.partition_states[("u", 0)] is PartitionState.NEW
    assert any("no leader for new partition u-0" in d.message for d in _of(out, Log))
    _up(zk, c, 5)  # its replica comes: it gets its leader
    assert zk.states[("u", 0)] == LeaderAndIsr(5, 0, (5,), 1, 0)


def test_broker_death_moves_leadership_within_the_isr() -> None:
    zk, c = _cluster(topics={"t": {0: (0, 1, 2), 1: (1, 2, 0), 2: (2, 0, 1)}})
    out = _down(zk, c, 1)
    # it led t-1: the next assigned replica in the ISR leads, epoch + 1, and 1 leaves the ISR
    assert zk.states[("t", 1)] == LeaderAndIsr(2, 1, (2, 0), 1, 1)
    # it followed t-0 and t-2: it leaves their ISR, epoch + 1
    assert zk.states[("t", 0)] == LeaderAndIsr(0, 1, (0, 2), 1, 1)
    assert zk.states[("t", 2)] == LeaderAndIsr(2, 1, (2, 0), 1, 1)
    # one write per partition, all in one compare-and-set batch carrying the controller epoch
    updates = _of(out, UpdatePartitionStates)
    assert len(updates) == 1 and updates[0].controller_epoch == 1
    assert {tp: s.zk_version for tp, s in updates[0].states.items()} == {
        ("t", 0): 0,
        ("t", 1): 0,
        ("t", 2): 0,
    }
    assert c.replica_states[(("t", 0), 1)] is ReplicaState.OFFLINE


def test_leader_is_first_live_isr_member_in_assignment_order() -> None:
    assert offline_election((3, 1, 2), (2, 1), {1, 2}, False).leader == 1  # type: ignore[union-attr]
    assert offline_election((3, 1, 2), (2, 1), {2}, False).leader == 2  # type: ignore[union-attr]
    assert offline_election((3, 1, 2), (3,), {1, 2}, False) is None
    e = offline_election((3, 1, 2), (3,), {1, 2}, True)
    assert e is not None and e.leader == 1 and e.isr == (1,) and e.unclean


def test_no_live_isr_member_keeps_partition_offline_then_clean_recovery() -> None:
    zk, c = _cluster(topics={"t": {0: (0, 1, 2)}})
    _isr(zk, c, ("t", 0), (0,))  # followers fell behind: only the leader is in sync
    out = _down(zk, c, 0)
    # unclean off: no leader rather than lose data; the last ISR member is kept (Kafka's rule)
    s = zk.states[("t", 0)]
    assert (s.leader, s.isr, s.leader_epoch) == (-1, (0,), 1)
    assert c.partition_states[("t", 0)] is PartitionState.OFFLINE
    assert not any(d.level == "warning" for d in _of(out, Log))
    _up(zk, c, 0)  # the broker that had everything comes back: it leads again, cleanly
    s = zk.states[("t", 0)]
    assert (s.leader, s.isr, s.leader_epoch) == (0, (0,), 2)


def test_unclean_election_when_enabled() -> None:
    zk, c = _cluster(topics={"t": {0: (0, 1, 2)}}, unclean_leader_election_enable=True)
    _isr(zk, c, ("t", 0), (0,))
    out = _down(zk, c, 0)
    s = zk.states[("t", 0)]
    assert (s.leader, s.isr, s.leader_epoch) == (1, (1,), 1)
    warnings = [d.message for d in _of(out, Log) if d.level == "warning"]
    assert warnings and "unclean leader election for t-0" in warnings[0] and "lost" in warnings[0]


def test_topic_override_enables_unclean_election_at_once() -> None:
    zk, c = _cluster(topics={"t": {0: (0, 1)}})
    _isr(zk, c, ("t", 0), (0,))
    _down(zk, c, 0)
    assert zk.states[("t", 0)].leader == -1
    zk.run(c, TopicUncleanElectionChange("t", True))
    assert zk.states[("t", 0)].leader == 1 and zk.states[("t", 0)].isr == (1,)


def test_preferred_election() -> None:
    zk, c = _cluster(topics={"t": {0: (0, 1, 2), 1: (1, 2, 0)}}, auto_leader_rebalance_enable=False)
    _down(zk, c, 0)
    _up(zk, c, 0)
    assert zk.states[("t", 0)].leader == 1  # 0 is back but out of the ISR
    out = zk.run(c, ElectLeaders(frozenset({("t", 0), ("t", 1), ("x", 0)})))
    res = _of(out, ElectionResults)[0].results
    assert res == {
        ("t", 0): ErrorCode.preferred_leader_not_available,
        ("t", 1): ErrorCode.election_not_needed,
        ("x", 0): ErrorCode.unknown_topic_or_partition,
    }
    _isr(zk, c, ("t", 0), (1, 2, 0))  # 0 caught up
    before = zk.states[("t", 0)]
    out = zk.run(c, ElectLeaders(frozenset({("t", 0)}), from_znode=True))
    assert _of(out, ElectionResults)[0].results == {("t", 0): None}
    assert _of(out, CompletePreferredElection)
    s = zk.states[("t", 0)]
    assert (s.leader, s.leader_epoch, s.isr) == (0, before.leader_epoch + 1, (1, 2, 0))


def test_unclean_election_on_request() -> None:
    zk, c = _cluster(topics={"t": {0: (0, 1)}})
    _isr(zk, c, ("t", 0), (0,))
    _down(zk, c, 0)
    out = zk.run(c, ElectLeaders(frozenset({("t", 0)}), ElectionType.UNCLEAN))
    assert _of(out, ElectionResults)[0].results == {("t", 0): None}
    assert zk.states[("t", 0)].leader == 1
    out = zk.run(c, ElectLeaders(frozenset({("t", 0)}), ElectionType.UNCLEAN))
    assert _of(out, ElectionResults)[0].results == {("t", 0): ErrorCode.election_not_needed}


def test_auto_rebalance_moves_leadership_back_to_preferred_replicas() -> None:
    zk, c = _cluster(
        topics={
            "t": {p: (0, 1, 2) if p % 3 == 0 else (1, 2, 0) if p % 3 == 1 else (2, 0, 1) for p in range(6)}
        }
    )
    _down(zk, c, 0)
    _up(zk, c, 0)
    for p in (0, 3):
        _isr(zk, c, ("t", p), (*zk.states[("t", p)].isr, 0))
    assert [zk.states[("t", p)].leader for p in (0, 3)] == [1, 1]
    off = Controller(0, ControllerConfig(auto_leader_rebalance_enable=False))
    zk.elect(off)
    assert not _of(zk.run(off, AutoLeaderRebalance()), UpdatePartitionStates)
    zk.elect(c)
    zk.run(c, AutoLeaderRebalance())
    assert [zk.states[("t", p)].leader for p in (0, 3)] == [0, 0]
    assert not _of(zk.run(c, AutoLeaderRebalance()), UpdatePartitionStates)  # balanced: nothing to do


def test_alter_partition_rules() -> None:
    zk, c = _cluster(topics={"t": {0: (0, 1, 2)}})
    s = zk.states[("t", 0)]
    tp = ("t", 0)

    def alter(
        broker: int,
        epoch: int,
        isr: tuple[int, ...],
        leader_epoch: int | None = None,
        version: int | None = None,
    ) -> AlterPartitionResult:
        out = zk.run(
            c,
            AlterPartition(
                broker,
                epoch,
                tp,
                s.leader_epoch if leader_epoch is None else leader_epoch,
                isr,
                zk.states[tp].zk_version if version is None else version,
            ),
        )
        return _of(out, AlterPartitionResult)[0]

    assert alter(0, 999, (0, 1)).error is ErrorCode.stale_broker_epoch
    assert alter(1, 101, (0, 1)).error is ErrorCode.fenced_leader_epoch  # not the leader
    assert alter(0, 100, (0, 1), leader_epoch=7).error is ErrorCode.fenced_leader_epoch
    assert alter(0, 100, (0, 1), version=5).error is ErrorCode.invalid_update_version
    assert alter(0, 100, (1, 2)).error is ErrorCode.invalid_request  # without the leader
    assert alter(0, 100, (0, 7)).error is ErrorCode.ineligible_replica  # not assigned
    ok = alter(0, 100, (0, 1))
    assert ok.error is None and ok.state == LeaderAndIsr(0, 0, (0, 1), 1, 1)  # leader epoch unchanged
    assert zk.states[tp] == ok.state
    _down(zk, c, 2)
    assert alter(0, 100, (0, 1, 2)).error is ErrorCode.ineligible_replica  # 2 is dead


def test_controlled_shutdown_moves_leadership_off_the_broker() -> None:
    zk, c = _cluster(topics={"t": {0: (0, 1, 2), 1: (1, 2, 0)}, "single": {0: (0,)}})
    out = zk.run(c, ControlledShutdown(0, 100))
    assert zk.states[("t", 0)] == LeaderAndIsr(1, 1, (1, 2), 1, 1)
    assert zk.states[("t", 1)] == LeaderAndIsr(1, 1, (1, 2), 1, 1)
    res = _of(out, ControlledShutdownResult)[0]
    assert res.remaining == frozenset()  # replication factor 1: nobody else can lead it, nothing left to move
    assert [e.message for e in _of(out, Log) if "controlled shutdown" in e.message] == [
        "controlled shutdown of broker 0: 0 partition(s) left led there, leadership of 1 moved; "
        "1 partition(s) of a single replica stay led there"
    ]
    # while it shuts down it cannot rejoin an ISR
    out = _isr(zk, c, ("t", 0), (1, 2, 0))
    assert _of(out, AlterPartitionResult)[0].error is ErrorCode.ineligible_replica
    out = zk.run(c, ControlledShutdown(1, 5))
    assert _of(out, ControlledShutdownResult)[0].remaining == frozenset()
    assert "stale broker epoch" in _of(out, Log)[0].message


def test_controlled_shutdown_reports_what_it_could_not_move_apart_from_what_was_moved() -> None:
    """t-0's other replica is down: its leadership stays (reported as left); t-1's moves; a partition of one
    replica is neither (Kafka's replicatedPartitionsBrokerLeads leaves it out of what remains)."""
    zk, c = _cluster(topics={"t": {0: (0, 1), 1: (0, 2)}, "single": {0: (0,), 1: (0,)}})
    _down(zk, c, 1)
    out = zk.run(c, ControlledShutdown(0, 100))
    assert _of(out, ControlledShutdownResult)[0].remaining == {("t", 0)}
    assert zk.states[("t", 0)].leader == 0 and zk.states[("t", 1)].leader == 2
    assert [e.message for e in _of(out, Log) if "controlled shutdown" in e.message] == [
        "controlled shutdown of broker 0: 1 partition(s) left led there, leadership of 1 moved; "
        "2 partition(s) of a single replica stay led there"
    ]


def test_reassignment_copies_then_switches() -> None:
    zk, c = _cluster(brokers=(0, 1, 2, 3), topics={"t": {0: (0, 1)}})
    out = zk.run(c, PartitionReassignment({("t", 0): (2, 3)}))
    w = _of(out, WriteTopicAssignment)[0].assignment
    assert (
        w.partitions[0] == (2, 3, 0, 1)
        and w.adding_replicas == {0: (2, 3)}
        and w.removing_replicas == {0: (0, 1)}
    )
    assert zk.states[("t", 0)].leader_epoch == 1  # followers learn the replica set
    assert not _of(out, CompleteReassignments)
    _isr(zk, c, ("t", 0), (0, 1, 2))
    assert c.reassignments  # 3 not in sync yet
    out = _isr(zk, c, ("t", 0), (0, 1, 2, 3))
    assert _of(out, CompleteReassignments)[0].partitions == {("t", 0)}
    s = zk.states[("t", 0)]
    assert s.leader == 2 and s.isr == (2, 3) and s.leader_epoch == 2
    final = _of(out, WriteTopicAssignment)[-1].assignment
    assert final.partitions == {0: (2, 3)} and not final.adding_replicas and not final.removing_replicas
    assert (("t", 0), 0) not in c.replica_states


def test_reassignment_refusals() -> None:
    zk, c = _cluster(topics={"t": {0: (0, 1)}})
    out = zk.run(c, PartitionReassignment({("t", 0): (1, 9), ("t", 5): (0,), ("t", 0 + 0): (1, 9)}))
    assert any("brokers that are not alive. Replica list: [9]" in d.message for d in _of(out, Log))
    out = zk.run(c, PartitionReassignment({("t", 5): (0,)}))
    assert any("UNKNOWN_TOPIC_OR_PARTITION" in d.message for d in _of(out, Log))
    assert _of(out, CompleteReassignments)


def test_partitions_added() -> None:
    zk, c = _cluster(topics={"t": {0: (0, 1)}})
    zk.run(c, PartitionModifications(TopicAssignment("t", {0: (0, 1), 1: (1, 2)})))
    assert zk.states[("t", 1)] == LeaderAndIsr(1, 0, (1, 2), 1, 0)
    out = zk.run(c, PartitionModifications(TopicAssignment("t", {1: (1, 2)})))
    assert any("partitions never shrink" in d.message for d in _of(out, Log))


def test_topic_deletion_waits_for_dead_replicas() -> None:
    zk, c = _cluster(topics={"t": {0: (0, 1)}, "u": {0: (2,)}})
    _down(zk, c, 1)
    out = zk.run(c, TopicDeletion(frozenset({"t", "u", "ghost"})))
    assert [d.topic for d in _of(out, DeleteTopic)] == ["u"]
    assert _of(out, CancelTopicDeletions)[0].topics == {"ghost"}
    assert c.replica_states[(("t", 0), 1)] is ReplicaState.DELETION_INELIGIBLE
    out = _up(zk, c, 1)
    assert [d.topic for d in _of(out, DeleteTopic)] == ["t"]
    assert "t" not in c.assignments and not any(k[0][0] == "t" for k in c.replica_states)
    off = Controller(0, ControllerConfig(delete_topic_enable=False))
    zk.elect(off)
    out = zk.run(off, TopicDeletion(frozenset({"t"})))
    assert not _of(out, DeleteTopic) and _of(out, CancelTopicDeletions)


def test_stale_write_is_reevaluated_from_zookeeper() -> None:
    zk, c = _cluster(topics={"t": {0: (0, 1, 2)}})
    # someone (a leader's ISR write seen late) changed the znode behind the controller's back
    cur = zk.states[("t", 0)]
    zk.states[("t", 0)] = LeaderAndIsr(0, 0, (0, 2), 1, cur.zk_version + 1)
    out = _down(zk, c, 0)
    assert _of(out, UpdatePartitionStates)
    s = zk.states[("t", 0)]
    assert s.leader == 2 and s.isr == (2,)  # elected from what ZooKeeper really held


def test_new_controller_finishes_what_the_old_one_left_and_fences_it() -> None:
    zk, old = _cluster(topics={"t": {0: (0, 1, 2)}})
    del zk.live[0]  # broker 0 died together with... the controller that never saw it
    new = Controller(1)
    out = zk.elect(new)
    assert new.epoch == 2
    assert zk.states[("t", 0)] == LeaderAndIsr(1, 1, (1, 2), 2, 1)
    assert all(d.controller_epoch == 2 for d in out)
    with pytest.raises(Fenced):
        zk.run(old, BrokerChange(dict(zk.live)))  # the deposed controller's writes are refused


def test_bounced_broker_is_a_failure_then_a_start() -> None:
    zk, c = _cluster(topics={"t": {0: (0, 1)}})
    zk.live[0] = 999  # same id, new registration
    zk.run(c, BrokerChange(dict(zk.live)))
    s = zk.states[("t", 0)]
    assert s.leader == 1 and s.isr == (1,) and c.replica_states[(("t", 0), 0)] is ReplicaState.ONLINE


def test_inactive_controller_refuses() -> None:
    c = Controller(0)
    out = c.handle(AlterPartition(0, 1, ("t", 0), 0, (0,), 0))
    assert _of(out, AlterPartitionResult)[0].error is ErrorCode.not_controller
    assert c.handle(BrokerChange({0: 1})) == []
    zk, c = _cluster(topics={"t": {0: (0,)}})
    c.resign()
    assert not c.active and c.handle(ElectLeaders(frozenset({("t", 0)})))[0].results == {
        ("t", 0): ErrorCode.not_controller
    }  # type: ignore[union-attr]


def test_create_conflict_comes_back_as_write_outcome() -> None:
    zk, c = _cluster()
    zk.states[("t", 0)] = LeaderAndIsr(2, 3, (2,), 1, 4)  # a state znode left from before
    out = zk.run(c, TopicChange(frozenset({"t"}), {"t": TopicAssignment("t", {0: (0, 2)})}))
    assert _of(out, CreatePartitionStates)
    s = zk.states[("t", 0)]
    assert s.leader == 2 and s.zk_version == 4  # adopted, not overwritten
    assert c.leadership[("t", 0)] == s
    c.handle(WriteOutcome({("t", 9): None}))  # unknown partitions are ignored


def test_illegal_transitions_are_refused() -> None:
    check_partition("t-0", PartitionState.NON_EXISTENT, PartitionState.NEW)
    with pytest.raises(IllegalStateTransition, match="NonExistentPartition -> OnlinePartition"):
        check_partition("t-0", PartitionState.NON_EXISTENT, PartitionState.ONLINE)
    with pytest.raises(IllegalStateTransition, match="OnlinePartition -> NonExistentPartition"):
        check_partition("t-0", PartitionState.ONLINE, PartitionState.NON_EXISTENT)
    with pytest.raises(IllegalStateTransition, match="OnlineReplica -> ReplicaDeletionStarted"):
        check_replica("r", ReplicaState.ONLINE, ReplicaState.DELETION_STARTED)


def test_no_election_picks_a_broker_in_controlled_shutdown() -> None:
    """Kafka leaves shutting-down brokers out of the live brokers its elections choose from. Broker 1 is
    in controlled shutdown (still registered): a new partition whose first replica is 1 is led by 2 with
    1 outside its ISR; an unclean election skips 1 for 2 (before: 1 led both)."""
    zk, c = _cluster(brokers=(0, 1, 2), topics={"u": {0: (0, 1, 2)}}, unclean_leader_election_enable=True)
    zk.run(c, ControlledShutdown(1, 101))
    assert 1 in c.shutting_down
    # a new topic while broker 1 shuts down
    a = TopicAssignment("n", {0: (1, 2, 0)}, uuid.uuid4())
    zk.topics["n"] = a
    zk.run(c, TopicChange(frozenset(zk.topics), {"n": a}))
    st = zk.states[("n", 0)]
    assert st.leader == 2 and 1 not in st.isr, st
    # u-0: ISR (0,) after 2 is shrunk out by its leader 0; then 0 dies: unclean, first live replica not 1
    zk.run(c, AlterPartition(0, 100, ("u", 0), zk.states[("u", 0)].leader_epoch, (0,),
                             zk.states[("u", 0)].zk_version))
    assert zk.states[("u", 0)].isr == (0,)
    zk.live = {1: 101, 2: 102}
    zk.run(c, BrokerChange(dict(zk.live)))
    st = zk.states[("u", 0)]
    assert st.leader == 2 and st.isr == (2,), st


def test_a_topic_created_with_the_unclean_override_elects_unclean_without_a_config_change() -> None:
    # the override comes with the topic (its config znode is written first; no change notification follows a
    # creation): before, the controller knew it only from a later change, and the partition stayed offline
    zk = SimZk(live={0: 100, 1: 101})
    c = Controller(0, ControllerConfig())
    zk.elect(c)
    a = TopicAssignment("t", {0: (0, 1)}, uuid.uuid4())
    zk.topics["t"] = a
    zk.run(c, TopicChange(frozenset(zk.topics), {"t": a}, {"t": True}))
    _isr(zk, c, ("t", 0), (0,))
    _down(zk, c, 0)
    assert zk.states[("t", 0)].leader == 1 and zk.states[("t", 0)].isr == (1,)
    # and a topic created with the override off stays offline under a broker default that allows it
    zk2, c2 = _cluster(unclean_leader_election_enable=True)
    b = TopicAssignment("u", {0: (0, 1)}, uuid.uuid4())
    zk2.topics["u"] = b
    zk2.run(c2, TopicChange(frozenset(zk2.topics), {"u": b}, {"u": False}))
    _isr(zk2, c2, ("u", 0), (0,))
    _down(zk2, c2, 0)
    assert zk2.states[("u", 0)].leader == -1
