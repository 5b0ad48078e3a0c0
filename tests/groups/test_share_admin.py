"""The share-group admin APIs on the wire against an embedded broker: DescribeShareGroupOffsets (90),
AlterShareGroupOffsets (91), DeleteShareGroupOffsets (92), v0, answered from `__share_group_state`; and
DescribeGroups of a share group id (as Kafka: Dead, v6 GROUP_ID_NOT_FOUND "is not a classic group")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.alter_share_group_offsets.v0 import request as alter_req
from kio.schema.delete_share_group_offsets.v0 import request as delete_req
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest as DescribeGroupsV5
from kio.schema.describe_groups.v6.request import DescribeGroupsRequest as DescribeGroupsV6
from kio.schema.describe_share_group_offsets.v0 import request as describe_req
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.static.primitive import i32, i64

from groups.test_share_wire import ACCEPT, SHORT, Member, joined_and_started, new_topic, offsets, produce
from kaflite.server.coordinators.share_state import SHARE_COORDINATOR
from kaflite.server.embedded import EmbeddedBroker
from server.kwire import WireClient

NONE, UNKNOWN_TOPIC_OR_PARTITION, UNSUPPORTED_VERSION = 0, 3, 35
INVALID_GROUP_ID, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND = 24, 68, 69
GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED = 30, 29


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(overrides=SHORT) as b:
        yield b


def describe(c: WireClient, group: str, topics: dict[str, list[int]] | None) -> Any:
    wanted = None if topics is None else tuple(
        describe_req.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(i32(p) for p in ps))
        for t, ps in topics.items())
    r = c.request(describe_req.DescribeShareGroupOffsetsRequest(groups=(
        describe_req.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=wanted),)))
    (g,) = r.groups
    return g


def starts(g: Any) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (start offset, error code) of a described group."""
    assert g.error_code == NONE, g
    return {(t.topic_name, int(p.partition_index)): (int(p.start_offset), int(p.error_code))
            for t in g.topics for p in t.partitions}


def alter(c: WireClient, group: str, offsets_: dict[str, list[tuple[int, int]]]) -> Any:
    return c.request(alter_req.AlterShareGroupOffsetsRequest(group_id=group, topics=tuple(
        alter_req.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(
            alter_req.AlterShareGroupOffsetsRequestPartition(partition_index=i32(p), start_offset=i64(o))
            for p, o in ps)) for t, ps in offsets_.items())))


def alter_errors(r: Any) -> dict[tuple[str, int], int]:
    return {(t.topic_name, int(p.partition_index)): int(p.error_code) for t in r.responses for p in t.partitions}


def delete(c: WireClient, group: str, topics: list[str]) -> Any:
    return c.request(delete_req.DeleteShareGroupOffsetsRequest(group_id=group, topics=tuple(
        delete_req.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics)))


def leave(m: Member) -> None:
    assert m.client.request(ShareGroupHeartbeatRequest(
        group_id=m.group, member_id=m.member_id, member_epoch=i32(-1))).error_code == NONE
    m.close()


def test_describe_answers_the_durable_start_offsets(broker: EmbeddedBroker) -> None:
    """Describe answers the share-partition start offset (SPSO) written to `__share_group_state`: the
    start where the share session opened (latest), moving past accepted records; -1 for a partition
    never fetched, an unknown topic (topic id zero, no error); topics null lists every share partition."""
    topic, tid = new_topic(broker, 2)
    (m,) = joined_and_started(broker, "g-adm-desc", topic, 4)
    got = offsets(m.fetch(max_wait_ms=2000))
    assert got == [0, 1, 2, 3]
    m.fetch(acks={(tid, 0): [(0, 1, ACCEPT)]})
    with WireClient(broker.bootstrap) as c:
        g = describe(c, "g-adm-desc", {topic: [0, 1, 5], "no-such-topic": [0]})
        assert starts(g) == {(topic, 0): (2, NONE), (topic, 1): (0, NONE), (topic, 5): (-1, NONE),
                             ("no-such-topic", 0): (-1, NONE)}
        ids = {t.topic_name: t.topic_id for t in g.topics}
        assert ids == {topic: tid, "no-such-topic": None}  # Uuid.ZERO_UUID reads as null
        every = describe(c, "g-adm-desc", None)
        assert starts(every) == {(topic, 0): (2, NONE), (topic, 1): (0, NONE)}
        # a group that never existed: no state, no error (as Kafka)
        assert starts(describe(c, "g-adm-nobody", None)) == {}
        assert starts(describe(c, "g-adm-nobody", {topic: [0]})) == {(topic, 0): (-1, NONE)}
    leave(m)


def test_alter_refuses_unknown_and_non_empty_groups_then_moves_the_start(broker: EmbeddedBroker) -> None:
    """Alter: GROUP_ID_NOT_FOUND for an unknown group, NON_EMPTY_GROUP while members are in it,
    INVALID_GROUP_ID for an empty id; once empty, the start offset moves (earlier records delivered again,
    with delivery count 1), an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION."""
    topic, tid = new_topic(broker)
    (m,) = joined_and_started(broker, "g-adm-alter", topic, 5)
    assert offsets(m.fetch(max_wait_ms=2000)) == [0, 1, 2, 3, 4]
    m.fetch(acks={(tid, 0): [(0, 4, ACCEPT)]})
    with WireClient(broker.bootstrap) as c:
        r = alter(c, "g-adm-nope", {topic: [(0, 0)]})
        assert (r.error_code, r.responses) == (GROUP_ID_NOT_FOUND, ())
        assert alter(c, "", {topic: [(0, 0)]}).error_code == INVALID_GROUP_ID
        r = alter(c, "g-adm-alter", {topic: [(0, 1)]})
        assert (r.error_code, r.responses) == (NON_EMPTY_GROUP, ())
        assert starts(describe(c, "g-adm-alter", {topic: [0]})) == {(topic, 0): (5, NONE)}  # unchanged
        leave(m)
        r = alter(c, "g-adm-alter", {topic: [(0, 2), (3, 0)], "no-such-topic": [(0, 0)]})
        assert r.error_code == NONE
        assert alter_errors(r) == {(topic, 0): NONE, (topic, 3): UNKNOWN_TOPIC_OR_PARTITION,
                                   ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION}
        assert {t.topic_name: t.topic_id for t in r.responses} == {topic: tid, "no-such-topic": None}  # Uuid.ZERO_UUID reads as null
        assert starts(describe(c, "g-adm-alter", {topic: [0]})) == {(topic, 0): (2, NONE)}
    again = Member(broker, "g-adm-alter", [topic])
    r = again.fetch(max_wait_ms=2000)
    assert offsets(r) == [2, 3, 4]  # accepted before, delivered again from the new start
    assert {c for t in r.responses for p in t.partitions for _f, _l, c in
            [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records]} == {1}
    leave(again)


def test_alter_to_minus_one_restarts_from_auto_offset_reset(broker: EmbeddedBroker) -> None:
    """A start offset of -1 leaves the share partition uninitialized (Describe: -1); its next fetch starts
    it from share.auto.offset.reset (latest), so records already in the log are not delivered."""
    topic, _tid = new_topic(broker)
    (m,) = joined_and_started(broker, "g-adm-reset", topic, 3)
    leave(m)
    with WireClient(broker.bootstrap) as c:
        assert alter_errors(alter(c, "g-adm-reset", {topic: [(0, -1)]})) == {(topic, 0): NONE}
        assert starts(describe(c, "g-adm-reset", {topic: [0]})) == {(topic, 0): (-1, NONE)}
    again = Member(broker, "g-adm-reset", [topic])
    assert offsets(again.fetch()) == []
    produce(broker, topic, 1)
    assert offsets(again.fetch(max_wait_ms=2000)) == [3]
    leave(again)


def test_delete_removes_the_state_of_the_topics_named(broker: EmbeddedBroker) -> None:
    """Delete: GROUP_ID_NOT_FOUND / NON_EMPTY_GROUP as Alter; per topic UNKNOWN_TOPIC_OR_PARTITION for an
    unknown topic and for one without state; the deleted topic's share partitions describe as -1 and start
    again from share.auto.offset.reset, the other topic's state stays."""
    gone, gone_id = new_topic(broker)
    kept, kept_id = new_topic(broker)
    other, _ = new_topic(broker)
    m = Member(broker, "g-adm-del", [gone, kept])
    m.wait_assigned()
    assert offsets(m.fetch()) == []
    produce(broker, gone, 2)
    produce(broker, kept, 2)
    r = m.fetch(max_wait_ms=2000)
    got = {(t.topic_id, int(a.first_offset), int(a.last_offset)) for t in r.responses for p in t.partitions
           for a in p.acquired_records}
    assert got == {(gone_id, 0, 1), (kept_id, 0, 1)}
    with WireClient(broker.bootstrap) as c:
        r = delete(c, "g-adm-nope", [gone])
        assert (r.error_code, r.responses) == (GROUP_ID_NOT_FOUND, ())
        assert delete(c, "g-adm-del", [gone]).error_code == NON_EMPTY_GROUP
        leave(m)
        assert delete(c, "", [gone]).error_code == INVALID_GROUP_ID
        r = delete(c, "g-adm-del", [gone, "no-such-topic", other])
        assert r.error_code == NONE
        answers = [(t.topic_name, t.topic_id, int(t.error_code), t.error_message) for t in r.responses]
        assert answers[0] == (gone, gone_id, NONE, None)
        assert answers[1][:3] == ("no-such-topic", None, UNKNOWN_TOPIC_OR_PARTITION)
        assert answers[2] == (other, None, UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete.")
        assert starts(describe(c, "g-adm-del", None)) == {(kept, 0): (0, NONE)}
        assert starts(describe(c, "g-adm-del", {gone: [0]})) == {(gone, 0): (-1, NONE)}
        # deleting again: nothing left of it
        assert int(delete(c, "g-adm-del", [gone]).responses[0].error_code) == UNKNOWN_TOPIC_OR_PARTITION
    assert broker.call(lambda: [k for k in broker.server.broker.services.get(SHARE_COORDINATOR).partitions
                                if k[:2] == ("g-adm-del", gone)]) == []


def test_describe_groups_of_a_share_group_is_not_a_classic_group(broker: EmbeddedBroker) -> None:
    """As Kafka's GroupMetadataManager.describeGroups: a share group id is described as Dead; from v6
    GROUP_ID_NOT_FOUND "Group <id> is not a classic group."."""
    topic, _ = new_topic(broker)
    m = Member(broker, "g-adm-dg", [topic])
    with WireClient(broker.bootstrap) as c:
        (g,) = c.request(DescribeGroupsV6(groups=("g-adm-dg",), include_authorized_operations=False)).groups
        assert (int(g.error_code), g.error_message, g.group_state) == (
            GROUP_ID_NOT_FOUND, "Group g-adm-dg is not a classic group.", "Dead")
        (old,) = c.request(DescribeGroupsV5(groups=("g-adm-dg",), include_authorized_operations=False)).groups
        assert (int(old.error_code), old.group_state) == (NONE, "Dead")
        (unknown,) = c.request(DescribeGroupsV6(groups=("g-adm-none",), include_authorized_operations=False)).groups
        assert unknown.error_message == "Group g-adm-none not found."
    leave(m)


def test_share_admin_apis_off_with_group_share_enable_false() -> None:
    with EmbeddedBroker(overrides={"group.share.enable": "false"}) as b, WireClient(b.bootstrap) as c:
        assert describe(c, "g", None).error_code == UNSUPPORTED_VERSION
        assert alter(c, "g", {"t": [(0, 0)]}).error_code == UNSUPPORTED_VERSION
        assert delete(c, "g", ["t"]).error_code == UNSUPPORTED_VERSION
