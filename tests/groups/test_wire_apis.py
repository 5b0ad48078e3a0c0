"""The group and offset APIs on the wire, across versions (raw kio requests to a real broker)."""

from __future__ import annotations

import uuid

from kaflite.protocol.errors import ErrorCode
from server.kwire import WireClient


def _i32(n: int):  # noqa: ANN202
    from kio.static.primitive import i32

    return i32(n)


def _commit(client: WireClient, group: str, topic: str, offsets: dict[int, int], version: int = 8) -> dict[int, int]:
    import importlib

    from kio.static.primitive import i64

    from kaflite.server.context import build  # keeps only the fields this version has

    mod = importlib.import_module(f"kio.schema.offset_commit.v{version}.request")
    parts = tuple(build(mod.OffsetCommitRequestPartition, partition_index=_i32(p), committed_offset=i64(o),
                        committed_leader_epoch=_i32(-1), committed_metadata="m") for p, o in offsets.items())
    req = build(mod.OffsetCommitRequest, group_id=group, generation_id_or_member_epoch=_i32(-1), member_id="",
                group_instance_id=None, topics=(mod.OffsetCommitRequestTopic(name=topic, partitions=parts),))
    resp = client.request(req)
    return {p.partition_index: p.error_code for t in resp.topics for p in t.partitions}


def test_find_coordinator_single_and_batched(broker) -> None:  # noqa: ANN001
    from kio.schema.find_coordinator.v0.request import FindCoordinatorRequest as V0
    from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest as V3
    from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest as V6
    from kio.static.primitive import i8

    host, port = broker.bootstrap.rsplit(":", 1)
    with WireClient(broker.bootstrap) as c:
        r0 = c.request(V0(key="test"))
        assert (r0.error_code, r0.node_id, r0.host, r0.port) == (ErrorCode.none, 0, host, int(port))
        r3 = c.request(V3(key="test", key_type=i8(0)))
        assert r3.error_code == ErrorCode.none and r3.port == int(port)
        r6 = c.request(V6(key_type=i8(0), coordinator_keys=("a", "b", "test")))
        assert [(x.key, x.error_code, x.port) for x in r6.coordinators] == \
            [("a", ErrorCode.none, int(port)), ("b", ErrorCode.none, int(port)), ("test", ErrorCode.none, int(port))]
        txn = c.request(V6(key_type=i8(1), coordinator_keys=("tx",)))
        # the transaction coordinator: the leader of the id's __transaction_state partition (this broker)
        assert (txn.coordinators[0].error_code, txn.coordinators[0].port) == (ErrorCode.none, int(port))
        bad = c.request(V6(key_type=i8(2), coordinator_keys=("x",)))
        assert bad.coordinators[0].error_code == ErrorCode.invalid_request


def test_offsets_of_several_groups_list_describe_delete(broker, topic_factory) -> None:  # noqa: ANN001
    from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
    from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
    from kio.schema.list_groups.v4.request import ListGroupsRequest
    from kio.schema.offset_delete.v0.request import (
        OffsetDeleteRequest,
        OffsetDeleteRequestPartition,
        OffsetDeleteRequestTopic,
    )
    from kio.schema.offset_fetch.v1.request import OffsetFetchRequest as F1
    from kio.schema.offset_fetch.v1.request import OffsetFetchRequestTopic as F1Topic
    from kio.schema.offset_fetch.v8.request import OffsetFetchRequest as F8
    from kio.schema.offset_fetch.v8.request import OffsetFetchRequestGroup, OffsetFetchRequestTopics

    topic = topic_factory(2)
    g1, g2 = f"g-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    with WireClient(broker.bootstrap) as c:
        assert _commit(c, g1, topic, {0: 5, 1: 9}) == {0: ErrorCode.none, 1: ErrorCode.none}
        assert _commit(c, g1, topic, {7: 1}, version=2) == {7: ErrorCode.unknown_topic_or_partition}
        assert _commit(c, g1, "no-such-topic", {0: 1}, version=9) == {0: ErrorCode.unknown_topic_or_partition}
        # v8: two groups at once; topics=None means "everything committed"
        r8 = c.request(F8(groups=(
            OffsetFetchRequestGroup(group_id=g1, topics=None),
            OffsetFetchRequestGroup(group_id=g2, topics=(OffsetFetchRequestTopics(name=topic, partition_indexes=(_i32(0),)),)),
        ), require_stable=False))
        got = {g.group_id: {(t.name, p.partition_index): (p.committed_offset, p.metadata) for t in g.topics
                            for p in t.partitions} for g in r8.groups}
        assert got == {g1: {(topic, 0): (5, "m"), (topic, 1): (9, "m")}, g2: {(topic, 0): (-1, "")}}
        r1 = c.request(F1(group_id=g1, topics=(F1Topic(name=topic, partition_indexes=(_i32(1),)),)))
        assert [(p.partition_index, p.committed_offset) for t in r1.topics for p in t.partitions] == [(1, 9)]
        # the simple group is listed as Empty, with the states filter (case-insensitive)
        listed = c.request(ListGroupsRequest(states_filter=("empty",)))
        assert any(g.group_id == g1 and g.group_state == "Empty" and g.protocol_type == "" for g in listed.groups)
        assert not any(g.group_id == g1 for g in c.request(ListGroupsRequest(states_filter=("Stable",))).groups)
        described = c.request(DescribeGroupsRequest(groups=(g1, g2), include_authorized_operations=False))
        assert [(d.group_id, d.error_code, d.group_state) for d in described.groups] == \
            [(g1, ErrorCode.none, "Empty"), (g2, ErrorCode.none, "Dead")]
        deleted = c.request(OffsetDeleteRequest(group_id=g1, topics=(OffsetDeleteRequestTopic(
            name=topic, partitions=(OffsetDeleteRequestPartition(partition_index=_i32(0)),)),)))
        assert deleted.error_code == ErrorCode.none
        r1 = c.request(F1(group_id=g1, topics=(F1Topic(name=topic, partition_indexes=(_i32(0), _i32(1))),)))
        assert [p.committed_offset for t in r1.topics for p in t.partitions] == [-1, 9]
        res = c.request(DeleteGroupsRequest(groups_names=(g1, g2)))
        assert [(r.group_id, r.error_code) for r in res.results] == \
            [(g1, ErrorCode.none), (g2, ErrorCode.group_id_not_found)]
        r1 = c.request(F1(group_id=g1, topics=(F1Topic(name=topic, partition_indexes=(_i32(1),)),)))
        assert [p.committed_offset for t in r1.topics for p in t.partitions] == [-1]


def test_offset_commit_screens_unknown_topics_and_partitions_before_the_coordinator(broker, topic_factory) -> None:  # noqa: ANN001
    """Kafka's KafkaApis answers UNKNOWN_TOPIC_OR_PARTITION for a topic not in the metadata and for a
    partition beyond the topic's count, commits the rest of the same request, and asks the coordinator
    nothing when no partition is left (so no group is created); TOPIC_AUTHORIZATION_FAILED comes first."""
    from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
    from kio.schema.offset_commit.v8.request import (
        OffsetCommitRequest,
        OffsetCommitRequestPartition,
        OffsetCommitRequestTopic,
    )
    from kio.schema.offset_fetch.v1.request import OffsetFetchRequest as F1
    from kio.schema.offset_fetch.v1.request import OffsetFetchRequestTopic as F1Topic
    from kio.static.primitive import i64

    from kaflite.server.authorizer import AclOperation, ResourceType

    topic = topic_factory(2)
    group, unknown_only, denied_group = (f"g-{uuid.uuid4().hex[:8]}" for _ in range(3))
    denied_topic = f"denied-{uuid.uuid4().hex[:6]}"  # unknown as well: authorization is asked first

    def commit(c: WireClient, group_id: str, wanted: dict[str, tuple[int, ...]]) -> dict[tuple[str, int], int]:
        req = OffsetCommitRequest(group_id=group_id, generation_id_or_member_epoch=_i32(-1), member_id="",
                                  group_instance_id=None, topics=tuple(OffsetCommitRequestTopic(name=t, partitions=tuple(
                                      OffsetCommitRequestPartition(partition_index=_i32(p), committed_offset=i64(3),
                                                                   committed_leader_epoch=_i32(-1), committed_metadata="m")
                                      for p in ps)) for t, ps in wanted.items()))
        resp = c.request(req)
        return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}

    class Refusing:
        def authorize(self, session, operation, resource_type, name) -> bool:  # noqa: ANN001
            return not (operation is AclOperation.READ and (resource_type, name) in {
                (ResourceType.TOPIC, denied_topic), (ResourceType.GROUP, denied_group)})

    E = ErrorCode
    with WireClient(broker.bootstrap) as c:
        got = commit(c, group, {topic: (0, 2, 1), "no-such-topic": (0,)})
        assert got == {(topic, 0): E.none, (topic, 2): E.unknown_topic_or_partition, (topic, 1): E.none,
                       ("no-such-topic", 0): E.unknown_topic_or_partition}
        r1 = c.request(F1(group_id=group, topics=(F1Topic(name=topic, partition_indexes=(_i32(0), _i32(1), _i32(2))),)))
        assert [(p.partition_index, p.committed_offset) for t in r1.topics for p in t.partitions] == \
            [(0, 3), (1, 3), (2, -1)]
        # nothing left for the coordinator: not asked, so the simple group is not created
        assert commit(c, unknown_only, {"no-such-topic": (0, 1), topic: (5,)}) == {
            ("no-such-topic", 0): E.unknown_topic_or_partition, ("no-such-topic", 1): E.unknown_topic_or_partition,
            (topic, 5): E.unknown_topic_or_partition}
        described = c.request(DescribeGroupsRequest(groups=(unknown_only, group), include_authorized_operations=False))
        assert [(d.group_id, d.group_state) for d in described.groups] == [(unknown_only, "Dead"), (group, "Empty")]
        previous = broker.call(lambda: broker.server.broker.authorizer)
        broker.call(lambda: setattr(broker.server.broker, "authorizer", Refusing()))
        try:
            assert commit(c, group, {denied_topic: (0,), topic: (0,)}) == {
                (denied_topic, 0): E.topic_authorization_failed, (topic, 0): E.none}
            assert commit(c, denied_group, {topic: (0,), "no-such-topic": (0,)}) == {
                (topic, 0): E.group_authorization_failed, ("no-such-topic", 0): E.group_authorization_failed}
        finally:
            broker.call(lambda: setattr(broker.server.broker, "authorizer", previous))


def test_bad_group_requests_get_kafka_error_codes(broker) -> None:  # noqa: ANN001
    import datetime

    from kio.schema.heartbeat.v0.request import HeartbeatRequest
    from kio.schema.join_group.v0.request import JoinGroupRequest, JoinGroupRequestProtocol
    from kio.schema.sync_group.v0.request import SyncGroupRequest
    from kio.static.primitive import i32Timedelta

    with WireClient(broker.bootstrap) as c:
        too_short = c.request(JoinGroupRequest(group_id="g-bad", session_timeout=i32Timedelta.parse(
            datetime.timedelta(milliseconds=10)), member_id="", protocol_type="consumer",
            protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),)))
        assert too_short.error_code == ErrorCode.invalid_session_timeout
        no_group = c.request(JoinGroupRequest(group_id="", session_timeout=i32Timedelta.parse(
            datetime.timedelta(seconds=10)), member_id="", protocol_type="consumer", protocols=()))
        assert no_group.error_code == ErrorCode.invalid_group_id
        hb = c.request(HeartbeatRequest(group_id="nope", generation_id=_i32(1), member_id="m"))
        assert hb.error_code == ErrorCode.unknown_member_id
        sync = c.request(SyncGroupRequest(group_id="nope", generation_id=_i32(1), member_id="m", assignments=()))
        assert sync.error_code == ErrorCode.unknown_member_id
        # JoinGroup v0 (no MEMBER_ID_REQUIRED round trip): a one-member group forms at once in --dev
        joined = c.request(JoinGroupRequest(group_id=f"g-{uuid.uuid4().hex[:8]}", session_timeout=i32Timedelta.parse(
            datetime.timedelta(seconds=10)), member_id="", protocol_type="consumer",
            protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),)))
        assert joined.error_code == ErrorCode.none and joined.generation_id == 1
        assert joined.member_id.startswith("kwire-") and joined.leader == joined.member_id


def test_describe_groups_v6_group_id_not_found(broker, topic_factory) -> None:  # noqa: ANN001
    """v6 (KIP-1043): a group that does not exist is GROUP_ID_NOT_FOUND with a message (still named Dead);
    v5 and older describe it as Dead without an error. An existing group is described the same in both."""
    from kio.schema.describe_groups.v5.request import DescribeGroupsRequest as V5
    from kio.schema.describe_groups.v6.request import DescribeGroupsRequest as V6

    topic = topic_factory(1)
    there, missing = f"g-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    with WireClient(broker.bootstrap) as c:
        assert _commit(c, there, topic, {0: 3}) == {0: ErrorCode.none}
        v6 = c.request(V6(groups=(there, missing), include_authorized_operations=False))
        v5 = c.request(V5(groups=(there, missing), include_authorized_operations=False))
    assert [(d.group_id, d.error_code, d.error_message, d.group_state) for d in v6.groups] == [
        (there, ErrorCode.none, None, "Empty"),
        (missing, ErrorCode.group_id_not_found, f"Group {missing} not found.", "Dead")]
    assert [(d.group_id, d.error_code, d.group_state) for d in v5.groups] == [
        (there, ErrorCode.none, "Empty"), (missing, ErrorCode.none, "Dead")]
