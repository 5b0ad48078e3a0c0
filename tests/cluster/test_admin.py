"""Topic administration on ZooKeeper (cluster.admin, Kafka's AdminZkClient): placement over the live
brokers, explicit assignments, growth, deletion requests, configs; the controller then elects leaders."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from functools import partial

import pytest

from helpers import wait_until
from kaflite.cluster.admin import ZkAdmin, plan_new_partitions, plan_new_topic
from kaflite.cluster.member import ClusterMember
from kaflite.cluster.placement import assign_replicas
from kaflite.cluster.zk import KafkaZkClient
from kaflite.cluster.zkconfig import zookeeper_settings
from kaflite.cluster.zkdata import BrokerInfo, ZkEndpoint
from kaflite.protocol.errors import ErrorCode, KafkaError

_wait = partial(wait_until, timeout=20.0)  # members in this process answer quickly: 20 s bounds every wait

BROKERS: dict[int, str | None] = {1: None, 2: None, 3: None}


def _code(fn: Callable[[], object]) -> tuple[ErrorCode, str]:
    with pytest.raises(KafkaError) as e:
        fn()
    return e.value.code, e.value.message


def test_plan_new_topic_defaults_and_refusals() -> None:
    placed = plan_new_topic(
        "t",
        -1,
        -1,
        None,
        BROKERS,
        set(),
        default_partitions=4,
        default_replication_factor=2,
        rng=random.Random(7),
    )
    assert sorted(placed) == [0, 1, 2, 3] and all(len(r) == 2 for r in placed.values())
    assert _code(lambda: plan_new_topic("t", 1, 1, None, BROKERS, {"t"}))[0] is ErrorCode.topic_already_exists
    code, msg = _code(lambda: plan_new_topic("a.b", 1, 1, None, BROKERS, {"a_b"}))
    assert (
        code is ErrorCode.invalid_topic_exception and msg == "Topic 'a.b' collides with existing topic: a_b"
    )
    assert (
        _code(lambda: plan_new_topic("bad/name", 1, 1, None, BROKERS, set()))[0]
        is ErrorCode.invalid_topic_exception
    )
    code, msg = _code(lambda: plan_new_topic("t", 1, 4, None, BROKERS, set()))
    assert code is ErrorCode.invalid_replication_factor and "larger than available brokers: 3" in msg
    assert _code(lambda: plan_new_topic("t", 0, 1, None, BROKERS, set()))[0] is ErrorCode.invalid_partitions


def test_plan_explicit_assignment() -> None:
    assert plan_new_topic("t", -1, -1, [[3, 1], [1, 2]], BROKERS, set()) == {0: (3, 1), 1: (1, 2)}
    assert _code(lambda: plan_new_topic("t", 2, -1, [[1]], BROKERS, set()))[0] is ErrorCode.invalid_request
    assert (
        _code(lambda: plan_new_topic("t", -1, -1, {0: [1], 2: [2]}, BROKERS, set()))[0]
        is ErrorCode.invalid_replica_assignment
    )
    code, msg = _code(lambda: plan_new_topic("t", -1, -1, [[1, 1]], BROKERS, set()))
    assert code is ErrorCode.invalid_replica_assignment and "Duplicate brokers" in msg
    assert (
        _code(lambda: plan_new_topic("t", -1, -1, [[1, 2], [3]], BROKERS, set()))[1]
        == "All partitions should have the same number of replicas"
    )
    code, msg = _code(lambda: plan_new_topic("t", -1, -1, [[1, 9]], BROKERS, set()))
    assert code is ErrorCode.broker_not_available and "available brokers: 1, 2, 3" in msg


def test_plan_new_partitions_continues_kafkas_placement() -> None:
    existing = {p: tuple(r) for p, r in assign_replicas(3, 2, [1, 2, 3], fixed_start_index=0).items()}
    assert existing == {0: (1, 2), 1: (2, 3), 2: (3, 1)}
    # start at partition 0's first replica (broker 1 -> index 0), ids from 3, the shift grows at p3:
    # p3 on 1 then index (0 + 1 + (1 + 0) % 2) % 3 = 2 -> 3; p4 on 2 then 1; p5 on 3 then 2
    new = plan_new_partitions("t", existing, 6, None, BROKERS)
    assert new == {3: (1, 3), 4: (2, 1), 5: (3, 2)}
    assert {**existing, **new} == {
        p: tuple(r) for p, r in assign_replicas(6, 2, [1, 2, 3], fixed_start_index=0).items()
    }
    assert plan_new_partitions("t", existing, 4, [[3, 2]], BROKERS) == {3: (3, 2)}
    code, msg = _code(lambda: plan_new_partitions("t", existing, 3, None, BROKERS))
    assert code is ErrorCode.invalid_partitions and "3 would not be an increase" in msg
    code, msg = _code(lambda: plan_new_partitions("t", existing, 5, [[1, 2]], BROKERS))
    assert msg == "Increasing the number of partitions by 2 but 1 assignments provided."
    code, msg = _code(lambda: plan_new_partitions("t", existing, 4, [[1]], BROKERS))
    assert code is ErrorCode.invalid_replica_assignment and "partition 0 has 2 while partitions [3]" in msg


def test_rack_aware_when_brokers_have_racks() -> None:
    racks: dict[int, str | None] = {1: "a", 2: "a", 3: "b", 4: "b"}
    placed = plan_new_topic("t", 8, 2, None, racks, set(), rng=random.Random(3))
    assert all(len({racks[r] for r in replicas}) == 2 for replicas in placed.values())
    assert (
        _code(lambda: plan_new_topic("t", 1, 1, None, {1: "a", 2: None}, set()))[0]
        is ErrorCode.invalid_replica_assignment
    )


@pytest.fixture
def live(zk_connect: str) -> Iterator[KafkaZkClient]:
    settings = zookeeper_settings({"zookeeper.connect": zk_connect, "zookeeper.session.timeout.ms": 4000})
    assert settings is not None
    members = [
        ClusterMember(settings, BrokerInfo(b, (ZkEndpoint("PLAINTEXT", "127.0.0.1", 19000 + b),)))
        for b in (1, 2, 3)
    ]
    for m in members:
        m.start()
    zk = KafkaZkClient(zk_connect)
    zk.start()
    _wait("3 brokers", lambda: zk.get_broker_ids() == [1, 2, 3])
    try:
        yield zk
    finally:
        zk.close()
        for m in members:
            m.stop()


def test_create_grow_configure_delete_on_a_live_cluster(live: KafkaZkClient) -> None:
    admin = ZkAdmin(live, default_partitions=3, default_replication_factor=3, rng=random.Random(1))
    preview = admin.create_topic("t", -1, -1, {"retention.ms": "1000"}, validate_only=True)
    assert live.get_topic_assignment("t") is None  # validate_only writes nothing
    created = admin.create_topic("t", -1, -1, {"retention.ms": "1000"})
    assert sorted(created.partitions) == [0, 1, 2] and all(len(r) == 3 for r in created.partitions.values())
    assert sorted(preview.partitions) == [0, 1, 2] and all(len(r) == 3 for r in preview.partitions.values())
    assert live.get_entity_config("topics", "t") == {"retention.ms": "1000"}
    states = _wait(
        "leaders",
        lambda: (s := live.get_partition_states([("t", p) for p in range(3)])) and all(s.values()) and s,
    )
    for (_, p), s in states.items():
        assert s is not None and s.leader == created.partitions[p][0]
    assert _code(lambda: admin.create_topic("t", 1, 1, {}))[0] is ErrorCode.topic_already_exists

    grown = admin.create_partitions("t", 5)
    assert sorted(grown.partitions) == [0, 1, 2, 3, 4] and grown.topic_id == created.topic_id
    _wait("new partitions led", lambda: all(live.get_partition_states([("t", 3), ("t", 4)]).values()))
    assert _code(lambda: admin.create_partitions("nope", 2))[0] is ErrorCode.unknown_topic_or_partition

    admin.alter_topic_configs("t", {"retention.ms": "2000"})
    assert live.get_entity_config("topics", "t") == {"retention.ms": "2000"}
    assert live.get_config_changes()[-1][1:] == ("topics", "t")

    explicit = admin.create_topic("x", -1, -1, {}, assignment=[[3, 2], [2, 1]])
    assert explicit.partitions == {0: (3, 2), 1: (2, 1)}
    _wait(
        "x led", lambda: (s := live.get_partition_states([("x", 0)])[("x", 0)]) is not None and s.leader == 3
    )

    admin.delete_topic("t")
    admin.delete_topic("t")  # a second request is not an error
    _wait("t deleted", lambda: "t" not in live.get_all_topics())
    assert _code(lambda: admin.delete_topic("t"))[0] is ErrorCode.unknown_topic_or_partition
