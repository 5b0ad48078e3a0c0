"""KafkaZkClient (cluster.zk) against a real ZooKeeper: Kafka's layout, ephemeral registrations, the
controller election with its epoch, fencing of a deposed controller, compare-and-set of partition state,
producer id blocks, and watches turned into events."""

from __future__ import annotations

import json
import queue
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from kazoo.exceptions import NoNodeError

from helpers import free_port
from kaflite.cluster import zkdata as zd
from kaflite.cluster.zk import (
    BrokerIdInUseError,
    BrokersChanged,
    ControllerChanged,
    ControllerMovedError,
    KafkaZkClient,
    PartitionStateChanged,
    PreferredElectionRequested,
    ReassignmentRequested,
    StaleZkVersionError,
    TopicAssignmentChanged,
    TopicDeletionRequested,
    TopicExistsError,
    TopicsChanged,
    ZkConnectionError,
    ZkEvent,
)
from kaflite.cluster.zkdata import BrokerInfo, LeaderAndIsr, TopicAssignment, ZkEndpoint
from kaflite.cluster.zkserver import ZooKeeperServer


@pytest.fixture
def clients(zk_connect: str) -> Iterator[Callable[[], KafkaZkClient]]:
    made: list[KafkaZkClient] = []

    def make() -> KafkaZkClient:
        c = KafkaZkClient(zk_connect, session_timeout_ms=4000, connection_timeout_ms=10000)
        c.start()
        made.append(c)
        return c

    yield make
    for c in made:
        try:
            c.close()
        except Exception:
            pass


def _broker(i: int, rack: str | None = None) -> BrokerInfo:
    return BrokerInfo(i, (ZkEndpoint("PLAINTEXT", "127.0.0.1", 19090 + i),), rack=rack, timestamp_ms=1)


def _wait_for(events: queue.Queue[ZkEvent], pred: Callable[[ZkEvent], bool], timeout: float = 10) -> ZkEvent:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            e = events.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            break
        if pred(e):
            return e
    raise AssertionError("event not seen in time")


def test_chroot_is_created_and_layout_is_kafkas(
    zookeeper: ZooKeeperServer, zk_connect: str, clients: Callable[[], KafkaZkClient]
) -> None:
    c = clients()
    c.create_top_level_paths()
    c.register_broker(_broker(1, rack="r1"))
    chroot = zk_connect[zk_connect.index("/") :]
    # read it as zkCli.sh would, from the root without the chroot
    root = KafkaZkClient(zookeeper.connect)
    root.start()
    try:
        for p in zd.PERSISTENT_PATHS:
            assert root.get_data(chroot + p) is not None, p
        got = root.get_data(f"{chroot}/brokers/ids/1")
        assert got is not None
        obj = json.loads(got[0])
        assert (
            obj["version"] == 5
            and obj["endpoints"] == ["PLAINTEXT://127.0.0.1:19091"]
            and obj["rack"] == "r1"
        )
        assert root.ephemeral_owner(f"{chroot}/brokers/ids/1") == c.session_id
    finally:
        root.close()


def test_broker_id_unique_while_alive(clients: Callable[[], KafkaZkClient]) -> None:
    a, b = clients(), clients()
    epoch = a.register_broker(_broker(1))
    assert epoch > 0
    assert a.register_broker(_broker(1)) == epoch  # our own session re-registering is fine
    with pytest.raises(BrokerIdInUseError, match="broker.id 1 is already registered"):
        b.register_broker(_broker(1))
    b.register_broker(_broker(2))
    assert a.get_broker_ids() == [1, 2]
    assert a.get_all_brokers()[2] == _broker(2)
    a.close()  # its session ends: the ephemeral registration goes at once
    assert b.get_broker_ids() == [2]
    b.register_broker(_broker(1))
    assert b.get_broker_ids() == [1, 2]


def test_controller_election_epoch_and_fencing(clients: Callable[[], KafkaZkClient]) -> None:
    a, b = clients(), clients()
    assert a.get_controller_id() is None and a.get_controller_epoch() is None
    won = a.register_controller_and_increment_epoch(1)
    assert won.epoch == 1
    with pytest.raises(ControllerMovedError, match="controller is 1"):
        b.register_controller_and_increment_epoch(2)
    assert b.get_controller_id() == 1
    a.create_top_level_paths()
    tp = ("t", 0)
    created, existing = a.create_partition_states({tp: LeaderAndIsr(1, 0, (1, 2), won.epoch)}, won)
    assert created[tp].zk_version == 0 and not existing

    a.close()  # the controller dies: /controller vanishes with its session
    won_b = b.register_controller_and_increment_epoch(2)
    assert won_b.epoch == 2 and b.get_controller_id() == 2
    assert b.get_controller_epoch() == won_b

    # the deposed controller (a new session reusing a's stale guard) can write nothing
    stale = clients()
    state = b.get_partition_states([tp])[tp]
    assert state is not None
    with pytest.raises(ControllerMovedError, match="epoch 1 is fenced"):
        stale.update_partition_states({tp: LeaderAndIsr(1, 1, (1,), 1, state.zk_version)}, won)
    assert b.get_partition_states([tp])[tp] == state  # unchanged
    written, stale_set = b.update_partition_states({tp: LeaderAndIsr(2, 1, (2,), 2, state.zk_version)}, won_b)
    assert written[tp] == LeaderAndIsr(2, 1, (2,), 2, state.zk_version + 1) and not stale_set


def test_partition_state_compare_and_set(clients: Callable[[], KafkaZkClient]) -> None:
    c = clients()
    guard = c.register_controller_and_increment_epoch(0)
    tps = [("t", p) for p in range(3)]
    created, _ = c.create_partition_states({tp: LeaderAndIsr(0, 0, (0,), 1) for tp in tps}, guard)
    assert set(created) == set(tps)
    again, existing = c.create_partition_states({tps[0]: LeaderAndIsr(0, 0, (0,), 1)}, guard)
    assert not again and existing == {tps[0]}
    # a leader shrinking the ISR at version 0 wins; the controller's write at version 0 is then stale
    w, s = c.update_partition_states({tps[1]: LeaderAndIsr(0, 0, (0,), 1, 0)}, None)
    assert w[tps[1]].zk_version == 1 and not s
    w, s = c.update_partition_states({tps[1]: LeaderAndIsr(0, 1, (0,), 1, 0)}, guard)
    assert not w and s == {tps[1]}
    states = c.get_partition_states([*tps, ("t", 9)])
    assert states[("t", 9)] is None and states[tps[1]] == LeaderAndIsr(0, 0, (0,), 1, 1)


def test_topics_configs_and_deletion(clients: Callable[[], KafkaZkClient]) -> None:
    c = clients()
    guard = c.register_controller_and_increment_epoch(0)
    a = TopicAssignment("t", {0: (0, 1), 1: (1, 0)}, uuid.uuid4())
    c.create_topic(a, {"retention.ms": "1000"})
    with pytest.raises(TopicExistsError, match="'t' already exists"):
        c.create_topic(a)
    got = c.get_topic_assignment("t")
    assert got is not None and got[0] == a and got[1] == 0
    assert c.get_entity_config("topics", "t") == {"retention.ms": "1000"}
    c.set_entity_config("topics", "t", {"retention.ms": "2000"})
    changes = c.get_config_changes()
    assert changes[-1][1:] == ("topics", "t") and changes[-1][0].startswith("config_change_")
    # partitions added by compare-and-set on the topic znode
    grown = TopicAssignment("t", {**a.partitions, 2: (0, 1)}, a.topic_id)
    assert c.set_topic_assignment(grown, 0) == 1
    with pytest.raises(StaleZkVersionError, match="no longer at version 0"):
        c.set_topic_assignment(grown, 0)
    c.create_partition_states({("t", p): LeaderAndIsr(0, 0, (0, 1), 1) for p in range(3)}, guard)
    c.mark_topic_for_deletion("t")
    assert c.get_topics_marked_for_deletion() == {"t"}
    c.delete_topic("t", guard)
    assert c.get_all_topics() == set() and c.get_topics_marked_for_deletion() == set()
    assert c.get_entity_config("topics", "t") == {}


def test_two_writers_creating_one_entity_config_both_succeed(clients: Callable[[], KafkaZkClient]) -> None:
    # Two brokers creating __consumer_offsets at once both write /config/topics/<t>: the one whose set
    # found no znode and whose create then found the other's must not fail (Kafka treats it as done).
    a, b = clients(), clients()
    real_set = a._zk.set
    calls = []

    def set_after_b_created(path: str, data: bytes) -> object:
        calls.append(path)
        if len(calls) == 1:  # a's set finds no znode; b creates it before a's create
            b.set_entity_config("topics", "race", {"retention.ms": "1"}, notify=False)
            raise NoNodeError()
        return real_set(path, data)

    a._zk.set = set_after_b_created  # type: ignore[method-assign]
    a.set_entity_config("topics", "race", {"retention.ms": "2"}, notify=False)
    assert len(calls) == 2 and b.get_entity_config("topics", "race") == {"retention.ms": "2"}


def test_producer_id_blocks_never_overlap(clients: Callable[[], KafkaZkClient]) -> None:
    a, b = clients(), clients()
    blocks = [a.allocate_producer_ids(1), b.allocate_producer_ids(2), a.allocate_producer_ids(1)]
    assert [(x.broker, x.first, x.last) for x in blocks] == [(1, 0, 999), (2, 1000, 1999), (1, 2000, 2999)]
    got = a.get_data(zd.PRODUCER_ID_BLOCK)
    assert got is not None
    assert json.loads(got[0]) == {"version": 1, "broker": 1, "block_start": "2000", "block_end": "2999"}


def test_cluster_id_first_writer_wins(clients: Callable[[], KafkaZkClient]) -> None:
    a, b = clients(), clients()
    assert a.get_or_create_cluster_id("first") == "first"
    assert b.get_or_create_cluster_id("second") == "first"


def test_watches_become_events(clients: Callable[[], KafkaZkClient]) -> None:
    controller, admin, broker = clients(), clients(), clients()
    events: queue.Queue[ZkEvent] = queue.Queue()
    controller.watch_cluster(events.put)
    controller.watch_controller(events.put)
    _wait_for(events, lambda e: isinstance(e, BrokersChanged) and not e.brokers)
    _wait_for(events, lambda e: isinstance(e, ControllerChanged) and e.controller_id is None)

    broker.register_broker(_broker(3))
    e = _wait_for(events, lambda e: isinstance(e, BrokersChanged) and 3 in e.brokers)
    assert isinstance(e, BrokersChanged) and e.brokers[3] == _broker(3)

    admin.create_topic(TopicAssignment("t", {0: (3,)}))
    _wait_for(events, lambda e: isinstance(e, TopicsChanged) and "t" in e.topics)
    _wait_for(events, lambda e: isinstance(e, TopicAssignmentChanged) and e.topic == "t")
    admin.set_topic_assignment(TopicAssignment("t", {0: (3,), 1: (3,)}), 0)
    e = _wait_for(
        events,
        lambda e: (
            isinstance(e, TopicAssignmentChanged)
            and e.assignment is not None
            and 1 in e.assignment.partitions
        ),
    )

    admin.mark_topic_for_deletion("t")
    _wait_for(events, lambda e: isinstance(e, TopicDeletionRequested) and e.topics == {"t"})
    admin.create_reassignment({("t", 0): [3]})
    _wait_for(events, lambda e: isinstance(e, ReassignmentRequested) and e.moves == {("t", 0): (3,)})
    admin.create_preferred_replica_election([("t", 0)])
    _wait_for(events, lambda e: isinstance(e, PreferredElectionRequested) and e.partitions == {("t", 0)})

    admin.register_controller_and_increment_epoch(7)
    _wait_for(events, lambda e: isinstance(e, ControllerChanged) and e.controller_id == 7)

    broker.close()  # broker death: its registration goes with its session
    _wait_for(events, lambda e: isinstance(e, BrokersChanged) and 3 not in e.brokers)


def test_partition_state_watch(clients: Callable[[], KafkaZkClient]) -> None:
    controller, broker = clients(), clients()
    guard = controller.register_controller_and_increment_epoch(0)
    events: queue.Queue[ZkEvent] = queue.Queue()
    broker.watch_partition_state("t", 0, events.put)
    _wait_for(events, lambda e: isinstance(e, PartitionStateChanged) and e.state is None)
    controller.create_partition_states({("t", 0): LeaderAndIsr(1, 0, (1, 2), 1)}, guard)
    _wait_for(
        events, lambda e: isinstance(e, PartitionStateChanged) and e.state == LeaderAndIsr(1, 0, (1, 2), 1, 0)
    )
    controller.update_partition_states({("t", 0): LeaderAndIsr(2, 1, (2,), 1, 0)}, guard)
    _wait_for(
        events, lambda e: isinstance(e, PartitionStateChanged) and e.state is not None and e.state.leader == 2
    )


def test_unreachable_zookeeper_is_one_clear_error() -> None:
    port = free_port()
    c = KafkaZkClient(f"127.0.0.1:{port}/kafka", session_timeout_ms=2000, connection_timeout_ms=1000)
    t0 = time.monotonic()
    with pytest.raises(
        ZkConnectionError, match=rf"127.0.0.1:{port} within 1000 ms .*zookeeper.connection.timeout.ms"
    ):
        c.start()
    assert time.monotonic() - t0 < 10


def test_batched_writes_find_the_stale_and_existing_ones(clients: Callable[[], KafkaZkClient]) -> None:
    c = clients()
    guard = c.register_controller_and_increment_epoch(0)
    tps = [("t", p) for p in range(5)]
    c.create_partition_states({tps[2]: LeaderAndIsr(9, 0, (9,), 1)}, guard)  # one exists already
    created, existing = c.create_partition_states({tp: LeaderAndIsr(0, 0, (0,), 1) for tp in tps}, guard)
    assert existing == {tps[2]} and set(created) == set(tps) - {tps[2]}
    c.update_partition_states({tps[4]: LeaderAndIsr(0, 0, (0,), 1, 0)}, None)  # someone writes first
    written, stale = c.update_partition_states({tp: LeaderAndIsr(1, 1, (1,), 1, 0) for tp in tps}, guard)
    assert stale == {tps[4]} and set(written) == set(tps) - {tps[4]}
    assert all(s.zk_version == 1 for s in written.values())
    states = c.get_partition_states(tps)
    assert states[tps[4]] == LeaderAndIsr(0, 0, (0,), 1, 1) and states[tps[0]] == LeaderAndIsr(
        1, 1, (1,), 1, 1
    )


def test_pipelined_state_watches(clients: Callable[[], KafkaZkClient]) -> None:
    controller, broker = clients(), clients()
    guard = controller.register_controller_and_increment_epoch(0)
    events: queue.Queue[ZkEvent] = queue.Queue()
    tps = [("w", p) for p in range(3)]
    broker.watch_partition_states(tps, events.put)
    broker.watch_partition_states(tps, events.put)  # watching twice changes nothing
    for _ in tps:
        _wait_for(events, lambda e: isinstance(e, PartitionStateChanged) and e.state is None)
    controller.create_partition_states({tp: LeaderAndIsr(1, 0, (1,), 1) for tp in tps}, guard)
    seen = set()
    while len(seen) < 3:
        e = _wait_for(events, lambda e: isinstance(e, PartitionStateChanged) and e.state is not None)
        assert isinstance(e, PartitionStateChanged)
        seen.add((e.topic, e.partition))
    controller.update_partition_states({tps[1]: LeaderAndIsr(2, 1, (2,), 1, 0)}, guard)
    e = _wait_for(
        events, lambda e: isinstance(e, PartitionStateChanged) and e.state is not None and e.state.leader == 2
    )
    assert isinstance(e, PartitionStateChanged) and (e.topic, e.partition) == tps[1] and e.state is not None
    assert e.state.zk_version == 1
    controller.delete_topic("w", guard)
    for _ in tps:
        _wait_for(events, lambda e: isinstance(e, PartitionStateChanged) and e.state is None)
    # created again: the watch (re-armed as an exists watch) sees it
    controller.create_partition_states({tps[0]: LeaderAndIsr(3, 0, (3,), 1)}, guard)
    _wait_for(
        events, lambda e: isinstance(e, PartitionStateChanged) and e.state is not None and e.state.leader == 3
    )
    assert events.empty() or all(
        isinstance(x, PartitionStateChanged) and x.state in (None, LeaderAndIsr(3, 0, (3,), 1, 0))
        for x in list(events.queue)
    )
