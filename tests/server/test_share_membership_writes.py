"""kaflite.server.coordinators.share_membership.write without sockets: a heartbeat's write builds and writes
the records it changed (the group's own and its member's, and the targets a rebalance moved), not the whole
group's; the shard then holds exactly the group's records, and a broker importing them gets the same group."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from types import SimpleNamespace
from typing import Any

from kaflite.coordinator.coordinator import GroupCoordinator
from kaflite.coordinator.offsets_topic import partition_for
from kaflite.coordinator.share import membership_records as mr
from kaflite.coordinator.share.group import ShareGroup, ShareGroupCoordinator
from kaflite.server.coordinators import share_membership
from kaflite.server.coordinators.groups import GROUP_SERVICE
from kaflite.server.services import BrokerServices

PARTITIONS = 50
TOPICS = {"t": 6, "u": 6}


class _Runtime:
    """The group coordinator runtime reduced to what `write` uses: a step runs at once on the shard (as the
    runtime's does, before the caller first waits), its records counted, its answer already committed."""

    def __init__(self) -> None:
        self.shards: dict[int, GroupCoordinator] = {}
        self.built: list[int] = []  # records handed to each share-group write step
        self.written: list[int] = []  # records each step wrote

    def active_shards(self) -> list[tuple[int, GroupCoordinator]]:
        return sorted(self.shards.items())

    def write(self, partition: int, op: Any) -> asyncio.Future[Any]:
        shard = self.shards[partition]
        real = shard.handle_share_group_write

        def counting(group_id: str, records: Any, now: int, *covered: Any) -> Any:
            self.built.append(len(records))
            result = real(group_id, records, now, *covered)
            self.written.append(len(result.records))
            return result
        shard.handle_share_group_write = counting  # type: ignore[method-assign]
        try:
            result = op(shard, 0)
        finally:
            del shard.handle_share_group_write
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(result.response())
        return fut


def _broker(ids: dict[str, uuid.UUID]) -> Any:
    svc = SimpleNamespace(runtime=_Runtime(), partition_for=lambda g: partition_for(g, PARTITIONS))
    svc.runtime.shards[partition_for("g", PARTITIONS)] = GroupCoordinator()
    metadata = SimpleNamespace(topics={n: SimpleNamespace(topic_id=i) for n, i in ids.items()})
    services = BrokerServices()
    services.set(GROUP_SERVICE, svc)
    return SimpleNamespace(services=services, metadata=metadata, now_ms=lambda: 0)


def _same(a: ShareGroup, b: ShareGroup) -> bool:
    def norm(g: ShareGroup) -> ShareGroup:
        return dataclasses.replace(g, members={m: dataclasses.replace(mb, deadline_ms=0)
                                               for m, mb in g.members.items()})
    return norm(a) == norm(b)


def test_a_rebalance_writes_per_member_records_and_a_broker_importing_them_gets_the_same_group() -> None:
    """200 members join one at a time, each join followed by a heartbeat of every member already in (to
    the new epoch): before, every write built (and diffed) the whole group's records, O(members) each;
    now a member's catch-up heartbeat builds its own and the group's (at most 3 + 5) and writes one."""
    ids = {"t": uuid.UUID(int=1), "u": uuid.UUID(int=2)}
    broker = _broker(ids)
    runtime = broker.services.get(GROUP_SERVICE).runtime
    coord = ShareGroupCoordinator(max_size=200)
    share_membership.reconcile(broker, coord)  # the (empty) shard imported: this broker writes its groups

    async def scenario() -> list[tuple[int, int]]:
        catch_up: list[tuple[int, int]] = []  # (records built, records written) of each catch-up write
        epochs: dict[str, int] = {}
        for i in range(200):
            member = f"member-{i:03d}"
            epochs[member] = coord.heartbeat("g", member, 0, ["t", "u"], TOPICS, now=i).member_epoch
            assert await share_membership.write_touched(broker, coord) == {}
            for other in sorted(epochs)[:i]:
                answer = coord.heartbeat("g", other, epochs[other], None, TOPICS, now=i)
                epochs[other] = answer.member_epoch
                before = len(runtime.built)
                assert await share_membership.write_touched(broker, coord) == {}
                if len(runtime.built) > before:
                    catch_up.append((runtime.built[-1], runtime.written[-1]))
        return catch_up

    catch_up = asyncio.run(scenario())
    assert len(catch_up) > 10_000  # one write per member whose epoch moved
    assert max(built for built, _w in catch_up) <= 8  # before: the whole group's records (up to 605)
    assert {written for _b, written in catch_up} == {1}  # its current assignment (key 14)
    shard = runtime.shards[partition_for("g", PARTITIONS)]
    group = coord.groups["g"]
    assert shard.share_records["g"] == mr.group_records(group, ids)
    # a broker starting again imports the group from the shard: the same group
    fresh = GroupCoordinator()
    for key, value in shard.share_records["g"].items():
        fresh.replay(*_bytes(key, value))
    imported = mr.group_from_records("g", fresh.share_records["g"], {i: n for n, i in ids.items()}, 0)
    assert imported is not None and _same(imported, group)


def _bytes(key: Any, value: Any) -> tuple[bytes, bytes | None]:
    from kaflite.coordinator.records import encode_key, encode_value
    return encode_key(key), None if value is None else encode_value(value)


def test_a_topic_created_again_under_its_name_has_every_members_records_written_again() -> None:
    """Member records name topics by id: after the ids changed (a topic deleted and created again between
    two heartbeats, so no member's assignment changed by name), the next write of the group is whole,
    so no record keeps the old id (which a restart would drop, and the assignment with it)."""
    ids = {"t": uuid.UUID(int=1), "u": uuid.UUID(int=2)}
    broker = _broker(ids)
    runtime = broker.services.get(GROUP_SERVICE).runtime
    coord = ShareGroupCoordinator()
    share_membership.reconcile(broker, coord)

    async def scenario() -> None:
        epochs: dict[str, int] = {}
        for member in ("a", "b", "c"):
            epochs[member] = coord.heartbeat("g", member, 0, ["t", "u"], TOPICS, now=0).member_epoch
            await share_membership.write_touched(broker, coord)
        for member in ("a", "b"):
            coord.heartbeat("g", member, epochs[member], None, TOPICS, now=1)
            await share_membership.write_touched(broker, coord)
        broker.metadata.topics["t"] = SimpleNamespace(topic_id=uuid.UUID(int=3))  # "t" created again
        coord.heartbeat("g", "c", epochs["c"], None, TOPICS, now=2, client_id="c-2")  # c's own record only
        await share_membership.write_touched(broker, coord)
        assert runtime.written[-1] > 1  # a, b and c's assignments by the new id, c's client id

    asyncio.run(scenario())
    shard = runtime.shards[partition_for("g", PARTITIONS)]
    now_ids = {"t": uuid.UUID(int=3), "u": uuid.UUID(int=2)}
    assert shard.share_records["g"] == mr.group_records(coord.groups["g"], now_ids)
    imported = mr.group_from_records("g", shard.share_records["g"], {i: n for n, i in now_ids.items()}, 0)
    assert imported is not None and _same(imported, coord.groups["g"])


def test_a_heartbeat_that_changes_nothing_is_answered_only_after_the_groups_earlier_writes_commit() -> None:
    """The order itself, at the coordinator runtime (a real CoordinatorRuntime over a writer whose commits
    the test releases by hand; tests/coordinator/test_runtime.py's HandWriter): b's join and a's move to
    b's epoch are written, not committed; a's next heartbeat changes nothing (no records), but its answer
    shows the epoch those writes made, so it is released only once both are committed, not before, and not
    after the first only (as handlers/share.py answers it: `after_pending_writes` when nothing changed).
    tests/groups/test_share_wire.py's test of the same name checks, over the wire, that the step is taken."""
    from coordinator.test_runtime import HandWriter, make_runtime, settle

    async def body() -> None:
        writer = HandWriter()
        runtime = make_runtime(writer)  # one __consumer_offsets partition: every group's is 0
        await runtime.load(0)
        services = BrokerServices()
        services.set(GROUP_SERVICE, SimpleNamespace(runtime=runtime, partition_for=lambda _g: 0))
        broker: Any = SimpleNamespace(services=services, now_ms=lambda: 0, metadata=SimpleNamespace(
            topics={"t": SimpleNamespace(topic_id=uuid.UUID(int=1))}))
        coord = ShareGroupCoordinator()
        share_membership.follow(broker, coord)  # the active shard imported: this broker writes group g

        async def heartbeat(member: str, epoch: int, topics: list[str] | None) -> tuple[int, bool]:
            """handlers/share.py's order: the step, its write, the barrier when nothing changed."""
            answer = coord.heartbeat("g", member, epoch, topics, {"t": 2}, now=0)
            changed = "g" in coord.touched
            assert await share_membership.write_touched(broker, coord) == {}
            if not changed:
                assert await share_membership.after_pending_writes(broker, "g") is None
            return answer.member_epoch, changed

        first = asyncio.ensure_future(heartbeat("a", 0, ["t"]))
        await settle()
        writer.commit_all()
        epoch_a, _ = await first
        join = asyncio.ensure_future(heartbeat("b", 0, ["t"]))  # written, held uncommitted
        await settle()
        move = asyncio.ensure_future(heartbeat("a", epoch_a, None))  # a moves to b's epoch: written, held
        await settle()
        assert not join.done() and not move.done() and len(writer.uncommitted) == 2
        quiet = asyncio.ensure_future(heartbeat("a", epoch_a + 1, None))  # changes nothing: no records
        await settle()
        assert len(writer.uncommitted) == 2 and not quiet.done()  # held behind both writes
        _partition, join_commit = writer.uncommitted.pop(0)
        join_commit.set_result(None)  # b's join committed; a's move not yet
        await settle()
        assert join.done() and not move.done() and not quiet.done()
        writer.commit_all()
        assert await move == (epoch_a + 1, True)
        assert await quiet == (epoch_a + 1, False)

    asyncio.run(asyncio.wait_for(body(), 10))


def test_flush_soon_is_a_job_of_the_brokers_services_held_until_written() -> None:
    """A write nobody waits for (an expiry noticed by ListGroups) runs as `BrokerServices.spawn`'s task:
    held until done, cancelled at the broker's stop (tests/server/test_services.py)."""
    ids = {"t": uuid.UUID(int=1), "u": uuid.UUID(int=2)}
    broker = _broker(ids)
    runtime = broker.services.get(GROUP_SERVICE).runtime
    coord = ShareGroupCoordinator()
    share_membership.reconcile(broker, coord)

    async def scenario() -> tuple[bool, bool]:
        coord.heartbeat("g", "a", 0, ["t"], TOPICS, now=0)
        task = share_membership.flush_soon(broker, coord)
        held = task is not None and broker.services.spawned() == [task]
        assert task is not None
        await task
        return held, share_membership.flush_soon(broker, coord) is None  # nothing left to write

    held, nothing_more = asyncio.run(scenario())
    assert held and nothing_more
    assert runtime.shards[partition_for("g", PARTITIONS)].share_records["g"] == mr.group_records(
        coord.groups["g"], ids)
