"""Invariants of the controller over random histories (hypothesis): brokers dying and starting, leaders
changing their ISR, elections, controlled shutdowns, controller failovers.

- a leader is always in its ISR, and the ISR is a non-empty subset of the assignment;
- with unclean election off, a new leader was in the ISR ZooKeeper held just before;
- leader epochs never go back, and go up whenever the leader changes;
- every write carries the epoch of the controller that made it, controller epochs never go back, and a
  deposed controller's writes are refused;
- no partition stays leaderless while one of its in-sync replicas is alive.
"""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cluster.controller_sim import Fenced, SimZk
from kaflite.cluster.controller import Controller, ControllerConfig
from kaflite.cluster.controller.events import (
    AlterPartition,
    AutoLeaderRebalance,
    BrokerChange,
    ControlledShutdown,
    ElectionType,
    ElectLeaders,
    TopicChange,
    TopicUncleanElectionChange,
)
from kaflite.cluster.placement import assign_replicas

BROKERS = (0, 1, 2, 3)

op = st.one_of(
    st.tuples(st.just("kill"), st.sampled_from(BROKERS)),
    st.tuples(st.just("start"), st.sampled_from(BROKERS)),
    st.tuples(st.just("expand"), st.integers(0, 7), st.sampled_from(BROKERS)),
    st.tuples(st.just("shrink"), st.integers(0, 7), st.sampled_from(BROKERS)),
    st.tuples(st.just("preferred"), st.integers(0, 7)),
    st.tuples(st.just("rebalance")),
    st.tuples(st.just("shutdown"), st.sampled_from(BROKERS)),
    st.tuples(st.just("failover"), st.sampled_from(BROKERS)),
    st.tuples(st.just("unclean_request"), st.integers(0, 7)),
    st.tuples(st.just("unclean_topic"), st.booleans()),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(op, min_size=1, max_size=40),
    seed=st.integers(0, 1000),
    rf=st.integers(1, 3),
    unclean_default=st.booleans(),
)
def test_invariants_over_random_histories(
    ops: list[tuple],
    seed: int,
    rf: int,
    unclean_default: bool,  # type: ignore[type-arg]
) -> None:
    config = ControllerConfig(
        unclean_leader_election_enable=unclean_default, leader_imbalance_per_broker_percentage=0
    )
    zk = SimZk(live={b: 1 for b in BROKERS})
    controller = Controller(0, config)
    zk.elect(controller)
    assignment = assign_replicas(8, rf, BROKERS, fixed_start_index=seed % 4)
    a = _assignment(assignment)
    zk.topics["t"] = a
    zk.run(controller, TopicChange(frozenset({"t"}), {"t": a}))
    registrations = 1
    unclean_ever = unclean_default
    deposed: list[Controller] = []

    for step in ops:
        before = dict(zk.states)
        seen = len(zk.history)
        epoch_before = zk.controller_epoch
        kind = step[0]
        if kind == "kill" and step[1] in zk.live:
            del zk.live[step[1]]
            zk.run(controller, BrokerChange(dict(zk.live)))
        elif kind == "start" and step[1] not in zk.live:
            registrations += 1
            zk.live[step[1]] = registrations
            zk.run(controller, BrokerChange(dict(zk.live)))
        elif kind in ("expand", "shrink"):
            tp = ("t", step[1])
            s = zk.states.get(tp)
            if s is None or s.leader == -1 or s.leader not in zk.live:
                continue
            b = step[2]
            if kind == "expand":
                if b in s.isr or b not in assignment[step[1]]:
                    continue
                isr = (*s.isr, b)
            else:
                if b not in s.isr or b == s.leader:
                    continue
                isr = tuple(x for x in s.isr if x != b)
            zk.run(
                controller, AlterPartition(s.leader, zk.live[s.leader], tp, s.leader_epoch, isr, s.zk_version)
            )
        elif kind == "preferred":
            zk.run(controller, ElectLeaders(frozenset({("t", step[1])})))
        elif kind == "rebalance":
            zk.run(controller, AutoLeaderRebalance())
        elif kind == "shutdown" and step[1] in zk.live:
            zk.run(controller, ControlledShutdown(step[1], zk.live[step[1]]))
        elif kind == "failover":
            deposed.append(controller)
            controller = Controller(step[1], config)
            zk.elect(controller)
            assert zk.controller_epoch == epoch_before + 1
            # the deposed controller, still believing, acts on the next broker change: refused
            old = deposed[-1]
            snapshot = dict(zk.states)
            try:
                zk.run(old, BrokerChange({b: e for b, e in zk.live.items() if b != min(zk.live, default=-1)}))
            except Fenced:
                pass
            assert zk.states == snapshot  # whatever it decided, nothing of it was written
        elif kind == "unclean_request":
            unclean_ever = True
            zk.run(controller, ElectLeaders(frozenset({("t", step[1])}), ElectionType.UNCLEAN))
        elif kind == "unclean_topic":
            unclean_ever = unclean_ever or step[1]
            zk.run(controller, TopicUncleanElectionChange("t", step[1]))

        _check(zk, assignment, before, zk.history[seen:], unclean_ever)


def _assignment(parts: dict[int, list[int]]):  # type: ignore[no-untyped-def]
    from kaflite.cluster.zkdata import TopicAssignment

    return TopicAssignment("t", {p: tuple(r) for p, r in parts.items()}, uuid.uuid4())


def _check(
    zk: SimZk, assignment: dict[int, list[int]], before: dict, writes: list, unclean_ever: bool
) -> None:  # type: ignore[type-arg]
    for (_, p), s in zk.states.items():
        assert s.isr and set(s.isr) <= set(assignment[p]), s
        assert len(set(s.isr)) == len(s.isr)
        assert s.leader == -1 or s.leader in s.isr, s
        assert s.controller_epoch <= zk.controller_epoch
        # availability: a live in-sync replica means a live leader
        if any(b in zk.live for b in s.isr):
            assert s.leader in zk.live, (p, s, zk.live)
    for _tp, old, new in writes:
        assert new.controller_epoch == zk.controller_epoch
        if old is None:
            continue
        assert new.controller_epoch >= old.controller_epoch
        assert new.leader_epoch >= old.leader_epoch, (old, new)
        if new.leader != old.leader:
            assert new.leader_epoch > old.leader_epoch, (old, new)
    if not unclean_ever:
        for tp, s in zk.states.items():
            prev = before.get(tp)
            if prev is not None and s.leader != prev.leader and s.leader != -1:
                assert s.leader in prev.isr, (prev, s)
