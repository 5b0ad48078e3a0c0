"""Fault tests of replication (issue 13's acceptance): three `python -m kaflite.server` processes on a real
ZooKeeper, topic RF 3 with min.insync.replicas=2, an idempotent confluent-kafka producer with acks=all
writing sequence-numbered records while the test kills -9 (or freezes with SIGSTOP) a broker, leader or
not, and brings it back, cycle after cycle. At the end every acknowledged record is read back exactly once,
in order, per partition, and every record a consumer saw during the faults is still there at the same
offset (a consumer never sees what could vanish).

The default suite runs a short version of each (about a minute each on the shared machine); the 20-cycle
kill -9 run is marked slow. Each cycle waits until the returning broker is back in every ISR before the
next fault, so at most one broker is out at a time (the guarantee RF 3 / min.insync 2 gives). The runs
share the module's brokers 1-3 (`three_brokers`, started with SETTINGS; a run ends with all three back in
every ISR), each on a topic of its own."""

from __future__ import annotations

import os
import random
import signal
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.conftest import BrokerProcesses
from cluster.workload import PARTITIONS, Run, Workload, check_exactly_once, read_back
from kaflite.cluster.zk import KafkaZkClient

SETTINGS = ("replica.lag.time.max.ms=4000", "replica.fetch.backoff.ms=200")
THREE_BROKERS_OVERRIDES = SETTINGS  # every start of the module's brokers (cluster/conftest.py)


def _isr_full(zk: KafkaZkClient, topic: str) -> bool:
    states = zk.get_partition_states([(topic, p) for p in range(PARTITIONS)])
    return all(s is not None and s.leader > 0 and sorted(s.isr) == [1, 2, 3] for s in states.values())


def _leaders(zk: KafkaZkClient, topic: str) -> set[int]:
    states = zk.get_partition_states([(topic, p) for p in range(PARTITIONS)])
    return {s.leader for s in states.values() if s is not None and s.leader > 0}


def _fault_run(brokers: BrokerProcesses, zk: KafkaZkClient, cycles: int, mode: str, seed: int,
               budget_s: float) -> Run:
    run = Run()
    rng = random.Random(seed)
    started = time.monotonic()
    topic = f"faults-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": brokers.bootstrap()})
    new = NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([new])[topic].result(30)
    w = Workload(brokers, run, topic=topic)
    assert w.pump(30, lambda: _isr_full(zk, topic)), "the topic never had a full ISR"
    w.pump(1.0)
    for i in range(cycles):
        assert time.monotonic() - started < budget_s, f"over budget after {i} cycles: {run.cycles}"
        leaders = _leaders(zk, topic)
        # alternate: a leader, then a broker chosen at random (leader or not)
        victim = rng.choice(sorted(leaders)) if i % 2 == 0 and leaders else rng.choice([1, 2, 3])
        t0 = time.monotonic()
        if mode == "kill":
            brokers.kill(victim)
            w.pump(rng.uniform(1.0, 3.0))
            # its registration must be gone (session expired) before it can register again, as in Kafka
            assert w.pump(30, lambda v=victim: v not in zk.get_broker_ids()), \
                f"broker {victim} still registered"
            brokers.start(victim, *SETTINGS, wait=False)
            w.pump(30, lambda v=victim: _listening(brokers, v))
        else:
            proc = brokers.procs[victim]
            os.kill(proc.pid, signal.SIGSTOP)
            w.pump(rng.uniform(4.0, 6.0))  # past the 3 s session: the cluster moves on without it
            os.kill(proc.pid, signal.SIGCONT)
        back = w.pump(45, lambda: _isr_full(zk, topic))
        run.cycles.append(f"{mode} {victim}{' (leader)' if victim in leaders else ''}: "
                          f"{time.monotonic() - t0:.1f} s to a full ISR")
        assert back, f"broker {victim} not back in every ISR within 45 s ({run.cycles})"
        w.pump(1.0)
    w.close()
    total = sum(map(len, run.acked.values()))
    final = read_back(brokers, total, topic)
    check_exactly_once(run, final)
    print(f"\n{mode}: {cycles} cycles, {total} acknowledged, {run.failed} failed, {len(run.seen)} seen live, "
          f"{time.monotonic() - started:.1f} s; " + "; ".join(run.cycles))
    return run


def _listening(brokers: BrokerProcesses, broker: int) -> bool:
    import socket

    try:
        socket.create_connection(("127.0.0.1", brokers.ports[broker]), 0.2).close()
        return True
    except OSError:
        return False


def test_kill_9_brokers_loses_nothing_acknowledged(
    three_brokers: BrokerProcesses, three_brokers_zk: KafkaZkClient
) -> None:
    run = _fault_run(three_brokers, three_brokers_zk, cycles=3, mode="kill", seed=13, budget_s=60)
    assert run.failed == 0 and sum(map(len, run.acked.values())) > 0


def test_sigstop_brokers_loses_nothing_acknowledged(
    three_brokers: BrokerProcesses, three_brokers_zk: KafkaZkClient
) -> None:
    run = _fault_run(three_brokers, three_brokers_zk, cycles=2, mode="stop", seed=31, budget_s=60)
    assert run.failed == 0 and sum(map(len, run.acked.values())) > 0


# The soaks: KAFLITE_SOAK=1 runs the 20 cycles whose figures docs/replication.md gives. The default suite
# runs the two short runs above and the nemesis (tests/cluster/test_nemesis.py), whose seeded CI run injects
# the same kills and pauses among its other faults with a stricter checker; 8 soak cycles each on top of
# those cost about 2 minutes of a suite that must stay under 30.
SOAK = os.environ.get("KAFLITE_SOAK", "") not in ("", "0")
SOAK_CYCLES = 20
soak_only = pytest.mark.skipif(not SOAK, reason="20 kill or pause cycles (about 2.5 min each); CI runs the "
                                                "short runs and the nemesis: run with KAFLITE_SOAK=1")


@pytest.mark.slow
@soak_only
def test_kill_9_soak_cycles(
    three_brokers: BrokerProcesses, three_brokers_zk: KafkaZkClient
) -> None:
    run = _fault_run(three_brokers, three_brokers_zk, cycles=SOAK_CYCLES, mode="kill", seed=2026,
                     budget_s=600)
    assert run.failed == 0


@pytest.mark.slow
@soak_only
def test_sigstop_soak_cycles(
    three_brokers: BrokerProcesses, three_brokers_zk: KafkaZkClient
) -> None:
    run = _fault_run(three_brokers, three_brokers_zk, cycles=SOAK_CYCLES, mode="stop", seed=2027,
                     budget_s=600)
    assert run.failed == 0
