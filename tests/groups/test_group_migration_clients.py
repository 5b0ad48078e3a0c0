"""KIP-848 online upgrade and downgrade with real clients (confluent-kafka) against a real broker.

A group of three consumers is replaced member by member by consumers of the other protocol (close one,
start one of the other kind, wait until the group settles, repeat) while a producer writes sequence-
numbered records. Every member's assignment callbacks are recorded with a timestamp: at no moment does a
partition belong to two members, and every record is consumed (at-least-once) although every consumer
uses auto.offset.reset=latest, so the committed offsets must carry over from one kind to the other.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from helpers import wait_until
from kaflite.server.embedded import EmbeddedBroker

TOPIC, PARTITIONS = "migrate", 6
OVERRIDES = {"group.consumer.heartbeat.interval.ms": "300", "group.initial.rebalance.delay.ms": "100"}


class Consumer(threading.Thread):
    """One consumer on its own thread; records (time, "+"/"-", partition) for every ownership change."""

    def __init__(self, name: str, protocol: str, bootstrap: str, group: str, log: list[tuple[float, str, str, int]],
                 lock: threading.Lock) -> None:
        super().__init__(daemon=True, name=name)
        self.protocol, self.bootstrap, self.group = protocol, bootstrap, group
        self.log, self.lock = log, lock
        self.owned: set[int] = set()
        self.seen: list[int] = []  # sequence numbers consumed
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def _change(self, sign: str, partitions: list[Any]) -> None:
        with self.lock:
            now = time.monotonic()
            for tp in partitions:
                if sign == "+":
                    self.owned.add(tp.partition)
                else:
                    self.owned.discard(tp.partition)
                self.log.append((now, sign, self.name, tp.partition))

    def run(self) -> None:
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap, "group.id": self.group,
                                "group.protocol": self.protocol, "auto.offset.reset": "latest",
                                "enable.auto.commit": True, "auto.commit.interval.ms": 200}
        if self.protocol == "classic":
            conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
        try:
            consumer = ck.Consumer(conf)
            consumer.subscribe([TOPIC], on_assign=lambda c, ps: self._change("+", ps),
                               on_revoke=lambda c, ps: self._change("-", ps),
                               on_lost=lambda c, ps: self._change("-", ps))
            deadline = time.monotonic() + 120
            while not self.stop_event.is_set() and time.monotonic() < deadline:
                msg = consumer.poll(0.05)
                if msg is not None and not msg.error():
                    with self.lock:
                        self.seen.append(int(msg.value()))
            # this member stops consuming now: whatever it still owns ends here at the latest (the broker
            # hands its partitions to others only after its leave, sent by close())
            self._change("-", [ck.TopicPartition(TOPIC, p) for p in sorted(self.owned)])
            consumer.close()
        except BaseException as e:  # noqa: BLE001 - reported to the test thread
            self.error = e

    def stop(self) -> None:
        self.stop_event.set()
        self.join(30)
        assert not self.is_alive() and self.error is None, self.error


class Producer(threading.Thread):
    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True, name="producer")
        self.producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
        self.acked: list[int] = []
        self.stop_event = threading.Event()

    def send(self, seq: int) -> None:
        def acked(err: Any, _msg: Any, seq: int = seq) -> None:
            if err is None:
                self.acked.append(seq)
        self.producer.produce(TOPIC, str(seq).encode(), partition=seq % PARTITIONS, on_delivery=acked)

    def run(self) -> None:
        seq = PARTITIONS  # 0..5 are the warm-up records
        deadline = time.monotonic() + 120
        while not self.stop_event.is_set() and time.monotonic() < deadline:
            self.send(seq)
            seq += 1
            self.producer.poll(0.01)
        self.producer.flush(10)


def _overlaps(log: list[tuple[float, str, str, int]]) -> list[str]:
    """Moments when a partition was owned by two members (from the timestamped callbacks)."""
    owner: dict[int, set[str]] = {}
    problems = []
    for t, sign, name, p in sorted(log, key=lambda e: (e[0], e[1] != "-")):  # releases first at a tie
        holders = owner.setdefault(p, set())
        if sign == "+":
            holders.add(name)
            if len(holders) > 1:
                problems.append(f"t={t:.3f} partition {p} owned by {sorted(holders)}")
        else:
            holders.discard(name)
    return problems


def _migrate(start: str, to: str, group: str) -> tuple[EmbeddedBroker | None, dict[str, Any]]:
    log: list[tuple[float, str, str, int]] = []
    lock = threading.Lock()
    with EmbeddedBroker(overrides=OVERRIDES) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(10)
        members = [Consumer(f"{start}-{i}", start, b.bootstrap, group, log, lock) for i in range(3)]
        retired: list[Consumer] = []

        def settled() -> bool:
            with lock:
                owned = [c.owned for c in members]
                return sorted(p for o in owned for p in o) == list(range(PARTITIONS)) and all(owned)

        for c in members:
            c.start()
        wait_until("the first group to form", settled, 30)
        time.sleep(1.0)  # the positions (latest) are resolved before anything is produced
        producer = Producer(b.bootstrap)
        for p in range(PARTITIONS):
            producer.send(p)
        producer.producer.flush(10)
        wait_until("the warm-up records", lambda: {s for c in members for s in c.seen} >= set(range(PARTITIONS)), 30)
        producer.start()
        for i in range(3):
            time.sleep(0.5)
            old = members[i]
            old.stop()
            retired.append(old)
            members[i] = Consumer(f"{to}-{i}", to, b.bootstrap, group, log, lock)
            members[i].start()
            wait_until(f"the group to settle after replacing member {i}", settled, 45)
            if i == 0:  # a mixed group: one consumer group, its members of both kinds (KIP-1099 member type)
                mixed = _member_types(b.bootstrap, group)
        time.sleep(0.5)
        producer.stop_event.set()
        producer.join(30)
        acked = set(producer.acked) | set(range(PARTITIONS))
        everyone = retired + members
        wait_until("every acknowledged record", lambda: {s for c in everyone for s in c.seen} >= acked, 30)
        listed = admin.list_consumer_groups().result(10)
        group_type = {g.group_id: g.type for g in listed.valid}[group]
        for c in members:
            c.stop()
        seen = [s for c in everyone for s in c.seen]
    return None, {"log": log, "acked": acked, "seen": seen, "type": group_type, "mixed": mixed}


def _member_types(bootstrap: str, group: str) -> list[int]:
    from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest

    from server.kwire import WireClient

    with WireClient(bootstrap) as w:
        [g] = w.request(ConsumerGroupDescribeRequest(group_ids=(group,), include_authorized_operations=False)).groups
    return sorted(int(mb.member_type) for mb in g.members)


def test_classic_group_upgraded_member_by_member_never_owns_a_partition_twice() -> None:
    _b, r = _migrate("classic", "consumer", "upgrade-group")
    assert not _overlaps(r["log"]), _overlaps(r["log"])[:5]
    assert set(r["seen"]) >= r["acked"] and len(r["acked"]) > 100
    assert str(r["type"]).endswith("CONSUMER")
    assert r["mixed"] == [0, 0, 1]  # two classic members and the consumer-protocol one, in one consumer group


def test_consumer_group_downgraded_member_by_member_never_owns_a_partition_twice() -> None:
    _b, r = _migrate("consumer", "classic", "downgrade-group")
    assert not _overlaps(r["log"]), _overlaps(r["log"])[:5]
    assert set(r["seen"]) >= r["acked"] and len(r["acked"]) > 100
    assert str(r["type"]).endswith("CLASSIC")
    assert r["mixed"] == [0, 1, 1]
