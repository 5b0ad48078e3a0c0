"""Topic administration through real admin clients (confluent-kafka, kafka-python)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)


def _admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _error_code(exc: BaseException) -> str:
    assert isinstance(exc, KafkaException)
    return exc.args[0].name()


def test_create_describe_alter_delete_with_confluent(broker) -> None:
    admin = _admin(broker)
    futures = admin.create_topics(
        [
            NewTopic("adm-a", num_partitions=3, replication_factor=1, config={"retention.ms": "60000"}),
            NewTopic("adm-b"),  # broker defaults
        ],
        operation_timeout=10,
    )
    for f in futures.values():
        f.result(timeout=10)
    md = admin.list_topics(timeout=10)
    assert sorted(md.topics["adm-a"].partitions) == [0, 1, 2]
    assert sorted(md.topics["adm-b"].partitions) == [0]
    assert md.topics["adm-a"].partitions[1].leader == 0
    assert md.topics["adm-a"].partitions[1].replicas == [0]
    assert md.topics["adm-a"].partitions[1].isrs == [0]

    # a second create of the same topic, a bad config, an impossible replication factor
    errors = admin.create_topics(
        [
            NewTopic("adm-a", 1, 1),
            NewTopic("adm-c", 1, 1, config={"retention.ms": "soon"}),
            NewTopic("adm-d", 1, 3),
            NewTopic("bad name!", 1, 1),
        ]
    )
    codes = {}
    for name, f in errors.items():
        with pytest.raises(KafkaException) as info:
            f.result(timeout=10)
        codes[name] = _error_code(info.value)
    assert codes == {
        "adm-a": "TOPIC_ALREADY_EXISTS",
        "adm-c": "INVALID_CONFIG",
        "adm-d": "INVALID_REPLICATION_FACTOR",
        "bad name!": "TOPIC_EXCEPTION",  # librdkafka's name for INVALID_TOPIC_EXCEPTION (17)
    }

    # describe configs: the override and the defaults
    res = ConfigResource(ConfigResource.Type.TOPIC, "adm-a")
    configs = admin.describe_configs([res])[res].result(timeout=10)
    assert configs["retention.ms"].value == "60000"
    assert configs["retention.ms"].source == ConfigResource.Type.TOPIC.value or configs["retention.ms"].source == 1
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].is_default

    # incremental alter, then describe again
    res2 = ConfigResource(
        ConfigResource.Type.TOPIC,
        "adm-a",
        incremental_configs=[ConfigEntry("retention.ms", "120000", incremental_operation=AlterConfigOpType.SET)],
    )
    admin.incremental_alter_configs([res2])[res2].result(timeout=10)
    configs = admin.describe_configs([res])[res].result(timeout=10)
    assert configs["retention.ms"].value == "120000"

    # create partitions: grow, never shrink
    admin.create_partitions([NewPartitions("adm-a", 5)])["adm-a"].result(timeout=10)
    assert sorted(admin.list_topics(timeout=10).topics["adm-a"].partitions) == [0, 1, 2, 3, 4]
    with pytest.raises(KafkaException) as info:
        admin.create_partitions([NewPartitions("adm-a", 2)])["adm-a"].result(timeout=10)
    assert _error_code(info.value) == "INVALID_PARTITIONS"

    # broker configs are described with their defaults
    bres = ConfigResource(ConfigResource.Type.BROKER, "0")
    bconf = admin.describe_configs([bres])[bres].result(timeout=10)
    assert bconf["num.partitions"].value == "1"

    # delete, then the topic is gone; deleting again is UNKNOWN_TOPIC_OR_PARTITION
    for f in admin.delete_topics(["adm-a", "adm-b"], operation_timeout=10).values():
        f.result(timeout=10)
    assert "adm-a" not in admin.list_topics(timeout=10).topics
    with pytest.raises(KafkaException) as info:
        admin.delete_topics(["adm-a"])["adm-a"].result(timeout=10)
    assert _error_code(info.value) == "UNKNOWN_TOPIC_OR_PART"


def test_describe_cluster_with_confluent(broker) -> None:
    admin = _admin(broker)
    desc = admin.describe_cluster(request_timeout=10).result(timeout=10)
    assert desc.controller.id == 0
    assert [n.id for n in desc.nodes] == [0]
    assert desc.cluster_id


def test_create_list_delete_with_kafka_python(broker) -> None:
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([KNewTopic("adm-kp", 2, 1)])
        assert "adm-kp" in admin.list_topics()
        described = admin.describe_topics(["adm-kp"])
        assert len(described[0]["partitions"]) == 2
        admin.delete_topics(["adm-kp"])
        assert "adm-kp" not in admin.list_topics()
    finally:
        admin.close()


def test_create_describe_delete_with_aiokafka(broker) -> None:
    import asyncio

    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewTopic as ANewTopic

    async def run() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:
            await admin.create_topics([ANewTopic("adm-aio", 4, 1, topic_configs={"cleanup.policy": "compact"})])
            assert "adm-aio" in await admin.list_topics()
            described = await admin.describe_topics(["adm-aio"])
            assert len(described[0]["partitions"]) == 4
            await admin.delete_topics(["adm-aio"])
            assert "adm-aio" not in await admin.list_topics()
        finally:
            await admin.close()

    asyncio.run(run())


def test_delete_records_moves_log_start_and_fetch_below_is_out_of_range(broker) -> None:
    import time

    from confluent_kafka import Consumer, Producer, TopicPartition

    admin = _admin(broker)
    admin.create_topics([NewTopic("adm-dr", 1, 1)])["adm-dr"].result(timeout=10)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(10):
        producer.produce("adm-dr", b"%d" % i)
        producer.flush(10)  # one batch per record, so the log start can move to any offset
    result = admin.delete_records([TopicPartition("adm-dr", 0, 4)])
    for f in result.values():
        assert f.result(timeout=10).low_watermark == 4
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "dr", "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    try:
        assert consumer.get_watermark_offsets(TopicPartition("adm-dr", 0), timeout=10) == (4, 10)
        consumer.assign([TopicPartition("adm-dr", 0, 2)])  # below the log start: reset to earliest
        got = []
        deadline = time.monotonic() + 10
        while len(got) < 6 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.offset())
        assert got == [4, 5, 6, 7, 8, 9]
    finally:
        consumer.close()


def test_describe_log_dirs_with_kafka_python(broker) -> None:
    from confluent_kafka import Producer
    from kafka.admin import KafkaAdminClient

    admin = _admin(broker)
    admin.create_topics([NewTopic("adm-ld", 2, 1)])["adm-ld"].result(timeout=10)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("adm-ld", b"x" * 1000, partition=1)
    assert producer.flush(10) == 0
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        result = kp.describe_log_dirs()
    finally:
        kp.close()
    (mine,) = result
    (log_dir,) = mine["log_dirs"]
    assert log_dir["log_dir"] == str(broker.data_dir.resolve()) and log_dir["error_code"] == 0
    sizes = {
        p["partition_index"]: p["partition_size"]
        for t in log_dir["topics"]
        if t["name"] == "adm-ld"
        for p in t["partitions"]
    }
    assert sizes[0] == 0 and 1000 < sizes[1] < 1200  # one ~1 KB record batch in partition 1
    assert log_dir["usable_bytes"] > 0


def test_reassignment_apis_on_a_single_node_with_kafka_python(broker) -> None:
    """AlterPartitionReassignments / ListPartitionReassignments on one broker: it is its own controller
    and nothing can move. Its own id is accepted (nothing to do), another broker is not alive, a cancel
    finds nothing in progress, and nothing is listed (the cluster path: tests/cluster/test_reassignment.py)."""
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.errors import (
        InvalidReplicationAssignmentError,
        NoReassignmentInProgressError,
        UnknownTopicOrPartitionError,
    )

    creator = _admin(broker)
    creator.create_topics([NewTopic("adm-move", 1, 1)])["adm-move"].result(10)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        node = broker.server.broker.node_id
        tp = TopicPartition("adm-move", 0)
        got = admin.alter_partition_reassignments({
            tp: [node], TopicPartition("adm-move", 3): [node], TopicPartition("adm-x", 0): [node + 1],
        })
        assert got == {tp: None, TopicPartition("adm-move", 3): UnknownTopicOrPartitionError,
                       TopicPartition("adm-x", 0): InvalidReplicationAssignmentError}
        assert admin.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}
        assert admin.list_partition_reassignments() == {}
    finally:
        admin.close()
