"""Share groups (KIP-932) on the wire against an embedded broker: ShareGroupHeartbeat / ShareGroupDescribe /
ShareFetch / ShareAcknowledge in the versions kio has, with the group.share.* keys changing behaviour."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.share_acknowledge.v1 import request as ack_req
from kio.schema.share_fetch.v1 import request as fetch_req
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.static.primitive import i8, i32, i64

from kaflite.coordinator.share.partition import ShareEpochs
from kaflite.server.coordinators import share_membership
from kaflite.server.coordinators.groups import GroupService
from kaflite.server.coordinators.share_state import SHARE_COORDINATOR
from kaflite.server.embedded import EmbeddedBroker
from server.kwire import WireClient

ACCEPT, RELEASE, REJECT = 1, 2, 3
LOCK_MS = 1000  # the smallest group.share.record.lock.duration.ms Kafka accepts
SHORT = {"group.share.record.lock.duration.ms": str(LOCK_MS), "group.share.delivery.count.limit": "2",
         "group.share.session.timeout.ms": "2500", "group.share.heartbeat.interval.ms": "321",
         "group.share.max.size": "2"}


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(overrides=SHORT) as b:
        yield b


_topics = iter(range(10_000))


def new_topic(b: EmbeddedBroker, partitions: int = 1) -> tuple[str, uuid.UUID]:
    name = f"share-{next(_topics)}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})  # kept alive until the answer is in
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)
    return name, b.call(lambda: b.server.broker.metadata.topics[name].topic_id)


def produce(b: EmbeddedBroker, topic: str, n: int, partition: int = 0) -> None:
    p = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, b"v%d" % i, partition=partition)
    assert p.flush(10) == 0


class Member:
    """One share-group member speaking the raw protocol: heartbeat, a share session, acknowledgements."""

    def __init__(self, b: EmbeddedBroker, group: str, topics: list[str], member_id: str | None = None) -> None:
        self.client = WireClient(b.bootstrap)
        self.group = group
        self.member_id = member_id or uuid.uuid4().hex[:22]
        self.epoch = 0
        self.session_epoch = 0
        self.assignment: list[tuple[uuid.UUID, list[int]]] = []
        self.last = self.heartbeat(topics)

    def heartbeat(self, topics: list[str] | None = None) -> Any:
        r = self.client.request(ShareGroupHeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=i32(self.epoch),
            subscribed_topic_names=tuple(topics) if topics is not None else None))
        if r.error_code == 0:
            self.epoch = int(r.member_epoch)
            if r.assignment is not None:
                self.assignment = [(tp.topic_id, list(tp.partitions)) for tp in r.assignment.topic_partitions]
        return r

    def wait_assigned(self, timeout: float = 10.0) -> None:
        """Heartbeat until the assignment is not empty: a new partition is assigned once the group
        coordinator has initialized its share state (the heartbeat that starts that is answered without it)."""
        deadline = time.monotonic() + timeout
        while not any(ps for _t, ps in self.assignment) and time.monotonic() < deadline:
            time.sleep(0.02)
            assert self.heartbeat().error_code == 0
        assert any(ps for _t, ps in self.assignment), f"{self.member_id}: nothing assigned in {timeout:g} s"

    def fetch(self, acks: dict[tuple[uuid.UUID, int], list[tuple[int, int, int]]] | None = None,
              max_wait_ms: int = 0, max_records: int = 500, epoch: int | None = None) -> Any:
        acks = acks or {}
        parts: dict[uuid.UUID, set[int]] = {tid: set(ps) for tid, ps in self.assignment}
        for tid, p in acks:
            parts.setdefault(tid, set()).add(p)
        topics = tuple(fetch_req.FetchTopic(topic_id=tid, partitions=tuple(
            fetch_req.FetchPartition(partition_index=i32(p), acknowledgement_batches=tuple(
                fetch_req.AcknowledgementBatch(first_offset=i64(f), last_offset=i64(last),
                                               acknowledge_types=(i8(k),))
                for f, last, k in acks.get((tid, p), []))) for p in sorted(ps)))
            for tid, ps in parts.items())
        sent_epoch = self.session_epoch if epoch is None else epoch
        r = self.client.request(fetch_req.ShareFetchRequest(
            group_id=self.group, member_id=self.member_id, share_session_epoch=i32(sent_epoch),
            max_wait=_td(max_wait_ms), min_bytes=i32(1), max_records=i32(max_records), batch_size=i32(500),
            topics=topics, forgotten_topics_data=()))
        if r.error_code == 0 and epoch is None:
            self.session_epoch += 1
        return r

    def acknowledge(self, acks: dict[tuple[uuid.UUID, int], list[tuple[int, int, int]]]) -> Any:
        topics: dict[uuid.UUID, list[Any]] = {}
        for (tid, p), ranges in acks.items():
            topics.setdefault(tid, []).append(ack_req.AcknowledgePartition(
                partition_index=i32(p), acknowledgement_batches=tuple(
                    ack_req.AcknowledgementBatch(first_offset=i64(f), last_offset=i64(last),
                                                 acknowledge_types=(i8(k),)) for f, last, k in ranges)))
        r = self.client.request(ack_req.ShareAcknowledgeRequest(
            group_id=self.group, member_id=self.member_id, share_session_epoch=i32(self.session_epoch),
            topics=tuple(ack_req.AcknowledgeTopic(topic_id=tid, partitions=tuple(ps)) for tid, ps in topics.items())))
        if r.error_code == 0:
            self.session_epoch += 1
        return r

    def close(self) -> None:
        self.client.close()


def _td(ms: int) -> Any:
    import datetime
    return datetime.timedelta(milliseconds=ms)


def acquired(resp: Any) -> dict[int, list[tuple[int, int, int]]]:
    """partition -> [(first, last, delivery count)] of a ShareFetch answer."""
    assert resp.error_code == 0, resp
    out: dict[int, list[tuple[int, int, int]]] = {}
    for t in resp.responses:
        for p in t.partitions:
            assert p.error_code == 0, p
            if p.acquired_records:
                out[int(p.partition_index)] = [(int(a.first_offset), int(a.last_offset), int(a.delivery_count))
                                               for a in p.acquired_records]
    return out


def offsets(resp: Any) -> list[int]:
    return sorted(o for ranges in acquired(resp).values() for f, last, _c in ranges for o in range(f, last + 1))


def ack_errors(resp: Any) -> dict[int, int]:
    field = "acknowledge_error_code" if hasattr(resp.responses[0].partitions[0], "acknowledge_error_code") \
        else "error_code"
    return {int(p.partition_index): int(getattr(p, field)) for t in resp.responses for p in t.partitions}


def joined_and_started(b: EmbeddedBroker, group: str, topic: str, n: int, members: int = 1) -> list[Member]:
    """Members joined and a share session opened (which sets the SPSO at the end: auto.offset.reset is
    latest), then `n` records produced."""
    ms = [Member(b, group, [topic]) for _ in range(members)]
    for m in ms:
        m.wait_assigned()
    for m in ms:
        if m.epoch != max(x.epoch for x in ms):
            m.heartbeat()
        assert offsets(m.fetch()) == []
    produce(b, topic, n)
    return ms


def test_apis_advertised(broker: EmbeddedBroker) -> None:
    with WireClient(broker.bootstrap) as c:
        r = c.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    got = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in r.api_keys}
    assert got[76] == (1, 1) and got[77] == (1, 1) and got[78] == (1, 1) and got[79] == (1, 1)
    assert all(got[k] == (0, 0) for k in (83, 84, 85, 86, 87))  # the share coordinator's RPCs
    # Describe / Alter / DeleteShareGroupOffsets: v0, what Kafka 4.1.0 advertises (kio also has Describe v1)
    assert all(got[k] == (0, 0) for k in (90, 91, 92))


def test_group_share_enable_false_hides_the_apis() -> None:
    with EmbeddedBroker(overrides={"group.share.enable": "false"}) as b, WireClient(b.bootstrap) as c:
        r = c.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        assert not {76, 77, 78, 79, 83, 84, 85, 86, 87, 90, 91, 92} & {int(k.api_key) for k in r.api_keys}
        hb = c.request(ShareGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=i32(0),
                                                  subscribed_topic_names=("t",)))
        assert hb.error_code == 35  # UNSUPPORTED_VERSION


def test_join_and_describe(broker: EmbeddedBroker) -> None:
    topic, tid = new_topic(broker, 2)
    a = Member(broker, "g-join", [topic])
    assert a.last.error_code == 0 and a.epoch == 1
    assert int(a.last.heartbeat_interval.total_seconds() * 1000) == 321  # group.share.heartbeat.interval.ms
    # the join starts the initialization of the partitions' share state and is answered without them; a
    # later heartbeat finds them initialized, bumps the group epoch and assigns them (as Kafka 4.1+)
    assert a.assignment == []
    a.wait_assigned()
    assert a.epoch == 2 and a.assignment == [(tid, [0, 1])]
    b = Member(broker, "g-join", [topic])  # initialized already: assigned at its join
    assert b.epoch == 3 and b.assignment
    # the first member learns the new epoch at its next heartbeat; one partition each
    a.heartbeat()
    assert a.epoch == 3 and sorted(a.assignment[0][1] + b.assignment[0][1]) == [0, 1]
    with WireClient(broker.bootstrap) as c:
        d = c.request(ShareGroupDescribeRequest(group_ids=("g-join", "nope"), include_authorized_operations=False))
    g, missing = d.groups
    assert g.error_code == 0 and g.group_state == "Stable" and g.group_epoch == 3 and g.assignor_name == "simple"
    assert {m.member_id for m in g.members} == {a.member_id, b.member_id}
    assert missing.error_code == 69  # GROUP_ID_NOT_FOUND
    third = Member(broker, "g-join", [topic])  # group.share.max.size=2
    assert third.last.error_code == 81 and third.epoch == 0  # GROUP_MAX_SIZE_REACHED
    third.close()
    fenced = Member.__new__(Member)
    fenced.client, fenced.group, fenced.member_id, fenced.epoch = a.client, "g-join", a.member_id, 1
    assert fenced.heartbeat().error_code == 110  # FENCED_MEMBER_EPOCH
    a.close()
    b.close()


def test_fetch_accept_release_reject(broker: EmbeddedBroker) -> None:
    topic, tid = new_topic(broker)
    (m,) = joined_and_started(broker, "g-ack", topic, 6)
    r = m.fetch(max_wait_ms=2000)
    assert acquired(r) == {0: [(0, 5, 1)]}
    # accept 0-1, release 2-3, reject 4-5, piggybacked on the next fetch: 2-3 come back at once
    r = m.fetch({(tid, 0): [(0, 1, ACCEPT), (2, 3, RELEASE), (4, 5, REJECT)]})
    assert ack_errors(r) == {0: 0}
    assert acquired(r) == {0: [(2, 3, 2)]}
    # ShareAcknowledge accepts them; accepting again is INVALID_RECORD_STATE
    assert ack_errors(m.acknowledge({(tid, 0): [(2, 3, ACCEPT)]})) == {0: 0}
    assert ack_errors(m.acknowledge({(tid, 0): [(2, 3, ACCEPT)]})) == {0: 121}
    assert offsets(m.fetch()) == []  # nothing redelivered: accepted and rejected records are final
    m.close()


def test_a_share_partition_made_from_this_brokers_state_carries_its_leader_epoch(broker: EmbeddedBroker) -> None:
    """The share partition a ShareFetch makes from this broker's share coordinator holds the partition's leader
    epoch at that time (`SharePartition.epochs`: what a later request compares with the leader epoch then),
    state epoch 0, state not elsewhere."""
    topic, _tid = new_topic(broker)
    (m,) = joined_and_started(broker, "g-epochs", topic, 1)

    def held() -> tuple[Any, int]:
        sp = broker.server.broker.services.get(SHARE_COORDINATOR).partitions[("g-epochs", topic, 0)]
        return sp.epochs, broker.server.broker.replica_manager.partition_or_none(topic, 0).state.leader_epoch
    epochs, leader_epoch = broker.call(held)
    assert epochs == ShareEpochs(leader_epoch, 0, state_elsewhere=False)
    m.close()


def test_lock_timeout_redelivers(broker: EmbeddedBroker) -> None:
    """group.share.record.lock.duration.ms: a record not acknowledged in time goes to another member."""
    topic, tid = new_topic(broker)
    a, b = joined_and_started(broker, "g-lock", topic, 3, members=2)
    assert acquired(a.fetch(max_wait_ms=2000)) == {0: [(0, 2, 1)]}
    assert offsets(b.fetch()) == []  # locked to a
    a.heartbeat()
    b.heartbeat()
    time.sleep(LOCK_MS / 1000 + 0.2)
    assert acquired(b.fetch(max_wait_ms=2000)) == {0: [(0, 2, 2)]}
    r = a.fetch({(tid, 0): [(0, 2, ACCEPT)]})  # too late: the lock ended
    assert ack_errors(r)[0] == 121
    a.close()
    b.close()


def test_delivery_count_limit_archives(broker: EmbeddedBroker) -> None:
    """group.share.delivery.count.limit=2: released twice, a record is archived, never delivered again."""
    topic, tid = new_topic(broker)
    (m,) = joined_and_started(broker, "g-limit", topic, 1)
    assert acquired(m.fetch(max_wait_ms=2000)) == {0: [(0, 0, 1)]}
    assert acquired(m.fetch({(tid, 0): [(0, 0, RELEASE)]})) == {0: [(0, 0, 2)]}
    assert offsets(m.fetch({(tid, 0): [(0, 0, RELEASE)]})) == []
    produce(broker, topic, 1)
    assert acquired(m.fetch(max_wait_ms=2000)) == {0: [(1, 1, 1)]}  # the log goes on past the archived one
    m.close()


def test_two_members_share_a_partition_without_duplicates(broker: EmbeddedBroker) -> None:
    topic, tid = new_topic(broker)
    a, b = joined_and_started(broker, "g-two", topic, 10, members=2)
    assert a.assignment == b.assignment == [(tid, [0])]
    got_a = offsets(a.fetch(max_records=4, max_wait_ms=2000))
    got_b = offsets(b.fetch(max_records=4, max_wait_ms=2000))
    assert got_a == [0, 1, 2, 3] and got_b == [4, 5, 6, 7]
    got_a2 = offsets(a.fetch({(tid, 0): [(0, 3, ACCEPT)]}, max_records=100))
    assert got_a2 == [8, 9]
    assert offsets(b.fetch({(tid, 0): [(4, 7, ACCEPT)]})) == []
    # b cannot acknowledge what a holds
    assert ack_errors(b.acknowledge({(tid, 0): [(8, 9, ACCEPT)]})) == {0: 121}
    a.close()
    b.close()


def test_session_timeout_removes_member_and_releases(broker: EmbeddedBroker) -> None:
    """group.share.session.timeout.ms=2500: a member that stops heartbeating leaves; its records are
    released to the others before their lock would have ended."""
    topic, tid = new_topic(broker)
    a, b = joined_and_started(broker, "g-sess", topic, 2, members=2)
    assert offsets(a.fetch(max_wait_ms=2000)) == [0, 1]
    deadline = time.monotonic() + 2.6
    while time.monotonic() < deadline:  # b stays alive; a falls silent
        b.heartbeat()
        time.sleep(0.3)
    b.heartbeat()
    with WireClient(broker.bootstrap) as c:
        d = c.request(ShareGroupDescribeRequest(group_ids=("g-sess",), include_authorized_operations=False))
    assert [m.member_id for m in d.groups[0].members] == [b.member_id]
    assert a.heartbeat().error_code == 25  # UNKNOWN_MEMBER_ID
    assert a.fetch().error_code == 25
    a.close()
    b.close()


def test_session_epochs(broker: EmbeddedBroker) -> None:
    topic, tid = new_topic(broker)
    (m,) = joined_and_started(broker, "g-epoch", topic, 1)
    assert m.fetch(epoch=5).error_code == 123  # INVALID_SHARE_SESSION_EPOCH
    assert m.fetch(epoch=0, acks={(tid, 0): [(0, 0, ACCEPT)]}).error_code == 42  # no acks when opening
    other = Member(broker, "g-epoch", [topic])
    assert other.fetch(epoch=3).error_code == 122  # SHARE_SESSION_NOT_FOUND
    m.close()
    other.close()


def _alter_group(b: EmbeddedBroker, group: str, **configs: str) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    admin.incremental_alter_configs([res])[res].result(10)


def test_group_config_auto_offset_reset_earliest(broker: EmbeddedBroker) -> None:
    """share.auto.offset.reset=earliest set on the group (IncrementalAlterConfigs, GROUP resource): records
    produced before the group's first fetch are delivered; without it (latest) they are not."""
    topic, tid = new_topic(broker)
    produce(broker, topic, 3)
    _alter_group(broker, "g-earliest", share_auto_offset_reset="earliest")
    m = Member(broker, "g-earliest", [topic])
    m.wait_assigned()
    assert acquired(m.fetch(max_wait_ms=2000)) == {0: [(0, 2, 1)]}
    late = Member(broker, "g-latest", [topic])
    late.wait_assigned()
    assert offsets(late.fetch(max_wait_ms=200)) == []
    m.close()
    late.close()


@pytest.mark.parametrize("how", ["final-epoch", "disconnect"])
def test_a_session_ending_releases_what_its_member_holds(broker: EmbeddedBroker, how: str) -> None:
    """A share session closed with epoch -1, or whose connection closes, releases its member's records
    at once (Kafka's releaseSession, and its ShareSessionCache on a disconnect): the other member gets them
    with its next fetch, long before the group's 60 s lock or session timeout would have ended; the member
    that left the session is still a member of the group."""
    topic, tid = new_topic(broker)
    group = f"g-end-{how}"
    _alter_group(broker, group, share_record_lock_duration_ms="60000", share_session_timeout_ms="60000")
    a, b = joined_and_started(broker, group, topic, 3, members=2)
    assert acquired(a.fetch(max_wait_ms=2000)) == {0: [(0, 2, 1)]}
    assert offsets(b.fetch()) == []  # locked to a
    if how == "final-epoch":
        assert a.fetch(epoch=-1).error_code == 0
    else:
        a.close()
    assert acquired(b.fetch(max_wait_ms=3000)) == {0: [(0, 2, 2)]}
    if how == "final-epoch":
        assert a.heartbeat().error_code == 0  # still a member: only its session here ended
        a.close()
    b.close()


def test_group_config_refuses_unknown_keys_and_bad_values(broker: EmbeddedBroker) -> None:
    from confluent_kafka import KafkaException
    with pytest.raises(KafkaException, match="Unknown group config name"):
        _alter_group(broker, "g-bad", share_no_such_key="1")
    with pytest.raises(KafkaException, match="share.delivery.count.limit"):
        _alter_group(broker, "g-bad", share_delivery_count_limit="11")
    assert broker.call(lambda: broker.server.broker.services.get(SHARE_COORDINATOR).group_configs.get("g-bad")) \
        is None


def test_group_config_read_committed_skips_aborted_and_open_transactions(broker: EmbeddedBroker) -> None:
    topic, tid = new_topic(broker)
    _alter_group(broker, "g-rc", share_isolation_level="read_committed", share_auto_offset_reset="earliest")
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "share-rc"})
    p.init_transactions(10)
    p.begin_transaction()
    p.produce(topic, b"aborted", partition=0)
    p.flush(10)
    p.abort_transaction(10)
    p.begin_transaction()
    p.produce(topic, b"committed", partition=0)
    p.flush(10)
    p.commit_transaction(10)
    p.begin_transaction()
    p.produce(topic, b"open", partition=0)
    p.flush(10)  # left open: past the last stable offset
    m = Member(broker, "g-rc", [topic])
    m.wait_assigned()
    # offsets: 0 aborted, 1 abort marker, 2 committed, 3 commit marker, 4 open
    assert offsets(m.fetch(max_wait_ms=2000)) == [2]
    plain = Member(broker, "g-ru", [topic])
    plain.wait_assigned()
    _alter_group(broker, "g-ru", share_auto_offset_reset="earliest")
    assert 4 in offsets(plain.fetch(max_wait_ms=2000))  # read_uncommitted: the open transaction's record too
    p.abort_transaction(10)
    m.close()
    plain.close()


def test_list_and_delete_share_groups(broker: EmbeddedBroker) -> None:
    """ListGroups names share groups with type "share" (filters by type and state apply); DeleteGroups
    refuses one with members (NON_EMPTY_GROUP) and deletes it once empty, its share state with it."""
    topic, tid = new_topic(broker)
    (m,) = joined_and_started(broker, "g-list", topic, 2)
    assert offsets(m.fetch(max_wait_ms=2000)) == [0, 1]
    with WireClient(broker.bootstrap) as c:
        listed = c.request(ListGroupsRequest(states_filter=(), types_filter=("share",)))
        assert ("g-list", "share", "Stable", "share") in {
            (g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups}
        assert all(g.group_type == "share" for g in listed.groups)
        empty = c.request(ListGroupsRequest(states_filter=("empty",), types_filter=("share",)))
        assert "g-list" not in {g.group_id for g in empty.groups}
        assert c.request(DeleteGroupsRequest(groups_names=("g-list",))).results[0].error_code == 68  # NON_EMPTY
        assert m.client.request(ShareGroupHeartbeatRequest(  # the member leaves
            group_id="g-list", member_id=m.member_id, member_epoch=i32(-1))).error_code == 0
        assert c.request(DeleteGroupsRequest(groups_names=("g-list",))).results[0].error_code == 0
        listed = c.request(ListGroupsRequest(states_filter=(), types_filter=()))
        assert "g-list" not in {g.group_id for g in listed.groups}
    assert broker.call(lambda: [k for k in broker.server.broker.services.get(SHARE_COORDINATOR).partitions
                                if k[0] == "g-list"]) == []
    m.close()


def test_share_requests_do_not_reconcile_but_a_shard_load_or_unload_does(broker: EmbeddedBroker,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The share groups follow the `__consumer_offsets` shards through the runtime's listeners
    (share_membership.follow): no share request reconciles; resigning the group's partition drops the group,
    an election imports it again from its records."""
    topic, tid = new_topic(broker)
    (m,) = joined_and_started(broker, "g-follow", topic, 2)  # the coordinator made, following the shards
    calls: list[str] = []
    real = share_membership.reconcile

    def counted(b: Any, coord: Any) -> None:
        calls.append("reconcile")
        real(b, coord)
    monkeypatch.setattr(share_membership, "reconcile", counted)
    m.heartbeat()
    assert offsets(m.fetch(max_wait_ms=2000)) == [0, 1]
    assert ack_errors(m.acknowledge({(tid, 0): [(0, 1, ACCEPT)]})) == {0: 0}
    with WireClient(broker.bootstrap) as c:
        (g,) = c.request(ShareGroupDescribeRequest(group_ids=("g-follow",), include_authorized_operations=False)).groups
        assert g.error_code == 0 and len(g.members) == 1
        assert "g-follow" in {x.group_id for x in c.request(ListGroupsRequest(states_filter=(),
                                                                               types_filter=("share",))).groups}
    assert calls == []  # four share requests and two group listings: none reconciled
    inner = broker.server.broker
    svc = GroupService.of(inner)
    partition = svc.partition_for("g-follow")

    def known() -> bool:
        return "g-follow" in inner.services.get(SHARE_COORDINATOR).groups
    broker.call(svc.on_resignation, partition)  # another broker leads it now
    assert calls == ["reconcile"] and not broker.call(known)
    broker.call(lambda: svc.on_election(partition) and None)  # this broker leads it again: its log replayed
    deadline = time.monotonic() + 10
    while not broker.call(known) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert calls == ["reconcile"] * 2 and broker.call(known)
    assert m.heartbeat().error_code == 0  # the member, imported from the records, heartbeats on
    m.close()


def test_a_heartbeat_that_changes_nothing_is_answered_behind_the_groups_earlier_writes(
        broker: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    """A heartbeat that changed none of its group's records writes nothing, but its answer may show what an
    earlier, still uncommitted write of the group made (another member's join): it is answered through a
    runtime step without records, which the runtime answers only after the partition's pending writes
    commit (coordinator/runtime.py rules; Kafka's "read operation after all")."""
    topic, _tid = new_topic(broker)
    (m,) = joined_and_started(broker, "g-barrier", topic, 2)
    svc = GroupService.of(broker.server.broker)
    steps: list[int] = []
    real = svc.runtime.write

    def counted(partition: int, op: Any, *args: Any, **kwargs: Any) -> Any:
        steps.append(partition)
        return real(partition, op, *args, **kwargs)
    monkeypatch.setattr(svc.runtime, "write", counted)
    assert m.heartbeat().error_code == 0  # nothing changed: no records, one step behind the earlier writes
    assert steps == [svc.partition_for("g-barrier")]
    m.close()
