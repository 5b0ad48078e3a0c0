"""A share group's partitions are assigned once their share state is initialized (Kafka 4.1+): the group
coordinator initializes a new partition's state at the share coordinator, records it in the group's
ShareGroupStatePartitionMetadata (key 15 of `__consumer_offsets`), and assigns it at a later heartbeat.
server/coordinators/share_initialize.py, kaflite.coordinator.share.group's rules."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from groups.test_share_wire import Member, _alter_group, new_topic
from helpers import free_port
from kaflite.coordinator.share.partition import ShareSnapshot, StateBatch
from kaflite.coordinator.share.state_records import ShareStateKey
from kaflite.coordinator.share.state_shard import ShareStateShard
from kaflite.protocol.errors import ErrorCode
from kaflite.server.coordinators import share_initialize, share_membership, share_state
from kaflite.server.coordinators.share_initialize import _if_absent
from kaflite.server.coordinators.share_state import SHARE_COORDINATOR
from kaflite.server.embedded import EmbeddedBroker
from kaflite.server.handlers import share, share_admin
from kaflite.server.share_persister import PersistedSummary


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


def _members(b: EmbeddedBroker, group: str) -> int:
    def count() -> int:
        coord = b.server.broker.services.get(SHARE_COORDINATOR)
        g = coord.groups.get(group) if coord is not None else None
        return 0 if g is None else len(g.members)
    return int(b.call(count))


def test_two_share_consumers_joining_apart_each_get_records(broker: EmbeddedBroker) -> None:
    """librdkafka's 0172 `do_test_mixed_ack_mode_same_group`: 400 records on 4 partitions, two members
    created apart. The second is created as soon as the first is a member of the group: before, the first
    one's join assigned it all 4 partitions and its first ShareFetch acquired all 400 (MaxRecords 500), so
    the second got nothing; now the join only starts the partitions' initialization, and they are assigned
    at a later heartbeat, over both members."""
    topic = "init-two"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(10)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(400):
        p.produce(topic, b"%d" % i, partition=i % 4)
    assert p.flush(10) == 0
    _alter_group(broker, "init-two-g", share_auto_offset_reset="earliest")
    config = {"bootstrap.servers": broker.bootstrap, "group.id": "init-two-g"}
    first = ck.ShareConsumer(config)
    first.subscribe([topic])
    got: dict[int, list[bytes]] = {0: [], 1: []}
    deadline = time.monotonic() + 15
    while _members(broker, "init-two-g") < 1:
        got[0] += [m.value() for m in first.poll(0.005) if m.error() is None]
        assert time.monotonic() < deadline, "the first consumer never joined"
    second = ck.ShareConsumer(config)
    second.subscribe([topic])
    consumers = [first, second]
    try:
        deadline = time.monotonic() + 30
        while sum(len(v) for v in got.values()) < 400 and time.monotonic() < deadline:
            for i, c in enumerate(consumers):
                got[i] += [m.value() for m in c.poll(0.2) if m.error() is None]
        assert sorted(got[0] + got[1]) == sorted(b"%d" % i for i in range(400))  # each once
        assert got[0] and got[1], (len(got[0]), len(got[1]))  # before: (400, 0)
    finally:
        for c in consumers:
            c.close()


def test_initialization_leaves_a_state_written_before_it_as_it_is() -> None:
    """ShareFetch does not check the assignment (as Kafka's): a raw client may fetch a partition whose
    initialization is still under way, and its share partition writes state first. The initialization's
    step then writes nothing (no sockets: the step on a shard)."""
    key = ShareStateKey("g", uuid.UUID(int=7), 0)
    shard = ShareStateShard()
    shard.write(key, ShareSnapshot(3, (StateBatch(3, 4, 2, 1),)), now_ms=1)
    before = shard.states[key]
    result = _if_absent(key, 5)(shard, 2)
    assert result.records == [] and result.responses[0][1].error is ErrorCode.none
    assert shard.states[key] is before and before.snapshot.start_offset == 3
    # a key without state: a snapshot with the state epoch and Kafka's uninitialized start offset -1
    other = ShareStateKey("g", uuid.UUID(int=7), 1)
    assert len(_if_absent(other, 5)(shard, 3).records) == 1
    assert (shard.states[other].state_epoch, shard.states[other].snapshot.start_offset) == (5, -1)


def test_the_initialized_partitions_survive_a_restart(tmp_path: Path) -> None:
    """The group's key 15 record is replayed at load: after a restart the partitions are initialized, so a
    member joining is assigned them at its join, nothing initialized again."""
    data, port = tmp_path / "data", free_port()
    with EmbeddedBroker(data_dir=data, port=port) as b:
        topic, tid = new_topic(b, 2)
        m = Member(b, "init-restart", [topic])
        assert m.assignment == []
        m.wait_assigned()
        assert m.assignment == [(tid, [0, 1])]
        m.epoch = -1  # leaves: the next member is alone in the group
        assert m.heartbeat().error_code == 0
        m.close()
    with EmbeddedBroker(data_dir=data, port=port) as b:
        n = Member(b, "init-restart", [topic])
        assert n.assignment == [(tid, [0, 1])]

        def initialized() -> dict[str, frozenset[int]]:
            g = b.server.broker.services.get(SHARE_COORDINATOR).groups["init-restart"]
            return dict(g.initialized) if not g.initializing else {}
        assert b.call(initialized) == {topic: frozenset({0, 1})}
        n.close()


class _ElsewherePersister:
    """The share coordinator of another broker (the persister's calls, no sockets), where DeleteGroups'
    DeleteShareGroupState lands before the initialization's InitializeShareGroupState: `meanwhile` runs
    between the initialization's summary and its write."""

    def __init__(self, meanwhile: Any) -> None:
        self.states: dict[ShareStateKey, tuple[int, int]] = {}  # key -> (state epoch, start offset)
        self.meanwhile = meanwhile

    async def summary(self, key: ShareStateKey) -> PersistedSummary:
        epoch, start = self.states.get(key, (0, -1))
        return PersistedSummary(epoch, start, -1)

    async def initialize(self, key: ShareStateKey, state_epoch: int, start_offset: int) -> None:
        self.meanwhile()
        self.states[key] = (state_epoch, start_offset)

    async def delete(self, key: ShareStateKey) -> None:
        self.states.pop(key, None)


def test_an_initialization_finishing_after_its_group_was_deleted_leaves_no_state(broker: EmbeddedBroker) -> None:
    """A join starts its partitions' initialization once its records are committed; the member leaving
    and DeleteGroups (tombstones for every state of the group) may come before that starts, or, when the
    state is another broker's, between the initialization's summary and its write. Before, either left a
    start-offset -1 state of the deleted group (it still showed as a share group); now the first writes
    nothing and the second deletes what it wrote."""
    topic, _tid = new_topic(broker, 2)
    b = broker.server.broker

    async def scenario() -> tuple[bool, bool, dict[ShareStateKey, tuple[int, int]]]:
        coord = share.coordinator(b)
        await share_state.ShareStateService.prepare(b)
        topics = {topic: 2}

        async def join(group: str) -> Any:
            assert await share_membership.prepare(b, coord, group) is None
            answer = coord.heartbeat(group, "m", 0, [topic], topics, b.now_ms())
            assert answer.initialize == {topic: frozenset({0, 1})}
            assert await share_membership.write_touched(b, coord) == {}  # what the handler waits for
            return answer

        async def delete(group: str) -> None:
            coord.heartbeat(group, "m", -1, None, topics, b.now_ms())
            assert await share_admin.delete_share_group(b, group) is ErrorCode.none

        async def initialized() -> None:
            await asyncio.gather(*b.services.spawned())

        # 1. deleted between the join's commit and the initialization's start (this broker's shard)
        answer = await join("init-deleted-before")
        await delete("init-deleted-before")
        share_initialize.start(b, coord, "init-deleted-before", answer.initialize, answer.state_epoch,
                               lambda: share.persister(b))
        await initialized()
        before = share_admin.is_share_group(b, "init-deleted-before")
        # 2. the state held by another broker, the group deleted while its initialization is under way
        # (DeleteGroups' own deletes, sent before, found nothing there)
        answer = await join("init-deleted-during")
        svc = share_state.ShareStateService.of(b)
        other = _ElsewherePersister(lambda: (coord.heartbeat("init-deleted-during", "m", -1, None, topics, 0),
                                             coord.delete_group("init-deleted-during")))
        svc.here = lambda _partition: False  # type: ignore[method-assign]
        try:
            share_initialize.start(b, coord, "init-deleted-during", answer.initialize, answer.state_epoch,
                                   lambda: other)  # type: ignore[arg-type,return-value]
            await initialized()
        finally:
            del svc.here
        await share_membership.write_touched(b, coord)  # the deleted group's tombstones
        return before, "init-deleted-during" in coord.groups, other.states

    before, during_still_a_group, elsewhere = asyncio.run_coroutine_threadsafe(
        scenario(), broker._loop).result(30)  # noqa: SLF001
    assert not before  # before the fix: True (a -1 state of each partition)
    assert not during_still_a_group and elsewhere == {}  # before the fix: both partitions' -1 states


def test_taking_back_an_initialization_deletes_only_its_own_state() -> None:
    """The step that removes what an initialization of a deleted group wrote on this broker's shard: the
    start-offset -1 state of its state epoch goes; a state with a start offset, batches or another state
    epoch (a share partition's, a group created again) stays (no sockets: the step on a shard)."""
    tid = uuid.UUID(int=8)
    shard = ShareStateShard()
    ours, other_epoch, fetched = (ShareStateKey("g", tid, p) for p in range(3))
    _if_absent(ours, 4)(shard, 1)
    _if_absent(other_epoch, 5)(shard, 1)
    shard.write(fetched, ShareSnapshot(3, (StateBatch(3, 4, 2, 1),)), now_ms=1)
    for key in (ours, other_epoch, fetched, ShareStateKey("g", tid, 9)):
        share_initialize._delete_if_ours(key, 4)(shard, 2)  # noqa: SLF001
    assert set(shard.states) == {other_epoch, fetched}
