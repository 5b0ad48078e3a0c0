"""What a kaflite cluster does when ZooKeeper itself goes away: three `python -m kaflite.server` processes
on a ZooKeeper of the test's own (`zookeeper_private`: the test stops it), a topic of 3 partitions with
RF 3 and min.insync.replicas=2, an idempotent confluent-kafka producer with acks=all writing
`partition:sequence` records at 300/s and a consumer reading live (the `Workload` of the replication fault
tests), while ZooKeeper is

1. frozen (SIGSTOP) for half the brokers' session, then resumed;
2. killed -9 for twice the brokers' session, then restarted on the same data directory and port, with
   CreateTopics, a producer's auto-creation, a new idempotent producer and the cluster's first
   FindCoordinator for a transactional id (which creates `__transaction_state`) arriving meanwhile;
3. killed -9 and, while it is down, a broker killed -9 too;
4. cut off from the brokers (a TCP proxy between them and a ZooKeeper that keeps running) for longer than
   their session, so that ZooKeeper expires the sessions, then reachable again.

Kafka's ZooKeeper mode is the reference: brokers keep serving reads and writes with the leadership they
last knew while ZooKeeper is unreachable, and what needs ZooKeeper (topic creation, ISR changes, noticing
a dead broker, controller failover) waits for it. Only ZooKeeper expires a session, and only while it runs:
restarted from its data directory it restores the sessions it had and counts their timeouts from its
start, so brokers that reconnect in time keep their sessions however long it was down (2, 3). A session
expired by a running ZooKeeper (4) loses its ephemeral znodes: the brokers register again with new broker
epochs and a controller is elected with a higher epoch.

In every case every acknowledged record is read back exactly once, in order, and every record the live
consumer saw is still at the same offset. The measured times are printed (`pytest -s`).
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.static.primitive import i8

from cluster.conftest import BrokerProcesses
from cluster.workload import PARTITIONS, TOPIC, Run, Workload, check_exactly_once, read_back
from helpers import wait_until
from kaflite.cluster.zk import KafkaZkClient
from kaflite.cluster.zkserver import ZooKeeperServer
from kaflite.protocol.errors import ErrorCode
from server.kwire import WireClient

CHROOT = "/kaflite"
BROKERS = (1, 2, 3)
RATE = 300  # records/s, the Workload's
TPS = [(TOPIC, p) for p in range(PARTITIONS)]
LOST = "lost the connection to ZooKeeper"  # kaflite's log line (cluster/zk.py) when a broker notices


class TimedWorkload(Workload):
    """The fault tests' workload, with the time of every acknowledgement (to see the stalls)."""

    def __init__(self, brokers: BrokerProcesses, run: Run) -> None:
        super().__init__(brokers, run)
        self.ack_times: list[float] = []

    def _delivered(self, err: KafkaError | None, msg: object) -> None:
        super()._delivered(err, msg)
        if err is None:
            self.ack_times.append(time.monotonic())

    def acks(self, t0: float, t1: float) -> int:
        return sum(1 for t in self.ack_times if t0 <= t < t1)

    def longest_wait(self, t0: float, t1: float) -> float:
        """The longest time without an acknowledgement within [t0, t1]."""
        marks = [t0, *(t for t in self.ack_times if t0 <= t < t1), t1]
        return max(b - a for a, b in zip(marks, marks[1:], strict=False))

    def first_ack(self, after: float) -> float | None:
        return next((t for t in self.ack_times if t >= after), None)

    def seen(self) -> int:
        return len(self.run.seen)


class ZkProxy:
    """A TCP forwarder between the brokers and ZooKeeper that the test can cut: the brokers lose ZooKeeper
    while it keeps running (and so expires their sessions), as in a network partition. Cut: every forwarded
    connection is closed and new ones are closed at once; healed: connections are forwarded again."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._cut = threading.Event()
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, name="zk-proxy", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            if self._cut.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), 2)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._forward, args=(a, b), daemon=True).start()

    def _forward(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _shut(src)
            _shut(dst)

    def cut(self) -> None:
        self._cut.set()
        with self._lock:
            conns, self._open = self._open, []
        for s in conns:
            _shut(s)

    def heal(self) -> None:
        self._cut.clear()

    def close(self) -> None:
        self.cut()
        _shut(self._listener)


def _shut(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in recv / accept on it
    except OSError:
        pass
    s.close()


def _snapshot(zk: KafkaZkClient) -> dict[str, Any]:
    """What ZooKeeper says of the cluster: controller, its epoch, the broker epochs, each partition's
    leader, leader epoch, ISR and partition epoch."""
    _, epochs = zk.get_all_brokers_with_epochs()
    epoch = zk.get_controller_epoch()
    states = zk.get_partition_states(TPS)
    return {
        "controller": zk.get_controller_id(),
        "controller_epoch": epoch.epoch if epoch else None,
        "broker_epochs": epochs,
        "states": {p: (s.leader, s.leader_epoch, tuple(sorted(s.isr)), s.zk_version) if s else None
                   for (_t, p), s in states.items()},
    }


def _leaders(snapshot: dict[str, Any]) -> list[int]:
    return [state[0] for _p, state in sorted(snapshot["states"].items())]


def _isr_full(zk: KafkaZkClient, members: tuple[int, ...] = BROKERS) -> bool:
    states = zk.get_partition_states(TPS).values()
    return all(s is not None and s.leader in members and sorted(s.isr) == list(members) for s in states)


def _start(brokers: BrokerProcesses, zk: KafkaZkClient) -> TimedWorkload:
    brokers.start_registered(zk, *BROKERS, overrides=("replica.fetch.backoff.ms=200",))
    admin = AdminClient({"bootstrap.servers": brokers.bootstrap()})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    w = TimedWorkload(brokers, Run())
    assert w.pump(30, lambda: _isr_full(zk)), "the topic never had a full ISR"
    w.pump(1.0)
    return w


def _finish(brokers: BrokerProcesses, w: TimedWorkload) -> int:
    """Every acknowledged record read back exactly once, in order; nothing seen live vanished."""
    w.close()
    total = sum(map(len, w.run.acked.values()))
    check_exactly_once(w.run, read_back(brokers, total))
    assert w.run.failed == 0, f"{w.run.failed} deliveries failed"
    return total


def _create_topic_with_leaders(brokers: BrokerProcesses, zk: KafkaZkClient, name: str) -> float:
    """CreateTopics (2 partitions, RF 3) until the controller elected their leaders: seconds it took."""
    t0 = time.monotonic()
    admin = AdminClient({"bootstrap.servers": brokers.bootstrap()})
    admin.create_topics([NewTopic(name, 2, 3)])[name].result(30)
    wait_until(f"{name} led", lambda: all(
        s is not None and s.leader in brokers.procs for s in zk.get_partition_states([(name, 0), (name, 1)]).values()
    ), timeout=20)
    return time.monotonic() - t0


def _settled(
    w: TimedWorkload, zk: KafkaZkClient, before: dict[str, Any], alive: tuple[int, ...]
) -> tuple[dict[str, Any], tuple[int, ...]]:
    """Once ZooKeeper is back: wait until exactly the `alive` brokers are registered, a controller is elected
    and every partition is led by one of them with all of them in sync; returns what ZooKeeper says then and
    the brokers that kept their session. ZooKeeper restored the sessions from its data and counts their
    timeouts from its start: a broker that reconnected within that time kept its session (same broker
    epoch), a later one found it expired and registered again. A controller that kept its session is still
    controller at the same epoch; otherwise a new election raised the epoch."""
    assert w.pump(30, lambda: zk.get_broker_ids() == list(alive) and zk.get_controller_id() is not None
                  and _isr_full(zk, alive)), f"the cluster did not settle: {_snapshot(zk)}"
    after = _snapshot(zk)
    kept = tuple(b for b in alive if after["broker_epochs"][b] == before["broker_epochs"][b])
    if before["controller"] in kept:
        assert (after["controller"], after["controller_epoch"]) == (before["controller"], before["controller_epoch"])
    else:
        assert after["controller_epoch"] > before["controller_epoch"]
    return after, kept


def _noticed(brokers: BrokerProcesses) -> int:
    """How many brokers logged that they lost their connection to ZooKeeper."""
    return sum(1 for b in BROKERS if LOST in brokers.log(b))


@pytest.fixture
def observer(zookeeper_private: ZooKeeperServer) -> Iterator[KafkaZkClient]:
    """The test's ZooKeeper client, connected directly, with a session that outlives each outage (never
    called while ZooKeeper is down: a call would wait for it)."""
    zk = KafkaZkClient(zookeeper_private.connect + CHROOT, session_timeout_ms=30000)
    zk.start()
    try:
        yield zk
    finally:
        zk.close()


@pytest.fixture
def cluster(zookeeper_private: ZooKeeperServer, tmp_path: Path) -> Iterator[BrokerProcesses]:
    """Three brokers' processes (started by the test) with 3 s sessions, stopped by pid after it."""
    brokers = BrokerProcesses(zookeeper_private.connect + CHROOT, tmp_path, session_timeout_ms=3000)
    try:
        yield brokers
    finally:
        brokers.stop_all()


def test_frozen_zookeeper_shorter_than_the_session(
    zookeeper_private: ZooKeeperServer, observer: KafkaZkClient, cluster: BrokerProcesses
) -> None:
    # the dev profile's 6 s session, frozen for half of it: a broker notices when a heartbeat (every third
    # of the session) goes unanswered for another third, so some do, and none can expire
    cluster.session_timeout_ms, freeze_s = 6000, 3.0
    zk_pid = zookeeper_private.pid
    assert zk_pid is not None
    w = _start(cluster, observer)
    before = _snapshot(observer)
    seen0 = w.seen()
    t0 = time.monotonic()
    os.kill(zk_pid, signal.SIGSTOP)
    try:
        w.pump(freeze_s)
    finally:
        os.kill(zk_pid, signal.SIGCONT)
    t1 = time.monotonic()
    acks, wait, seen = w.acks(t0, t1), w.longest_wait(t0, t1), w.seen() - seen0
    w.pump(3.0)  # the brokers that noticed reconnect, to their sessions
    after = _snapshot(observer)
    noticed = _noticed(cluster)
    # nothing changed: same controller and epoch, same registrations, same leaders, epochs and ISRs
    assert after == before
    assert all(proc.poll() is None for proc in cluster.procs.values())
    total = _finish(cluster, w)
    print(f"\nZooKeeper frozen {t1 - t0:.1f} s (session 6 s): {acks} records acknowledged meanwhile, longest wait "
          f"for an acknowledgement {wait:.2f} s, {seen} read by the consumer; {noticed} of 3 brokers noticed "
          f"and reconnected to their session; unchanged after (controller {after['controller']}, epoch "
          f"{after['controller_epoch']}, leaders {_leaders(after)}); {total} acknowledged in all, read back "
          f"once, in order")
    assert acks >= 0.5 * RATE * freeze_s and wait < 1.0, (acks, wait)
    assert seen >= 0.5 * RATE * freeze_s, seen


def test_zookeeper_killed_past_the_session_and_restarted(
    zookeeper_private: ZooKeeperServer, observer: KafkaZkClient, cluster: BrokerProcesses
) -> None:
    outage_s = 6.0
    late: Producer | None = None
    auto: Producer | None = None
    try:
        w = _start(cluster, observer)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        admin.create_topics([NewTopic("side", 1, 3)])["side"].result(30)
        side = ("side", 0)
        wait_until("side led", lambda: (s := observer.get_partition_states([side])[side]) and s.leader > 0)
        # one record acknowledged by all three replicas before the outage: every broker has read the new
        # topic from ZooKeeper (its assignment and config, on the watch) and follows it. A broker that has
        # not yet when ZooKeeper dies cannot follow it until ZooKeeper is back, and holds acks=all back for
        # the whole outage (shrinking the ISR needs ZooKeeper too): seen once on a loaded machine, as 0 of
        # the late producer's 100 records acknowledged during the outage
        warm = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all"})
        warm.produce("side", value=b"warm-up")
        assert warm.flush(30) == 0
        before = _snapshot(observer)
        seen0 = w.seen()
        t0 = time.monotonic()
        zookeeper_private.kill()
        w.pump(1.0)
        # What needs ZooKeeper waits for it, and nothing else: a CreateTopics (its client gives up after 3 s),
        # a producer's auto-creation of a topic; a new idempotent producer gets its producer id (from the
        # block its broker claimed at start) and writes to an existing topic meanwhile. The first
        # FindCoordinator for a transactional id is answered COORDINATOR_NOT_AVAILABLE at once: the creation
        # of __transaction_state waits in broker 1's admin thread.
        t_find = time.monotonic()
        with WireClient(cluster.bootstrap(1), timeout=2.0) as c:
            found = c.request(FindCoordinatorRequest(key_type=i8(1), coordinator_keys=("txn",))).coordinators[0]
        find_s = time.monotonic() - t_find
        assert found.error_code == ErrorCode.coordinator_not_available
        during = admin.create_topics([NewTopic("during", 1, 3)], request_timeout=3)["during"]
        late_acked: list[float] = []
        late = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5})
        for i in range(100):
            late.produce("side", value=f"late:{i}".encode(),
                         on_delivery=lambda err, _m: None if err else late_acked.append(time.monotonic()))
        auto_acked: list[float] = []
        auto = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all", "message.timeout.ms": 60000})
        auto.produce("auto", value=b"x",
                     on_delivery=lambda err, _m: None if err else auto_acked.append(time.monotonic()))
        while time.monotonic() < t0 + outage_s:
            w.pump(0.1)
            late.poll(0)
            auto.poll(0)
        t1 = time.monotonic()
        acks, wait, seen = w.acks(t0, t1), w.longest_wait(t0, t1), w.seen() - seen0
        assert all(proc.poll() is None for proc in cluster.procs.values())
        with pytest.raises(Exception) as timed_out:
            during.result(10)
        zookeeper_private.start()  # the same data directory and port
        t2 = time.monotonic()
        assert w.pump(20, lambda: observer.connected), "the observer did not reconnect"
        w.pump(2 * 3.0)  # past a session timeout counted from ZooKeeper's start: each session kept or expired
        after, kept = _settled(w, observer, before, BROKERS)
        if kept == BROKERS:
            assert after == before  # nothing changed at all
        # What waited is done now: the CreateTopics of the outage was carried out when ZooKeeper answered (its
        # client had given up: Kafka's handler thread waits the same way), unless the session it waited on
        # expired (the request then failed); the auto-created topic exists (its producer asks again).
        during_created = observer.get_topic_assignment("during") is not None
        if kept == BROKERS:
            assert during_created
        if 1 in kept:  # its session kept: the creation it queued during the outage was carried out
            assert w.pump(10, lambda: observer.get_topic_assignment("__transaction_state") is not None)
        auto.flush(30)
        assert len(auto_acked) == 1, "the auto-created topic's record was not acknowledged"
        created_s = _create_topic_with_leaders(cluster, observer, "after")
        total = _finish(cluster, w)
        late_in_outage = sum(1 for t in late_acked if t < t1)
        expired = [b for b in BROKERS if b not in kept]
        print(f"\nZooKeeper killed -9 for {t1 - t0:.1f} s (session 3 s): {acks} records acknowledged meanwhile, "
              f"longest wait for an acknowledgement {wait:.2f} s, {seen} read by the consumer; a producer started "
              f"meanwhile: {late_in_outage} of 100 acknowledged during the outage; FindCoordinator for a "
              f"transactional id answered in {find_s:.3f} s; CreateTopics meanwhile: "
              f"{timed_out.value}, the topic {'created' if during_created else 'not created'} after; ZooKeeper "
              f"answering again {t2 - t1:.1f} s after its restart began; sessions kept by brokers {list(kept)}, "
              f"expired (registered again) {expired}; controller {before['controller']} epoch "
              f"{before['controller_epoch']} -> {after['controller']} epoch {after['controller_epoch']}, leaders "
              f"{_leaders(before)} -> {_leaders(after)}; the auto-created topic's record acknowledged "
              f"{auto_acked[0] - t2:.2f} s after ZooKeeper answered; a new RF 3 topic led {created_s:.2f} s after "
              f"CreateTopics; {total} acknowledged in all, read back once, in order")
        assert acks >= 0.5 * RATE * outage_s and wait < 1.0, (acks, wait)
        assert seen >= 0.5 * RATE * outage_s, seen
        assert late_in_outage == 100
    finally:
        for p in (late, auto):
            if p is not None:
                p.flush(0)


def test_broker_killed_while_zookeeper_is_down(
    zookeeper_private: ZooKeeperServer, observer: KafkaZkClient, cluster: BrokerProcesses
) -> None:
    w = _start(cluster, observer)
    before = _snapshot(observer)
    # a leader that is not the controller (the controller's own failover is the other tests' subject)
    victim = next(b for b in _leaders(before) if b != before["controller"])
    t0 = time.monotonic()
    zookeeper_private.kill()
    w.pump(1.0)
    t_kill = time.monotonic()
    cluster.kill(victim)
    w.pump(5.0)
    t1 = time.monotonic()
    # every partition has the dead broker in its ISR (or as leader): acks=all waits, since neither the
    # controller's election nor a leader's ISR shrink can be written, and ZooKeeper cannot notice the death
    stalled = w.acks(t_kill + 1.0, t1)
    zookeeper_private.start()
    t2 = time.monotonic()
    # ZooKeeper expires the dead broker's restored session a session timeout after its start; then the
    # controller moves its leadership to in-sync replicas and takes it out of the ISRs
    survivors = tuple(b for b in BROKERS if b != victim)
    assert w.pump(20, lambda: victim not in observer.get_broker_ids()), "the dead broker's session never expired"
    gone_s = time.monotonic() - t2
    after, kept = _settled(w, observer, before, survivors)
    w.pump(1.0)
    first = w.first_ack(t2)
    assert first is not None, "no acknowledgement after ZooKeeper returned"
    total = _finish(cluster, w)
    print(f"\nZooKeeper killed -9, then broker {victim} (a leader) 1 s later; {stalled} records acknowledged from "
          f"1 s after that kill until ZooKeeper was restarted {t1 - t_kill:.1f} s after it; ZooKeeper answering "
          f"again after {t2 - t1:.1f} s; broker {victim}'s session expired {gone_s:.2f} s after that, first "
          f"acknowledgement {first - t2:.2f} s after it (longest wait {w.longest_wait(t0, first + 0.001):.2f} s); "
          f"sessions kept by brokers {list(kept)}; leaders {_leaders(before)} -> {_leaders(after)}, controller "
          f"{before['controller']} epoch {before['controller_epoch']} -> {after['controller']} epoch "
          f"{after['controller_epoch']}; {total} acknowledged in all, read back once, in order")
    assert stalled == 0, stalled


def test_sessions_expired_by_zookeeper(
    zookeeper_private: ZooKeeperServer, observer: KafkaZkClient, tmp_path: Path
) -> None:
    proxy = ZkProxy(zookeeper_private.port)
    brokers = BrokerProcesses(f"127.0.0.1:{proxy.port}{CHROOT}", tmp_path, session_timeout_ms=3000)
    try:
        w = _start(brokers, observer)
        before = _snapshot(observer)
        seen0 = w.seen()
        t0 = time.monotonic()
        proxy.cut()
        # ZooKeeper, still running, expires the brokers' sessions: registrations and /controller vanish
        assert w.pump(10, lambda: observer.get_broker_ids() == []), "the sessions never expired"
        expired_s = time.monotonic() - t0
        assert observer.get_controller_id() is None
        w.pump(2.0)  # the brokers serve on, with the leadership they know
        t1 = time.monotonic()
        acks, wait, seen = w.acks(t0, t1), w.longest_wait(t0, t1), w.seen() - seen0
        assert all(proc.poll() is None for proc in brokers.procs.values())
        proxy.heal()
        # each broker gets a new session, registers again (a new broker epoch) and runs for controller
        assert w.pump(20, lambda: observer.get_broker_ids() == list(BROKERS)), "the brokers did not register again"
        registered_s = time.monotonic() - t1
        assert w.pump(20, lambda: observer.get_controller_id() is not None), "no controller elected"
        elected_s = time.monotonic() - t1
        assert w.pump(30, lambda: _isr_full(observer)), f"partitions not led with a full ISR: {_snapshot(observer)}"
        settled_s = time.monotonic() - t1
        after = _snapshot(observer)
        assert after["controller_epoch"] > before["controller_epoch"]
        assert all(after["broker_epochs"][b] != before["broker_epochs"][b] for b in BROKERS)
        w.pump(1.0)
        healed_wait = w.longest_wait(t1, time.monotonic())
        created_s = _create_topic_with_leaders(brokers, observer, "after")
        total = _finish(brokers, w)
        leader_epochs = [after["states"][p][1] for p in range(PARTITIONS)]
        print(f"\nZooKeeper cut off for {t1 - t0:.1f} s (session 3 s): sessions expired after {expired_s:.1f} s; "
              f"{acks} records acknowledged meanwhile, longest wait for an acknowledgement {wait:.2f} s, {seen} "
              f"read by the consumer; reachable again: all registered again after {registered_s:.2f} s, "
              f"controller {after['controller']} elected (epoch {before['controller_epoch']} -> "
              f"{after['controller_epoch']}) after {elected_s:.2f} s, full ISRs after {settled_s:.2f} s, leaders "
              f"{_leaders(before)} -> {_leaders(after)} (leader epochs {leader_epochs}), longest wait for an "
              f"acknowledgement meanwhile {healed_wait:.2f} s; a new RF 3 topic led {created_s:.2f} s after "
              f"CreateTopics; {total} acknowledged in all, read back once, in order")
        assert acks >= 0.5 * RATE * (t1 - t0) and wait < 1.0, (acks, wait)
        assert seen >= 0.5 * RATE * (t1 - t0), seen
    finally:
        brokers.stop_all()
        proxy.close()
