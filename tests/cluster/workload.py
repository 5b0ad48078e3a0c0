"""The replication fault tests' workload, shared by test_replication_faults.py and test_zookeeper_outage.py:
an idempotent acks=all producer writing `partition:sequence` records at a steady rate with a live consumer
(`Workload`, what they saw in `Run`), the read-back of the whole topic, and the check that every
acknowledged record is there once, in order, and that nothing a consumer saw vanished."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from cluster.conftest import BrokerProcesses

TOPIC = "faults"
PARTITIONS = 3


@dataclass
class Run:
    acked: dict[int, list[int]] = field(default_factory=lambda: {p: [] for p in range(PARTITIONS)})
    failed: int = 0
    seen: dict[tuple[int, int], bytes] = field(default_factory=dict)  # (partition, offset) -> value, live
    sent: int = 0
    cycles: list[str] = field(default_factory=list)


class Workload:
    """Producer (paced) and a live consumer, pumped from the test's thread."""

    def __init__(self, brokers: BrokerProcesses, run: Run, rate: float = 300.0, topic: str = TOPIC) -> None:
        self.run = run
        self.topic = topic
        self.rate = rate
        self.next_seq = {p: 0 for p in range(PARTITIONS)}
        self.producer = Producer({"bootstrap.servers": brokers.bootstrap(), "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": 120000,
                                  "retry.backoff.ms": 100})
        self.consumer = Consumer({"bootstrap.servers": brokers.bootstrap(), "group.id": f"g-{uuid.uuid4().hex[:6]}",
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "topic.metadata.refresh.interval.ms": 1000})
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        self._t0 = time.monotonic()

    def _delivered(self, err: KafkaError | None, msg: object) -> None:
        if err is not None:
            self.run.failed += 1
            return
        p, seq = msg.value().decode().split(":")  # type: ignore[attr-defined]
        self.run.acked[int(p)].append(int(seq))

    def pump(self, seconds: float, until: Callable[[], bool] | None = None) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            due = int((time.monotonic() - self._t0) * self.rate)
            while self.run.sent < due:
                p = self.run.sent % PARTITIONS
                seq = self.next_seq[p]
                self.next_seq[p] += 1
                try:
                    self.producer.produce(self.topic, value=f"{p}:{seq}".encode(), partition=p,
                                          on_delivery=self._delivered)
                except BufferError:
                    self.next_seq[p] -= 1
                    break
                self.run.sent += 1
            self.producer.poll(0)
            m = self.consumer.poll(0.02)
            if m is not None and m.error() is None:
                self.run.seen[(m.partition(), m.offset())] = m.value()
            if until is not None and until():
                return True
        return until is None

    def close(self) -> None:
        assert self.producer.flush(120) == 0, "records still unacknowledged after 120 s"
        self.consumer.close()


def read_back(
    brokers: BrokerProcesses, expected: int, topic: str = TOPIC
) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of `topic` from offset 0 to each partition's high watermark, which librdkafka reports
    as a partition EOF once it has fetched up to it, and at least `expected` of them (within 60 s; the check
    fails on what did arrive). A run reads back after every record it sent was acknowledged with acks=all,
    so each one written is below the high watermark: no idle wait decides the end (one of 2 s did)."""
    consumer = Consumer({"bootstrap.servers": brokers.bootstrap(), "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
        at_end: set[int] = set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
            len(at_end) < PARTITIONS or sum(map(len, got.values())) < expected
        ):
            m = consumer.poll(0.2)
            if m is None or (part := m.partition()) is None:
                continue
            if (err := m.error()) is None:
                got[part].append((m.offset(), m.value()))  # type: ignore[arg-type]
                at_end.discard(part)  # more may follow
            elif err.code() == KafkaError._PARTITION_EOF:
                at_end.add(part)
        return got
    finally:
        consumer.close()


def check_exactly_once(run: Run, final: dict[int, list[tuple[int, bytes]]]) -> None:
    for p in range(PARTITIONS):
        seqs = [int(v.decode().split(":")[1]) for _o, v in final[p]]
        assert all(v.decode().startswith(f"{p}:") for _o, v in final[p])
        # exactly once and in order: strictly increasing sequence numbers (the producer's order)
        dups = len(seqs) - len(set(seqs))
        assert dups == 0, f"partition {p}: {dups} duplicate records"
        assert seqs == sorted(seqs), f"partition {p}: records out of order"
        missing = set(run.acked[p]) - set(seqs)
        assert not missing, f"partition {p}: {len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
        assert run.acked[p] == sorted(run.acked[p]), f"partition {p}: acknowledged out of order"
    offsets = {(p, o): v for p in range(PARTITIONS) for o, v in final[p]}
    vanished = {k: v for k, v in run.seen.items() if offsets.get(k) != v}
    assert not vanished, f"a consumer saw records that are not finally there: {list(vanished.items())[:5]}"
