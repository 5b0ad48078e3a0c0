"""The control plane end to end: a real ZooKeeper and cluster members as real processes
(`python -m kaflite.cluster.member`, 3 s sessions). Brokers register, one is elected controller, topics
get leaders as Kafka places them; kill -9 of the controller elects another within the session timeout +
2 s with the epoch bumped; kill -9 of a leader moves each of its partitions to an ISR member with
leader_epoch + 1; a controller frozen past its session and resumed changes nothing (fenced).

The first test starts its own members (it checks the cluster's first election, epoch 1); the others share
members 1-3 with the module (`three_members`, which restarts or resumes what a test killed or froze), each
on a topic of its own, and compare epochs with the ones they found at their start."""

from __future__ import annotations

import os
import signal
import time
import uuid

from cluster.conftest import MemberProcesses
from helpers import wait_until
from kaflite.cluster.placement import assign_replicas
from kaflite.cluster.zk import KafkaZkClient
from kaflite.cluster.zkdata import LeaderAndIsr, TopicAssignment

SESSION_S = 3.0


def _states(zk: KafkaZkClient, topic: str, n: int) -> dict[int, LeaderAndIsr]:
    got = zk.get_partition_states([(topic, p) for p in range(n)])
    return {p: s for (_, p), s in got.items() if s is not None}


def _cluster_of_three(members: MemberProcesses, zk: KafkaZkClient) -> tuple[int, int]:
    for b in (1, 2, 3):
        members.start(b)
    wait_until("3 registered brokers", lambda: zk.get_broker_ids() == [1, 2, 3])
    return _controller(zk)


def _controller(zk: KafkaZkClient) -> tuple[int, int]:
    """The controller and its epoch."""
    controller = wait_until("a controller", zk.get_controller_id)
    epoch = zk.get_controller_epoch()
    assert epoch is not None
    return controller, epoch.epoch


def _create_topic(zk: KafkaZkClient, name: str, n: int) -> dict[int, list[int]]:
    placed = assign_replicas(n, 3, [1, 2, 3], fixed_start_index=0)
    zk.create_topic(TopicAssignment(name, {p: tuple(r) for p, r in placed.items()}, uuid.uuid4()))
    wait_until(f"leaders for {name}", lambda: len(_states(zk, name, n)) == n or None)
    return placed


def test_registration_election_and_placement(members: MemberProcesses, zk: KafkaZkClient) -> None:
    controller, epoch = _cluster_of_three(members, zk)
    assert controller in (1, 2, 3) and epoch == 1
    placed = _create_topic(zk, "orders", 6)
    # Kafka's rack-unaware placement with start index 0 over brokers [1, 2, 3]
    assert placed == {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2], 3: [1, 3, 2], 4: [2, 1, 3], 5: [3, 2, 1]}
    for p, s in _states(zk, "orders", 6).items():
        assert s.leader == placed[p][0] and list(s.isr) == placed[p] and s.leader_epoch == 0
        assert s.controller_epoch == epoch
    # a second broker with a live id is refused, with the reason
    dup = members.start(2)
    assert dup.wait(30) == 1
    assert "broker.id 2 is already registered in ZooKeeper by a live broker" in members.log(2)


def _topic() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def test_kill_9_of_the_controller_elects_another_in_time(
    three_members: MemberProcesses, three_members_zk: KafkaZkClient
) -> None:
    members, zk, t = three_members, three_members_zk, _topic()
    controller, epoch = _controller(zk)
    placed = _create_topic(zk, t, 6)
    before = _states(zk, t, 6)
    t0 = time.monotonic()
    os.kill(members.procs[controller].pid, signal.SIGKILL)
    members.procs[controller].wait(10)
    new = wait_until(
        "a new controller", lambda: (c := zk.get_controller_id()) not in (None, controller) and c
    )
    elapsed = time.monotonic() - t0
    assert elapsed <= SESSION_S + 2, f"controller failover took {elapsed:.2f}s"
    got = zk.get_controller_epoch()
    assert got is not None and got.epoch == epoch + 1
    print(f"controller failover after kill -9: {elapsed:.2f}s (session timeout {SESSION_S:.0f}s)")
    # the dead controller was a broker too: its partitions moved, it left every ISR
    wait_until(
        "the dead broker out of every ISR",
        lambda: all(controller not in s.isr for s in _states(zk, t, 6).values()),
    )
    for p, s in _states(zk, t, 6).items():
        assert s.controller_epoch == epoch + 1
        if before[p].leader == controller:
            assert s.leader == next(
                r for r in placed[p] if r != controller
            )  # first live ISR member in assignment order
            assert s.leader_epoch == before[p].leader_epoch + 1
        else:
            assert s.leader == before[p].leader
    assert new != controller


def test_kill_9_of_a_leader_moves_its_partitions(
    three_members: MemberProcesses, three_members_zk: KafkaZkClient
) -> None:
    members, zk, t = three_members, three_members_zk, _topic()
    controller, _ = _controller(zk)
    placed = _create_topic(zk, t, 6)
    victim = next(b for b in (1, 2, 3) if b != controller)
    before = _states(zk, t, 6)
    led = [p for p, s in before.items() if s.leader == victim]
    assert led
    t0 = time.monotonic()
    os.kill(members.procs[victim].pid, signal.SIGKILL)
    members.procs[victim].wait(10)

    def moved() -> dict[int, LeaderAndIsr] | None:
        now = _states(zk, t, 6)
        return (
            now
            if all(now[p].leader != victim for p in led) and all(victim not in s.isr for s in now.values())
            else None
        )

    after = wait_until("its partitions moved", moved)
    elapsed = time.monotonic() - t0
    assert elapsed <= SESSION_S + 2, f"leader failover took {elapsed:.2f}s"
    print(f"leader failover after kill -9: {elapsed:.2f}s")
    for p in led:
        assert after[p].leader in before[p].isr
        assert after[p].leader == next(r for r in placed[p] if r != victim)
        assert after[p].leader_epoch == before[p].leader_epoch + 1
    # it comes back: it registers again; its partitions stay with their new leaders (it is out of sync)
    members.start(victim)
    wait_until("the broker back", lambda: victim in zk.get_broker_ids())
    assert zk.get_controller_id() == controller


def test_frozen_controller_is_fenced_after_resuming(
    three_members: MemberProcesses, three_members_zk: KafkaZkClient
) -> None:
    members, zk, t = three_members, three_members_zk, _topic()
    controller, epoch = _controller(zk)
    _create_topic(zk, t, 3)
    proc = members.procs[controller]
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        new = wait_until(
            "a controller elected past the frozen one's session",
            lambda: (c := zk.get_controller_id()) not in (None, controller) and c,
            timeout=SESSION_S + 10,
        )
        new_epoch = zk.get_controller_epoch()
        assert new_epoch is not None and new_epoch.epoch == epoch + 1
        wait_until(
            "the frozen broker out of every ISR",
            lambda: all(controller not in s.isr for s in _states(zk, t, 3).values()),
        )
        settled = _states(zk, t, 3)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    # resumed: it finds its session expired, resigns, registers again; it never writes with its old epoch
    wait_until(
        "the resumed controller resigned",
        lambda: "resigns as controller" in members.log(controller),
        timeout=20,
    )
    wait_until("the resumed broker registered again", lambda: controller in zk.get_broker_ids(), timeout=20)
    assert zk.get_controller_id() == new
    epoch_now = zk.get_controller_epoch()
    assert epoch_now is not None and epoch_now.epoch == epoch + 1
    assert _states(zk, t, 3) == settled
