"""OffsetForLeaderEpoch (API 23, v2-4) on the wire: where epoch 0 ends, fencing by current leader epoch,
unknown partitions and epochs the log never had (UNDEFINED)."""

from __future__ import annotations

from collections.abc import Iterator

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.offset_for_leader_epoch.v4 import request as q
from kio.static.primitive import i32
from kwire import WireClient

from kaflite.protocol.errors import ErrorCode
from kaflite.server.embedded import EmbeddedBroker


def _ask(b: EmbeddedBroker, topic: str, partition: int, current: int, epoch: int) -> tuple[ErrorCode, int, int]:
    req = q.OffsetForLeaderEpochRequest(
        replica_id=i32(-1),
        topics=(q.OffsetForLeaderTopic(topic=topic, partitions=(
            q.OffsetForLeaderPartition(partition=i32(partition), current_leader_epoch=i32(current),
                                       leader_epoch=i32(epoch)),)),),
    )
    with WireClient(b.bootstrap) as c:
        resp = c.request(req)
    (t,) = resp.topics
    (p,) = t.partitions
    return p.error_code, int(p.leader_epoch), int(p.end_offset)


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("ofle", 2, 1)])["ofle"].result(10)
        p = ck.Producer({"bootstrap.servers": b.bootstrap})
        for i in range(7):
            p.produce("ofle", b"v%d" % i, partition=0)
        assert p.flush(10) == 0
        yield b


def test_epoch_zero_ends_at_the_log_end(broker: EmbeddedBroker) -> None:
    assert _ask(broker, "ofle", 0, -1, 0) == (ErrorCode.none, 0, 7)
    assert _ask(broker, "ofle", 0, 0, 0) == (ErrorCode.none, 0, 7)
    # an epoch newer than any: UNDEFINED (Kafka's endOffsetFor; it was the latest one's end before)
    assert _ask(broker, "ofle", 0, -1, 5) == (ErrorCode.none, -1, -1)


def test_empty_partition_has_its_leaders_epoch(broker: EmbeddedBroker) -> None:
    # the leader's epoch starts at its election, before any record (Kafka's makeLeader): it ends at the
    # log end (0); a later epoch is UNDEFINED
    assert _ask(broker, "ofle", 1, -1, 0) == (ErrorCode.none, 0, 0)
    assert _ask(broker, "ofle", 1, -1, 1) == (ErrorCode.none, -1, -1)


def test_current_leader_epoch_is_checked(broker: EmbeddedBroker) -> None:
    assert _ask(broker, "ofle", 0, 3, 0)[0] == ErrorCode.unknown_leader_epoch


def test_unknown_partition(broker: EmbeddedBroker) -> None:
    assert _ask(broker, "ofle", 9, -1, 0)[0] == ErrorCode.unknown_topic_or_partition
    assert _ask(broker, "nosuch", 0, -1, 0)[0] == ErrorCode.unknown_topic_or_partition
