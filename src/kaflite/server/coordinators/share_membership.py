"""Share-group membership made durable: the broker's `ShareGroupCoordinator` (in memory) written to, and
rebuilt from, the share-group records of `__consumer_offsets` (kaflite.coordinator.share.membership_records),
through the group coordinator's runtime (GroupService), as Kafka's group coordinator keeps share groups.

Rules (tests/server/test_share_membership_reconcile.py, tests/groups/test_share_membership.py,
tests/cluster/test_share_cluster.py):
- the records of a share group live in its `__consumer_offsets` partition (`partition_for(group)`, as a
  consumer group's); that partition's GroupCoordinator shard holds them as written (`share_records`,
  replayed at load and by every step, so a shard always holds exactly what its log holds);
- `reconcile` when a shard changes, never on a request: `follow` (called when the share coordinator is
  made) registers it as a listener of the group coordinator's shards (groups.SHARD_LISTENERS: the runtime
  calls it when a `__consumer_offsets` shard becomes active or is unloaded, whether the GroupService
  exists yet or is made later) and runs it once at once (shards active before the share coordinator
  existed). It imports the share groups of a partition whose active shard this broker has not imported
  yet (loaded at start-up, after an election, or reloaded after a failed write), replacing what memory
  holds of that partition's share groups by the groups its records describe, every member's session
  deadline its group's session timeout after the shard's activation (Kafka restarts session timers at
  load); a partition no longer active here (unloaded: another broker leads it, or reloading) takes its
  share groups out of memory;
- `write` after a change: one step per touched group on its shard, writing the difference between the
  group's records now and the shard's, answered once committed. A group the coordinator names with the
  members whose records may have changed (`take_touched`) is written in part: its own records and those
  members' are built and diffed, every other member's kept as written (a heartbeat's write costs O(1) in
  the group's size, not O(members): bench/share_heartbeat_bench.py); it is written whole when no members
  are named, and every group is at its next write after the topic ids changed since the last write
  (`TOPIC_IDS`: a topic created or deleted; member records name topics by id, and a topic created again
  under a name gets another). The writers (each through `write_touched`,
  or `flush_soon` where the caller cannot wait): ShareGroupHeartbeat (handlers/share.py: a join, leave,
  epoch, assignment, subscription or client metadata change, and the partitions it moved to
  initializing, key 15, before the answer; one that changed none of the group's records writes nothing);
  members removed by a session expiry (found by any call's `expire`, a ShareFetch's too) at the next of
  those or of ShareGroupDescribe, ListGroups and the rebalance history (`flush_soon` for the last two);
  DeleteGroups (handlers/share_admin.py's `delete_share_group`: the
  tombstones); and the other writers of key 15 (ShareGroupStatePartitionMetadata): share_initialize.py
  when an initialization ends (partitions initialized, or out of initializing after a failure), a topic
  deleted (share_state.py's `_forget_topics`: every group's record of it, `flush_soon`, not waited for),
  AlterShareGroupOffsets (its partitions initialized) and DeleteShareGroupOffsets (its topics neither
  initialized nor initializing), both written before their answer (share_admin.py's `_write_records`);
  a failed write answers the runtime's error (NOT_COORDINATOR for a storage error, COORDINATOR_NOT_AVAILABLE
  ...) and the partition's share groups are imported again from its shard, which holds what was written
  (the runtime reloads it after a failed write: its listener call re-imports them; when that has not
  happened yet, the write drops them and reconciles itself), so the change is gone from memory too;
- `holds(group)`: this broker has imported the group's partition, so memory holds the group exactly when
  it exists (share_initialize.py tells a group deleted during an initialization by it);
- `prepare` for a heartbeat: the group's shard must be active here (else its error: NOT_COORDINATOR,
  COORDINATOR_LOAD_IN_PROGRESS), and `__consumer_offsets` is created first when missing (single node).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from kaflite.coordinator.share import membership_records as mr
from kaflite.coordinator.share.group import ShareGroupCoordinator
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.coordinators.broker_api import ShareBroker
from kaflite.server.coordinators.groups import GROUP_SERVICE, SHARD_LISTENERS, GroupService
from kaflite.server.services import Slot

__all__ = ["follow", "flush_soon", "holds", "prepare", "reconcile", "write", "write_touched"]

log = logging.getLogger("kaflite.share")

# partition -> the shard object its share groups were imported from
LOADED: Slot[dict[int, Any]] = Slot("share_membership_loaded")
# the topic ids (name -> id) of the last write: when they changed, every group is written whole
TOPIC_IDS: Slot[dict[str, uuid.UUID]] = Slot("share_membership_topic_ids")
# the share coordinator `follow` keeps in step with the shards, and its listener (in SHARD_LISTENERS)
FOLLOWING: Slot[tuple[ShareGroupCoordinator, Any]] = Slot("share_membership_following")


def _service(broker: ShareBroker) -> GroupService | None:
    return broker.services.get(GROUP_SERVICE)


def _loaded(broker: ShareBroker) -> dict[int, Any]:
    return broker.services.get_or_make(LOADED, dict)


def _drop(coord: ShareGroupCoordinator, svc: GroupService, partition: int) -> None:
    for group_id in [g for g in coord.groups if svc.partition_for(g) == partition]:
        del coord.groups[group_id]


def holds(broker: ShareBroker, group_id: str) -> bool:
    """This broker coordinates the group and has imported its partition's share groups: memory then holds
    the group exactly when the group exists (absent: never created, or deleted)."""
    svc = _service(broker)
    return svc is not None and svc.partition_for(group_id) in _loaded(broker)


def follow(broker: ShareBroker, coord: ShareGroupCoordinator) -> None:
    """From now on `reconcile` `coord` whenever a `__consumer_offsets` shard becomes active or is unloaded
    here, and once now (see the rules). Called again with the same coordinator it does nothing; with
    another (a coordinator replaced), that one is followed instead and imports every shard afresh."""
    following = broker.services.get(FOLLOWING)
    if following is not None and following[0] is coord:
        return
    listeners = broker.services.get_or_make(SHARD_LISTENERS, list)
    if following is not None:
        if following[1] in listeners:
            listeners.remove(following[1])
        _loaded(broker).clear()  # what the former coordinator imported is not in this one

    def changed(_partition: int, _shard: Any) -> None:
        reconcile(broker, coord)
    listeners.append(changed)
    broker.services.set(FOLLOWING, (coord, changed))
    reconcile(broker, coord)


def reconcile(broker: ShareBroker, coord: ShareGroupCoordinator) -> None:
    """Import the share groups of newly active shards, drop those of shards no longer active here (the
    listener `follow` registers: run on a shard's load or unload, not per request)."""
    svc = _service(broker)
    if svc is None:
        return
    loaded = _loaded(broker)
    active = dict(svc.runtime.active_shards())
    for partition in [p for p, shard in loaded.items() if active.get(p) is not shard]:
        del loaded[partition]
        _drop(coord, svc, partition)
    fresh = [(p, shard) for p, shard in active.items() if p not in loaded]
    if not fresh:
        return
    names: dict[uuid.UUID, str] = {t.topic_id: n for n, t in broker.metadata.topics.items()}
    now = broker.now_ms()
    for partition, shard in fresh:
        _drop(coord, svc, partition)
        start = shard.activated_ms if shard.activated_ms is not None else now
        for group_id, records in shard.share_records.items():
            group = mr.group_from_records(group_id, records, names, start + coord.session_timeout_for(group_id))
            if group is not None:
                coord.groups[group_id] = group
        loaded[partition] = shard


async def prepare(broker: ShareBroker, coord: ShareGroupCoordinator, group_id: str) -> ErrorCode | None:
    """Before a heartbeat: the group coordinator started (its topic created when missing) and its start-up
    loads done (each shard's share groups imported by `follow`'s listener as it became active); the error
    to answer when the group's shard is not active here."""
    svc = await GroupService.of_async(broker)
    if not svc.loaded.done():
        await asyncio.shield(svc.loaded)  # the partitions loading at start-up
    try:
        svc.shard(group_id)
    except KafkaError as e:
        return e.code
    return None


async def write(broker: ShareBroker, coord: ShareGroupCoordinator, group_ids: Iterable[str],
                members: Mapping[str, frozenset[str] | None] | None = None) -> dict[str, ErrorCode]:
    """Write the groups' records (see the rules); the error per group whose write failed. `members`: per
    group, the members whose records may have changed (None, or a group not in it: the whole group)."""
    svc = _service(broker)
    if svc is None:
        return {}
    ids = {name: t.topic_id for name, t in broker.metadata.topics.items()}
    seen = broker.services.get_or_make(TOPIC_IDS, dict)
    group_ids = sorted(set(group_ids))
    if ids != seen:  # the member records of every group may name a topic by an id no longer its own
        coord.rewrite_all(written=group_ids)  # those written whole now; the others at their next write
        members = None
        seen.clear()
        seen.update(ids)
    loaded = _loaded(broker)
    steps: list[tuple[str, asyncio.Future[Any]]] = []
    ran_on: dict[str, Any] = {}  # group -> the shard its step ran on
    for group_id in group_ids:
        if svc.partition_for(group_id) not in loaded:
            continue  # not a group this broker coordinates (its memory of it was dropped)
        def op(shard: Any, now: int, group_id: str = group_id) -> Any:
            ran_on[group_id] = shard
            group = coord.groups.get(group_id)
            changed = None if members is None or group is None else members.get(group_id)
            if changed is None:
                return shard.handle_share_group_write(group_id, mr.group_records(group, ids), now)
            return shard.handle_share_group_write(group_id, mr.group_records(group, ids, changed), now,
                                                  mr.record_keys(group_id, changed))
        # the runtime runs the step now, before this coroutine first waits: the records are those of the
        # change just made, with no other request (a re-import by `reconcile`) in between
        steps.append((group_id, svc.runtime.write(svc.partition_for(group_id), op)))
    errors: dict[str, ErrorCode] = {}
    for group_id, fut in steps:
        try:
            await fut
            code = ErrorCode.none
        except KafkaError as e:
            code = e.code
        if code is not ErrorCode.none:
            log.warning("share group %s: writing its membership failed (%s); it is read again from %s", group_id,
                        ErrorCode(code).name.upper(), "__consumer_offsets")
            errors[group_id] = code
            partition = svc.partition_for(group_id)
            ran = ran_on.get(group_id)
            if partition in loaded and (ran is None or loaded[partition] is ran):
                # memory still holds what was imported from the shard the change failed on (the
                # runtime's reload, whose listener call re-imports, has not happened): drop it and import
                # what the active shard holds, if any
                del loaded[partition]
                _drop(coord, svc, partition)
                reconcile(broker, coord)
    return errors


async def after_pending_writes(broker: ShareBroker, group_id: str) -> ErrorCode | None:
    """For a heartbeat that changed none of its group's records (so wrote nothing): wait until every earlier
    write of the group's partition is committed, as its answer may show what such a write changed (another
    member's join); the error to answer when the shard stopped being active here or that write failed."""
    svc = _service(broker)
    if svc is None:
        return None
    try:
        await svc.runtime.write(svc.partition_for(group_id), lambda shard, now: shard.handle_read_barrier(now))
    except KafkaError as e:
        return e.code
    return None


async def write_touched(broker: ShareBroker, coord: ShareGroupCoordinator) -> dict[str, ErrorCode]:
    """`write` of every group changed since the last write (`coord.touched`), in part where the coordinator
    names the members changed (`coord.take_touched()`)."""
    touched = coord.take_touched()
    return await write(broker, coord, touched, touched) if touched else {}


def flush_soon(broker: ShareBroker, coord: ShareGroupCoordinator) -> asyncio.Task[Any] | None:
    """`write_touched` from code that cannot wait (a member expired while listing): not waited for (a
    background job of the broker's services, cancelled at its stop), a failed write logged (and the memory
    re-imported) by `write`; the task, None when there is nothing to write."""
    if not coord.touched or _service(broker) is None:
        return None
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # a tool's call off the event loop: the next heartbeat or describe writes them
        return None
    return broker.services.spawn(write_touched(broker, coord), name="share-membership-flush")
