"""Per-partition handlers called in-process (no socket): the error each gets from the one mapping in
`ReplicaManager.get_partition`, epochs and offsets from the Partition, and the Metadata view of the image.
The broker is real (logs on disk); leadership changes are published as a cluster writer would."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_payload_module, load_response_schema
from kio.serial import entity_reader
from kio.static.constants import EntityType

from kaflite.cluster.metadata import BrokerRegistration, Endpoint, PartitionRegistration, TopicImage
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.messages import RequestHeader
from kaflite.protocol.record_batch import build_record_batch
from kaflite.server.broker import Broker
from kaflite.server.config import Listener
from kaflite.server.context import RequestContext
from kaflite.server.embedded import load_broker_config
from kaflite.server.handlers import EncodedBody
from kaflite.server.handlers.admin import (
    handle_create_partitions,
    handle_create_topics,
    handle_delete_records,
    handle_delete_topics,
)
from kaflite.server.handlers.fetch import handle_fetch
from kaflite.server.handlers.list_offsets import handle_list_offsets
from kaflite.server.handlers.metadata import handle_metadata
from kaflite.server.handlers.offset_for_leader_epoch import handle_offset_for_leader_epoch
from kaflite.server.handlers.produce import handle_produce

OTHER = 7


class Harness:
    def __init__(self, tmp: Path) -> None:
        self.loop = asyncio.new_event_loop()
        cfg = load_broker_config({"log.dirs": str(tmp), "listeners": "PLAINTEXT://127.0.0.1:0"}, True)
        self.broker = Broker(cfg)
        self.loop.run_until_complete(self.broker.start())
        self.broker.set_bound_listeners([Listener("PLAINTEXT", "127.0.0.1", 19092, "PLAINTEXT")])

    def call(self, api_key: int, version: int, handler: Any, request: Any) -> Any:
        ctx = RequestContext(self.broker, RequestHeader(api_key, version, 1, "inproc"))
        out = self.loop.run_until_complete(handler(ctx, request))
        if isinstance(out, EncodedBody):  # a hot encoder's bytes: decode them as a client would
            frame = b"".join(p.tobytes() if hasattr(p, "tobytes") else bytes(p) for p in out.parts)
            body, size = entity_reader(load_response_schema(api_key, version))(frame, 0)
            assert size == len(frame)
            return body
        return out

    def req(self, api_key: int, version: int) -> Any:
        return load_payload_module(api_key, version, EntityType.request)

    def close(self) -> None:
        self.loop.run_until_complete(self.broker.stop())
        self.loop.close()


@pytest.fixture
def h(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path)
    yield harness
    harness.close()


def produce(h: Harness, topic: str, partition: int, n: int = 1, acks: int = -1) -> Any:
    q = h.req(0, 9)
    records = build_record_batch([(None, b"v%d" % i, []) for i in range(n)])
    req = q.ProduceRequest(transactional_id=None, acks=acks, timeout=datetime.timedelta(seconds=5), topic_data=(
        q.TopicProduceData(name=topic, partition_data=(q.PartitionProduceData(index=partition, records=records),)),))
    (t,) = h.call(0, 9, handle_produce, req).responses
    (p,) = t.partition_responses
    return p


def list_offsets(h: Harness, topic: str, partition: int, ts: int, current_epoch: int = -1) -> Any:
    q = h.req(2, 7)
    req = q.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(q.ListOffsetsTopic(name=topic, partitions=(
        q.ListOffsetsPartition(partition_index=partition, current_leader_epoch=current_epoch, timestamp=ts),)),))
    return h.call(2, 7, handle_list_offsets, req).topics[0].partitions[0]


def epoch_end(h: Harness, topic: str, partition: int, current: int, epoch: int) -> Any:
    q = h.req(23, 4)
    req = q.OffsetForLeaderEpochRequest(replica_id=-1, topics=(q.OffsetForLeaderTopic(topic=topic, partitions=(
        q.OffsetForLeaderPartition(partition=partition, current_leader_epoch=current, leader_epoch=epoch),)),))
    return h.call(23, 4, handle_offset_for_leader_epoch, req).topics[0].partitions[0]


def delete_records(h: Harness, topic: str, partition: int, offset: int) -> Any:
    q = h.req(21, 2)
    req = q.DeleteRecordsRequest(topics=(q.DeleteRecordsTopic(name=topic, partitions=(
        q.DeleteRecordsPartition(partition_index=partition, offset=offset),)),), timeout=datetime.timedelta(seconds=5))
    return h.call(21, 2, handle_delete_records, req).topics[0].partitions[0]


def fetch(h: Harness, topic: str, partition: int, offset: int, current_epoch: int = -1) -> Any:
    q = h.req(1, 12)
    req = q.FetchRequest(max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                         session_id=0, session_epoch=-1, topics=(q.FetchTopic(topic=topic, partitions=(
                             q.FetchPartition(partition=partition, current_leader_epoch=current_epoch,
                                              fetch_offset=offset, log_start_offset=-1,
                                              partition_max_bytes=1 << 20),)),),
                         forgotten_topics_data=(), rack_id="")
    return h.call(1, 12, handle_fetch, req).responses[0].partitions[0]


def metadata(h: Harness, topic: str) -> Any:
    q = h.req(3, 12)
    req = q.MetadataRequest(topics=(q.MetadataRequestTopic(topic_id=None, name=topic),),
                            allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return h.call(3, 12, handle_metadata, req)


def move_leadership(h: Harness, topic: str, leader: int, epoch: int) -> None:
    """Publish what a cluster writer would: `topic` led by `leader` at `epoch`, this broker a follower."""
    writer = h.broker.metadata_writer
    image = writer.image
    old = image.topics[topic]
    me = h.broker.node_id
    parts = tuple(PartitionRegistration((leader, me) if leader != me else (me,), (leader, me) if leader != me else (me,),
                                        leader, epoch, epoch) for _ in old.partitions)
    brokers = dict(image.brokers)
    brokers[OTHER] = BrokerRegistration(OTHER, (Endpoint("PLAINTEXT", "other", 9093),))
    topics = dict(image.topics)
    topics[topic] = TopicImage(topic, old.topic_id, parts, old.configs)
    writer._publish(image.evolve(topics=topics, brokers=brokers), persist=False)


def test_single_node_answers(h: Harness) -> None:
    h.broker.create_topic("t", 2, None)
    assert produce(h, "t", 0, 3).error_code == ErrorCode.none
    assert produce(h, "t", 5).error_code == ErrorCode.unknown_topic_or_partition
    assert produce(h, "nope", 0).error_code == ErrorCode.unknown_topic_or_partition
    assert produce(h, "__consumer_offsets", 0).error_code == ErrorCode.invalid_topic_exception
    latest = list_offsets(h, "t", 0, -1)
    assert (latest.error_code, latest.offset, latest.leader_epoch) == (ErrorCode.none, 3, 0)
    assert list_offsets(h, "t", 0, -1, current_epoch=1).error_code == ErrorCode.unknown_leader_epoch
    assert (epoch_end(h, "t", 0, 0, 0).leader_epoch, epoch_end(h, "t", 0, 0, 0).end_offset) == (0, 3)
    f = fetch(h, "t", 0, 0, current_epoch=0)
    assert (f.error_code, f.high_watermark, f.last_stable_offset) == (ErrorCode.none, 3, 3)
    d = delete_records(h, "t", 0, 2)
    assert (d.error_code, d.low_watermark) == (ErrorCode.none, 2)
    assert delete_records(h, "t", 0, 4).error_code == ErrorCode.offset_out_of_range
    m = metadata(h, "t")
    assert [b.node_id for b in m.brokers] == [h.broker.node_id] and m.brokers[0].port == 19092
    assert m.controller_id == h.broker.node_id
    p0 = m.topics[0].partitions[0]
    assert (p0.leader_id, p0.leader_epoch, p0.replica_nodes, p0.isr_nodes) == (
        h.broker.node_id, 0, (h.broker.node_id,), (h.broker.node_id,))


def test_after_leadership_moved_every_handler_says_not_leader(h: Harness) -> None:
    h.broker.create_topic("m", 1, None)
    produce(h, "m", 0, 2)
    move_leadership(h, "m", OTHER, 3)
    assert produce(h, "m", 0).error_code == ErrorCode.not_leader_or_follower
    assert fetch(h, "m", 0, 0).error_code == ErrorCode.not_leader_or_follower
    assert list_offsets(h, "m", 0, -1).error_code == ErrorCode.not_leader_or_follower
    assert delete_records(h, "m", 0, 1).error_code == ErrorCode.not_leader_or_follower
    # the epoch check comes first: a client behind on epochs is fenced, one ahead is told to wait
    assert epoch_end(h, "m", 0, 2, 0).error_code == ErrorCode.fenced_leader_epoch
    assert fetch(h, "m", 0, 0, current_epoch=4).error_code == ErrorCode.unknown_leader_epoch
    assert epoch_end(h, "m", 0, 3, 0).error_code == ErrorCode.not_leader_or_follower
    p0 = metadata(h, "m").topics[0].partitions[0]
    assert (p0.error_code, p0.leader_id, p0.leader_epoch) == (ErrorCode.none, OTHER, 3)
    assert sorted(b.node_id for b in metadata(h, "m").brokers) == sorted([h.broker.node_id, OTHER])


def test_metadata_of_a_partition_whose_leader_is_not_live(h: Harness) -> None:
    h.broker.create_topic("off", 1, None)
    move_leadership(h, "off", 99, 1)  # broker 99 is not registered
    p0 = metadata(h, "off").topics[0].partitions[0]
    assert (p0.error_code, p0.leader_id, p0.offline_replicas) == (ErrorCode.leader_not_available, -1, (99,))


def test_auto_creation_that_another_broker_won_answers_leader_not_available(h: Harness) -> None:
    """In a cluster two brokers may auto-create one topic at once (librdkafka asks any broker): the loser's
    write finds the topic in ZooKeeper before its own image shows it. Kafka answers LEADER_NOT_AVAILABLE
    (retriable, no partitions); an error-free topic without partitions made librdkafka drop the partitions it
    knew and fail its queued records with 'Unknown partition' (librdkafka's suite, 0103, three brokers)."""

    async def already_there(name: str, *args: Any, **kwargs: Any) -> TopicImage:
        # what the cluster path (`create_topic_async` -> admin_call(create_topic)) raises when ZooKeeper
        # has the topic already
        raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")

    h.broker.create_topic_async = already_there  # type: ignore[method-assign]
    q = h.req(3, 12)
    req = q.MetadataRequest(topics=(q.MetadataRequestTopic(topic_id=None, name="raced"),),
                            allow_auto_topic_creation=True, include_topic_authorized_operations=False)
    (t,) = h.call(3, 12, handle_metadata, req).topics
    assert (t.name, t.error_code, t.partitions) == ("raced", ErrorCode.leader_not_available, ())


def test_metadata_cache_follows_the_image(h: Harness) -> None:
    h.broker.create_topic("c", 1, None)
    before = metadata(h, "c").topics[0].partitions[0]
    h.broker.create_partitions("c", 3)
    after = metadata(h, "c").topics[0]
    assert before.leader_epoch == 0 and len(after.partitions) == 3
    move_leadership(h, "c", OTHER, 2)
    assert metadata(h, "c").topics[0].partitions[2].leader_id == OTHER


def all_topics(h: Harness) -> dict[str, Any]:
    q = h.req(3, 12)
    req = q.MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return {t.name: t for t in h.call(3, 12, handle_metadata, req).topics}


def test_all_topics_answer_is_cached_per_image_version(h: Harness) -> None:
    h.broker.create_topic("x", 1, None)
    first = all_topics(h)
    assert set(first) >= {"x"}
    version = h.broker.metadata.version
    assert all_topics(h)["x"].partitions[0].leader_id == h.broker.node_id
    assert h.broker.metadata.version == version  # reading changes nothing
    h.broker.create_topic("y", 2, None)  # a new image: the cached list must not be reused
    again = all_topics(h)
    assert set(again) >= {"x", "y"} and len(again["y"].partitions) == 2
    move_leadership(h, "x", OTHER, 5)
    moved = all_topics(h)["x"].partitions[0]
    assert (moved.leader_id, moved.leader_epoch) == (OTHER, 5)
    h.broker.delete_topic("y")
    assert "y" not in all_topics(h)


def test_topic_admin_through_the_handlers(h: Harness) -> None:
    me = h.broker.node_id
    q = h.req(19, 7)

    def create(name: str, n: int = -1, rf: int = -1, assignments: tuple = (), validate_only: bool = False) -> Any:
        req = q.CreateTopicsRequest(topics=(q.CreatableTopic(name=name, num_partitions=n, replication_factor=rf,
                                                             assignments=assignments, configs=()),),
                                    timeout=datetime.timedelta(seconds=5), validate_only=validate_only)
        return h.call(19, 7, handle_create_topics, req).topics[0]

    version = h.broker.metadata.version
    dry = create("dry", 3, 1, validate_only=True)
    assert (dry.error_code, dry.num_partitions, dry.replication_factor) == (ErrorCode.none, 3, 1)
    assert "dry" not in h.broker.metadata.topics and h.broker.metadata.version == version
    assert create("rf3", 1, 3).error_code == ErrorCode.invalid_replication_factor  # decided by the writer
    bad = (q.CreatableReplicaAssignment(partition_index=0, broker_ids=(me, OTHER)),)
    assert create("elsewhere", assignments=bad).error_code == ErrorCode.invalid_replica_assignment
    ok = (q.CreatableReplicaAssignment(partition_index=0, broker_ids=(me,)),
          q.CreatableReplicaAssignment(partition_index=1, broker_ids=(me,)))
    made = create("placed", assignments=ok)
    assert (made.error_code, made.num_partitions) == (ErrorCode.none, 2)
    assert sorted(p for t, p in h.broker.replica_manager.partitions if t == "placed") == [0, 1]

    pq = h.req(37, 3)
    grow = pq.CreatePartitionsRequest(topics=(pq.CreatePartitionsTopic(name="placed", count=4, assignments=None),),
                                      timeout=datetime.timedelta(seconds=5), validate_only=False)
    assert h.call(37, 3, handle_create_partitions, grow).results[0].error_code == ErrorCode.none
    assert produce(h, "placed", 3).error_code == ErrorCode.none  # the new partition is hosted and led here

    dq = h.req(20, 5)
    gone = dq.DeleteTopicsRequest(topic_names=("placed",), timeout=datetime.timedelta(seconds=5))
    assert h.call(20, 5, handle_delete_topics, gone).responses[0].error_code == ErrorCode.none
    assert not [k for k in h.broker.replica_manager.partitions if k[0] == "placed"]
    assert h.broker.log_manager.get("placed", 3) is None
    assert produce(h, "placed", 0).error_code == ErrorCode.unknown_topic_or_partition


def describe_log_dirs(h: Harness, topic: str) -> dict[int, tuple[int, int]]:
    """{partition: (size, offset_lag)} of `topic` in DescribeLogDirs v4."""
    from kaflite.server.handlers.admin import handle_describe_log_dirs

    q = h.req(35, 4)
    req = q.DescribeLogDirsRequest(topics=(q.DescribableLogDirTopic(topic=topic, partitions=(0, 1)),))
    resp = h.call(35, 4, handle_describe_log_dirs, req)
    out = {}
    for result in resp.results:
        for t in result.topics:
            for p in t.partitions:
                assert not p.is_future_key
                out[p.partition_index] = (p.partition_size, p.offset_lag)
    return out


def test_describe_log_dirs_size_and_follower_lag(h: Harness) -> None:
    h.broker.create_topic("lag", 2, None)
    produce(h, "lag", 0, 3)
    produce(h, "lag", 1, 2)
    size0 = h.broker.get_log("lag", 0).size
    got = describe_log_dirs(h, "lag")
    assert got[0] == (size0, 0) and size0 > 0 and got[1][1] == 0  # leaders: no lag
    move_leadership(h, "lag", OTHER, 3)
    part = h.broker.replica_manager.partition_or_none("lag", 0)
    assert part is not None
    assert describe_log_dirs(h, "lag")[0] == (size0, 0)  # nothing heard from the new leader yet
    part.update_follower_high_watermark(10)  # the leader answered: its high watermark is 10, our log ends at 3
    assert describe_log_dirs(h, "lag")[0] == (size0, 7)
    part.update_follower_high_watermark(3)
    assert describe_log_dirs(h, "lag")[0] == (size0, 0)  # caught up


# -- the leader's side of a follower's fetch (issue 24 finding 2, KIP-595's last_fetched_epoch) -------------
def lead_with_follower(h: Harness, topic: str, epoch: int, isr: tuple[int, ...], pepoch: int = 0) -> None:
    """Publish what a cluster writer would: `topic` led by this broker at `epoch`, OTHER its follower."""
    writer = h.broker.metadata_writer
    image = writer.image
    old = image.topics[topic]
    me = h.broker.node_id
    parts = tuple(PartitionRegistration((me, OTHER), isr, me, epoch, pepoch) for _ in old.partitions)
    brokers = dict(image.brokers)
    brokers[OTHER] = BrokerRegistration(OTHER, (Endpoint("PLAINTEXT", "other", 9093),))
    topics = dict(image.topics)
    topics[topic] = TopicImage(topic, old.topic_id, parts, old.configs)
    writer._publish(image.evolve(topics=topics, brokers=brokers), persist=False)


def follower_fetch(h: Harness, topic: str, offset: int, current_epoch: int = -1, last_fetched_epoch: int = -1,
                   replica: int = OTHER) -> Any:
    q = h.req(1, 12)
    req = q.FetchRequest(replica_id=replica, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
                         isolation_level=0, session_id=0, session_epoch=-1, topics=(q.FetchTopic(topic=topic, partitions=(
                             q.FetchPartition(partition=0, current_leader_epoch=current_epoch, fetch_offset=offset,
                                              last_fetched_epoch=last_fetched_epoch, log_start_offset=-1,
                                              partition_max_bytes=1 << 20),)),),
                         forgotten_topics_data=(), rack_id="")
    return h.call(1, 12, handle_fetch, req).responses[0].partitions[0]


def test_a_follower_offset_beyond_the_log_end_is_refused_and_moves_nothing(h: Harness) -> None:
    """The reproduction of issue 24 finding 2: a follower fetch at 10,000 was recorded as its log end offset
    before the read, and moved the high watermark from 0 to 10 with min.insync.replicas=2. Kafka reads
    first and reports only a successful read: the offset is OFFSET_OUT_OF_RANGE and nothing moves."""
    h.broker.create_topic("f", 1, {"min.insync.replicas": "2"})
    lead_with_follower(h, "f", 1, (h.broker.node_id, OTHER))
    assert produce(h, "f", 0, 10, acks=1).error_code == ErrorCode.none
    part = h.broker.replica_manager.get_partition("f", 0)
    assert part.high_watermark == 0  # OTHER has not reported
    got = follower_fetch(h, "f", 10_000, current_epoch=1)
    assert got.error_code == ErrorCode.offset_out_of_range
    assert part.high_watermark == 0 and got.high_watermark == 0
    assert part.follower_log_end_offset(OTHER) == -1  # not recorded
    got = follower_fetch(h, "f", 10, current_epoch=1)  # a real report at the log end
    assert got.error_code == ErrorCode.none and part.high_watermark == 10
    assert got.high_watermark == 10  # the answer carries the high watermark after the report
    # a broker that is not a replica is refused before anything is read
    assert follower_fetch(h, "f", 0, current_epoch=1, replica=99).error_code == ErrorCode.not_leader_or_follower


def test_last_fetched_epoch_diverging_answer(h: Harness) -> None:
    """Fetch v12+ last_fetched_epoch (KIP-595, Kafka's Partition.readRecords): a follower whose log holds an
    epoch this leader never wrote is told where to truncate to (diverging_epoch), nothing is read nor
    recorded; a follower in agreement reads and is recorded; an epoch the cache cannot place is
    OFFSET_OUT_OF_RANGE."""
    h.broker.create_topic("d", 1, None)
    assert produce(h, "d", 0, 3, acks=1).error_code == ErrorCode.none  # epoch 0: offsets 0-2
    me = h.broker.node_id
    lead_with_follower(h, "d", 2, (me, OTHER), pepoch=1)  # leader again under epoch 2, from offset 3
    part = h.broker.replica_manager.get_partition("d", 0)
    # before any append in epoch 2, the cache knows it started at 3 (Kafka's makeLeader)
    e = epoch_end(h, "d", 0, 2, 2)
    assert (e.error_code, e.leader_epoch, e.end_offset) == (ErrorCode.none, 2, 3)
    # the follower copied offsets 3-4 under epoch 1 from a deposed leader: epoch 1 does not exist here,
    # epoch 0 ended at 3
    got = follower_fetch(h, "d", 5, current_epoch=2, last_fetched_epoch=1)
    assert got.error_code == ErrorCode.none
    assert (got.diverging_epoch.epoch, got.diverging_epoch.end_offset) == (0, 3)
    assert got.records is None or len(got.records) == 0
    assert part.follower_log_end_offset(OTHER) == -1 and part.high_watermark == 3
    assert produce(h, "d", 0, 2, acks=1).error_code == ErrorCode.none  # epoch 2: offsets 3-4
    # same epoch, but the follower is beyond where epoch 0 ended here: diverging at (0, 3)
    got = follower_fetch(h, "d", 4, current_epoch=2, last_fetched_epoch=0)
    assert (got.diverging_epoch.epoch, got.diverging_epoch.end_offset) == (0, 3)
    # in agreement: read and recorded
    got = follower_fetch(h, "d", 3, current_epoch=2, last_fetched_epoch=0)
    assert got.error_code == ErrorCode.none and got.diverging_epoch.epoch == -1 and len(got.records) > 0
    assert part.follower_log_end_offset(OTHER) == 3
    # an epoch newer than any here: the cache cannot place it
    assert follower_fetch(h, "d", 5, current_epoch=2, last_fetched_epoch=7).error_code == ErrorCode.offset_out_of_range
    assert part.follower_log_end_offset(OTHER) == 3


def lead_with_one_follower(h: Harness, topic: str, follower: int, epoch: int, *, alive: bool = True) -> None:
    """Publish: this broker leads `topic` at `epoch` with `follower` as the other replica, both in the ISR
    (`alive`: the follower's broker is registered, i.e. live)."""
    writer = h.broker.metadata_writer
    image = writer.image
    old = image.topics[topic]
    me = h.broker.node_id
    parts = tuple(PartitionRegistration((me, follower), (me, follower), me, epoch, epoch) for _ in old.partitions)
    brokers = dict(image.brokers)
    if alive:
        brokers[follower] = BrokerRegistration(follower, (Endpoint("PLAINTEXT", "other", 9093),))
    topics = dict(image.topics)
    topics[topic] = TopicImage(topic, old.topic_id, parts, old.configs)
    writer._publish(image.evolve(topics=topics, brokers=brokers), persist=False)


def follower_fetch_at(h: Harness, replica: int, topic: str, offset: int, log_start: int) -> Any:
    q = h.req(1, 12)
    req = q.FetchRequest(replica_id=replica, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
                         isolation_level=0, session_id=0, session_epoch=-1, topics=(q.FetchTopic(
                             topic=topic, partitions=(q.FetchPartition(
                                 partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                 log_start_offset=log_start, partition_max_bytes=1 << 20),)),),
                         forgotten_topics_data=(), rack_id="")
    return h.call(1, 12, handle_fetch, req).responses[0].partitions[0]


def start_delete_records(h: Harness, topic: str, offset: int, timeout_s: float) -> asyncio.Task[Any]:
    q = h.req(21, 2)
    req = q.DeleteRecordsRequest(topics=(q.DeleteRecordsTopic(name=topic, partitions=(
        q.DeleteRecordsPartition(partition_index=0, offset=offset),)),), timeout=datetime.timedelta(seconds=timeout_s))
    ctx = RequestContext(h.broker, RequestHeader(21, 2, 1, "inproc"))
    task = h.loop.create_task(handle_delete_records(ctx, req))
    h.loop.run_until_complete(asyncio.sleep(0.05))  # the handler runs up to its wait
    return task


def test_delete_records_waits_for_the_followers_log_start_offset(h: Harness) -> None:
    """Kafka's DelayedDeleteRecords: the answer comes once every live replica's log start offset (as its
    fetches tell the leader) reached the deleted offset; before, a failover could bring the deleted records
    back (the follower kept them)."""
    h.broker.create_topic("dr", 1, None)
    lead_with_one_follower(h, "dr", OTHER, 1)
    produce(h, "dr", 0, 5, acks=1)
    assert follower_fetch_at(h, OTHER, "dr", 5, 0).high_watermark == 5  # the follower has everything
    task = start_delete_records(h, "dr", 3, 5.0)
    assert not task.done()  # the follower's log still starts at 0
    assert h.broker.get_log("dr", 0).log_start_offset == 3  # the leader's moved at once
    follower_fetch_at(h, OTHER, "dr", 5, 2)  # not yet far enough
    h.loop.run_until_complete(asyncio.sleep(0.05))
    assert not task.done()
    follower_fetch_at(h, OTHER, "dr", 5, 3)  # the follower adopted the leader's log start offset
    p = h.loop.run_until_complete(task).topics[0].partitions[0]
    assert (p.error_code, p.low_watermark) == (ErrorCode.none, 3)


def test_delete_records_times_out_while_a_follower_lags(h: Harness) -> None:
    h.broker.create_topic("dt", 1, None)
    lead_with_one_follower(h, "dt", OTHER, 1)
    produce(h, "dt", 0, 4, acks=1)
    follower_fetch_at(h, OTHER, "dt", 4, 0)
    p = h.loop.run_until_complete(start_delete_records(h, "dt", 2, 0.2)).topics[0].partitions[0]
    assert (p.error_code, p.low_watermark) == (ErrorCode.request_timed_out, 0)


def test_delete_records_waits_for_no_dead_replica_and_a_new_leader_asks_again(h: Harness) -> None:
    h.broker.create_topic("dd", 1, None)
    lead_with_one_follower(h, "dd", 99, 1, alive=False)  # broker 99 is not registered: not waited for
    produce(h, "dd", 0, 4, acks=1)
    h.broker.replica_manager.partitions[("dd", 0)].log.update_high_watermark(4)  # type: ignore[union-attr]
    d = delete_records(h, "dd", 0, 2)
    assert (d.error_code, d.low_watermark) == (ErrorCode.none, 2)
    # a new leader epoch forgets what the followers told (Kafka's makeLeader resets the replicas' state)
    lead_with_one_follower(h, "dd", OTHER, 2)
    follower_fetch_at(h, OTHER, "dd", 4, 2)
    assert h.broker.replica_manager.low_watermark(h.broker.replica_manager.partitions[("dd", 0)]) == 2
    lead_with_one_follower(h, "dd", OTHER, 3)
    assert h.broker.replica_manager.low_watermark(h.broker.replica_manager.partitions[("dd", 0)]) == -1
