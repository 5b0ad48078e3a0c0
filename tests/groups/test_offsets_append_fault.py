"""Acceptance (issue 16): the `__consumer_offsets` append fails (an OSError from the partition's log, as a
full disk raises it). Every answer of the failed step carries an error, nothing unwritten is reported as
committed, every parked request is answered, and once the fault clears the group's state equals its log.

The fault is injected in the storage path itself: the partition's `Log.append` raises, so the broker's
own append, the runtime's writer and the handlers all run as they do on a real disk error."""

from __future__ import annotations

import time
import uuid

import confluent_kafka as ck
from kio.schema.heartbeat.v3.request import HeartbeatRequest
from kio.static.primitive import i32

from coordinator.coord_harness import encode_assignment
from groups.coord_wire import (
    answer_of,
    awaiting_sync,
    commit,
    fetch,
    full_disk,
    group_in_same_partition,
    group_state_name,
    join_request,
    live_and_log,
    sync,
)
from groups.group_members import wait_for
from kaflite.coordinator import partition_for
from kaflite.protocol.errors import ErrorCode
from server.kwire import WireClient


def test_failed_offsets_append_answers_errors_and_state_equals_log(broker, topic_factory) -> None:  # noqa: ANN001
    topic = topic_factory(1)
    group = f"fault-{uuid.uuid4().hex[:8]}"
    partition = partition_for(group)
    with WireClient(broker.bootstrap) as a, WireClient(broker.bootstrap) as b:
        first = a.request(join_request(group, "", topic))
        assert first.error_code == ErrorCode.member_id_required
        ja = a.request(join_request(group, first.member_id, topic))
        a_id = ja.member_id
        assert ja.error_code == ErrorCode.none and ja.generation_id == 1 and ja.leader == a_id
        synced = a.request(sync(a, group, a_id, 1, {a_id: encode_assignment({topic: [0]})}))
        assert synced.error_code == ErrorCode.none
        assert commit(a, group, topic, a_id, 1, 5) == ErrorCode.none

        with full_disk(broker, partition) as refused:
            # OffsetCommit: the write fails, the answer says so, and the offset is not reported committed
            assert commit(a, group, topic, a_id, 1, 9) == ErrorCode.not_coordinator
            assert refused, "the commit never reached the log"
            assert fetch(a, group, topic) == (ErrorCode.none, 5)
            # the shard was reloaded from its log: A is still the Stable generation-1 member
            assert a.request(HeartbeatRequest(group_id=group, generation_id=i32(1), member_id=a_id,
                                              group_instance_id=None)).error_code == ErrorCode.none

            # a parked JoinGroup is answered when a failed write of its shard reloads it
            pending = b.request(join_request(group, "", topic))
            assert pending.error_code == ErrorCode.member_id_required
            b_join = join_request(group, pending.member_id, topic)
            b_corr = b.send(b_join)  # parks: A must rejoin first
            wait_for(lambda: group_state_name(broker, group) == "PreparingRebalance", 10, "B parked in the rebalance")
            assert commit(a, group, topic, a_id, 1, 10) == ErrorCode.not_coordinator
            assert answer_of(b, b_join, b_corr).error_code == ErrorCode.not_coordinator
            assert fetch(a, group, topic) == (ErrorCode.none, 5)

            # JoinGroup into a new group of the same partition: its first record cannot be written
            other = group_in_same_partition(group)
            assert a.request(join_request(other, "", topic)).error_code == ErrorCode.not_coordinator

            # SyncGroup: a generation is formed, the leader's assignment cannot be written; the
            # follower parked in SyncGroup is answered too
            pending = b.request(join_request(group, "", topic))
            b_join = join_request(group, pending.member_id, topic)
            b_corr = b.send(b_join)
            wait_for(lambda: group_state_name(broker, group) == "PreparingRebalance", 10, "B parked in the rebalance")
            ja2 = a.request(join_request(group, a_id, topic))
            jb2 = answer_of(b, b_join, b_corr)
            assert ja2.error_code == jb2.error_code == ErrorCode.none and ja2.generation_id == 2
            b_sync = sync(b, group, jb2.member_id, 2)
            b_sync_corr = b.send(b_sync)
            wait_for(lambda: awaiting_sync(broker, group, jb2.member_id), 10, "B parked in SyncGroup")
            plan = {a_id: encode_assignment({topic: [0]}), jb2.member_id: encode_assignment({topic: []})}
            assert a.request(sync(a, group, a_id, 2, plan)).error_code == ErrorCode.not_coordinator
            assert answer_of(b, b_sync, b_sync_corr).error_code == ErrorCode.not_coordinator
            assert fetch(a, group, topic) == (ErrorCode.none, 5)

        # the fault is gone: the group is what its log says (generation 1, A alone, offset 5) ...
        live, logged = live_and_log(broker, group)
        assert live == logged
        assert logged["groups"][group][1] == 1 and logged["offsets"][group] == {(topic, 0): (5, "at 5")}
        assert other not in logged["groups"]
        # ... and the group carries on from there
        assert commit(a, group, topic, a_id, 1, 11) == ErrorCode.none
        assert fetch(a, group, topic) == (ErrorCode.none, 11)
        live, logged = live_and_log(broker, group)
        assert live == logged and logged["offsets"][group] == {(topic, 0): (11, "at 11")}


def test_confluent_consumer_commit_fails_on_full_disk_and_state_equals_log(broker, topic_factory) -> None:  # noqa: ANN001
    """The same with librdkafka: a commit during the fault fails (the client sees the error), the last
    really committed offset is what `committed()` reports, and the group carries on after the fault."""
    topic = topic_factory(2, 20)
    group = f"fault-ck-{uuid.uuid4().hex[:8]}"
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                            "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
            consumer.poll(0.1)
        assert len(consumer.assignment()) == 2
        consumer.commit(offsets=[ck.TopicPartition(topic, 0, 3), ck.TopicPartition(topic, 1, 4)], asynchronous=False)
        with full_disk(broker, partition_for(group)) as refused:
            failed = None
            try:
                consumer.commit(offsets=[ck.TopicPartition(topic, 0, 8)], asynchronous=False)
            except ck.KafkaException as e:
                failed = e.args[0]
            assert refused, "the commit never reached the log"
            assert failed is not None, "a commit that was never written was acknowledged"
            committed = consumer.committed([ck.TopicPartition(topic, 0), ck.TopicPartition(topic, 1)], timeout=10)
            assert [(tp.partition, tp.offset) for tp in committed] == [(0, 3), (1, 4)]
        live, logged = live_and_log(broker, group)
        assert live == logged and logged["offsets"][group] == {(topic, 0): (3, ""), (topic, 1): (4, "")}
        # after the fault: the consumer (reloaded as the same member) commits again
        deadline = time.monotonic() + 30
        while True:
            consumer.poll(0.1)
            try:
                consumer.commit(offsets=[ck.TopicPartition(topic, 0, 8)], asynchronous=False)
                break
            except ck.KafkaException:
                assert time.monotonic() < deadline, "the consumer never committed after the fault"
        committed = consumer.committed([ck.TopicPartition(topic, 0)], timeout=10)
        assert committed[0].offset == 8
        live, logged = live_and_log(broker, group)
        assert live == logged
    finally:
        consumer.close()
