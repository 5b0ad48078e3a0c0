"""Coordinator leadership moving A -> B -> A on a real broker, in-process and without sockets (issue 24).

The broker is A, a single node whose `__consumer_offsets` / `__transaction_state` partition is handed to
another broker B and back by publishing images as the cluster's metadata would after preferred
elections. B is not running: what it writes as leader is built by a coordinator shard replaying the
same partition (what B's load does) and appended to A's log as a follower's fetch would
(`append_records_to_follower`, B's leader epoch in the batch). Checked: A's shard goes at the
resignation, and after the round trip A answers from B's writes (a group's committed offsets; a
transaction B extended is completed by its markers), and a write failing once the replica layer no
longer leads does not bring the shard back."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kio.index import load_payload_module
from kio.static.constants import EntityType

from kaflite.cluster.metadata import (
    BrokerRegistration,
    Endpoint,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from kaflite.coordinator import OFFSETS_TOPIC, GroupCoordinator
from kaflite.coordinator import messages as m
from kaflite.coordinator.transaction import TRANSACTION_STATE_TOPIC, TransactionCoordinatorShard, TxnState
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.messages import RequestHeader
from kaflite.protocol.record_batch import build_record_batch
from kaflite.server.broker import Broker
from kaflite.server.config import Listener
from kaflite.server.context import RequestContext
from kaflite.server.coordinators.groups import GroupService
from kaflite.server.coordinators.transactions import TransactionService
from kaflite.server.coordinators.writer import OffsetsTopicWriter
from kaflite.server.embedded import load_broker_config
from kaflite.server.handlers.transactions import handle_end_txn

B = 7  # the other broker
T = TypeVar("T")


class Harness:
    def __init__(self, tmp: Path) -> None:
        self.loop = asyncio.new_event_loop()
        cfg = load_broker_config({"log.dirs": str(tmp), "listeners": "PLAINTEXT://127.0.0.1:0",
                                  "offsets.topic.num.partitions": "1",
                                  "transaction.state.log.num.partitions": "1"}, True)
        self.broker = Broker(cfg)
        self.loop.run_until_complete(self.broker.start())
        self.broker.set_bound_listeners([Listener("PLAINTEXT", "127.0.0.1", 19092, "PLAINTEXT")])

    def run(self, fn: Callable[[], Awaitable[T]]) -> T:
        return self.loop.run_until_complete(asyncio.wait_for(fn(), 10))

    def image_led_by(self, topic: str, leader: int, epoch: int) -> MetadataImage:
        """The image after an election of `leader` at `epoch` for every partition of `topic` (A a follower
        in B's ISR while B leads; alone when A leads)."""
        image = self.broker.metadata_writer.image
        old = image.topics[topic]
        me = self.broker.node_id
        replicas = (me,) if leader == me else (leader, me)
        parts = tuple(PartitionRegistration(replicas, replicas, leader, epoch, epoch) for _ in old.partitions)
        brokers = dict(image.brokers)
        brokers[B] = BrokerRegistration(B, (Endpoint("PLAINTEXT", "b", 9093),))
        topics = dict(image.topics)
        topics[topic] = TopicImage(topic, old.topic_id, parts, old.configs)
        return image.evolve(topics=topics, brokers=brokers)

    def elect(self, topic: str, leader: int, epoch: int) -> None:
        """Publish a (preferred) election, on the event loop as the metadata listener runs."""
        async def publish() -> None:
            self.broker.metadata_writer._publish(self.image_led_by(topic, leader, epoch), persist=False)
        self.run(publish)

    def replicate_from_b(self, topic: str, records: list[Any], epoch: int, **batch: Any) -> None:
        """B's batch, as A's fetcher appends it: B's offsets (A's log end) and B's leader epoch."""
        part = self.broker.replica_manager.partition_or_none(topic, 0)
        assert part is not None and part.log is not None and not part.is_leader
        end = part.log.log_end_offset
        data = build_record_batch([(r.key, r.value, []) for r in records], base_offset=end,
                                  partition_leader_epoch=epoch, **batch)
        part.append_records_to_follower(data, end + len(records))

    def close(self) -> None:
        self.loop.run_until_complete(self.broker.stop())
        self.loop.close()


@pytest.fixture
def h(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path)
    yield harness
    harness.close()


def commit_req(offset: int) -> m.OffsetCommitRequest:
    return m.OffsetCommitRequest("g", (("t", (m.OffsetCommitPartition(0, offset),)),))


def groups(h: Harness) -> GroupService:
    async def start() -> GroupService:
        svc = await GroupService.of_async(h.broker)  # __consumer_offsets created first (single node)
        await svc.loaded
        return svc
    return h.run(start)


def commit(h: Harness, svc: GroupService, offset: int) -> None:
    async def go() -> Any:
        return await svc.runtime.write(0, lambda shard, now: shard.handle_offset_commit(commit_req(offset), now))
    assert h.run(go).topics == (("t", ((0, ErrorCode.none),)),)


def committed_offset(h: Harness, svc: GroupService) -> int:
    async def go() -> Any:
        req = m.OffsetFetchRequest("g", (("t", (0,)),))
        return await svc.runtime.write(0, lambda shard, now: shard.handle_offset_fetch(req, now))
    return int(h.run(go).topics[0][1][0].offset)


def test_group_offsets_committed_on_b_survive_the_round_trip(h: Harness) -> None:
    """Issue 24's first consequence: the group's committed offset read back as what A last saw."""
    me = h.broker.node_id
    svc = groups(h)
    shard = svc.runtime.shard(0)
    h.elect(OFFSETS_TOPIC, me, 1)  # a new epoch, A still leading (as after an ISR change): the shard stays
    assert svc.runtime.shard(0) is shard and svc.runtime.leader_epoch(0) == 1
    commit(h, svc, 5)
    h.elect(OFFSETS_TOPIC, B, 2)  # B leads: A resigns
    assert svc.runtime.state(0) is None
    with pytest.raises(KafkaError) as e:
        committed_offset(h, svc)
    assert e.value.code is ErrorCode.not_coordinator
    # B loads the partition (its replica holds A's records) and commits 9
    b = GroupCoordinator(svc.config, active=False)
    for key, value in svc.writer.records(0):
        b.replay(key, value)
    b.activate(h.broker.now_ms())
    h.replicate_from_b(OFFSETS_TOPIC, list(b.handle_offset_commit(commit_req(9), h.broker.now_ms()).records), 2)
    h.elect(OFFSETS_TOPIC, me, 3)  # preferred election: A leads again
    assert committed_offset(h, svc) == 9
    commit(h, svc, 10)  # and writes on from there
    assert committed_offset(h, svc) == 10


def test_a_write_failing_once_the_replica_layer_lost_leadership_does_not_reactivate_the_shard(h: Harness) -> None:
    """The replica layer follows B before the coordinator hears of it: the commit is refused
    (NOT_LEADER_OR_FOLLOWER) and the reload that follows must leave the partition unloaded (it made the
    follower's shard active: committed_end said "all committed" as the high watermark was at the log end)."""
    me = h.broker.node_id
    svc = groups(h)
    commit(h, svc, 5)
    h.broker.replica_manager.on_image(None, h.image_led_by(OFFSETS_TOPIC, B, 1))
    with pytest.raises(KafkaError) as e:
        commit(h, svc, 6)
    assert e.value.code is ErrorCode.not_coordinator
    assert svc.runtime.state(0) is None
    h.elect(OFFSETS_TOPIC, B, 1)  # the coordinator hears of it: nothing left to unload
    h.elect(OFFSETS_TOPIC, me, 2)
    assert committed_offset(h, svc) == 5


def end_txn_request(pid: int, epoch: int) -> Any:
    q = load_payload_module(26, 3, EntityType.request)
    return q.EndTxnRequest(transactional_id="tx", producer_id=pid, producer_epoch=epoch, committed=True)


def test_a_transaction_extended_on_b_is_committed_with_its_markers_after_the_round_trip(h: Harness) -> None:
    """Issue 24's second consequence: EndTxn(commit) answered success from A's stale CompleteCommit of the
    previous transaction, no marker was written, the data partition's last stable offset stayed put."""
    me = h.broker.node_id
    h.broker.create_topic("t", 1, None)
    ids = itertools.count(5000)

    async def start() -> TransactionService:
        svc = await TransactionService.of_async(h.broker)
        await svc.loaded
        return svc
    svc = h.run(start)
    now = h.broker.now_ms
    h.elect(TRANSACTION_STATE_TOPIC, me, 1)  # a new epoch, A still leading
    async def call(op: Callable[[TransactionCoordinatorShard, int], Any]) -> Any:
        return await svc.call("tx", op)

    init = h.run(lambda: call(lambda s, t: s.init_producer_id("tx", 60_000, t)))
    pid, epoch = init.producer_id, init.producer_epoch
    data = h.broker.replica_manager.partition_or_none("t", 0)
    assert data is not None and data.log is not None

    def produce(sequence: int) -> None:
        batch = build_record_batch([(None, b"v%d" % sequence, [])], producer_id=pid, producer_epoch=epoch,
                                   base_sequence=sequence, is_transactional=True)
        h.broker.replica_manager.append_records("t", 0, batch, -1)

    def state() -> TxnState:
        return svc.runtime.shard(0).txns["tx"].state

    async def until(check: Callable[[], bool]) -> None:
        while not check():
            await asyncio.sleep(0.01)

    # transaction 1, all on A
    assert h.run(lambda: call(lambda s, t: s.add_partitions("tx", pid, epoch, [("t", 0)], t))).error is ErrorCode.none
    produce(0)
    ctx = RequestContext(h.broker, RequestHeader(26, 3, 1, "inproc"))
    assert h.run(lambda: handle_end_txn(ctx, end_txn_request(pid, epoch))).error_code == ErrorCode.none
    h.run(lambda: until(lambda: state() is TxnState.COMPLETE_COMMIT))

    h.elect(TRANSACTION_STATE_TOPIC, B, 2)  # B coordinates the id now: A resigns
    assert svc.runtime.state(0) is None
    # transaction 2 begins on B (AddPartitionsToTxn), replicated into A's log; its data goes to t-0
    b = TransactionCoordinatorShard(svc.config, lambda: next(ids))
    for item in OffsetsTopicWriter.loaded_records(svc.writer.log(0)):
        assert isinstance(item, tuple)
        b.replay(item[0], item[1])
    added = b.add_partitions("tx", pid, epoch, [("t", 0)], now())
    assert added.response().error is ErrorCode.none and b.txns["tx"].state is TxnState.ONGOING
    h.replicate_from_b(TRANSACTION_STATE_TOPIC, list(added.records), 2)
    produce(1)
    assert data.last_stable_offset < data.log_end_offset  # transaction 2 is open

    h.elect(TRANSACTION_STATE_TOPIC, me, 3)  # preferred election: A coordinates again
    response = h.run(lambda: handle_end_txn(ctx, end_txn_request(pid, epoch)))
    assert response.error_code == ErrorCode.none
    h.run(lambda: until(lambda: state() is TxnState.COMPLETE_COMMIT))
    assert data.last_stable_offset == data.log_end_offset  # the COMMIT marker is written
