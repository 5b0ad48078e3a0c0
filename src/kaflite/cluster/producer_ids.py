"""Producer ids for a broker in a cluster (Kafka's ZkProducerIdManager, claiming ahead as its
RPCProducerIdManager does).

Rules:
- ids come from blocks of 1000 claimed by compare-and-set on /latest_producer_id_block (the claim is
  `KafkaZkClient.allocate_producer_ids`): a broker hands out the ids of its current block in order, then
  those of the next block it claimed, so no two brokers ever hand out the same id;
- the first block is claimed when the broker starts (`claim_first_block`, as Kafka's manager does when it is
  created); a restarted broker claims a new block: ids handed out before a restart are never handed out
  again (their sequence state may still be in the logs);
- `next_id` runs on the broker's event loop and never calls ZooKeeper there: once PREFETCH_AT of the
  current block is handed out, the next block is claimed in the executor given (the broker's ZooKeeper
  write threads), one claim at a time, and a failed claim is tried again at the next id. While ZooKeeper is
  unreachable the claim waits for it; if the current block runs out meanwhile, `next_id` raises
  COORDINATOR_LOAD_IN_PROGRESS (retriable: the client asks again), as Kafka's RPCProducerIdManager answers
  while it waits for a block (Kafka's ZooKeeper mode instead blocks the request's handler thread);
- ids stop at the largest long: past it, a clear error (Kafka: "Have exhausted all producerIds").
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Executor

from kaflite.cluster.zkdata import ProducerIdsBlock
from kaflite.protocol.errors import ErrorCode, KafkaError

__all__ = ["PREFETCH_AT", "ZkProducerIdManager"]

log = logging.getLogger("kaflite.cluster")

LONG_MAX = 2**63 - 1
PREFETCH_AT = 0.9  # the share of the current block handed out when the next one is claimed (Kafka's)


class ZkProducerIdManager:
    def __init__(self, claim: Callable[[], ProducerIdsBlock], executor: Executor) -> None:
        self._claim = claim
        self._executor = executor
        # the block ids are handed out from (event loop only)
        self._block: ProducerIdsBlock | None = None
        self._next = 0
        # the claim ahead (guarded by _lock: its result arrives on the executor's thread)
        self._lock = threading.Lock()
        self._claiming = False
        self._ready: ProducerIdsBlock | None = None
        self._exhausted: RuntimeError | None = None

    def claim_first_block(self) -> None:
        """Claim a block now, at start-up (ZooKeeper is reachable then), not at the first InitProducerId."""
        if self._block is None:
            block = _checked(self._claim())
            log.info("claimed producer id block %d-%d", block.first, block.last)
            self._block, self._next = block, block.first

    def next_id(self) -> int:
        """The next producer id; KafkaError COORDINATOR_LOAD_IN_PROGRESS while no block is at hand."""
        block = self._block
        if block is None or self._next > block.last:
            ready = self._take_ready()
            if ready is None:
                self._claim_ahead()
                ready = self._take_ready()  # claimed already (an executor that ran the claim at once)
            if ready is None:
                raise KafkaError(ErrorCode.coordinator_load_in_progress,
                                 "no producer id left in this broker's block; the next one is being claimed")
            block = ready
            self._block, self._next = block, block.first
        pid = self._next
        self._next += 1
        if pid - block.first >= int(block.size * PREFETCH_AT):
            self._claim_ahead()
        return pid

    def _take_ready(self) -> ProducerIdsBlock | None:
        """The block claimed ahead, taken; raises when the claim found every id handed out."""
        with self._lock:
            ready, self._ready = self._ready, None
            if ready is None and self._exhausted is not None:
                raise self._exhausted
        return ready

    def _claim_ahead(self) -> None:
        """Start claiming the next block in the executor, unless one is claimed or being claimed."""
        with self._lock:
            if self._claiming or self._ready is not None or self._exhausted is not None:
                return
            self._claiming = True
        try:
            self._executor.submit(self._claim_in_thread)
        except RuntimeError:  # the executor is shut down: the broker is stopping
            with self._lock:
                self._claiming = False

    def _claim_in_thread(self) -> None:
        block: ProducerIdsBlock | None = None
        exhausted: RuntimeError | None = None
        try:
            block = _checked(self._claim())
        except _Exhausted as e:
            exhausted = e
        except Exception as e:  # noqa: BLE001 - ZooKeeper failed (session expired...): the next id tries again
            log.warning("claiming the next producer id block failed (%s: %s); tried again at the next id",
                        type(e).__name__, e)
        else:
            log.info("claimed producer id block %d-%d", block.first, block.last)
        with self._lock:
            self._claiming = False
            self._ready = block
            self._exhausted = exhausted


class _Exhausted(RuntimeError):
    pass


def _checked(block: ProducerIdsBlock) -> ProducerIdsBlock:
    if block.last > LONG_MAX or block.first < 0:
        raise _Exhausted("Have exhausted all producerIds.")
    return block
