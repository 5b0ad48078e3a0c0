"""kaflite.server.coordinators.share_membership.reconcile without sockets: the share groups of a loaded
`__consumer_offsets` shard come into memory (sessions from the shard's activation), a reloaded shard
replaces them, an unloaded one takes them out."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

from kaflite.coordinator.coordinator import GroupCoordinator
from kaflite.coordinator.offsets_topic import partition_for
from kaflite.coordinator.share import membership_records as mr
from kaflite.coordinator.share.group import ShareGroupCoordinator
from kaflite.server.coordinators import share_membership
from kaflite.server.coordinators.groups import GROUP_SERVICE
from kaflite.server.services import BrokerServices

PARTITIONS = 50
TOPICS = {"t": 2}
TID = uuid.UUID(int=7)


class _Runtime:
    def __init__(self) -> None:
        self.shards: dict[int, GroupCoordinator] = {}

    def active_shards(self) -> list[tuple[int, GroupCoordinator]]:
        return sorted(self.shards.items())


def _broker(now: int) -> Any:
    svc = SimpleNamespace(runtime=_Runtime(), partition_for=lambda g: partition_for(g, PARTITIONS))
    metadata = SimpleNamespace(topics={"t": SimpleNamespace(topic_id=TID, num_partitions=2)})
    services = BrokerServices()
    services.set(GROUP_SERVICE, svc)
    return SimpleNamespace(services=services, metadata=metadata, now_ms=lambda: now)


def _written(group_id: str, members: list[str], activated_ms: int) -> GroupCoordinator:
    """A shard holding what a broker wrote for `group_id` with these members, activated at `activated_ms`."""
    source = ShareGroupCoordinator()
    for m in members:
        source.heartbeat(group_id, m, 0, ["t"], TOPICS, now=0)
    shard = GroupCoordinator()
    shard.handle_share_group_write(group_id, mr.group_records(source.groups[group_id], {"t": TID}), 0)
    shard.activate(activated_ms)
    return shard


def test_reconcile_imports_replaces_and_drops_by_shard() -> None:
    broker = _broker(now=5000)
    svc = broker.services.get(GROUP_SERVICE)
    coord = ShareGroupCoordinator(session_timeout_ms=1000)
    p = partition_for("g", PARTITIONS)
    svc.runtime.shards[p] = _written("g", ["a", "b"], activated_ms=4000)
    share_membership.reconcile(broker, coord)
    group = coord.groups["g"]
    assert sorted(group.members) == ["a", "b"] and group.group_epoch == 2
    assert {m.deadline_ms for m in group.members.values()} == {5000}  # activation + session timeout
    assert (group.members["a"].member_epoch, group.members["a"].assigned) == (1, {"t": frozenset({0, 1})})
    # the same shard again: nothing re-imported (memory keeps its own changes)
    coord.heartbeat("g", "b", -1, None, TOPICS, now=4500)
    share_membership.reconcile(broker, coord)
    assert sorted(coord.groups["g"].members) == ["a"]
    # a reloaded shard (a new object: a failed write, an election) replaces what memory holds
    svc.runtime.shards[p] = _written("g", ["a", "b", "c"], activated_ms=4800)
    share_membership.reconcile(broker, coord)
    assert sorted(coord.groups["g"].members) == ["a", "b", "c"]
    # unloaded (another broker leads the partition): the group leaves memory
    del svc.runtime.shards[p]
    share_membership.reconcile(broker, coord)
    assert "g" not in coord.groups
