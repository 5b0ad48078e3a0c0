"""The share coordinator's RPCs (83-87) and FindCoordinator key type SHARE against an embedded broker, on
the same durable state as the broker's own share partitions (docs/share-groups.md)."""

from __future__ import annotations

import errno
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.delete_share_group_state.v0 import request as delete_req
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest
from kio.schema.initialize_share_group_state.v0 import request as init_req
from kio.schema.read_share_group_state.v0 import request as read_req
from kio.schema.read_share_group_state_summary.v0 import request as summary_req
from kio.schema.write_share_group_state.v0 import request as write_req
from kio.static.primitive import i8, i16, i32, i64

from groups.test_share_wire import ACCEPT, Member, ack_errors, joined_and_started, new_topic, offsets, produce
from helpers import wait_until
from kaflite.coordinator.share.state_records import ShareStateKey, kafka_uuid
from kaflite.server.coordinators.share_state import SHARE_COORDINATOR, SHARE_STATE_SERVICE
from kaflite.server.embedded import EmbeddedBroker
from server.kwire import WireClient


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


def _read(c: WireClient, group: str, tid: uuid.UUID | None, partition: int = 0, leader_epoch: int = 0) -> Any:
    r = c.request(read_req.ReadShareGroupStateRequest(group_id=group, topics=(read_req.ReadStateData(
        topic_id=tid, partitions=(read_req.PartitionData(partition=i32(partition), leader_epoch=i32(leader_epoch)),)),)))
    [result] = r.results
    [p] = result.partitions
    return p


def _batches(p: Any) -> list[tuple[int, int, int, int]]:
    return [(int(b.first_offset), int(b.last_offset), int(b.delivery_state), int(b.delivery_count))
            for b in p.state_batches]


def test_find_coordinator_share_key(broker: EmbeddedBroker) -> None:
    _topic, tid = new_topic(broker)
    with WireClient(broker.bootstrap) as c:
        r = c.request(FindCoordinatorRequest(key_type=i8(2), coordinator_keys=(
            f"g:{kafka_uuid(tid)}:0", "not-a-share-key")))
    good, bad = r.coordinators
    assert good.error_code == 0 and good.node_id == broker.call(lambda: broker.server.broker.node_id)
    assert bad.error_code == 42  # INVALID_REQUEST


def test_initialize_write_read_summary_delete(broker: EmbeddedBroker) -> None:
    _topic, tid = new_topic(broker)
    with WireClient(broker.bootstrap) as c:
        assert (int(_read(c, "rpc-g", tid).start_offset), _batches(_read(c, "rpc-g", tid))) == (-1, [])
        init = c.request(init_req.InitializeShareGroupStateRequest(group_id="rpc-g", topics=(init_req.InitializeStateData(
            topic_id=tid, partitions=(init_req.PartitionData(partition=i32(0), state_epoch=i32(1),
                                                             start_offset=i64(5)),)),)))
        assert init.results[0].partitions[0].error_code == 0
        w = c.request(write_req.WriteShareGroupStateRequest(group_id="rpc-g", topics=(write_req.WriteStateData(
            topic_id=tid, partitions=(write_req.PartitionData(
                partition=i32(0), state_epoch=i32(1), leader_epoch=i32(2), start_offset=i64(6), state_batches=(
                    write_req.StateBatch(first_offset=i64(6), last_offset=i64(9), delivery_state=i8(0),
                                         delivery_count=i16(1)),
                    write_req.StateBatch(first_offset=i64(7), last_offset=i64(7), delivery_state=i8(2),
                                         delivery_count=i16(1)))),)),)))
        assert w.results[0].partitions[0].error_code == 0
        p = _read(c, "rpc-g", tid, leader_epoch=2)
        assert (p.error_code, int(p.start_offset), int(p.state_epoch)) == (0, 6, 1)
        assert _batches(p) == [(6, 6, 0, 1), (7, 7, 2, 1), (8, 9, 0, 1)]
        assert _read(c, "rpc-g", tid, leader_epoch=1).error_code == 74  # FENCED_LEADER_EPOCH
        s = c.request(summary_req.ReadShareGroupStateSummaryRequest(group_id="rpc-g", topics=(
            summary_req.ReadStateSummaryData(topic_id=tid, partitions=(
                summary_req.PartitionData(partition=i32(0), leader_epoch=i32(2)),)),))).results[0].partitions[0]
        assert (s.error_code, int(s.start_offset), int(s.state_epoch), int(s.leader_epoch)) == (0, 6, 1, 2)
        d = c.request(delete_req.DeleteShareGroupStateRequest(group_id="rpc-g", topics=(delete_req.DeleteStateData(
            topic_id=tid, partitions=(delete_req.PartitionData(partition=i32(0)),)),)))
        assert d.results[0].partitions[0].error_code == 0
        assert int(_read(c, "rpc-g", tid).start_offset) == -1
        assert _read(c, "rpc-g", None).error_code == 42  # INVALID_REQUEST: no topic id


def test_read_shows_what_the_broker_made_durable(broker: EmbeddedBroker) -> None:
    """ReadShareGroupState answers the state the broker's own share partition wrote: accepted offset 0 moved
    the start offset, 1 and 2 were delivered once and are still held (persisted as AVAILABLE)."""
    topic, tid = new_topic(broker)
    (m,) = joined_and_started(broker, "rpc-live", topic, 3)
    assert offsets(m.fetch(max_wait_ms=2000)) == [0, 1, 2]
    assert ack_errors(m.acknowledge({(tid, 0): [(0, 0, ACCEPT)]})) == {0: 0}
    with WireClient(broker.bootstrap) as c:
        p = _read(c, "rpc-live", tid)
    assert (p.error_code, int(p.start_offset), _batches(p)) == (0, 1, [(1, 2, 0, 1)])
    m.close()


def test_a_hole_in_a_written_state_is_available(broker: EmbeddedBroker) -> None:
    """A state written through WriteShareGroupState with a hole between its batches (start 0, offset 1
    accepted, nothing said of 0 and 2): a member then gets 0 and 2, never 1."""
    topic, tid = new_topic(broker)
    produce(broker, topic, 3)
    with WireClient(broker.bootstrap) as c:
        w = c.request(write_req.WriteShareGroupStateRequest(group_id="rpc-hole", topics=(write_req.WriteStateData(
            topic_id=tid, partitions=(write_req.PartitionData(
                partition=i32(0), state_epoch=i32(0), leader_epoch=i32(0), start_offset=i64(0), state_batches=(
                    write_req.StateBatch(first_offset=i64(1), last_offset=i64(1), delivery_state=i8(2),
                                         delivery_count=i16(1)),)),)),)))
        assert w.results[0].partitions[0].error_code == 0
    m = Member(broker, "rpc-hole", [topic])
    m.wait_assigned()
    assert offsets(m.fetch(max_wait_ms=2000)) == [0, 2]
    m.close()


def test_a_deleted_topic_takes_its_share_state_with_it(broker: EmbeddedBroker) -> None:
    """DeleteTopics: the share partitions of the topic are forgotten and their durable state deleted; the
    topic created again under the same name starts afresh (before: the old share partition, start offset 3,
    kept the new topic's records 0 and 1 from ever being delivered)."""
    topic, tid = new_topic(broker)
    (m,) = joined_and_started(broker, "rpc-del", topic, 3)
    assert offsets(m.fetch(max_wait_ms=2000)) == [0, 1, 2]
    assert ack_errors(m.acknowledge({(tid, 0): [(0, 2, ACCEPT)]})) == {0: 0}
    m.close()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics([topic])[topic].result(10)
    with WireClient(broker.bootstrap) as c:
        wait_until("the deleted topic's share state gone", lambda: int(_read(c, "rpc-del", tid).start_offset) == -1,
                   timeout=10)

    def recorded() -> bool:  # the group's key 15 record of its initialized share partitions forgets the topic
        g = broker.server.broker.services.get(SHARE_COORDINATOR).groups["rpc-del"]
        return topic in g.initialized or topic in g.initializing
    wait_until("the deleted topic gone from the group's initialized partitions", lambda: not broker.call(recorded),
               timeout=10)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    again = Member(broker, "rpc-del", [topic])
    assert again.assignment == []  # initialized again before it is assigned
    again.wait_assigned()
    assert offsets(again.fetch()) == []  # the new share partition starts at the log end: 0
    produce(broker, topic, 2)
    assert offsets(again.fetch(max_wait_ms=2000)) == [0, 1]
    again.close()


def test_a_failed_state_write_fails_the_acknowledgement(broker: EmbeddedBroker) -> None:
    """The `__share_group_state` append fails (an OSError from the log, as a full disk raises it): the
    acknowledgement is answered with an error, not as applied, and the share partition is rebuilt from what
    was written: the records come back."""
    topic, tid = new_topic(broker)
    (m,) = joined_and_started(broker, "rpc-fault", topic, 3)
    assert offsets(m.fetch(max_wait_ms=2000)) == [0, 1, 2]
    svc = broker.call(lambda: broker.server.broker.services.get(SHARE_STATE_SERVICE))
    partition = svc.partition_for(ShareStateKey("rpc-fault", tid, 0))
    refused: list[int] = []

    def failing(*_args: object, **_kwargs: object) -> Any:
        refused.append(1)
        raise OSError(errno.ENOSPC, "No space left on device (injected)")

    def inject() -> None:
        svc.writer.log(partition).append = failing

    def clear() -> None:
        del svc.writer.log(partition).append  # the method again
    broker.call(inject)
    try:
        assert ack_errors(m.acknowledge({(tid, 0): [(0, 2, ACCEPT)]})) == {0: 16}  # NOT_COORDINATOR
        assert refused
    finally:
        broker.call(clear)
    with WireClient(broker.bootstrap) as c:
        assert (int(_read(c, "rpc-fault", tid).start_offset), _batches(_read(c, "rpc-fault", tid))) == (0, [])
    assert offsets(m.fetch(max_wait_ms=2000)) == [0, 1, 2]  # not accepted: delivered again
    m.close()
