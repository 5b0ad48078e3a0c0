"""Group members driven by real clients (confluent-kafka, kafka-python, aiokafka), each on its own thread.

A member polls until told to stop and records what it saw: (partition, offset) of every record and the
partitions it owns now. Every loop is bounded by the caller's stop event and by `max_seconds`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

SESSION_MS = 3000
HEARTBEAT_MS = 500


class Member(threading.Thread):
    def __init__(self, client: str, strategy: str, bootstrap: str, group: str, topic: str,
                 instance_id: str | None = None, commit: bool = False, max_seconds: float = 90.0,
                 session_ms: int = SESSION_MS) -> None:
        super().__init__(daemon=True, name=f"{client}-{strategy}")
        self.client, self.strategy, self.bootstrap = client, strategy, bootstrap
        self.group, self.topic, self.instance_id = group, topic, instance_id
        self.commit = commit
        self.session_ms = session_ms
        self.max_seconds = max_seconds
        self.stop_event = threading.Event()
        self.records: list[tuple[int, int]] = []
        self.assignment: frozenset[int] = frozenset()
        self.assign_events = 0  # partitions-assigned callbacks seen (rebalances this member took part in)
        self.error: BaseException | None = None
        self.lock = threading.Lock()

    # --- what the test reads ----------------------------------------------------------------------

    def snapshot(self) -> tuple[frozenset[int], list[tuple[int, int]]]:
        with self.lock:
            return self.assignment, list(self.records)

    def stop(self, timeout: float = 30.0) -> None:
        self.stop_event.set()
        self.join(timeout)

    def _record(self, partition: int, offset: int) -> None:
        with self.lock:
            self.records.append((partition, offset))

    def _set_assignment(self, partitions: Any) -> None:
        with self.lock:
            self.assignment = frozenset(partitions)

    def _running(self, started: float) -> bool:
        return not self.stop_event.is_set() and time.monotonic() - started < self.max_seconds

    def run(self) -> None:
        try:
            getattr(self, f"_run_{self.client.replace('-', '_')}")()
        except BaseException as e:  # noqa: BLE001 - reported to the test thread
            self.error = e

    # --- confluent-kafka (librdkafka) -------------------------------------------------------------

    def _run_confluent(self) -> None:
        import confluent_kafka as ck

        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap, "group.id": self.group,
            "partition.assignment.strategy": self.strategy, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": self.session_ms,
            "heartbeat.interval.ms": HEARTBEAT_MS, "topic.metadata.refresh.interval.ms": 1000,
        }
        if self.instance_id:
            conf["group.instance.id"] = self.instance_id
        consumer = ck.Consumer(conf)

        def on_assign(c: Any, parts: list[Any]) -> None:
            self.assign_events += 1

        consumer.subscribe([self.topic], on_assign=on_assign)
        started = time.monotonic()
        try:
            while self._running(started):
                msg = consumer.poll(0.05)
                self._set_assignment(tp.partition for tp in consumer.assignment())
                if msg is None or msg.error():
                    continue
                self._record(msg.partition(), msg.offset())
                if self.commit:
                    consumer.commit(message=msg, asynchronous=False)
        finally:
            consumer.close()

    # --- confluent-kafka with the KIP-848 protocol (group.protocol=consumer) ----------------------

    def _run_confluent_kip848(self) -> None:
        import confluent_kafka as ck

        # the broker assigns: no assignor, session or heartbeat settings on the client
        consumer = ck.Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
        })

        def on_assign(c: Any, parts: list[Any]) -> None:
            self.assign_events += 1

        consumer.subscribe([self.topic], on_assign=on_assign)
        started = time.monotonic()
        try:
            while self._running(started):
                msg = consumer.poll(0.05)
                self._set_assignment(tp.partition for tp in consumer.assignment())
                if msg is None or msg.error():
                    continue
                self._record(msg.partition(), msg.offset())
                if self.commit:
                    consumer.commit(message=msg, asynchronous=False)
        finally:
            consumer.close()

    # --- kafka-python -----------------------------------------------------------------------------

    def _run_kafka_python(self) -> None:
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

        assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                    "sticky": StickyPartitionAssignor}[self.strategy]
        consumer = KafkaConsumer(
            self.topic, bootstrap_servers=self.bootstrap, group_id=self.group, client_id=f"kp-{self.name}",
            partition_assignment_strategy=[assignor], auto_offset_reset="earliest", enable_auto_commit=False,
            session_timeout_ms=self.session_ms, heartbeat_interval_ms=HEARTBEAT_MS, metadata_max_age_ms=1000,
        )
        started = time.monotonic()
        try:
            while self._running(started):
                # kafka-python 3.0 can lose a finished join when poll() times out inside it: poll long
                batches = consumer.poll(timeout_ms=1000)
                for tp, records in batches.items():
                    for r in records:
                        self._record(tp.partition, r.offset)
                self._set_assignment(tp.partition for tp in consumer.assignment())
                if self.commit and batches:
                    consumer.commit()
        finally:
            consumer.close()

    # --- aiokafka ---------------------------------------------------------------------------------

    def _run_aiokafka(self) -> None:
        asyncio.run(self._aio_main())

    async def _aio_main(self) -> None:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[self.strategy]
        consumer = AIOKafkaConsumer(
            self.topic, bootstrap_servers=self.bootstrap, group_id=self.group,
            partition_assignment_strategy=(assignor,), auto_offset_reset="earliest", enable_auto_commit=False,
            session_timeout_ms=self.session_ms, heartbeat_interval_ms=HEARTBEAT_MS, metadata_max_age_ms=1000,
        )
        await consumer.start()
        started = time.monotonic()
        try:
            while self._running(started):
                batches = await consumer.getmany(timeout_ms=50)
                for tp, records in batches.items():
                    for r in records:
                        self._record(tp.partition, r.offset)
                self._set_assignment(tp.partition for tp in consumer.assignment())
                if self.commit and batches:
                    await consumer.commit()
        finally:
            await consumer.stop()


def wait_for(condition: Callable[[], bool], timeout: float, what: str, members: list[Member] = ()) -> None:  # type: ignore[assignment]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for mb in members:
            if mb.error is not None:
                raise AssertionError(f"{mb.name} failed: {mb.error!r}") from mb.error
        if condition():
            return
        time.sleep(0.05)
    state = [(mb.name, sorted(mb.snapshot()[0]), len(mb.snapshot()[1])) for mb in members]
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; members: {state}")


def balanced(members: list[Member], partitions: int) -> bool:
    """Every partition owned by exactly one member, and every member owns something."""
    owned = [mb.snapshot()[0] for mb in members]
    if any(not o for o in owned):
        return False
    flat = [p for o in owned for p in o]
    return len(flat) == len(set(flat)) == partitions


def wait_stable(members: list[Member], partitions: int, timeout: float = 45.0, hold: float = 1.0) -> None:
    """Balanced and unchanged for `hold` seconds (cooperative protocols rebalance twice)."""
    deadline = time.monotonic() + timeout
    while True:
        wait_for(lambda: balanced(members, partitions), max(0.1, deadline - time.monotonic()),
                 "a balanced assignment", members)
        before = [mb.snapshot()[0] for mb in members]
        time.sleep(hold)
        if balanced(members, partitions) and [mb.snapshot()[0] for mb in members] == before:
            return
        assert time.monotonic() < deadline, "assignment never settled"


def produce(bootstrap: str, topic: str, count: int, start: int = 0) -> None:
    import confluent_kafka as ck

    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
    assert producer.flush(15) == 0
