"""ZkProducerIdManager: ids from claimed blocks, a new block when one is used up."""

from __future__ import annotations

import pytest

from kaflite.cluster.producer_ids import ZkProducerIdManager
from kaflite.cluster.zkdata import ProducerIdsBlock


def test_blocks_are_used_in_order_and_claimed_lazily() -> None:
    claims: list[ProducerIdsBlock] = []
    blocks = iter([ProducerIdsBlock(1, 0, 3), ProducerIdsBlock(1, 6, 2)])

    def claim() -> ProducerIdsBlock:
        claims.append(next(blocks))
        return claims[-1]

    m = ZkProducerIdManager(claim)
    assert claims == []  # nothing claimed before the first request
    assert [m.next_id() for _ in range(5)] == [0, 1, 2, 6, 7]
    assert len(claims) == 2


def test_first_block_claimed_at_start() -> None:
    claims: list[ProducerIdsBlock] = []
    blocks = iter([ProducerIdsBlock(1, 0, 2), ProducerIdsBlock(1, 4, 2)])

    def claim() -> ProducerIdsBlock:
        claims.append(next(blocks))
        return claims[-1]

    m = ZkProducerIdManager(claim)
    m.claim_first_block()
    m.claim_first_block()  # once only
    assert len(claims) == 1
    assert [m.next_id() for _ in range(3)] == [0, 1, 4]  # the ids of the block claimed at start first
    assert len(claims) == 2


def test_exhausted() -> None:
    m = ZkProducerIdManager(lambda: ProducerIdsBlock(1, 2**63 - 10, 1000))
    with pytest.raises(RuntimeError, match="exhausted all producerIds"):
        m.next_id()
