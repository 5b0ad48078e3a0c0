"""Real consumer groups on kaflite's broker using kaflite's assignors as client plug-ins:
kafka-python with Sticky and CooperativeSticky (KIP-429, kafka-python >= 3), aiokafka with Sticky.
Every produced record must be consumed exactly once, and keyed records must sit where the Java
partitioner puts them."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import pytest

from kaflite.assign import partition_for_key

PARTITIONS = 6
DEADLINE_S = 60


def create_topic(bootstrap: str, partitions: int = PARTITIONS) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"assign-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=15)
    return topic


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    from kafka import KafkaProducer

    from kaflite.clients.kafka_python import JavaPartitioner

    producer = KafkaProducer(bootstrap_servers=bootstrap, partitioner=JavaPartitioner(), linger_ms=5)
    try:
        for i in range(start, start + count):
            producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
        producer.flush(timeout=20)
    finally:
        producer.close(timeout=5)


class Member:
    """One kafka-python consumer polling in its own thread; commits after every batch.

    poll() waits up to 1 s: with kafka-python 3.0.12's cooperative protocol and a short poll timeout
    (200 ms) the group leader sometimes receives its SyncGroup response but never completes the join
    (no heartbeats, expelled after session.timeout.ms) — reproduced with kafka-python's own
    CooperativeStickyAssignor too (3 of 15 groups on kaflite's broker; none in 15 with 1 s polls)."""

    def __init__(self, bootstrap: str, topic: str, group: str, assignor: type, seen: list[Any],
                 lock: threading.Lock, poll_ms: int = 1000) -> None:
        from kafka import KafkaConsumer

        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, partition_assignment_strategy=[assignor],
            enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=10000,
            heartbeat_interval_ms=500, max_poll_interval_ms=30000, consumer_timeout_ms=100)
        self.consumer.subscribe([topic])
        self.seen, self.lock = seen, lock
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None
        self.poll_ms = poll_ms

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                batch = self.consumer.poll(timeout_ms=self.poll_ms)
                if batch:
                    with self.lock:
                        for tp, records in batch.items():
                            self.seen.extend((tp.partition, r.offset, r.key, r.value) for r in records)
                    self.consumer.commit()
        except BaseException as err:  # surfaced by the test
            self.error = err
        finally:
            try:
                self.consumer.close(autocommit=False)
            except Exception:
                pass

    def assignment(self) -> set[Any]:
        return set(self.consumer.assignment())


def wait_for(cond: Any, what: str, timeout: float = DEADLINE_S, state: Any = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    detail = f"; state: {state()}" if state is not None else ""
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")


def all_committed(bootstrap: str, topic: str, group: str, partitions: int = PARTITIONS) -> Any:
    """A probe: has `group` committed the end offset of every partition of `topic`? Once it has, every
    record the members read is in `seen` (they record before they commit) and a member taking over any
    partition starts at its end, so nothing more can arrive: the positive condition behind "wait and see
    that nothing more arrives". Returns (probe, close)."""
    from confluent_kafka import Consumer, TopicPartition

    # a consumer that never subscribes only reads the group's offsets; it does not join the group
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    tps = [TopicPartition(topic, p) for p in range(partitions)]

    def probe() -> bool:
        ends = [reader.get_watermark_offsets(tp, timeout=10)[1] for tp in tps]
        return [tp.offset for tp in reader.committed(tps, timeout=10)] == ends

    return probe, reader.close


def check_exactly_once(seen: list[Any], total: int) -> None:
    keys = [k for _, _, k, _ in seen]
    assert len(keys) == len(set(keys)), "a record was consumed twice"
    assert sorted(keys) == sorted(f"k{i}".encode() for i in range(total))
    for partition, _, key, _ in seen:
        assert partition == partition_for_key(key, PARTITIONS)


@pytest.mark.parametrize("strategy", ["sticky", "cooperative-sticky"])
def test_kafka_python_group_with_kaflite_assignor(kaflite_broker: Any, strategy: str) -> None:
    from kaflite.clients import kafka_python as kp

    assignor = kp.StickyAssignor if strategy == "sticky" else kp.CooperativeStickyAssignor
    bootstrap = kaflite_broker.bootstrap
    topic = create_topic(bootstrap)
    group = f"g-{strategy}-{uuid.uuid4().hex[:6]}"
    seen: list[Any] = []
    lock = threading.Lock()
    members = [Member(bootstrap, topic, group, assignor, seen, lock) for _ in range(3)]
    try:
        for m in members:
            m.thread.start()

        def settled(ms: list[Member]) -> bool:
            parts = [m.assignment() for m in ms]
            union = set().union(*parts)
            return all(parts) and len(union) == PARTITIONS and sum(map(len, parts)) == PARTITIONS

        def state(ms: list[Member] = members) -> str:
            return "; ".join(f"{sorted((tp.topic[-4:], tp.partition) for tp in m.assignment())} err={m.error!r}"
                             for m in ms)

        wait_for(lambda: settled(members), "3 members sharing 6 partitions", state=state)
        sizes = sorted(len(m.assignment()) for m in members)
        assert sizes == [2, 2, 2]
        produce(bootstrap, topic, 0, 300)
        wait_for(lambda: len(seen) >= 300, "300 records consumed", state=lambda: f"{len(seen)} seen; {state()}")

        # one member leaves: its partitions move, the others keep theirs (sticky)
        before = [m.assignment() for m in members[1:]]
        members[0].stop.set()
        members[0].thread.join(timeout=20)
        wait_for(lambda: settled(members[1:]), "2 members sharing 6 partitions", state=lambda: state(members[1:]))
        for kept, m in zip(before, members[1:], strict=True):
            assert kept <= m.assignment(), "a surviving member lost a partition it owned"
        produce(bootstrap, topic, 300, 300)
        wait_for(lambda: len(seen) >= 600, "600 records consumed",
                 state=lambda: f"{len(seen)} seen; {state(members[1:])}")
        committed, close = all_committed(bootstrap, topic, group)
        try:
            wait_for(committed, "every partition's end offset committed (nothing more can arrive)",
                     state=lambda: f"{len(seen)} seen; {state(members[1:])}")
        finally:
            close()
        for m in members:
            assert m.error is None, m.error
        check_exactly_once(seen, 600)
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.thread.join(timeout=20)


def test_aiokafka_group_with_kaflite_sticky(kaflite_broker: Any) -> None:
    from aiokafka import AIOKafkaConsumer

    from kaflite.clients.aiokafka import kaflite_assignor

    bootstrap = kaflite_broker.bootstrap
    topic = create_topic(bootstrap)
    group = f"g-aio-{uuid.uuid4().hex[:6]}"

    async def main() -> list[Any]:
        consumers = [AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                      partition_assignment_strategy=(kaflite_assignor("sticky"),),
                                      enable_auto_commit=False, auto_offset_reset="earliest",
                                      session_timeout_ms=10000, heartbeat_interval_ms=500)
                     for _ in range(2)]
        seen: list[Any] = []
        for c in consumers:
            await c.start()
        try:
            stop = asyncio.Event()

            async def run(c: AIOKafkaConsumer) -> None:
                while not stop.is_set():
                    batch = await c.getmany(timeout_ms=200)
                    for tp, records in batch.items():
                        seen.extend((tp.partition, r.offset, r.key, r.value) for r in records)
                    if batch:
                        await c.commit()

            tasks = [asyncio.create_task(run(c)) for c in consumers]
            deadline = time.monotonic() + DEADLINE_S
            while not (all(c.assignment() for c in consumers)
                       and sum(len(c.assignment()) for c in consumers) == PARTITIONS):
                assert time.monotonic() < deadline, "aiokafka group never settled"
                await asyncio.sleep(0.1)
            assert sorted(len(c.assignment()) for c in consumers) == [3, 3]
            await asyncio.to_thread(produce, bootstrap, topic, 0, 400)
            while len(seen) < 400:
                assert time.monotonic() < deadline, f"only {len(seen)} of 400 records consumed"
                await asyncio.sleep(0.1)
            committed, close = all_committed(bootstrap, topic, group)
            try:  # every end offset committed: nothing more can arrive
                while not await asyncio.to_thread(committed):
                    assert time.monotonic() < deadline, "the group never committed every end offset"
                    await asyncio.sleep(0.1)
            finally:
                close()
            stop.set()
            await asyncio.gather(*tasks)
        finally:
            for c in consumers:
                await c.stop()
        return seen

    seen = asyncio.run(asyncio.wait_for(main(), DEADLINE_S + 30))
    check_exactly_once(seen, 400)


class RdMember:
    """A confluent-kafka (librdkafka) consumer with its own cooperative-sticky assignor, in a thread."""

    def __init__(self, bootstrap: str, topic: str, group: str, seen: list[Any], lock: threading.Lock) -> None:
        # librdkafka joins the group as soon as it subscribes, so the consumer is created in the thread
        self.config = {"bootstrap.servers": bootstrap, "group.id": group,
                       "partition.assignment.strategy": "cooperative-sticky",
                       "auto.offset.reset": "earliest", "enable.auto.commit": False,
                       "session.timeout.ms": 10000, "heartbeat.interval.ms": 500}
        self.topic = topic
        self.owned: set[Any] = set()
        self.seen, self.lock = seen, lock
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def _on_assign(self, consumer: Any, parts: list[Any]) -> None:
        self.owned |= {(p.topic, p.partition) for p in parts}
        consumer.incremental_assign(parts)

    def _on_revoke(self, consumer: Any, parts: list[Any]) -> None:
        self.owned -= {(p.topic, p.partition) for p in parts}
        consumer.incremental_unassign(parts)

    def _run(self) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(self.config)
        try:
            consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
            while not self.stop.is_set():
                msg = consumer.poll(0.2)
                if msg is not None and not msg.error():
                    with self.lock:
                        self.seen.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
                    consumer.commit(msg, asynchronous=False)
        except BaseException as err:
            self.error = err
        finally:
            consumer.close()

    def assignment(self) -> set[Any]:
        return set(self.owned)


@pytest.mark.parametrize("leader", ["kaflite", "librdkafka"])
def test_mixed_group_kafka_python_with_librdkafka(kaflite_broker: Any, leader: str) -> None:
    """Two kafka-python members using kaflite's CooperativeSticky and one librdkafka member using its own
    cooperative-sticky share a group: whichever computes the assignment, the other side reads it."""
    from kaflite.clients import kafka_python as kp

    bootstrap = kaflite_broker.bootstrap
    topic = create_topic(bootstrap)
    group = f"g-mixed-{uuid.uuid4().hex[:6]}"
    seen: list[Any] = []
    lock = threading.Lock()
    py = [Member(bootstrap, topic, group, kp.CooperativeStickyAssignor, seen, lock) for _ in range(2)]
    rd = RdMember(bootstrap, topic, group, seen, lock)
    members: list[Any] = [rd, *py] if leader == "librdkafka" else [*py, rd]
    try:
        members[0].thread.start()  # the first member to join leads the group
        wait_for(lambda: len(members[0].assignment()) == PARTITIONS, "the first member to own every partition")
        for m in members[1:]:
            m.thread.start()

        def settled() -> bool:
            parts = [m.assignment() for m in members]
            return all(parts) and sum(map(len, parts)) == PARTITIONS

        wait_for(settled, "3 members sharing 6 partitions",
                 state=lambda: str([sorted(m.assignment()) for m in members]))
        assert sorted(len(m.assignment()) for m in members) == [2, 2, 2]
        produce(bootstrap, topic, 0, 300)
        wait_for(lambda: len(seen) >= 300, "300 records consumed", state=lambda: f"{len(seen)} seen")
        committed, close = all_committed(bootstrap, topic, group)
        try:
            wait_for(committed, "every partition's end offset committed (nothing more can arrive)",
                     state=lambda: f"{len(seen)} seen")
        finally:
            close()
        for m in members:
            assert m.error is None, m.error
        check_exactly_once(seen, 300)
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            if m.thread.is_alive():
                m.thread.join(timeout=20)
