"""ControllerService and ClusterMember in-process against a real ZooKeeper: the controller's paths
beyond failover (partitions added, preferred election and reassignment through their znodes, a
reassignment by the API resumed by the next controller,
AlterPartition, topic deletion, unclean override, stale compare-and-sets, controlled shutdown, the auto
leader rebalance on its leader.imbalance.check.interval.seconds timer)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from functools import partial

import pytest

from helpers import wait_until
from kaflite.cluster.controller import ControllerConfig
from kaflite.cluster.controller.events import (
    AlterPartition,
    AlterPartitionResult,
    ControlledShutdown,
    ControlledShutdownResult,
    ElectionResults,
    ElectionType,
    ElectLeaders,
    ListReassignments,
    OngoingReassignments,
    PartitionReassignment,
    ReassignmentResults,
)
from kaflite.cluster.member import ClusterMember
from kaflite.cluster.zk import KafkaZkClient
from kaflite.cluster.zk_metadata import controller_config
from kaflite.cluster.zkconfig import zookeeper_settings
from kaflite.cluster.zkdata import BrokerInfo, LeaderAndIsr, TopicAssignment, ZkEndpoint
from kaflite.protocol.errors import ErrorCode
from kaflite.server.config import BrokerConfig

_wait = partial(wait_until, timeout=20.0)  # members in this process answer quickly: 20 s bounds every wait


class Cluster:
    def __init__(self, connect: str) -> None:
        self.connect = connect
        self.members: dict[int, ClusterMember] = {}
        self.seen: dict[int, dict[tuple[str, int], LeaderAndIsr]] = {}
        self.zk = KafkaZkClient(connect, session_timeout_ms=10000)
        self.zk.start()

    def start(
        self, broker_id: int, controller_config: ControllerConfig | None = None, **config: object
    ) -> ClusterMember:
        settings = zookeeper_settings(
            {"zookeeper.connect": self.connect, "zookeeper.session.timeout.ms": 4000}
        )
        assert settings is not None
        seen = self.seen.setdefault(broker_id, {})
        m = ClusterMember(
            settings,
            BrokerInfo(broker_id, (ZkEndpoint("PLAINTEXT", "127.0.0.1", 19000 + broker_id),)),
            controller_config or ControllerConfig(**config),  # type: ignore[arg-type]
            on_partition_state=lambda tp, s: seen.__setitem__(tp, s),
        )
        m.start()
        self.members[broker_id] = m
        return m

    def controller(self) -> ClusterMember:
        cid = _wait("a controller", self.zk.get_controller_id)
        m = self.members[cid]
        _wait("the controller active", lambda: m.controller.is_active)
        return m

    def state(self, topic: str, p: int) -> LeaderAndIsr | None:
        return self.zk.get_partition_states([(topic, p)])[(topic, p)]

    def close(self) -> None:
        for m in self.members.values():
            m.stop()
        self.zk.close()


@pytest.fixture
def cluster(zk_connect: str) -> Iterator[Cluster]:
    c = Cluster(zk_connect)
    try:
        yield c
    finally:
        c.close()


def _three(cluster: Cluster, **config: object) -> ClusterMember:
    for b in (1, 2, 3):
        cluster.start(b, **config)
    _wait("3 brokers", lambda: cluster.zk.get_broker_ids() == [1, 2, 3])
    return cluster.controller()


def _alter(
    cluster: Cluster, ctl: ClusterMember, tp: tuple[str, int], isr: tuple[int, ...]
) -> AlterPartitionResult:
    s = cluster.state(*tp)
    assert s is not None
    leader = cluster.members[s.leader]
    out = ctl.controller.submit(
        AlterPartition(s.leader, leader.broker_epoch, tp, s.leader_epoch, isr, s.zk_version)
    ).result(10)
    return next(d for d in out if isinstance(d, AlterPartitionResult))


def test_members_learn_leadership_and_partitions_added(cluster: Cluster) -> None:
    _three(cluster)
    cluster.zk.create_topic(TopicAssignment("t", {0: (1, 2), 1: (2, 3)}, uuid.uuid4()))
    _wait("leaders", lambda: cluster.state("t", 1))
    # each member hears only of its own partitions, with the state the controller wrote
    _wait("member 3 sees t-1", lambda: ("t", 1) in cluster.seen[3])
    assert ("t", 0) not in cluster.seen[3]
    assert cluster.seen[1][("t", 0)] == LeaderAndIsr(1, 0, (1, 2), 1, 0)
    got = cluster.zk.get_topic_assignment("t")
    assert got is not None
    cluster.zk.set_topic_assignment(
        TopicAssignment("t", {0: (1, 2), 1: (2, 3), 2: (3, 1)}, got[0].topic_id), got[1]
    )
    s = _wait("t-2 led", lambda: cluster.state("t", 2))
    assert (s.leader, s.isr, s.leader_epoch) == (3, (3, 1), 0)


def test_alter_partition_and_preferred_election_through_the_znode(cluster: Cluster) -> None:
    ctl = _three(cluster, auto_leader_rebalance_enable=False)
    cluster.zk.create_topic(TopicAssignment("t", {0: (1, 2, 3)}, uuid.uuid4()))
    _wait("leader", lambda: cluster.state("t", 0))
    shrunk = _alter(cluster, ctl, ("t", 0), (1, 2))
    assert shrunk.error is None and shrunk.state is not None and shrunk.state.isr == (1, 2)
    assert cluster.state("t", 0) == shrunk.state  # written, leader epoch unchanged, version + 1
    stale = ctl.controller.submit(
        AlterPartition(1, cluster.members[1].broker_epoch, ("t", 0), 0, (1,), 0)
    ).result(10)
    assert (
        next(d for d in stale if isinstance(d, AlterPartitionResult)).error
        is ErrorCode.invalid_update_version
    )
    # leadership moves off 1 by an election request, then back through the znode
    out = ctl.controller.submit(ElectLeaders(frozenset({("t", 0)}), ElectionType.PREFERRED)).result(10)
    assert next(d for d in out if isinstance(d, ElectionResults)).results == {
        ("t", 0): ErrorCode.election_not_needed
    }
    down = ctl.controller.submit(ControlledShutdown(1, cluster.members[1].broker_epoch)).result(10)
    assert next(d for d in down if isinstance(d, ControlledShutdownResult)).remaining == frozenset()
    s = _wait("leader moved to 2", lambda: (x := cluster.state("t", 0)) is not None and x.leader == 2 and x)
    assert s.isr == (2,)
    cluster.members[1].stop()  # it shuts down, comes back: not in sync, so 2 keeps leading
    del cluster.members[1]
    _wait("1 gone", lambda: cluster.zk.get_broker_ids() == [2, 3])
    cluster.start(1)
    _wait("1 back", lambda: cluster.zk.get_broker_ids() == [1, 2, 3])
    ctl = cluster.controller()
    _wait("the controller sees 1 back", lambda: 1 in ctl.controller.controller.live_brokers)
    assert _alter(cluster, ctl, ("t", 0), (2, 1)).error is None  # it caught up
    cluster.zk.create_preferred_replica_election([("t", 0)])
    s = _wait(
        "preferred leader back", lambda: (x := cluster.state("t", 0)) is not None and x.leader == 1 and x
    )
    assert s.isr == (2, 1)
    _wait("the znode removed", lambda: cluster.zk.get_data("/admin/preferred_replica_election") is None)


def test_reassignment_through_the_znode(cluster: Cluster) -> None:
    ctl = _three(cluster)
    cluster.zk.create_topic(TopicAssignment("t", {0: (1, 2)}, uuid.uuid4()))
    _wait("leader", lambda: cluster.state("t", 0))
    cluster.zk.create_reassignment({("t", 0): [2, 3]})

    def moving() -> TopicAssignment | None:
        got = cluster.zk.get_topic_assignment("t")
        return got[0] if got and got[0].adding_replicas else None

    a = _wait("the reassignment started", moving)
    assert (
        a.partitions[0] == (2, 3, 1) and a.adding_replicas == {0: (3,)} and a.removing_replicas == {0: (1,)}
    )
    _wait("member 3 follows t-0", lambda: ("t", 0) in cluster.seen[3])
    assert _alter(cluster, ctl, ("t", 0), (1, 2, 3)).error is None  # the new replica caught up
    s = _wait("done", lambda: (x := cluster.state("t", 0)) is not None and x.leader == 2 and x)
    assert s.isr == (2, 3)
    got = cluster.zk.get_topic_assignment("t")
    assert got is not None and got[0].partitions == {0: (2, 3)} and not got[0].adding_replicas
    _wait("the znode removed", lambda: cluster.zk.get_data("/admin/reassign_partitions") is None)


def test_reassignment_by_the_api_survives_a_controller_failover(cluster: Cluster) -> None:
    # AlterPartitionReassignments to the controller; the controller stops mid-move; the next one resumes
    # from the topic znode and completes when the leader's own ISR write (compare-and-set, then
    # /isr_change_notification, as a ZooKeeper-mode leader does) brings the new replica in
    ctl = _three(cluster)
    cluster.zk.create_topic(TopicAssignment("t", {0: (1, 2)}, uuid.uuid4()))
    _wait("leader", lambda: cluster.state("t", 0))
    out = ctl.controller.submit(PartitionReassignment({("t", 0): (2, 3)}, from_api=True)).result(10)
    assert next(d for d in out if isinstance(d, ReassignmentResults)).results == {("t", 0): (None, None)}
    old = next(b for b, m in cluster.members.items() if m is ctl)
    others = [m for b, m in cluster.members.items() if b != old]
    assert all(not m.controller.is_active for m in others)
    refused = others[0].controller.submit(ListReassignments(None)).result(10)
    assert refused == [OngoingReassignments(0, {}, ErrorCode.not_controller)]
    cluster.members.pop(old).stop()
    new = _wait("another controller", lambda: (c := cluster.zk.get_controller_id()) not in (None, old) and c)
    nctl = cluster.members[new]
    _wait("it is active", lambda: nctl.controller.is_active)
    listed = next(d for d in nctl.controller.submit(ListReassignments(None)).result(10)
                  if isinstance(d, OngoingReassignments))
    assert listed.reassignments == {("t", 0): ((2, 3, 1), (3,), (1,))}
    if old in (2, 3):  # a target replica stopped with the controller: back first
        cluster.start(old)
        _wait("it is back", lambda: old in nctl.controller.controller.live_brokers)
    s = _wait("a leader", lambda: (x := cluster.state("t", 0)) is not None and x.leader != -1 and x)
    written, stale = cluster.zk.update_partition_states(
        {("t", 0): LeaderAndIsr(s.leader, s.leader_epoch, tuple(sorted({*s.isr, 2, 3})), s.controller_epoch,
                                s.zk_version)}, None)
    assert not stale
    cluster.zk.propagate_isr_changes([("t", 0)])
    done = _wait("the move done", lambda: (a := cluster.zk.get_topic_assignment("t")) is not None
                 and a[0].partitions == {0: (2, 3)} and a[0])
    assert not done.adding_replicas and not done.removing_replicas
    s = cluster.state("t", 0)
    assert s is not None and s.leader in (2, 3) and set(s.isr) == {2, 3}


def test_topic_deletion_and_unclean_override(cluster: Cluster) -> None:
    ctl = _three(cluster)
    cluster.zk.create_topic(TopicAssignment("gone", {0: (1, 2)}, uuid.uuid4()))
    cluster.zk.create_topic(TopicAssignment("u", {0: (2, 3)}, uuid.uuid4()))
    _wait("leaders", lambda: cluster.state("gone", 0) and cluster.state("u", 0))
    cluster.zk.mark_topic_for_deletion("gone")
    _wait("deleted", lambda: "gone" not in cluster.zk.get_all_topics())
    assert cluster.zk.get_topics_marked_for_deletion() == set()
    # u-0 only in sync on 2; 2 dies: offline (unclean off) until the topic allows unclean election
    assert _alter(cluster, ctl, ("u", 0), (2,)).error is None
    victim = cluster.members.pop(2)
    victim.stop()
    s = _wait("offline", lambda: (x := cluster.state("u", 0)) is not None and x.leader == -1 and x)
    assert s.isr == (2,)
    # the topic override, written as kafka-configs.sh does (config znode + change notification)
    cluster.zk.set_entity_config("topics", "u", {"unclean.leader.election.enable": "true"})
    s = _wait("unclean leader", lambda: (x := cluster.state("u", 0)) is not None and x.leader == 3 and x)
    assert s.isr == (3,)


@pytest.mark.parametrize("enabled", [True, False])
def test_auto_leader_rebalance_runs_on_the_configured_interval(cluster: Cluster, enabled: bool) -> None:
    # the broker keys as a server.properties gives them, through the same mapping the broker uses
    config = controller_config(BrokerConfig.load(overrides={
        "leader.imbalance.check.interval.seconds": "1",
        "auto.leader.rebalance.enable": str(enabled).lower(),
    }))
    assert config.leader_imbalance_check_interval_seconds == 1
    for b in (1, 2, 3):
        cluster.start(b, config)
    _wait("3 brokers", lambda: cluster.zk.get_broker_ids() == [1, 2, 3])
    ctl = cluster.controller()
    assert ctl.controller.rebalance_interval_s == 1.0
    cluster.zk.create_topic(TopicAssignment("t", {0: (1, 2, 3)}, uuid.uuid4()))
    _wait("1 leads t-0", lambda: (x := cluster.state("t", 0)) is not None and x.leader == 1)
    # the preferred replica's member stops: leadership moves away; it comes back and catches up
    cluster.members.pop(1).stop()
    moved = _wait("leader moved off 1", lambda: (x := cluster.state("t", 0)) is not None and x.leader in (2, 3) and x)
    cluster.start(1, config)
    ctl = cluster.controller()
    _wait("the controller sees 1 back", lambda: 1 in ctl.controller.controller.live_brokers)
    assert (s := cluster.state("t", 0)) is not None and s.leader == moved.leader  # a restart moves nothing
    assert _alter(cluster, ctl, ("t", 0), (*s.isr, 1)).error is None  # 1 is in sync again
    caught_up = time.monotonic()
    if enabled:
        # the check runs every second: leadership is back within a few intervals (300 s by default)
        back = wait_until("1 leads t-0 again", lambda: (x := cluster.state("t", 0)) is not None
                          and x.leader == 1 and x, timeout=8.0)
        assert back.leader_epoch > moved.leader_epoch and 1 in back.isr
        assert time.monotonic() - caught_up < 8.0
    else:
        time.sleep(4.0)  # four intervals: the check runs and, switched off, moves nothing
        s = cluster.state("t", 0)
        assert s is not None and s.leader == moved.leader and 1 in s.isr
