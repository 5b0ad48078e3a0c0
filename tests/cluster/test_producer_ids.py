"""ZkProducerIdManager: ids from claimed blocks, the first claimed at start, the next claimed ahead in the
executor given (never by `next_id`, which runs on the event loop), COORDINATOR_LOAD_IN_PROGRESS while none
is at hand."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

import pytest

from kaflite.cluster.producer_ids import ZkProducerIdManager
from kaflite.cluster.zkdata import ProducerIdsBlock
from kaflite.protocol.errors import ErrorCode, KafkaError


class Inline(Executor):
    """Runs each submitted call at once, in the caller's thread."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        f: Future[Any] = Future()
        f.set_result(fn(*args, **kwargs))
        return f


def claims_of(*blocks: ProducerIdsBlock) -> tuple[list[ProducerIdsBlock], Callable[[], ProducerIdsBlock]]:
    claimed: list[ProducerIdsBlock] = []
    it = iter(blocks)

    def claim() -> ProducerIdsBlock:
        claimed.append(next(it))
        return claimed[-1]

    return claimed, claim


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    p = ThreadPoolExecutor(max_workers=1)
    yield p
    p.shutdown(wait=False, cancel_futures=True)


def test_first_block_at_start_the_next_claimed_ahead_at_90_percent() -> None:
    claimed, claim = claims_of(ProducerIdsBlock(1, 0, 10), ProducerIdsBlock(1, 30, 10))
    m = ZkProducerIdManager(claim, Inline())
    assert claimed == []  # nothing before the broker starts
    m.claim_first_block()
    m.claim_first_block()  # once only
    assert len(claimed) == 1
    assert [m.next_id() for _ in range(9)] == list(range(9))
    assert len(claimed) == 1  # 9 of 10 handed out: not yet
    assert m.next_id() == 9
    assert len(claimed) == 2  # the 10th id (90% of the block handed out) claimed the next block ahead
    assert [m.next_id() for _ in range(3)] == [30, 31, 32]  # the ids of the block claimed ahead, in order
    assert len(claimed) == 2


def test_a_block_used_up_while_the_claim_waits_is_coordinator_load_in_progress(pool: ThreadPoolExecutor) -> None:
    """The claim of the next block waits for ZooKeeper in the executor; next_id does not wait: it answers
    COORDINATOR_LOAD_IN_PROGRESS (retriable) until the block arrives, with one claim in flight."""
    release = threading.Event()
    threads: list[str] = []

    def claim() -> ProducerIdsBlock:
        threads.append(threading.current_thread().name)
        if len(threads) == 1:
            return ProducerIdsBlock(1, 0, 10)  # at start
        assert release.wait(10), "not released"
        return ProducerIdsBlock(1, 2000, 10)

    m = ZkProducerIdManager(claim, pool)
    m.claim_first_block()
    assert [m.next_id() for _ in range(10)] == list(range(10))
    t0 = time.monotonic()
    for _ in range(5):
        with pytest.raises(KafkaError) as e:
            m.next_id()
        assert e.value.code is ErrorCode.coordinator_load_in_progress
    assert time.monotonic() - t0 < 0.5, "next_id waited for the claim"
    assert len(threads) == 2 and threads[1] != threading.current_thread().name  # one claim, in the pool
    release.set()
    deadline = time.monotonic() + 5
    while True:
        try:
            assert m.next_id() == 2000
            break
        except KafkaError:
            assert time.monotonic() < deadline, "the claimed block never arrived"
            time.sleep(0.01)
    assert m.next_id() == 2001 and len(threads) == 2


def test_a_failed_claim_is_tried_again() -> None:
    calls: list[int] = []

    def claim() -> ProducerIdsBlock:
        calls.append(1)
        if len(calls) == 2:
            raise ConnectionError("session expired")  # ZooKeeper failed this claim
        return ProducerIdsBlock(1, 10 * len(calls), 2)

    m = ZkProducerIdManager(claim, Inline())
    m.claim_first_block()
    assert [m.next_id(), m.next_id()] == [10, 11]  # the second id claims ahead: it fails
    assert len(calls) == 2
    assert m.next_id() == 30  # used up: claimed again (inline, so at once) and the first id is retried
    assert len(calls) == 3


def test_exhausted() -> None:
    m = ZkProducerIdManager(lambda: ProducerIdsBlock(1, 2**63 - 10, 1000), Inline())
    with pytest.raises(RuntimeError, match="exhausted all producerIds"):
        m.claim_first_block()
    claimed, claim = claims_of(ProducerIdsBlock(1, 0, 2), ProducerIdsBlock(1, 2**63 - 10, 1000))
    m = ZkProducerIdManager(claim, Inline())
    m.claim_first_block()
    assert [m.next_id(), m.next_id()] == [0, 1]
    for _ in range(2):  # and no further claim
        with pytest.raises(RuntimeError, match="exhausted all producerIds"):
            m.next_id()
    assert len(claimed) == 2
