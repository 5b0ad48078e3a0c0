"""The controller never gets ahead of ZooKeeper (issue 24, finding 5). Deterministic, without sockets: the
controller's shell (`ControllerService`, driven through `process` on the test's thread) runs against an
in-memory ZooKeeper whose writes can fail as kazoo fails them once its retries run out (ConnectionLoss),
before or after landing; and `KafkaZkClient`'s own retries run against a fake kazoo client."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

import pytest
from kazoo.exceptions import ConnectionLoss, NodeExistsError
from kazoo.retry import KazooRetry

from cluster.controller_sim import SimZk
from kaflite.cluster import zk as zk_module
from kaflite.cluster.controller import Controller
from kaflite.cluster.controller.events import BrokerChange
from kaflite.cluster.controller.states import IllegalStateTransition
from kaflite.cluster.zk import (
    BrokersChanged,
    ControllerChanged,
    ControllerEpochZkVersion,
    ControllerMovedError,
    KafkaZkClient,
    TopicsChanged,
)
from kaflite.cluster.zkcontroller import ControllerService, _GiveUpAgain
from kaflite.cluster.zkdata import BrokerInfo, ControllerInfo, LeaderAndIsr, TopicAssignment, ZkEndpoint

TP = tuple[str, int]


class FakeZk:
    """The part of KafkaZkClient the controller's shell uses, in memory, with the controller epoch guard
    and compare-and-set on state versions. `fail_updates` holds what the next update_partition_states
    calls do: "lost" (ConnectionLoss, nothing written), "landed" (written, then ConnectionLoss)."""

    def __init__(self, live: Mapping[int, int], topics: Iterable[TopicAssignment]) -> None:
        self.epoch, self.epoch_version = 0, 0
        self.controller: int | None = None
        self.live = dict(live)
        self.topics = {a.topic: a for a in topics}
        self.states: dict[TP, LeaderAndIsr] = {}
        self.fail_updates: list[str] = []
        self.resigned = 0
        self.configs: dict[str, dict[str, str]] = {}  # topic -> its config overrides

    # election
    def register_controller_and_increment_epoch(self, broker_id: int) -> ControllerEpochZkVersion:
        if self.controller is not None:
            raise ControllerMovedError(f"controller is {self.controller}")
        self.controller, self.epoch, self.epoch_version = broker_id, self.epoch + 1, self.epoch_version + 1
        return ControllerEpochZkVersion(self.epoch, self.epoch_version)

    def resign_controller(self, broker_id: int) -> None:
        if self.controller == broker_id:
            self.controller = None
            self.resigned += 1

    def _check(self, guard: ControllerEpochZkVersion | None) -> None:
        if guard is None or guard.zk_version != self.epoch_version:
            raise ControllerMovedError("fenced")

    # reads
    def get_all_brokers_with_epochs(self) -> tuple[dict[int, Any], dict[int, int]]:
        return {}, dict(self.live)

    def get_all_topics(self) -> set[str]:
        return set(self.topics)

    def get_topic_assignment(self, topic: str) -> tuple[TopicAssignment, int] | None:
        return (self.topics[topic], 0) if topic in self.topics else None

    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        return dict(self.configs.get(name, {})) if entity_type == "topics" else {}

    def get_partition_states(self, tps: Iterable[TP]) -> dict[TP, LeaderAndIsr | None]:
        return {tp: self.states.get(tp) for tp in tps}

    def get_topics_marked_for_deletion(self) -> set[str]:
        return set()

    def get_reassignment(self) -> dict[TP, tuple[int, ...]]:
        return {}

    def get_preferred_replica_election(self) -> set[TP]:
        return set()

    # watches (the test hands events over itself)
    def watch_cluster(self, callback: Any) -> None: ...
    def watch_config_changes(self, callback: Any) -> None: ...
    def watch_controlled_shutdowns(self, callback: Any) -> None: ...

    # writes
    def create_partition_states(self, states: Mapping[TP, LeaderAndIsr], guard: Any) -> tuple[dict, set[TP]]:
        self._check(guard)
        existing = {tp for tp in states if tp in self.states}
        for tp, s in states.items():
            if tp not in existing:
                self.states[tp] = _versioned(s, 0)
        return {}, existing

    def update_partition_states(self, states: Mapping[TP, LeaderAndIsr], guard: Any) -> tuple[dict, set[TP]]:
        fault = self.fail_updates.pop(0) if self.fail_updates else None
        if fault == "lost":
            raise ConnectionLoss()
        self._check(guard)
        stale = set()
        for tp, s in states.items():
            cur = self.states.get(tp)
            if cur is None or cur.zk_version != s.zk_version:
                stale.add(tp)
            else:
                self.states[tp] = _versioned(s, s.zk_version + 1)
        if fault == "landed":
            raise ConnectionLoss()
        return {}, stale

    def set_topic_assignment(self, assignment: TopicAssignment, version: int, guard: Any) -> int:
        self._check(guard)
        self.topics[assignment.topic] = assignment
        return 0


def _versioned(s: LeaderAndIsr, version: int) -> LeaderAndIsr:
    return LeaderAndIsr(s.leader, s.leader_epoch, s.isr, s.controller_epoch, version)


def _cluster() -> tuple[FakeZk, ControllerService]:
    """Brokers 1-3; topic t with 6 partitions of 3 replicas (preferred leaders 1, 2, 3, 1, 2, 3);
    broker 1 elected controller, every partition led."""
    parts = {p: tuple((p + i) % 3 + 1 for i in range(3)) for p in range(6)}
    zk = FakeZk({1: 101, 2: 102, 3: 103}, [TopicAssignment("t", parts)])
    svc = ControllerService(zk, 1)  # type: ignore[arg-type]
    assert svc.process(ControllerChanged(None)) == []
    assert svc.is_active and zk.controller == 1
    assert {s.leader for s in zk.states.values()} == {1, 2, 3}
    return zk, svc


def _view_not_ahead(zk: FakeZk, svc: ControllerService) -> None:
    """The controller's view of partition states is ZooKeeper's (or it has none: it resigned)."""
    c = svc.controller
    assert not getattr(c, "unconfirmed", False)
    if c.active:
        assert c.leadership == zk.states


def _all_led_by_live(zk: FakeZk) -> None:
    for tp, s in sorted(zk.states.items()):
        assert s.leader in zk.live, f"{tp} led by {s.leader}, live {sorted(zk.live)}"
        assert all(r in zk.live for r in s.isr), (tp, s)


@pytest.mark.parametrize("fault", ["lost", "landed"])
def test_a_write_failing_past_its_retries_resigns_and_the_next_controller_leads_every_partition(
    fault: str,
) -> None:
    """The finding's example: broker 2 dies while ZooKeeper is unreachable (the state writes fail after
    kazoo's retries, having landed or not). The controller does not keep the new leaders in memory only:
    it resigns and gives /controller up; the election that follows reads ZooKeeper and leads every
    partition from a live broker."""
    zk, svc = _cluster()
    zk.fail_updates = [fault]
    del zk.live[2]
    svc.process(BrokersChanged({}, dict(zk.live)))
    _view_not_ahead(zk, svc)
    assert not svc.is_active and zk.controller is None and zk.resigned == 1
    # /controller's deletion fires the watch on every broker: an election (here broker 1 wins again)
    svc.process(ControllerChanged(None))
    assert svc.is_active and svc.epoch == 2
    _view_not_ahead(zk, svc)
    _all_led_by_live(zk)


def test_controller_given_up_again_while_zookeeper_does_not_answer() -> None:
    """The deletion of /controller fails too (ZooKeeper still unreachable): tried again on the timer until
    it is deleted; a controller elected meanwhile (its session ended, /controller with it) stops trying."""
    zk, svc = _cluster()
    real = zk.resign_controller
    zk.resign_controller = lambda b: (_ for _ in ()).throw(ConnectionLoss())  # type: ignore[method-assign]
    zk.fail_updates = ["lost"]
    del zk.live[2]
    svc.process(BrokersChanged({}, dict(zk.live)))
    assert not svc.is_active and zk.controller == 1 and svc._retry_resign_at is not None
    svc.process(_GiveUpAgain())  # still unreachable: the timer is set again
    assert zk.controller == 1 and svc._retry_resign_at is not None
    zk.resign_controller = real  # type: ignore[method-assign]
    svc.process(_GiveUpAgain())
    assert zk.controller is None and svc._retry_resign_at is None
    svc.process(ControllerChanged(None))
    assert svc.is_active
    _view_not_ahead(zk, svc)
    _all_led_by_live(zk)


def test_a_failure_while_reading_the_cluster_gives_controller_up() -> None:
    """A controller whose start-up read fails does not keep /controller without acting as controller
    (before: the exception was logged, /controller stayed held, nobody led the cluster)."""
    zk, svc = _cluster()
    svc.process(ControllerChanged(2))  # another broker is named: resign (a test shortcut)
    zk.controller = None
    real = zk.get_all_topics
    zk.get_all_topics = lambda: (_ for _ in ()).throw(ConnectionLoss())  # type: ignore[method-assign]
    svc.process(ControllerChanged(None))
    assert not svc.is_active and zk.controller is None
    zk.get_all_topics = real  # type: ignore[method-assign]
    svc.process(ControllerChanged(None))
    assert svc.is_active
    _view_not_ahead(zk, svc)


def test_an_illegal_transition_mid_event_leaves_the_context_as_it_was() -> None:
    """The pure controller: an exception raised while it handles an event (an illegal state transition
    after some writes were decided) restores the context of the last confirm; nothing is half-applied."""
    sim = SimZk(live={1: 101, 2: 102, 3: 103})
    sim.topics["t"] = TopicAssignment("t", {p: tuple((p + i) % 3 + 1 for i in range(3)) for p in range(6)})
    c = Controller(1)
    sim.elect(c)
    before = (dict(c.leadership), dict(c.partition_states), dict(c.replica_states), dict(c.live_brokers))
    calls = 0
    real = c._set_replica

    def failing(tp: TP, replica: int, target: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise IllegalStateTransition("injected")
        real(tp, replica, target)

    c._set_replica = failing  # type: ignore[method-assign]
    with pytest.raises(IllegalStateTransition):
        c.handle(BrokerChange({1: 101, 3: 103}))
    assert (dict(c.leadership), dict(c.partition_states), dict(c.replica_states), dict(c.live_brokers)) == before
    assert not c.unconfirmed


def test_rollback_undoes_unconfirmed_decisions_and_confirm_keeps_them() -> None:
    sim = SimZk(live={1: 101, 2: 102})
    sim.topics["t"] = TopicAssignment("t", {0: (2, 1)})
    c = Controller(1)
    sim.elect(c)
    assert c.leadership[("t", 0)].leader == 2
    c.handle(BrokerChange({1: 101}))
    assert c.leadership[("t", 0)].leader == 1 and c.unconfirmed
    c.rollback()
    assert c.leadership[("t", 0)].leader == 2 and c.live_brokers == {1: 101, 2: 102}
    sim.run(c, BrokerChange({1: 101}))  # applied and confirmed
    assert c.leadership[("t", 0)] == sim.states[("t", 0)] and not c.unconfirmed


# --- KafkaZkClient's retries (a fake kazoo client) ---------------------------------------------------


class _Stat:
    def __init__(self, version: int = 0, owner: int = 0) -> None:
        self.version, self.ephemeralOwner, self.czxid = version, owner, 1


class FakeKazoo:
    """Answers get() after `losses` ConnectionLoss; a transaction that lands and then loses its answer."""

    client_id = (0x51, b"")

    def __init__(self, losses: int) -> None:
        self.losses = losses
        self.data: dict[str, tuple[bytes, _Stat]] = {}
        self.gets = 0
        self.commits = 0

    def get(self, path: str) -> tuple[bytes, _Stat]:
        self.gets += 1
        if self.losses > 0:
            self.losses -= 1
            raise ConnectionLoss()
        from kazoo.exceptions import NoNodeError

        if path not in self.data:
            raise NoNodeError()
        return self.data[path]

    def transaction(self) -> Any:
        zk = self

        class Tx:
            ops: list[tuple[str, bytes]] = []

            def create(self, path: str, data: bytes, ephemeral: bool = False) -> None:
                self.ops.append((path, data))

            def set_data(self, path: str, data: bytes, version: int) -> None:
                self.ops.append((path, data))

            def commit(self) -> list[Any]:
                zk.commits += 1
                if zk.commits == 1:  # lands, then the connection is lost before the answer
                    for path, data in self.ops:
                        zk.data[path] = (data, _Stat(zk.data[path][1].version + 1 if path in zk.data else 0,
                                                     owner=0x51))
                    raise ConnectionLoss()
                return [NodeExistsError(), NodeExistsError()]

        t = Tx()
        t.ops = []
        return t


def _client(fake: FakeKazoo) -> KafkaZkClient:
    client = KafkaZkClient("127.0.0.1:1", session_timeout_ms=6000)
    client._zk = fake  # type: ignore[assignment]
    client.retry_policy = KazooRetry(max_tries=5, delay=0, max_jitter=0, sleep_func=lambda _s: None,
                                     ignore_expire=False)
    return client


def test_zookeeper_reads_are_retried_while_the_session_lives() -> None:
    fake = FakeKazoo(losses=3)
    client = _client(fake)
    assert client.get_topic_assignment("t") is None  # three ConnectionLoss, then NoNode
    assert fake.gets == 4
    fake.losses = 10  # longer than the retries: reported (the controller then resigns)
    with pytest.raises(Exception, match="retry"):
        client.get_topic_assignment("t")


def test_a_controller_election_whose_answer_was_lost_is_won_on_retry() -> None:
    """The multi-op creating /controller landed but its answer was lost: the retry finds /controller held
    by this session and the epoch it wrote, and wins (it used to report ControllerMovedError)."""
    fake = FakeKazoo(losses=0)
    from kaflite.cluster import zkdata as zd

    fake.data[zd.CONTROLLER_EPOCH] = (zd.encode_controller_epoch(4), _Stat(7))
    client = _client(fake)
    guard = client.register_controller_and_increment_epoch(1, now_ms=0)
    assert guard == ControllerEpochZkVersion(5, 8)
    assert ControllerInfo.decode(fake.data[zd.CONTROLLER][0]).broker_id == 1


# --- watch callbacks only enqueue ------------------------------------------------------------------


class ReadsByThread:
    """A fake kazoo client for the brokers' znodes: records the thread of every read."""

    client_id = (0x51, b"")

    def __init__(self) -> None:
        self.reads: list[str] = []

    def ensure_path(self, path: str) -> None: ...

    def get_children(self, path: str) -> list[str]:
        self.reads.append(threading.current_thread().name)
        return ["1", "2"]

    def get(self, path: str) -> tuple[bytes, _Stat]:
        self.reads.append(threading.current_thread().name)
        bid = int(path.rsplit("/", 1)[1])
        return BrokerInfo(bid, (ZkEndpoint("PLAINTEXT", "h", 9000 + bid, "PLAINTEXT"),)).encode(), _Stat()


def test_a_broker_watch_reads_nothing_on_kazoos_callback_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """kazoo runs every watch callback on one thread: what it calls for /brokers/ids only enqueues; the
    registrations are read, and the BrokersChanged delivered, on the client's zk-watch thread (before, each
    registration was read on kazoo's thread, holding up every other watch for a round trip each)."""
    watches: list[Any] = []

    class FakeChildrenWatch:
        def __init__(self, client: Any, path: str, func: Any) -> None:
            watches.append(func)

    monkeypatch.setattr(zk_module, "ChildrenWatch", FakeChildrenWatch)
    fake = ReadsByThread()
    client = _client(FakeKazoo(0))
    client._zk = fake  # type: ignore[assignment]
    got: list[tuple[str, Any]] = []
    delivered = threading.Event()

    def callback(event: Any) -> None:
        got.append((threading.current_thread().name, event))
        delivered.set()

    client.watch_brokers(callback)
    (fire,) = watches
    kazoo_thread = threading.Thread(target=fire, args=(["1", "2"],), name="kazoo-callbacks")
    kazoo_thread.start()
    kazoo_thread.join(5)
    assert "kazoo-callbacks" not in fake.reads
    assert delivered.wait(5)
    (thread, event), = got
    assert thread == "zk-watch" and isinstance(event, BrokersChanged)
    assert sorted(event.brokers) == [1, 2] and set(fake.reads) == {"zk-watch"}
    client._closed = True
    client._work.put(None)


def test_a_topic_created_while_the_controller_runs_brings_its_unclean_override() -> None:
    """Kafka's AdminZkClient writes a new topic's config znode before its topic znode and sends no change
    notification for it: the controller reads the override when it sees the topic, or never learns it
    (before: a topic created with unclean.leader.election.enable=true stayed offline when its ISR died)."""
    zk, svc = _cluster()
    zk.configs["w"] = {"unclean.leader.election.enable": "true"}
    zk.configs["x"] = {"unclean.leader.election.enable": "false", "retention.ms": "1000"}
    zk.topics["w"] = TopicAssignment("w", {0: (1, 2)})
    zk.topics["x"] = TopicAssignment("x", {0: (1, 2)})
    zk.topics["y"] = TopicAssignment("y", {0: (1, 2)})
    svc.process(TopicsChanged(frozenset(zk.topics)))
    assert svc.controller.topic_unclean == {"w": True, "x": False}
    assert {tp for tp in zk.states if tp[0] in "wxy"} == {("w", 0), ("x", 0), ("y", 0)}
