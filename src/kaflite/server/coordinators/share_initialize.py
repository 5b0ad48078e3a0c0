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
from kaflite.server.services import Slot
from kaflite.server.share_persister import SharePersister

__all__ = ["UNINITIALIZED_START_OFFSET", "start"]

log = logging.getLogger("kaflite.share")

UNINITIALIZED_START_OFFSET = -1  # Kafka's PartitionFactory.UNINITIALIZED_START_OFFSET
# the initializations running, held until done (the loop keeps only weak references to tasks)
RUNNING: Slot[set[asyncio.Future[Any]]] = Slot("share_initializations")


def start(broker: ShareBroker, coord: ShareGroupCoordinator, group_id: str,
          partitions: Mapping[str, frozenset[int]], state_epoch: int, persister: Callable[[], SharePersister]) -> None:
    """Initialize the partitions' state in the background (see the rules); `persister` gives the broker's
    persister (made by the handlers) for state held by another broker."""
    if not partitions:
        return
    tasks = broker.services.get_or_make(RUNNING, set)
    fut = asyncio.ensure_future(_initialize(broker, coord, group_id, dict(partitions), state_epoch, persister))
    tasks.add(fut)
    fut.add_done_callback(tasks.discard)


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
    coord.initialized(group_id, done, broker.now_ms())
    coord.initialize_failed(group_id, failed)
    await share_membership.write_touched(broker, coord)
