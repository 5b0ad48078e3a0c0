"""EmbeddedCluster and the `kaflite_cluster` fixture, used the way a user's test would: one three-broker
cluster for the module (the plugin's module-scoped fixture), clients of the three libraries, a leader
killed under an acks=all producer, a frozen broker, a moved leader under a kafka-python consumer."""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from helpers import iterate_values, missing_zookeeper, produce_numbered, require


@pytest.fixture(scope="module", autouse=True)
def _zookeeper_present() -> None:
    require(missing_zookeeper())


@pytest.fixture
def cluster(kaflite_cluster: Any) -> Iterator[Any]:
    """The module's cluster; a test that killed, stopped or froze a broker leaves it whole again."""
    yield kaflite_cluster
    for broker_id in kaflite_cluster.broker_ids:
        kaflite_cluster.thaw(broker_id)
        if kaflite_cluster._broker(broker_id).proc.poll() is not None:
            kaflite_cluster.restart(broker_id)


def _topic(cluster: Any, partitions: int = 1, rf: int = 3, **config: str) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(name, partitions, rf, config)
    return name


def _consume_all(cluster: Any, topic: str, count: int) -> list[bytes]:
    c = Consumer({**cluster.confluent_config(), "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        # a little longer: a duplicate would arrive after the expected count
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        c.close()
    return got


def test_three_brokers_registered_and_every_client_library_works(cluster: Any) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    assert cluster.broker_ids == [0, 1, 2]
    assert len(cluster.bootstrap.split(",")) == 3
    md = AdminClient(cluster.confluent_config()).list_topics(timeout=10)
    assert sorted(md.brokers) == [0, 1, 2]
    assert {"__consumer_offsets", "__transaction_state"} <= set(md.topics)  # ready for groups at once
    # the test defaults (Kafka's test harness: 5 offsets partitions), not Kafka's 50
    assert [len(md.topics[t].partitions) for t in ("__consumer_offsets", "__transaction_state")] == [5, 5]
    assert cluster.start_seconds is not None and cluster.start_seconds > 0
    topic = _topic(cluster)

    p = Producer(cluster.confluent_config())
    p.produce(topic, b"from-confluent")
    assert p.flush(30) == 0
    kp = KafkaProducer(**cluster.kafka_python_config())
    kp.send(topic, b"from-kafka-python").get(30)
    kp.close()

    async def aio() -> None:
        from aiokafka import AIOKafkaProducer

        ap = AIOKafkaProducer(**cluster.aiokafka_config())
        await ap.start()
        try:
            await ap.send_and_wait(topic, b"from-aiokafka")
        finally:
            await ap.stop()

    asyncio.run(aio())
    kc = KafkaConsumer(topic, **cluster.kafka_python_config(), auto_offset_reset="earliest",
                       consumer_timeout_ms=15000)
    got: list[bytes] = []
    iterate_values(kc, got, 3)
    kc.close()
    assert got == [b"from-confluent", b"from-kafka-python", b"from-aiokafka"]


def test_acks_all_idempotent_producer_survives_a_killed_leader(cluster: Any) -> None:
    topic = _topic(cluster, rf=3, **{"min.insync.replicas": "2"})
    leader = cluster.leader(topic, 0)
    p = Producer({**cluster.confluent_config(), "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "message.timeout.ms": 60000})
    failures: list[str] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    for i in range(50):
        p.produce(topic, str(i).encode(), on_delivery=report)
    assert p.flush(30) == 0
    cluster.kill(leader)
    for i in range(50, 100):
        p.produce(topic, str(i).encode(), on_delivery=report)
        p.poll(0)
    assert p.flush(60) == 0, "records still in flight a minute after the leader was killed"
    assert failures == []
    new_leader = cluster.leader(topic, 0)
    assert new_leader not in (-1, leader)
    got = _consume_all(cluster, topic, 100)
    assert sorted(got, key=int) == [str(i).encode() for i in range(100)]  # each once: no loss, no duplicate
    old_pid = cluster.pid(leader)
    cluster.restart(leader)  # returns once the metadata lists it again
    assert cluster.pid(leader) != old_pid
    assert leader in AdminClient(cluster.confluent_config()).list_topics(timeout=10).brokers


def _api_versions_answered(address: str, timeout: float) -> bool:
    """Whether the broker at `address` answers an ApiVersions v0 within `timeout` s."""
    host, port = address.split(":")
    frame = b"\x00\x12\x00\x00\x00\x00\x00\x07\xff\xff"  # ApiVersions v0, correlation 7, null client id
    with socket.create_connection((host, int(port)), timeout) as s:
        s.settimeout(timeout)
        s.sendall(len(frame).to_bytes(4, "big") + frame)
        try:
            return len(s.recv(8)) > 0
        except TimeoutError:
            return False


def test_freeze_stops_answers_until_thaw(cluster: Any) -> None:
    assert _api_versions_answered(cluster.address(1), 5)
    cluster.freeze(1)
    try:
        assert not _api_versions_answered(cluster.address(1), 1.0)  # the kernel accepts; nobody answers
    finally:
        cluster.thaw(1)
    assert _api_versions_answered(cluster.address(1), 10)


def test_kafka_python_consumer_keeps_consuming_across_a_moved_leader(cluster: Any) -> None:
    from kafka import KafkaConsumer

    topic = _topic(cluster, rf=2)
    p = Producer(cluster.confluent_config())
    first = produce_numbered(p, topic, "a")
    consumer = KafkaConsumer(topic, **cluster.kafka_python_config(), auto_offset_reset="earliest",
                             consumer_timeout_ms=20000, metadata_max_age_ms=1000)
    got: list[bytes] = []
    iterate_values(consumer, got, 10)
    old = cluster.leader(topic, 0)
    target = next(b for b in cluster.broker_ids if b != old)
    cluster.move_leader(topic, 0, to=target)
    assert cluster.leader(topic, 0) == target
    second = produce_numbered(p, topic, "b")
    iterate_values(consumer, got, 20)
    consumer.close()
    assert got == first + second


def test_move_leader_to_a_broker_that_is_not_a_replica(cluster: Any) -> None:
    topic = _topic(cluster, rf=1)
    leader = cluster.leader(topic, 0)
    target = (leader + 1) % 3
    cluster.move_leader(topic, 0, to=target)
    assert cluster.leader(topic, 0) == target
    with pytest.raises(KeyError):
        cluster.move_leader(topic, 0, to=7)


def test_async_context_manager_and_start_time(tmp_path: Any) -> None:
    from kaflite.server.embedded_cluster import EmbeddedCluster

    async def main() -> tuple[float, list[int], list[int]]:
        async with EmbeddedCluster(brokers=1, data_dir=tmp_path / "c",
                                   overrides={"offsets.topic.num.partitions": "3"}) as c:
            md = AdminClient(c.confluent_config()).list_topics(timeout=10)
            assert c.start_seconds is not None
            # the caller's key over the test default; the other default kept
            assert len(md.topics["__consumer_offsets"].partitions) == 3
            assert len(md.topics["__transaction_state"].partitions) == 5
            return c.start_seconds, sorted(md.brokers), [c.pid(0), c._cluster.zookeeper.pid]

    seconds, brokers, pids = asyncio.run(main())
    assert brokers == [0]
    for pid in pids:  # the broker and ZooKeeper were stopped (and reaped) by the context manager's exit
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    print(f"EmbeddedCluster(1) started in {seconds:.2f} s")


def test_expire_member_and_force_rebalance_reach_the_groups_coordinator(cluster: Any) -> None:
    """`cluster.expire_member` / `force_rebalance` (and `kaflite faults expire-member` / `force-rebalance`)
    act on the group's coordinator, whichever broker it is: a confluent-kafka member expired on purpose
    rejoins under a new member id and keeps its records; a forced rebalance starts a new generation."""
    from typer.testing import CliRunner

    from kaflite.cli.main import app
    from kaflite.protocol.errors import ErrorCode, KafkaError

    topic, group = _topic(cluster, partitions=2), f"kit-{uuid.uuid4().hex[:6]}"
    values = produce_numbered(Producer(cluster.confluent_config()), topic, "e", 4)
    consumer = Consumer({**cluster.confluent_config(), "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 30000,
                         "heartbeat.interval.ms": 300})
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []

        def poll_until(done: Any, timeout: float = 30.0) -> bool:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                m = consumer.poll(0.2)
                if m is not None and m.error() is None:
                    got.append(m.value())
                    consumer.commit(m, asynchronous=False)
                if done():
                    return True
            return False

        assert poll_until(lambda: len(got) == 4), got
        member = consumer.memberid()
        cluster.expire_member(group, member)
        # its next heartbeat gets UNKNOWN_MEMBER_ID: it rejoins as a new member and is given both partitions
        assert poll_until(lambda: consumer.memberid() not in (member, None, "") and len(consumer.assignment()) == 2)
        with pytest.raises(KafkaError) as unknown:
            cluster.expire_member(group, "no-such-member")
        assert unknown.value.code == ErrorCode.unknown_member_id
        with pytest.raises(KafkaError) as missing:
            cluster.force_rebalance(f"no-such-{group}")
        assert missing.value.code == ErrorCode.group_id_not_found
        rejoined = consumer.memberid()
        runner = CliRunner()
        result = runner.invoke(app, ["faults", "force-rebalance", group, "--bootstrap-server", cluster.bootstrap])
        assert result.exit_code == 0 and f"group {group} rebalances" in result.output, result.output
        result = runner.invoke(app, ["faults", "expire-member", group, rejoined, "--bootstrap-server",
                                     cluster.bootstrap])
        assert result.exit_code == 0 and f"expired member {rejoined}" in result.output, result.output
        assert poll_until(lambda: consumer.memberid() not in (rejoined, None, "") and len(consumer.assignment()) == 2)
        result = runner.invoke(app, ["faults", "expire-member", group, "nobody", "--bootstrap-server",
                                     cluster.bootstrap])
        assert result.exit_code == 1 and "UNKNOWN_MEMBER_ID" in result.output, result.output
        assert sorted(got) == sorted(values)  # nothing read twice: the commits were kept
    finally:
        consumer.close()
