"""Transactions in a cluster (issue 14): three `python -m kaflite.server` processes on a real ZooKeeper, a
topic whose three partitions are led by three different brokers, confluent-kafka transactional producers.

- commit and abort: the coordinator (the leader of the id's `__transaction_state` partition) sends
  WriteTxnMarkers to the two leaders on other brokers; read_committed sees exactly the committed records,
  read_uncommitted every one, and the last stable offset of every partition reaches its end;
- kill -9 of the coordinator mid-transaction (after the sends, before the commit): the `__transaction_state`
  leadership moves, the new coordinator rebuilds the transactions from the replicated log, the producer's
  commit completes there (or, when refused, nothing of it is visible), an abandoned transaction of another id
  is aborted when a new incarnation of that id starts, and producers go on with new transactions.

Both tests run on the module's brokers 1-3 (`three_brokers`, started with SETTINGS and brought back whole
before each test), each on a topic, transactional ids and groups named after the test."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from functools import partial

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.types import ProducerId, TopicName
from kio.schema.write_txn_markers.v1.request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from kio.schema.write_txn_markers.v1.response import WriteTxnMarkersResponse
from kio.static.primitive import i16, i32

from cluster.conftest import BrokerProcesses
from helpers import read_to_end, wait_until
from kaflite.cluster.zk import KafkaZkClient
from kaflite.coordinator import OFFSETS_TOPIC
from kaflite.coordinator import partition_for as offsets_partition
from kaflite.coordinator.transaction import TRANSACTION_STATE_TOPIC, partition_for
from kaflite.protocol.errors import ErrorCode
from kaflite.server.broker_connection import BrokerConnection

_wait = partial(wait_until, interval=0.1)  # several checks here open client connections: poll at 10 Hz

SETTINGS = ("replica.lag.time.max.ms=4000", "replica.fetch.backoff.ms=200",
            "transaction.state.log.replication.factor=3", "transaction.state.log.min.isr=2",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms=500",
            "offsets.topic.replication.factor=3")
THREE_BROKERS_OVERRIDES = SETTINGS  # every start of the module's brokers (cluster/conftest.py)


def _topic(brokers: BrokerProcesses, zk: KafkaZkClient) -> str:
    """A new topic of this test: 3 partitions, RF 3, min.insync.replicas 2, every ISR full. Its name
    prefixes the test's transactional ids and groups too."""
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": brokers.bootstrap()})
    admin.create_topics([NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    _wait("full ISRs", lambda: _full_isr(zk, [(topic, p) for p in range(3)]))
    return topic


def _full_isr(zk: KafkaZkClient, tps: list[tuple[str, int]]) -> bool:
    states = zk.get_partition_states(tps)
    return all(s is not None and s.leader > 0 and sorted(s.isr) == [1, 2, 3] for s in states.values())


def _leader(zk: KafkaZkClient, topic: str, partition: int) -> int:
    s = zk.get_partition_states([(topic, partition)])[(topic, partition)]
    return -1 if s is None else s.leader


def _coordinator(zk: KafkaZkClient, tid: str) -> int:
    return _leader(zk, TRANSACTION_STATE_TOPIC, partition_for(tid, 50))


def _read(bootstrap: str, topic: str, isolation: str, expected: int) -> list[bytes]:
    """Every partition to its end (read_committed: its last stable offset), and at least `expected` records
    (helpers.read_to_end; an idle 1.5 s per read decided the end before)."""
    return read_to_end(bootstrap, topic, 3, isolation, at_least=expected)


def _stable(bootstrap: str, topic: str) -> bool:
    """The last stable offset of every partition is its end: no transaction is left open."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "w", "isolation.level": "read_committed"})
    u = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "w", "isolation.level": "read_uncommitted"})
    try:
        return all(c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10)[1]
                   == u.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10)[1] for p in range(3))
    except ck.KafkaException:
        return False
    finally:
        c.close()
        u.close()


def _producer(bootstrap: str, tid: str, **extra: object) -> ck.Producer:
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5, **extra})
    p.init_transactions(60)
    return p


def _send(p: ck.Producer, topic: str, prefix: str, n: int) -> list[bytes]:
    values = [f"{prefix}-{i}".encode() for i in range(n)]
    for i, v in enumerate(values):
        p.produce(topic, v, partition=i % 3)
    return values


def _write_marker(port: int, topic: str) -> ErrorCode:
    """One ABORT marker for partition 0 of `topic` (an unknown producer), sent as a coordinator would."""
    async def send() -> ErrorCode:
        conn = await BrokerConnection.open("127.0.0.1", port, "test-coordinator", 10)
        try:
            req = WriteTxnMarkersRequest(markers=(WritableTxnMarker(
                producer_id=ProducerId(999_999), producer_epoch=i16(0), transaction_result=False,
                coordinator_epoch=i32(0), topics=(WritableTxnMarkerTopic(name=TopicName(topic),
                                                                         partition_indexes=(i32(0),)),)),))
            resp = await conn.request(req, WriteTxnMarkersResponse, 10)
            code = resp.markers[0].topics[0].partitions[0].error_code
            return ErrorCode(int(getattr(code, "value", code)))
        finally:
            conn.close()
    return asyncio.run(send())


def _group(bootstrap: str, zk: KafkaZkClient, topic: str, wanted: Callable[[int], bool]) -> str:
    """A group id (prefixed `topic`) whose coordinator (its __consumer_offsets partition's leader) is
    `wanted`."""
    probe = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", "enable.auto.commit": False})

    def created() -> bool:
        try:  # a FindCoordinator: the first one creates __consumer_offsets
            probe.committed([ck.TopicPartition(topic, 0)], timeout=5)
        except ck.KafkaException:
            pass
        return _leader(zk, OFFSETS_TOPIC, offsets_partition("probe", 50)) > 0

    try:
        _wait("__consumer_offsets", created)
    finally:
        probe.close()
    return next(g for g in (f"{topic}-g-{i}" for i in range(1000))
                if wanted(_leader(zk, OFFSETS_TOPIC, offsets_partition(g, 50))))


def test_commit_and_abort_across_leaders(
    three_brokers: BrokerProcesses, three_brokers_zk: KafkaZkClient
) -> None:
    brokers, zk = three_brokers, three_brokers_zk
    topic = _topic(brokers, zk)
    assert {_leader(zk, topic, p) for p in range(3)} == {1, 2, 3}  # three leaders: two are remote
    bootstrap = brokers.bootstrap()
    tid = f"{topic}-cross"
    p = _producer(bootstrap, tid)
    coordinator = _coordinator(zk, tid)
    assert coordinator in (1, 2, 3)
    group = _group(bootstrap, zk, topic, lambda leader: leader not in (-1, coordinator))
    member = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    committed: list[bytes] = []
    p.begin_transaction()
    committed += _send(p, topic, "c1", 30)
    p.send_offsets_to_transaction([ck.TopicPartition(topic, 0, 5)], member.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    p.begin_transaction()
    aborted = _send(p, topic, "a1", 30)
    p.send_offsets_to_transaction([ck.TopicPartition(topic, 0, 9)], member.consumer_group_metadata(), 30)
    p.flush(30)
    p.abort_transaction(30)
    # the group's offsets: committed with the first transaction, not with the aborted one (their markers
    # went to the group's __consumer_offsets partition on another broker)
    assert member.committed([ck.TopicPartition(topic, 0)], timeout=20)[0].offset == 5
    member.close()
    p.begin_transaction()
    committed += _send(p, topic, "c2", 30)
    p.commit_transaction(30)
    _wait("every transaction complete (LSO = end everywhere)", lambda: _stable(bootstrap, topic))
    got = _read(bootstrap, topic, "read_committed", len(committed))
    assert sorted(got) == sorted(committed)
    assert sorted(_read(bootstrap, topic, "read_uncommitted", 90)) == sorted(committed + aborted)
    # (the LSO reached the end on the two other leaders: the coordinator's markers were written there)
    for b in (1, 2, 3):
        assert "Traceback" not in brokers.log(b), brokers.log(b)[-3000:]
    p.flush(10)
    # WriteTxnMarkers checks the leadership on the receiving broker: a follower refuses the marker
    leader = _leader(zk, topic, 0)
    follower = next(b for b in (1, 2, 3) if b != leader)
    assert _write_marker(brokers.ports[follower], topic) == ErrorCode.not_leader_or_follower


def test_kill_9_coordinator_mid_transaction(
    three_brokers: BrokerProcesses, three_brokers_zk: KafkaZkClient
) -> None:
    brokers, zk = three_brokers, three_brokers_zk
    topic = _topic(brokers, zk)
    bootstrap = brokers.bootstrap()
    tid = f"{topic}-a"
    committing = _producer(bootstrap, tid, **{"transaction.timeout.ms": 60000})
    victim = _coordinator(zk, tid)
    # an id of the same coordinator whose transaction is abandoned (its producer gone with the crash)
    abandoned_id = next(b for b in (f"{topic}-b-{i}" for i in range(1000)) if _coordinator(zk, b) == victim)
    abandoned = _producer(bootstrap, abandoned_id, **{"transaction.timeout.ms": 60000})
    # a group coordinated by the same broker: its pending transactional offset must survive the crash too
    group = _group(bootstrap, zk, topic, lambda leader: leader == victim)
    member = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    tps = [(TRANSACTION_STATE_TOPIC, partition_for(tid, 50)),
           (TRANSACTION_STATE_TOPIC, partition_for(abandoned_id, 50)),
           (OFFSETS_TOPIC, offsets_partition(group, 50))]
    _wait("the coordinators' partitions fully replicated", lambda: _full_isr(zk, tps))
    committing.begin_transaction()
    committed = _send(committing, topic, "before", 9)  # a first, whole transaction
    committing.commit_transaction(30)

    committing.begin_transaction()
    pending = _send(committing, topic, "mid", 30)
    committing.send_offsets_to_transaction(
        [ck.TopicPartition(topic, 0, 7)], member.consumer_group_metadata(), 30
    )
    committing.flush(30)
    abandoned.begin_transaction()
    lost = _send(abandoned, topic, "lost", 30)
    abandoned.flush(30)

    t0 = time.monotonic()
    brokers.kill(victim)
    new = _wait("a new coordinator", lambda: (c := _coordinator(zk, tid)) > 0 and c != victim and c, 30)
    try:
        committing.commit_transaction(60)
        outcome = "committed"
        committed += pending
    except ck.KafkaException as e:  # refused: then none of it may ever be visible
        outcome = f"refused ({e})"
        committing.abort_transaction(60)
    took = time.monotonic() - t0
    # a new incarnation of the abandoned id fences it: its open transaction is aborted, never visible
    again = _producer(bootstrap, abandoned_id)
    again.begin_transaction()
    committed += _send(again, topic, "again", 6)
    again.commit_transaction(30)
    # and the first producer goes on
    committing.begin_transaction()
    committed += _send(committing, topic, "after", 6)
    committing.commit_transaction(30)

    _wait("every transaction complete (LSO = end everywhere)", lambda: _stable(bootstrap, topic), 60)
    got = _read(bootstrap, topic, "read_committed", len(committed))
    assert sorted(got) == sorted(committed), f"outcome {outcome}"
    assert not set(got) & set(lost)
    everything = set(_read(bootstrap, topic, "read_uncommitted", len(committed) + len(lost)))
    assert set(lost) <= everything and set(pending) <= everything  # written, then marked
    # the group's offset went with the transaction (its coordinator moved too, and loaded it pending)
    offset = member.committed([ck.TopicPartition(topic, 0)], timeout=30)[0].offset
    assert offset == (7 if outcome == "committed" else ck.OFFSET_INVALID), outcome
    member.close()
    print(f"\ncoordinator {victim} killed -> {new}; commit {outcome} {took:.1f} s after the kill")
