"""The share-partition leader's persister (kaflite.server.share_persister), its retry rules without sockets:
the answer of the share coordinator is faked below `_send`, the leader of the `__share_group_state`
partition comes from a fake image that a test moves. The wire itself is exercised by
tests/cluster/test_share_cluster.py."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from kaflite.coordinator.share.partition import ShareSnapshot, StateBatch
from kaflite.coordinator.share.state_records import ShareStateKey
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.server.share_persister import SharePersister

KEY = ShareStateKey("g", uuid.UUID(int=7), 0)


class Fake(SharePersister):
    """`answers[broker]`: what that broker answers, in turn (an ErrorCode, an exception to raise, or a
    partition answer); `sent` the (broker, request) pairs."""

    def __init__(self, leader: list[int], answers: dict[int, list[Any]], timeout_ms: int = 2000) -> None:
        self.leader = leader
        image = SimpleNamespace(partition=lambda _t, _p: SimpleNamespace(leader=self.leader[0]))
        super().__init__(0, lambda: image, lambda _k: 0, timeout_ms=timeout_ms, backoff_ms=5)  # type: ignore[arg-type,return-value]
        self.answers = answers
        self.sent: list[tuple[int, Any]] = []

    async def _send(self, broker: int, req: Any, schema: Any, timeout_s: float) -> Any:
        self.sent.append((broker, req))
        await asyncio.sleep(0)
        answer = self.answers[broker].pop(0)
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, ErrorCode):
            return SimpleNamespace(error_code=answer)
        return answer


def _state(epoch: int, start: int) -> Any:
    return SimpleNamespace(error_code=ErrorCode.none, state_epoch=epoch, start_offset=start, state_batches=(
        SimpleNamespace(first_offset=start, last_offset=start + 1, delivery_state=2, delivery_count=1),))


def test_not_coordinator_is_asked_again_at_the_new_leader() -> None:
    async def main() -> None:
        per = Fake([1], {1: [ErrorCode.not_coordinator], 2: [_state(3, 10)]})

        async def move(_s: float) -> None:
            per.leader[0] = 2  # the image moved the state partition meanwhile
        per.sleep = move
        got = await per.read(KEY, leader_epoch=4)
        assert [b for b, _r in per.sent] == [1, 2]
        assert got.state_epoch == 3 and got.snapshot() == ShareSnapshot(10, (StateBatch(10, 11, 2, 1),))
        assert per.sent[1][1].topics[0].partitions[0].leader_epoch == 4
    asyncio.run(main())


def test_no_state_reads_as_none_and_loading_and_failed_connections_are_retried() -> None:
    async def main() -> None:
        per = Fake([1], {1: [ErrorCode.coordinator_load_in_progress, ConnectionError("refused"),
                             ErrorCode.coordinator_not_available, _state(0, -1)]})
        got = await per.read(KEY, 0)
        assert got.snapshot() is None and len(per.sent) == 4
    asyncio.run(main())


def test_a_fencing_error_is_not_retried_and_retries_end_at_the_timeout() -> None:
    async def main() -> None:
        per = Fake([1], {1: [ErrorCode.fenced_state_epoch]})
        with pytest.raises(KafkaError) as e:
            await per.write(KEY, 0, 1, ShareSnapshot(0, ()))
        assert e.value.code is ErrorCode.fenced_state_epoch and len(per.sent) == 1
        per = Fake([-1], {}, timeout_ms=100)  # no leader in the image all along
        with pytest.raises(KafkaError) as e:
            await per.read(KEY, 0)
        assert e.value.code is ErrorCode.coordinator_not_available and per.sent == []
    asyncio.run(main())


def test_writes_of_a_key_are_sent_in_call_order_even_when_the_first_is_retried() -> None:
    async def main() -> None:
        per = Fake([1], {1: [ErrorCode.not_coordinator, ErrorCode.none, ErrorCode.none]})
        first = asyncio.ensure_future(per.write(KEY, 0, 1, ShareSnapshot(5, ())))
        second = asyncio.ensure_future(per.write(KEY, 0, 1, ShareSnapshot(9, ())))
        await asyncio.gather(first, second)
        starts = [int(r.topics[0].partitions[0].start_offset) for _b, r in per.sent]
        assert starts == [5, 5, 9]  # the retry of the first before the second
    asyncio.run(main())


def test_a_fetch_partition_answers_no_error_while_its_state_is_loading_or_moving() -> None:
    """librdkafka raises a ShareFetch partition error it does not know (COORDINATOR_LOAD_IN_PROGRESS) to
    the application: the leader answers nothing there instead, and asks again at the next fetch."""
    from kaflite.server.handlers.share import _partition_error

    for code in (ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
                 ErrorCode.not_coordinator):
        assert _partition_error(code) is ErrorCode.none
    assert _partition_error(ErrorCode.fenced_leader_epoch) is ErrorCode.not_leader_or_follower
    assert _partition_error(ErrorCode.kafka_storage_error) is ErrorCode.kafka_storage_error


def test_a_share_partition_of_a_partition_led_elsewhere_now_is_dropped_not_written() -> None:
    """A broker that stopped leading a partition (or leads it at a newer leader epoch) holds a stale share
    partition: a change to it (a member leaving released its records) is not written over the state the
    leader since then wrote; it is dropped, its acknowledgements answered NOT_LEADER_OR_FOLLOWER."""
    from kaflite.coordinator.share.group import ShareGroupCoordinator
    from kaflite.server.handlers.share import persist

    leader = {"t": SimpleNamespace(leader=1, leader_epoch=3), "u": SimpleNamespace(leader=0, leader_epoch=5)}
    from kaflite.coordinator.share.partition import ShareEpochs

    broker = SimpleNamespace(node_id=0,
                             replica_manager=SimpleNamespace(
                                 partition_or_none=lambda t, _p: SimpleNamespace(state=leader[t])))
    coord = ShareGroupCoordinator()
    for topic in ("t", "u"):
        sp = coord.install("g", topic, 0, None, log_start_offset=0, high_watermark=0)
        assert sp.changed and sp.epochs is None
    coord.partitions[("g", "u", 0)].epochs = ShareEpochs(4)  # made here at leader epoch 4
    errors = asyncio.run(persist(broker, coord))
    assert errors == {("g", "t", 0): ErrorCode.not_leader_or_follower,  # led by broker 1 now
                      ("g", "u", 0): ErrorCode.not_leader_or_follower}  # led here, at epoch 5, not 4
    assert coord.partitions == {}
    # made again (from what was written): nothing of the dropped one's epochs
    assert coord.install("g", "u", 0, None, log_start_offset=0, high_watermark=0).epochs is None


def test_prepare_drops_a_share_partition_made_at_another_leader_epoch_and_notes_the_ones_made_here() -> None:
    """`_prepare` reads the leader epoch a share partition was made at from the share partition itself
    (`SharePartition.epochs`): one made at epoch 3 of a partition led here at epoch 4 now is dropped, one
    made at epoch 4 is kept, one without epochs (made before any were noted) is kept; the partitions whose
    share partition the acquisition will make from this broker's shard come back with their leader epoch."""
    from kaflite.coordinator.share.group import ShareGroupCoordinator
    from kaflite.coordinator.share.partition import ShareEpochs
    from kaflite.server.coordinators.share_state import SHARE_STATE_SERVICE
    from kaflite.server.handlers.share import _prepare
    from kaflite.server.services import BrokerServices

    ids = {"stale": uuid.uuid4(), "same": uuid.uuid4(), "unknown": uuid.uuid4(), "new": uuid.uuid4()}
    local = SimpleNamespace(key=lambda g, t, p: ShareStateKey(g, ids[t], p), partition_for=lambda _k: 0,
                            here=lambda _p: True)
    services = BrokerServices()
    services.set(SHARE_STATE_SERVICE, local)
    broker = SimpleNamespace(node_id=0, services=services, replica_manager=SimpleNamespace(
        partition_or_none=lambda _t, _p: SimpleNamespace(state=SimpleNamespace(leader=0, leader_epoch=4))))
    coord = ShareGroupCoordinator()
    for topic, epochs in (("stale", ShareEpochs(3)), ("same", ShareEpochs(4)), ("unknown", None)):
        coord.install("g", topic, 0, None, log_start_offset=0, high_watermark=0).epochs = epochs
    errors, made_here = asyncio.run(_prepare(broker, coord, "g", [(t, 0) for t in ids]))
    assert errors == {}
    assert sorted(t for _g, t, _p in coord.partitions) == ["same", "unknown"]
    assert made_here == {("stale", 0): 4, ("new", 0): 4}  # made again from the shard: at the epoch now


def test_summary_is_an_admin_read_and_delete_is_retried_like_the_others() -> None:
    """The group coordinator's calls (share_admin.py): ReadShareGroupStateSummary with leader epoch -1
    (fenced by nothing), DeleteShareGroupState retried at the coordinator the image then names."""
    async def main() -> None:
        answer = SimpleNamespace(error_code=ErrorCode.none, state_epoch=2, start_offset=9, leader_epoch=4)
        per = Fake([1], {1: [ErrorCode.coordinator_load_in_progress, answer, ErrorCode.not_coordinator],
                         2: [ErrorCode.none]})
        got = await per.summary(KEY)
        assert (got.state_epoch, got.start_offset, got.leader_epoch) == (2, 9, 4)
        sent = per.sent[-1][1]
        assert type(sent).__name__ == "ReadShareGroupStateSummaryRequest"
        assert sent.topics[0].partitions[0].leader_epoch == -1

        async def move(_s: float) -> None:
            per.leader[0] = 2
        per.sleep = move
        await per.delete(KEY)
        assert [b for b, _r in per.sent] == [1, 1, 1, 2]
        assert type(per.sent[-1][1]).__name__ == "DeleteShareGroupStateRequest"
    asyncio.run(main())
