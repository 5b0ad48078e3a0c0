"""A log start offset inside a batch on a real 3-broker cluster (`python -m kaflite.server` processes, a real
ZooKeeper): DeleteRecords moves it into the middle of a batch while broker 3 is down, the leader changes,
and broker 3 comes back behind. Its fetch offset is below the new leader's log start, so it restarts its log
there, inside the batch the leader then sends; it must restart at that batch's base offset and append it
(Kafka's UnexpectedAppendOffsetException path), catch up and rejoin the ISR, and every acknowledged record
past the log start stays readable from the new leader. Before, broker 3 refused the batch on every fetch
and never caught up."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from cluster.conftest import BrokerProcesses
from helpers import wait_until
from kaflite.cluster.admin import ZkAdmin
from kaflite.cluster.zk import KafkaZkClient

FAST = ("replica.lag.time.max.ms=4000", "replica.fetch.backoff.ms=200")
T = "midbatch"


def _isr(zk: KafkaZkClient) -> tuple[int, ...]:
    s = zk.get_partition_states([(T, 0)])[(T, 0)]
    return tuple(sorted(s.isr)) if s is not None else ()


def _leader(zk: KafkaZkClient) -> int:
    s = zk.get_partition_states([(T, 0)])[(T, 0)]
    return s.leader if s is not None else -1


def _log_bytes(directory: Path, broker: int) -> bytes:
    d = directory / f"broker-{broker}" / f"{T}-0"
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log"))) if d.is_dir() else b""


def _produce_batch(bootstrap: str, tag: str, n: int) -> list[tuple[int, bytes]]:
    """`n` records in one batch (one flush after a long linger), acks=all: their (offset, value)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 2000,
            "batch.num.messages": n,
            "message.timeout.ms": 20000,
        }
    )
    acked: list[tuple[int, bytes]] = []
    errors: list[object] = []

    def on_delivery(err: KafkaError | None, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked.append((msg.offset(), msg.value()))  # type: ignore[attr-defined]

    for i in range(n):
        producer.produce(T, value=f"{tag}{i}".encode(), partition=0, on_delivery=on_delivery)
    assert producer.flush(25) == 0 and not errors, errors
    return sorted(acked)


def _consume_from(
    bootstrap: str, offset: int, expected: int, timeout: float = 15.0
) -> list[tuple[int, bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    try:
        consumer.assign([TopicPartition(T, 0, offset)])
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + timeout
        while len(got) < expected and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append((m.offset(), m.value()))
        return got
    finally:
        consumer.close()


def test_a_follower_behind_a_mid_batch_log_start_catches_up_after_a_leader_change(
    brokers: BrokerProcesses, zk_connect: str
) -> None:
    zk = KafkaZkClient(zk_connect)
    zk.start()
    try:
        for b in (1, 2, 3):  # started together: a start is mostly the interpreter's import time
            brokers.start(b, *FAST, wait=False)
        for b in (1, 2, 3):
            brokers.wait_listening(b)
        wait_until("brokers registered", lambda: zk.get_broker_ids() == [1, 2, 3])
        ZkAdmin(zk).create_topic(T, -1, -1, {"min.insync.replicas": "1"}, assignment=[[1, 2, 3]])
        wait_until("a full ISR", lambda: _isr(zk) == (1, 2, 3))
        assert _leader(zk) == 1
        brokers.kill(3)  # broker 3 falls behind: it has nothing of what follows
        wait_until("3 out of the ISR", lambda: _isr(zk) == (1, 2), 15)
        first = _produce_batch(brokers.bootstrap(1), "a", 10)
        second = _produce_batch(brokers.bootstrap(1), "b", 10)
        assert [o for o, _v in first + second] == list(range(20))
        admin = AdminClient({"bootstrap.servers": brokers.bootstrap(1)})
        (future,) = admin.delete_records([TopicPartition(T, 0, 15)], request_timeout=20).values()
        assert future.result(20).low_watermark == 15  # inside the batch 10-19, on brokers 1 and 2
        brokers.kill(1)  # the leader changes: 2 leads
        wait_until("2 leads", lambda: _leader(zk) == 2, 15)
        brokers.start(3, *FAST)  # fetches from 0, below 2's log start 15 (inside its batch 10-19)
        third = _produce_batch(brokers.bootstrap(2), "c", 5)
        assert [o for o, _v in third] == list(range(20, 25))
        wait_until(
            "3 caught up and back in the ISR",
            lambda: _isr(zk) == (2, 3),
            20,
            context=lambda: brokers.log(3)[-2000:],
        )
        assert "restarting the local log at the batch's base offset 10" in brokers.log(3)
        # every acknowledged record past the log start is readable from the new leader
        acked = [(o, v) for o, v in second + third if o >= 15]
        assert _consume_from(brokers.bootstrap(2), 15, len(acked)) == acked
        # the replicas converged: broker 3 holds broker 2's bytes from the batch holding the log start on
        tail = _log_bytes(brokers.directory, 3)
        assert tail and _log_bytes(brokers.directory, 2).endswith(tail)
        assert len(tail) < len(_log_bytes(brokers.directory, 2))  # (nothing below that batch)
    finally:
        zk.close()
