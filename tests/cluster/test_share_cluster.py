"""Share groups on a three-broker cluster (issue 30): confluent-kafka ShareConsumers whose heartbeats go to
the group coordinator fetch and acknowledge at the leaders of partitions led by three different brokers,
each leader serving members it does not hold the membership of (as Kafka's share-partition leaders) and
writing its share partitions' state to the share coordinator of their `__share_group_state` partition
through WriteShareGroupState when another broker leads it; after the leader of a partition is killed,
the new leader reads the state there and nothing accepted is delivered again, only what was in flight."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient

from helpers import missing_zookeeper, require
from kaflite.coordinator.offsets_topic import partition_for as offsets_partition
from kaflite.coordinator.share.state_records import SHARE_GROUP_STATE_TOPIC, ShareStateKey
from kaflite.coordinator.share.state_records import partition_for as state_partition
from kaflite.server.embedded_cluster import EmbeddedCluster
from server.kwire import WireClient

STATE_PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedCluster]:
    require(missing_zookeeper())
    overrides = {"share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS),
                 "group.share.heartbeat.interval.ms": "500"}
    with EmbeddedCluster(3, overrides=overrides) as c:
        yield c
        # SIGKILL, not stop()'s controlled shutdowns: with one broker already dead, a controlled shutdown
        # could wait up to 30 s for a leadership move; the data directory goes anyway
        for broker_id in c.broker_ids:
            c.kill(broker_id)


def _leaders(admin: AdminClient, topic: str) -> dict[int, int]:
    md = admin.list_topics(topic, timeout=10)
    tm = md.topics.get(topic)
    if tm is None or tm.error is not None:
        return {}
    return {p: int(pm.leader) for p, pm in tm.partitions.items()}


def _topic_id(admin: AdminClient, topic: str) -> uuid.UUID:
    from confluent_kafka import TopicCollection

    desc = admin.describe_topics(TopicCollection([topic]))[topic].result(10)
    tid = desc.topic_id
    mask = (1 << 64) - 1
    return uuid.UUID(int=((tid.get_most_significant_bits() & mask) << 64) | (tid.get_least_significant_bits() & mask))


def _produce(c: EmbeddedCluster, topic: str, values: dict[int, list[bytes]]) -> None:
    p = ck.Producer({**c.confluent_config(), "linger.ms": 0, "acks": "all"})
    for partition, vs in values.items():
        for v in vs:
            p.produce(topic, v, partition=partition)
    assert p.flush(20) == 0


def _record(m: ck.Message) -> tuple[int, bytes]:
    return int(m.partition() or 0), bytes(m.value() or b"")


def _poll(consumers: list[ck.ShareConsumer], seen: list[tuple[int, bytes]], timeout: float = 0.3,
          errors: list[str] | None = None) -> None:
    """Records polled into `seen`; with `errors`, what a poll raises is noted there (after a broker was
    killed librdkafka may raise a connection's failure) instead of failing the test."""
    for cons in consumers:
        try:
            seen += [_record(m) for m in cons.poll(timeout) if m.error() is None]
        except ck.KafkaException as e:
            if errors is None:
                raise
            errors.append(str(e))


class _LeaderSession:
    """A share session of one member at one broker over the raw protocol (ShareFetch only: a leader that is
    not the group coordinator opens sessions for any member id, as Kafka's)."""

    def __init__(self, address: str, group: str, member_id: str, topic_id: uuid.UUID, partition: int) -> None:
        from server.kwire import WireClient

        self.client = WireClient(address)
        self.group, self.member_id, self.topic_id, self.partition = group, member_id, topic_id, partition
        self.epoch = 0

    def fetch(self, max_wait_ms: int) -> list[tuple[int, int, int]]:
        """(first, last, delivery count) of the records acquired."""
        return self.fetch_with_errors(max_wait_ms)[0]

    def fetch_with_errors(self, max_wait_ms: int) -> tuple[list[tuple[int, int, int]], list[int]]:
        """The records acquired, as `fetch`, and the partitions' error codes (a partition's error, such as
        its share state still loading at a leader, is answered at once with no records)."""
        import datetime

        from kio.schema.share_fetch.v1 import request as fetch_req
        from kio.static.primitive import i32

        r = self.client.request(fetch_req.ShareFetchRequest(
            group_id=self.group, member_id=self.member_id, share_session_epoch=i32(self.epoch),
            max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=i32(1), max_records=i32(500),
            batch_size=i32(500), topics=(fetch_req.FetchTopic(topic_id=self.topic_id, partitions=(
                fetch_req.FetchPartition(partition_index=i32(self.partition), acknowledgement_batches=()),)),),
            forgotten_topics_data=()))
        assert r.error_code == 0, r
        self.epoch += 1
        return ([(int(a.first_offset), int(a.last_offset), int(a.delivery_count))
                 for t in r.responses for p in t.partitions for a in p.acquired_records],
                [int(p.error_code) for t in r.responses for p in t.partitions])


def test_a_departed_members_records_come_back_at_once_from_a_leader_that_is_not_the_coordinator(
        cluster: EmbeddedCluster) -> None:
    """Member A acquires records at the leader of a partition that is not the group's coordinator, and its
    connection there closes (the client closed or was killed) without a word to the coordinator: the
    leader ends A's share session and releases what A held, so member B gets those records at once (the
    lock is 30 s), with delivery count 2. Kafka's leader does the same on a disconnect."""
    admin = AdminClient(cluster.confluent_config())
    topic = f"shd-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 1, 3)
    leader = cluster.leader(topic, 0)
    offsets_leaders = _leaders(admin, "__consumer_offsets")
    group = next(g for g in (f"shd-{i}" for i in range(200))
                 if offsets_leaders[offsets_partition(g, len(offsets_leaders))] != leader)
    topic_id = _topic_id(admin, topic)
    a = _LeaderSession(cluster.address(leader), group, "member-a", topic_id, 0)
    held: list[tuple[int, int, int]] = []
    deadline = time.monotonic() + 30
    while not held:  # the share partition starts at the log end: probes until A holds one
        assert time.monotonic() < deadline, "nothing was acquired"
        _produce(cluster, topic, {0: [b"probe"]})
        held += a.fetch(500)
    _produce(cluster, topic, {0: [b"x-%d" % i for i in range(5)]})
    while sum(last - first + 1 for first, last, _c in held) < 6:
        assert time.monotonic() < deadline, f"A holds only {held}"
        held += a.fetch(500)
    b = _LeaderSession(cluster.address(leader), group, "member-b", topic_id, 0)
    assert b.fetch(0) == []  # everything is locked to A
    a.client.close()  # no leave, no acknowledgement: A is gone
    started = time.monotonic()
    got: list[tuple[int, int, int]] = []
    while sum(last - first + 1 for first, last, _c in got) < 6:
        assert time.monotonic() - started < 10, f"B got only {got} of A's {held}"
        got += b.fetch(1000)
    assert {o for first, last, _c in got for o in range(first, last + 1)} == \
        {o for first, last, _c in held for o in range(first, last + 1)}
    assert {c for _f, _l, c in got} == {2}
    b.client.close()


def _state_topic_ready(cluster: EmbeddedCluster, admin: AdminClient, topic: str) -> None:
    """`__share_group_state` is made at the first share heartbeat: a throw-away member makes it."""
    warm = ck.ShareConsumer({**cluster.confluent_config(), "group.id": "warm-up"})
    warm.subscribe([topic])
    deadline = time.monotonic() + 20
    while len(_leaders(admin, SHARE_GROUP_STATE_TOPIC)) < STATE_PARTITIONS or \
            min(_leaders(admin, SHARE_GROUP_STATE_TOPIC).values(), default=-1) < 0:
        assert time.monotonic() < deadline, "__share_group_state was not created"
        warm.poll(0.2)
    warm.close()


def test_share_group_offsets_admin_through_the_persister(cluster: EmbeddedCluster) -> None:
    """`kaflite share-groups` reset-offsets, describe, delete-offsets and delete against the cluster, for a
    group whose share partitions' state is partly held by share coordinators other than its group
    coordinator: the group coordinator reaches them through the persister (summary, initialize, delete
    RPCs), so every partition is answered, a fetch at a leader starts where the reset put it, and the
    state is gone after delete-offsets and delete. Before, those partitions were COORDINATOR_NOT_AVAILABLE
    (reset, delete-offsets) or -1 (describe)."""
    from kio.schema.describe_share_group_offsets.v0 import request as describe_req
    from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
    from kio.static.primitive import i32
    from typer.testing import CliRunner

    from kaflite.cli.main import app
    from server.kwire import WireClient

    admin = AdminClient(cluster.confluent_config())
    topic = f"sha-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 3, 3)
    _state_topic_ready(cluster, admin, topic)
    topic_id = _topic_id(admin, topic)
    offsets_leaders = _leaders(admin, "__consumer_offsets")
    state_leaders = _leaders(admin, SHARE_GROUP_STATE_TOPIC)

    def elsewhere(g: str) -> list[int]:  # partitions whose share coordinator is not g's group coordinator
        c = offsets_leaders[offsets_partition(g, len(offsets_leaders))]
        return [p for p in range(3) if state_leaders[state_partition(ShareStateKey(g, topic_id, p),
                                                                     STATE_PARTITIONS)] != c]
    group = next(g for g in (f"sha-{i}" for i in range(500)) if len(elsewhere(g)) >= 2)
    coordinator = offsets_leaders[offsets_partition(group, len(offsets_leaders))]
    with WireClient(cluster.address(coordinator)) as c:  # a member joins and leaves: the group is Empty
        for epoch in (0, -1):
            r = c.request(ShareGroupHeartbeatRequest(group_id=group, member_id="m", member_epoch=i32(epoch),
                                                     subscribed_topic_names=(topic,) if epoch == 0 else None))
            assert r.error_code == 0, r
    _produce(cluster, topic, {p: [b"r-%d" % i for i in range(4)] for p in range(3)})

    def cli(*args: str) -> tuple[int, list[list[str]]]:
        res = CliRunner().invoke(app, ["share-groups", "--bootstrap-server", cluster.bootstrap, *args])
        assert "Traceback" not in res.output, res.output
        return res.exit_code, [ln.split() for ln in res.output.splitlines() if ln.split()[:1] == [group]]

    def start_offsets() -> dict[int, int]:
        with WireClient(cluster.address(coordinator)) as c:
            r = c.request(describe_req.DescribeShareGroupOffsetsRequest(groups=(
                describe_req.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=(
                    describe_req.DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=(
                        i32(0), i32(1), i32(2))),)),)))
        return {int(p.partition_index): int(p.start_offset) for t in r.groups[0].topics for p in t.partitions}

    code, rows = cli("--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    assert code == 0 and sorted(rows) == [[group, topic, str(p), "0"] for p in range(3)], rows
    assert start_offsets() == {0: 0, 1: 0, 2: 0}
    code, rows = cli("--describe", "--group", group)
    assert code == 0 and sorted(rows) == [[group, topic, str(p), "0"] for p in range(3)], rows
    # a partition whose state is elsewhere, led by a broker that is not the group coordinator (which would
    # check the member id): its leader fetches from the reset start, read at the share coordinator
    victim = elsewhere(group)[0]
    if cluster.leader(topic, victim) == coordinator:
        cluster.move_leader(topic, victim, to=next(b for b in cluster.broker_ids if b != coordinator))
    member = _LeaderSession(cluster.address(cluster.leader(topic, victim)), group, "m2", topic_id, victim)
    got: list[tuple[int, int, int]] = []
    deadline = time.monotonic() + 20
    while not got:
        assert time.monotonic() < deadline, "nothing acquired after the reset"
        got = member.fetch(500)
    assert got == [(0, 3, 1)]
    member.client.close()
    code, rows = cli("--delete-offsets", "--group", group, "--topic", topic)
    assert code == 0, rows
    assert start_offsets() == {0: -1, 1: -1, 2: -1}
    code, rows = cli("--reset-offsets", "--group", group, "--topic", topic, "--to-latest", "--execute")
    assert code == 0 and start_offsets() == {0: 4, 1: 4, 2: 4}
    code, _rows = cli("--delete", "--group", group)
    assert code == 0
    assert start_offsets() == {0: -1, 1: -1, 2: -1}


def test_a_group_config_altered_at_one_broker_applies_at_every_leader(cluster: EmbeddedCluster) -> None:
    """IncrementalAlterConfigs of a GROUP sent to one broker is stored in ZooKeeper (/config/groups/<g>)
    and every broker applies it: share.auto.offset.reset=earliest makes the leaders of the three
    partitions, one per broker, deliver records produced before the group's first fetch. Before, only the
    broker the request reached applied it: the two others started their share partitions at the log end."""
    from kio.schema.incremental_alter_configs.v1 import request as ireq
    from kio.static.primitive import i8

    from kaflite.cluster.zk import KafkaZkClient
    from server.kwire import WireClient

    admin = AdminClient(cluster.confluent_config())
    topic = f"shc-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 3, 3)
    for p in range(3):  # one partition led by each broker
        if cluster.leader(topic, p) != p:
            cluster.move_leader(topic, p, to=p)
    _state_topic_ready(cluster, admin, topic)
    topic_id = _topic_id(admin, topic)
    _produce(cluster, topic, {p: [b"early-%d" % i for i in range(2)] for p in range(3)})
    group = f"shc-{uuid.uuid4().hex[:6]}"
    with WireClient(cluster.address(0)) as c:  # to broker 0 only
        r = c.request(ireq.IncrementalAlterConfigsRequest(validate_only=False, resources=(ireq.AlterConfigsResource(
            resource_type=i8(32), resource_name=group, configs=(ireq.AlterableConfig(
                name="share.auto.offset.reset", config_operation=i8(0), value="earliest"),)),)))
    assert [int(x.error_code) for x in r.responses] == [0], r
    zk = KafkaZkClient(cluster.zookeeper_connect)
    zk.start()
    try:
        assert zk.get_entity_config("groups", group) == {"share.auto.offset.reset": "earliest"}
    finally:
        zk.close()
    from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
    from kio.static.primitive import i32

    offsets_leaders = _leaders(admin, "__consumer_offsets")
    coordinator = offsets_leaders[offsets_partition(group, len(offsets_leaders))]
    heartbeats = WireClient(cluster.address(coordinator))  # the member the coordinator checks fetches against
    hb = heartbeats.request(ShareGroupHeartbeatRequest(group_id=group, member_id="m", member_epoch=i32(0),
                                                       subscribed_topic_names=(topic,)))
    assert hb.error_code == 0, hb
    # every broker applies the change (its /config/changes watch fires, the znode is read off the loop):
    # waited for on each broker's log line, bounded, not for a fixed time
    applied = f"share group {group}: configs applied from /config/groups: share.auto.offset.reset=earliest"
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not all(applied in cluster.log(b) for b in range(3)):
        time.sleep(0.05)
    assert [b for b in range(3) if applied not in cluster.log(b)] == []
    started = time.monotonic()
    for p in range(3):
        # a partition error (its share state still loading at that leader, seen once in a full run) is
        # answered at once with no records: fetched again, bounded. A share partition that started at the
        # log end (the bug this test is for) answers no records and no error, every time, and fails
        member = _LeaderSession(cluster.address(p), group, "m", topic_id, p)
        deadline = time.monotonic() + 15
        got, errors = member.fetch_with_errors(1000)
        while not got and any(errors) and time.monotonic() < deadline:
            time.sleep(0.1)
            got, errors = member.fetch_with_errors(1000)
        member.client.close()
        assert got == [(0, 1, 1)], (p, got, errors, time.monotonic() - started)
    heartbeats.close()


def test_share_group_across_leaders_and_a_killed_leader(cluster: EmbeddedCluster) -> None:
    admin = AdminClient(cluster.confluent_config())
    topic = f"sh-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 3, 3)
    for p in range(3):  # one partition led by each broker
        if cluster.leader(topic, p) != p:
            cluster.move_leader(topic, p, to=p)
    assert _leaders(admin, topic) == {0: 0, 1: 1, 2: 2}

    _state_topic_ready(cluster, admin, topic)

    # a group and a partition whose leader is neither the group coordinator nor its share coordinator:
    # its ShareFetch members heartbeat elsewhere, and its state goes through WriteShareGroupState
    topic_id = _topic_id(admin, topic)
    offsets_leaders = _leaders(admin, "__consumer_offsets")
    state_leaders = _leaders(admin, SHARE_GROUP_STATE_TOPIC)
    choice = None
    for i in range(200):
        group = f"shg-{i}"
        coordinator = offsets_leaders[offsets_partition(group, len(offsets_leaders))]
        for p in range(3):
            state_leader = state_leaders[state_partition(ShareStateKey(group, topic_id, p), STATE_PARTITIONS)]
            if p not in (coordinator, state_leader):
                choice = (group, p)
                break
        if choice:
            break
    assert choice is not None
    group, victim = choice

    consumers = [ck.ShareConsumer({**cluster.confluent_config(), "group.id": group}) for _ in range(2)]
    for cons in consumers:
        cons.subscribe([topic])
    # the share partitions start at the log end (share.auto.offset.reset=latest): probes until each
    # partition has delivered one, so every record produced from then on is the group's
    seen: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    while {p for p, _v in seen} != {0, 1, 2}:
        assert time.monotonic() < deadline, f"probes seen only from {sorted({p for p, _ in seen})}"
        _produce(cluster, topic, {p: [b"probe"] for p in range(3)})
        _poll(consumers, seen, 0.5)

    first = {p: [b"a-%d-%d" % (p, i) for i in range(20)] for p in range(3)}
    _produce(cluster, topic, first)
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 20
    while not all(v in {x for _p, x in got} for vs in first.values() for v in vs):
        assert time.monotonic() < deadline, "not every record was delivered"
        _poll(consumers, got)
    for cons in consumers:
        cons.commit_sync()  # the implicit ACCEPTs sent, answered once durable
    real = [(p, v) for p, v in got if v != b"probe"]
    assert sorted(real) == sorted((p, v) for p, vs in first.items() for v in vs)  # each once

    # records in flight at the victim's leader when it dies: delivered, not acknowledged
    second = {p: [b"b-%d-%d" % (p, i) for i in range(10)] for p in range(3)}
    _produce(cluster, topic, second)
    before: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 20
    holder = None
    while holder is None:
        assert time.monotonic() < deadline, "nothing of the second batch was delivered"
        for cons in consumers:
            batch = [_record(m) for m in cons.poll(0.3) if m.error() is None]
            before += batch
            if any(p == victim for p, _v in batch):
                holder = cons
                break
    in_flight = {v for p, v in before if p == victim}
    cluster.kill(victim)

    after: list[tuple[int, bytes]] = []
    errors: list[str] = []
    deadline = time.monotonic() + 40
    while not set(second[victim]) <= {v for p, v in after if p == victim}:
        assert time.monotonic() < deadline, (
            f"after the kill, of {victim}'s second batch only {sorted(v for p, v in after if p == victim)}; "
            f"in flight before: {sorted(in_flight)}; poll errors: {errors}")
        _poll(consumers, after, errors=errors)
    _poll(consumers, after, 1.0, errors)  # anything accepted coming back would come now
    from_victim = [v for p, v in after if p == victim]
    # nothing accepted came back: only the second batch, which was in flight or never delivered
    assert set(from_victim) == set(second[victim]), (sorted(from_victim), errors)
    assert not any(v.startswith(b"a-") for _p, v in after)
    for cons in consumers:
        cons.close()


def _heartbeat(address: str, group: str, member_id: str, epoch: int, topics: list[str] | None) -> Any:
    from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
    from kio.static.primitive import i32

    with WireClient(address) as c:
        return c.request(ShareGroupHeartbeatRequest(group_id=group, member_id=member_id, member_epoch=i32(epoch),
                                                    subscribed_topic_names=None if topics is None else tuple(topics)))


def _describe(address: str, group: str) -> Any:
    from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest

    with WireClient(address) as c:
        (g,) = c.request(ShareGroupDescribeRequest(group_ids=(group,), include_authorized_operations=False)).groups
    return g


def _members(g: Any) -> dict[str, tuple[int, list[tuple[uuid.UUID, list[int]]]]]:
    return {m.member_id: (int(m.member_epoch), [(tp.topic_id, sorted(tp.partitions))
                                                for tp in m.assignment.topic_partitions]) for m in g.members}


def test_the_membership_moves_with_the_group_coordinator(cluster: EmbeddedCluster) -> None:
    """The group coordinator (the leader of the group's `__consumer_offsets` partition) is killed: the
    broker that leads the partition next has the group from its replica of the log, its epoch and its
    members with their assignments, and a member's heartbeat with its epoch of before is accepted there.
    Runs with whichever brokers the test above left alive (two of three)."""
    admin = AdminClient(cluster.confluent_config())
    offsets_leaders = _leaders(admin, "__consumer_offsets")
    live = sorted({b for b in offsets_leaders.values() if b >= 0})
    assert len(live) >= 2, offsets_leaders
    group = next(f"move-{i}" for i in range(1000)
                 if offsets_leaders[offsets_partition(f"move-{i}", len(offsets_leaders))] == live[0])
    coordinator, other = live[0], live[1]
    topic = f"shm-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 2, 1)
    a, b = uuid.uuid4().hex[:22], uuid.uuid4().hex[:22]
    at = cluster.address(coordinator)
    assert int(_heartbeat(at, group, a, 0, [topic]).member_epoch) == 1
    assert int(_heartbeat(at, group, b, 0, [topic]).member_epoch) == 2
    # the partitions are assigned once the group coordinator has initialized their share state (at the
    # share coordinators of their __share_group_state partitions, this broker's or through the persister)
    epochs = {a: 1, b: 2}
    deadline = time.monotonic() + 30
    while True:
        for m in (a, b):
            epochs[m] = int(_heartbeat(at, group, m, epochs[m], None).member_epoch)
        before = _describe(at, group)
        assigned = _members(before)
        if int(before.group_epoch) == epochs[a] == epochs[b] and all(
                len(assigned[m][1]) == 1 and len(assigned[m][1][0][1]) == 1 for m in (a, b)):
            break
        assert time.monotonic() < deadline, before
        time.sleep(0.2)
    epoch = epochs[a]

    cluster.kill(coordinator)
    deadline = time.monotonic() + 60
    while True:  # the member's heartbeat with its old epoch, to whichever broker leads the partition now
        leader = _leaders(admin, "__consumer_offsets").get(offsets_partition(group, len(offsets_leaders)), -1)
        address = cluster.address(leader if leader >= 0 and leader != coordinator else other)
        try:
            r = _heartbeat(address, group, a, epoch, None)
        except OSError:
            r = None
        if r is not None and r.error_code not in (14, 15, 16):  # LOAD_IN_PROGRESS, NOT_AVAILABLE, NOT_COORDINATOR
            break
        assert time.monotonic() < deadline, f"no coordinator took the group over: {r}"
        time.sleep(0.3)
    assert (r.error_code, int(r.member_epoch)) == (0, epoch), r
    after = _describe(address, group)
    assert (int(after.group_epoch), int(after.assignment_epoch), _members(after)) == (
        epoch, epoch, _members(before))
