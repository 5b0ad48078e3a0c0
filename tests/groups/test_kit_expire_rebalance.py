"""EmbeddedBroker.expire_member and force_rebalance (the test kit's group faults), used as a user would
with an aiokafka group member: expired on purpose, it rejoins under a new member id and keeps consuming;
a forced rebalance moves the group to a new generation."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

import pytest

from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.embedded import EmbeddedBroker


def test_aiokafka_member_expired_on_purpose_rejoins_and_a_forced_rebalance_starts_a_generation() -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic, group = f"kit-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"

    async def consume(consumer: AIOKafkaConsumer, got: list[bytes], count: int) -> None:
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                got.extend(r.value for r in records)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        async with EmbeddedBroker() as broker:
            producer = AIOKafkaProducer(**broker.aiokafka_config())
            await producer.start()
            consumer = AIOKafkaConsumer(topic, **broker.aiokafka_config(), group_id=group,
                                        auto_offset_reset="earliest", heartbeat_interval_ms=200,
                                        session_timeout_ms=10000)
            try:
                for i in range(5):
                    await producer.send_and_wait(topic, f"a{i}".encode())
                await consumer.start()
                got: list[bytes] = []
                await consume(consumer, got, 5)
                old_member, old_generation = consumer._coordinator.member_id, consumer._coordinator.generation

                await loop.run_in_executor(None, broker.expire_member, group, old_member)
                deadline = time.monotonic() + 20  # its next heartbeat gets UNKNOWN_MEMBER_ID: it rejoins
                while consumer._coordinator.member_id in (old_member, "") and time.monotonic() < deadline:
                    got.extend(r.value for rs in (await consumer.getmany(timeout_ms=200)).values() for r in rs)
                for i in range(5):
                    await producer.send_and_wait(topic, f"b{i}".encode())
                await consume(consumer, got, 10)
                assert got == [f"a{i}".encode() for i in range(5)] + [f"b{i}".encode() for i in range(5)]
                assert consumer._coordinator.member_id != old_member  # it rejoined as a new member
                assert consumer._coordinator.generation > old_generation

                generation = consumer._coordinator.generation
                await loop.run_in_executor(None, broker.force_rebalance, group)
                deadline = time.monotonic() + 20
                while consumer._coordinator.generation <= generation and time.monotonic() < deadline:
                    await consumer.getmany(timeout_ms=200)
                assert consumer._coordinator.generation > generation
                assert consumer.assignment()  # still assigned after the rebalance

                with pytest.raises(KafkaError) as unknown:
                    await loop.run_in_executor(None, broker.expire_member, group, "no-such-member")
                assert unknown.value.code == ErrorCode.unknown_member_id
                with pytest.raises(KafkaError) as missing:
                    await loop.run_in_executor(None, broker.force_rebalance, "no-such-group")
                assert missing.value.code == ErrorCode.group_id_not_found
            finally:
                await consumer.stop()
                await producer.stop()

    asyncio.run(main())


def test_kip848_member_expired_on_purpose_rejoins_and_a_forced_rebalance_bumps_the_group_epoch() -> None:
    """The same faults on a `group.protocol=consumer` group (confluent-kafka): the expired member is fenced,
    rejoins with epoch 0 and keeps consuming; force_rebalance gives the group, then its member, a new epoch
    (seen with ConsumerGroupDescribe)."""
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic
    from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest

    from server.kwire import WireClient

    topic, group = f"kit848-{uuid.uuid4().hex[:6]}", f"g848-{uuid.uuid4().hex[:6]}"
    with EmbeddedBroker(overrides={"group.consumer.heartbeat.interval.ms": "300"}) as broker:
        def describe() -> tuple[int, dict[str, int]]:
            with WireClient(broker.bootstrap) as w:
                [g] = w.request(ConsumerGroupDescribeRequest(group_ids=(group,),
                                                             include_authorized_operations=False)).groups
            return int(g.group_epoch), {str(mb.member_id): int(mb.member_epoch) for mb in g.members}

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(10)
        producer = ck.Producer({"bootstrap.servers": broker.bootstrap})
        consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                "group.protocol": "consumer", "auto.offset.reset": "earliest",
                                "enable.auto.commit": False})
        got: list[bytes] = []

        def poll_until(done: Callable[[], bool], timeout: float = 30.0) -> bool:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None and not msg.error():
                    got.append(msg.value())
                    consumer.commit(msg, asynchronous=False)
                if done():
                    return True
            return False

        try:
            for i in range(5):
                producer.produce(topic, f"a{i}".encode(), partition=i % 2)
            assert producer.flush(10) == 0
            consumer.subscribe([topic])
            assert poll_until(lambda: len(got) == 5), got
            member = consumer.memberid()
            epoch, members = describe()
            assert members == {member: epoch}

            broker.expire_member(group, member)
            after_expiry, members = describe()
            assert after_expiry == epoch + 1 and members == {}  # fenced: removed, the group epoch moved on
            # its next heartbeat gets UNKNOWN_MEMBER_ID: it rejoins with epoch 0 and is given both partitions
            assert poll_until(lambda: describe()[1].get(member, 0) > after_expiry and len(consumer.assignment()) == 2)
            for i in range(5):
                producer.produce(topic, f"b{i}".encode(), partition=i % 2)
            assert producer.flush(10) == 0
            assert poll_until(lambda: len(got) >= 10), got
            assert sorted(got) == sorted([f"a{i}".encode() for i in range(5)] + [f"b{i}".encode() for i in range(5)])

            before, members = describe()
            broker.force_rebalance(group)
            assert describe()[0] == before + 1
            assert poll_until(lambda: describe()[1] == {member: before + 1})  # the member moved to the new epoch
            assert len(consumer.assignment()) == 2

            with pytest.raises(KafkaError) as unknown:
                broker.expire_member(group, "no-such-member")
            assert unknown.value.code == ErrorCode.unknown_member_id
        finally:
            consumer.close()
