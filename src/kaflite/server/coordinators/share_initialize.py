"""The group coordinator initializing the share-partition state of a share group's new partitions before
they are assigned, as Kafka 4.1+'s GroupCoordinatorService does after a ShareGroupHeartbeat (the decisions
are kaflite.coordinator.share.group's: which partitions, when they are assignable).

Rules (tests/groups/test_share_initialize.py, tests/coordinator/share/test_group.py):
- `start(broker, coord, group, partitions, state epoch)` runs after the heartbeat that put the partitions
  in `initializing` is written (key 15 committed) and answered: never waited for by a request, nothing on
  the event loop blocks (the local path is one coordinator-runtime step, the remote one RPCs);
- each partition is initialized at the share coordinator holding its `__share_group_state` partition:
  this broker's shard by a runtime step, another broker's by InitializeShareGroupState (83) through the
  persister, with the group epoch as state epoch and start offset -1 (Kafka's uninitialized start offset:
  the share-partition leader starts it from share.auto.offset.reset at its first fetch, as kaflite did
  before). A partition that already has state there (a share partition fetched before it was assigned,
  AlterShareGroupOffsets, a group from before key 15 was written) is left as it is and counts as
  initialized (a difference from Kafka, whose InitializeShareGroupState writes a new empty snapshot: a
  fetch of a partition not yet assigned is possible in kaflite's raw-protocol tests and tools);
- an initialization for a group gone (`_gone`: this broker holds the group's `__consumer_offsets`
  partition and has no group of that id, or one with a group epoch below the state epoch, so deleted,
  perhaps created again) writes nothing; one whose group went while its states were written (DeleteGroups
  in between, whose tombstones may have come first) deletes every state it may have written that is still
  its own (state epoch its own, start offset -1, no batches), here by a runtime step, elsewhere by
  DeleteShareGroupState, and records nothing: no start-offset -1 state outlives its deleted group
  (tests/groups/test_share_initialize.py::test_an_initialization_finishing_after_its_group_was_deleted_leaves_no_state);
- then the group's partitions that succeeded move to `initialized`, those that failed (an error, the
  topic gone) out of `initializing` (sent again at the next heartbeat), and the group's key 15 record is
  written (`share_membership.write_touched`); a failure of that write is logged there and the group is
  imported again from its shard (its partitions then initializing are sent again at the next heartbeat).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from kaflite.coordinator.share.group import ShareGroupCoordinator
from kaflite.coordinator.share.state_records import ShareStateKey
from kaflite.coordinator.share.state_shard import ShareStateResult, ShareStateShard, StateAnswer
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.coordinators import share_membership, share_state
from kaflite.server.coordinators.broker_api import ShareBroker
from kaflite.server.share_persister import SharePersister

__all__ = ["UNINITIALIZED_START_OFFSET", "start"]

log = logging.getLogger("kaflite.share")

UNINITIALIZED_START_OFFSET = -1  # Kafka's PartitionFactory.UNINITIALIZED_START_OFFSET


def start(broker: ShareBroker, coord: ShareGroupCoordinator, group_id: str,
          partitions: Mapping[str, frozenset[int]], state_epoch: int,
          persister: Callable[[], SharePersister]) -> asyncio.Task[None] | None:
    """Initialize the partitions' state in the background (see the rules: a job of the broker's services,
    cancelled at its stop); `persister` gives the broker's persister (made by the handlers) for state held
    by another broker. The task (None: no partition)."""
    if not partitions:
        return None
    return broker.services.spawn(_initialize(broker, coord, group_id, dict(partitions), state_epoch, persister),
                                 name=f"share-initialize-{group_id}")


def _if_absent(key: ShareStateKey, state_epoch: int) -> Any:
    """A runtime step: the key's state initialized unless it has one (then nothing is written)."""
    def step(shard: ShareStateShard, now: int) -> ShareStateResult:
        if key in shard.states:
            return ShareStateResult(responses=[(None, StateAnswer(ErrorCode.none))])
        return shard.initialize(key, state_epoch, UNINITIALIZED_START_OFFSET, now)
    return step


async def _remote_if_absent(per: SharePersister, key: ShareStateKey, state_epoch: int) -> None:
    held = await per.summary(key)
    if held.start_offset >= 0 or held.state_epoch > 0:
        return  # it has state already (see the rules)
    await per.initialize(key, state_epoch, UNINITIALIZED_START_OFFSET)


async def _initialize(broker: ShareBroker, coord: ShareGroupCoordinator, group_id: str,
                      partitions: dict[str, frozenset[int]], state_epoch: int,
                      persister: Callable[[], SharePersister]) -> None:
    if _gone(broker, coord, group_id, state_epoch):
        return  # deleted since the heartbeat that asked for this (its answer waited for its own write)
    pending: list[tuple[str, int, Any]] = []
    failed: dict[str, set[int]] = {}
    svc = share_state.ShareStateService.of(broker)
    for topic, parts in sorted(partitions.items()):
        for p in sorted(parts):
            key = svc.key(group_id, topic, p)
            if key is None:  # the topic is gone
                failed.setdefault(topic, set()).add(p)
                continue
            partition = svc.partition_for(key)
            if svc.here(partition):
                pending.append((topic, p, svc.runtime.write(partition, _if_absent(key, state_epoch))))
            else:
                pending.append((topic, p, asyncio.ensure_future(_remote_if_absent(persister(), key, state_epoch))))
    done: dict[str, set[int]] = {}
    for topic, p, fut in pending:
        try:
            answer = await fut
            code = answer.error if isinstance(answer, StateAnswer) else ErrorCode.none
        except KafkaError as e:
            code = e.code
        except Exception:  # noqa: BLE001 - one partition's failure must not lose the others' answers
            log.exception("share group %s: initializing the state of %s-%d failed", group_id, topic, p)
            code = ErrorCode.unknown_server_error
        if code is ErrorCode.none:
            done.setdefault(topic, set()).add(p)
        else:
            log.info("share group %s: initializing the state of %s-%d failed (%s); sent again at a later "
                     "heartbeat", group_id, topic, p, ErrorCode(code).name.upper())
            failed.setdefault(topic, set()).add(p)
    if _gone(broker, coord, group_id, state_epoch):
        # DeleteGroups ran while the states were written, its tombstones possibly before them: what this
        # initialization wrote goes too (Kafka deletes a deleted group's initializing partitions' state)
        await _take_back(broker, svc, group_id, partitions, state_epoch, persister)
        return
    coord.initialized(group_id, done, broker.now_ms())
    coord.initialize_failed(group_id, failed)
    await share_membership.write_touched(broker, coord)


def _gone(broker: ShareBroker, coord: ShareGroupCoordinator, group_id: str, state_epoch: int) -> bool:
    """The group this initialization was for no longer exists: this broker holds its partition's share
    groups and none has its id (deleted), or the one there has a group epoch below the state epoch (deleted
    and created again: a group's epoch only goes up). A group whose partition is not imported here (moved
    to another broker, reloading) is not gone: its key 15 record decides there."""
    if not share_membership.holds(broker, group_id):
        return False
    group = coord.groups.get(group_id)
    return group is None or group.group_epoch < state_epoch


def _delete_if_ours(key: ShareStateKey, state_epoch: int) -> Any:
    """A runtime step: the key's state deleted if it is still the one an initialization with this state
    epoch writes (start offset -1, no batches); any other (a share partition's, a new group's) is kept."""
    def step(shard: ShareStateShard, now: int) -> ShareStateResult:
        held = shard.states.get(key)
        if (held is None or held.state_epoch != state_epoch or held.snapshot.batches
                or held.snapshot.start_offset != UNINITIALIZED_START_OFFSET):
            return ShareStateResult(responses=[(None, StateAnswer(ErrorCode.none))])
        return shard.delete([key])
    return step


async def _remote_delete_if_ours(per: SharePersister, key: ShareStateKey, state_epoch: int) -> None:
    held = await per.summary(key)
    if held.state_epoch == state_epoch and held.start_offset == UNINITIALIZED_START_OFFSET:
        await per.delete(key)


async def _take_back(broker: ShareBroker, svc: share_state.ShareStateService, group_id: str,
                     partitions: Mapping[str, frozenset[int]], state_epoch: int,
                     persister: Callable[[], SharePersister]) -> None:
    """Delete the states this initialization wrote for a group gone meanwhile (see `_delete_if_ours`); a
    failure is logged (the state stays, as after a failed DeleteGroups)."""
    deletes: list[tuple[str, int, Any]] = []
    for topic, parts in sorted(partitions.items()):
        for p in sorted(parts):
            key = svc.key(group_id, topic, p)
            if key is None:  # the topic is gone, and its states with it
                continue
            partition = svc.partition_for(key)
            if svc.here(partition):
                deletes.append((topic, p, svc.runtime.write(partition, _delete_if_ours(key, state_epoch))))
            else:
                deletes.append((topic, p, asyncio.ensure_future(_remote_delete_if_ours(persister(), key, state_epoch))))
    for topic, p, fut in deletes:
        try:
            await fut
        except Exception:  # noqa: BLE001 - one partition's failure must not stop the others
            log.warning("share group %s (deleted): removing the initialized state of %s-%d failed", group_id,
                        topic, p, exc_info=True)
