"""Producer ids for a broker in a cluster (Kafka's ZkProducerIdManager).

Rules:
- ids come from blocks of 1000 claimed by compare-and-set on /latest_producer_id_block (the claim is
  `KafkaZkClient.allocate_producer_ids`): a broker hands out the ids of its current block in order and
  claims the next free block when it is used up, so no two brokers ever hand out the same id;
- the first block is claimed when the broker starts (`claim_first_block`, as Kafka's manager does when it is
  created), so InitProducerId needs ZooKeeper only once 1000 ids were handed out: the claim blocks the
  broker's event loop, and while ZooKeeper is unreachable it waits for it; a restarted broker claims a new
  block: ids handed out before a restart are never handed out again (their sequence state may still be in
  the logs);
- ids stop at the largest long: past it, a clear error (Kafka: "Have exhausted all producerIds").
"""

from __future__ import annotations

from collections.abc import Callable

from kaflite.cluster.zkdata import ProducerIdsBlock

__all__ = ["ZkProducerIdManager"]

LONG_MAX = 2**63 - 1


class ZkProducerIdManager:
    def __init__(self, claim: Callable[[], ProducerIdsBlock]) -> None:
        self._claim = claim
        self._block: ProducerIdsBlock | None = None
        self._next = 0

    def claim_first_block(self) -> None:
        """Claim a block now, at start-up (ZooKeeper is reachable then), not at the first InitProducerId."""
        if self._block is None:
            self._claim_next()

    def next_id(self) -> int:
        if self._block is None or self._next > self._block.last:
            self._claim_next()
        assert self._block is not None
        pid = self._next
        self._next += 1
        return pid

    def _claim_next(self) -> None:
        block = self._claim()
        if block.last > LONG_MAX or block.first < 0:
            raise RuntimeError("Have exhausted all producerIds.")
        self._block, self._next = block, block.first
