"""ReplicaManager without sockets: the one place per-partition access errors are decided, partitions that
follow the metadata image, acks=-1 through the purgatory, the coordinators' committed append."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kaflite.cluster.metadata import MetadataImage, PartitionRegistration, TopicImage
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.record_batch import build_record_batch
from kaflite.server.purgatory import Purgatory
from kaflite.server.replica import ReplicaManager, TopicSettings
from kaflite.storage import LogManager
from kaflite.storage.config import LogConfig

ME, F1 = 1, 2


def batch(n: int = 1) -> bytes:
    return build_record_batch([(None, b"v%d" % i, []) for i in range(n)])


def settings(topic: TopicImage) -> TopicSettings:
    return TopicSettings(LogConfig(), int(topic.configs.get("min.insync.replicas", "1")), None)


def topic(name: str, *regs: PartitionRegistration, configs: dict[str, str] | None = None) -> TopicImage:
    import uuid

    return TopicImage(name, uuid.uuid5(uuid.NAMESPACE_DNS, name), tuple(regs), configs or {})


def reg(leader: int, replicas: tuple[int, ...], isr: tuple[int, ...] | None = None, epoch: int = 0,
        pepoch: int = 0) -> PartitionRegistration:
    return PartitionRegistration(replicas, isr if isr is not None else replicas, leader, epoch, pepoch)


@pytest.fixture
def rm(tmp_path: Path) -> Any:
    mgr = LogManager([tmp_path])
    manager = ReplicaManager(ME, mgr, Purgatory(), lambda: 0, settings)
    yield manager
    mgr.close()


def publish(rm: ReplicaManager, *topics: TopicImage) -> MetadataImage:
    new = rm.image.evolve(topics={t.name: t for t in topics})
    rm.on_image(rm.image, new)
    return new


def code_of(fn: Any, *args: Any, **kw: Any) -> ErrorCode:
    try:
        fn(*args, **kw)
    except KafkaError as e:
        return e.code
    return ErrorCode.none


def test_get_partition_error_mapping(rm: ReplicaManager) -> None:
    publish(rm,
            topic("led", reg(ME, (ME, F1), epoch=4)),
            topic("followed", reg(F1, (F1, ME), epoch=2)),
            topic("elsewhere", reg(F1, (F1,))))
    gp = rm.get_partition
    assert code_of(gp, "nope", 0) == ErrorCode.unknown_topic_or_partition
    assert code_of(gp, "led", 1) == ErrorCode.unknown_topic_or_partition
    assert code_of(gp, "led", 0) == ErrorCode.none
    assert code_of(gp, "led", 0, current_leader_epoch=4) == ErrorCode.none
    assert code_of(gp, "led", 0, current_leader_epoch=3) == ErrorCode.fenced_leader_epoch
    assert code_of(gp, "led", 0, current_leader_epoch=5) == ErrorCode.unknown_leader_epoch
    # hosted as a follower: only requests that need no leader may use it, the epoch check comes first
    assert code_of(gp, "followed", 0) == ErrorCode.not_leader_or_follower
    assert code_of(gp, "followed", 0, require_leader=False) == ErrorCode.none
    assert code_of(gp, "followed", 0, current_leader_epoch=1) == ErrorCode.fenced_leader_epoch
    # known to the cluster but not hosted here: clients refresh their metadata
    assert code_of(gp, "elsewhere", 0) == ErrorCode.not_leader_or_follower
    assert code_of(gp, "elsewhere", 0, require_leader=False) == ErrorCode.not_leader_or_follower
    assert code_of(rm.append_records, "followed", 0, batch(), 1) == ErrorCode.not_leader_or_follower
    assert code_of(rm.append_records, "__consumer_offsets", 0, batch(), 1) == ErrorCode.invalid_topic_exception


def test_partitions_follow_the_image(rm: ReplicaManager) -> None:
    a = topic("a", reg(ME, (ME,)), reg(ME, (ME,)))
    publish(rm, a)
    assert sorted(rm.partitions) == [("a", 0), ("a", 1)]
    rm.append_records("a", 0, batch(3), 1)
    log0 = rm.get_partition("a", 0).log
    publish(rm, a, topic("b", reg(ME, (ME,))))  # a unchanged: the same objects
    assert rm.get_partition("a", 0).log is log0 and log0 is not None and log0.log_end_offset == 3
    # leadership moves away: this broker follows, keeps the data
    publish(rm, topic("a", reg(F1, (ME, F1), epoch=1), reg(ME, (ME,))), topic("b", reg(ME, (ME,))))
    assert not rm.get_partition("a", 0, require_leader=False).is_leader
    # reassigned away: the replica is stopped and its log deleted
    publish(rm, topic("a", reg(F1, (F1,), epoch=2), reg(ME, (ME,))))
    assert ("a", 0) not in rm.partitions and rm.log_manager.get("a", 0) is None
    assert ("b", 0) not in rm.partitions  # topic b deleted
    assert code_of(rm.get_partition, "b", 0) == ErrorCode.unknown_topic_or_partition


def test_acks_all_waits_for_the_high_watermark(rm: ReplicaManager) -> None:
    publish(rm, topic("r", reg(ME, (ME, F1))))

    async def scenario() -> tuple[ErrorCode, ErrorCode]:
        part, result = rm.append_records("r", 0, batch(2), -1)
        assert part.high_watermark == 0
        waiting = asyncio.ensure_future(rm.wait_committed(part, result.last_offset + 1, 10_000))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        part.update_follower_fetch_state(F1, 1)  # not far enough
        rm._high_watermark_moved(part)
        await asyncio.sleep(0.01)
        assert not waiting.done()
        assert part.update_follower_fetch_state(F1, 2)
        rm._high_watermark_moved(part)
        done = await asyncio.wait_for(waiting, 2)
        _, r2 = rm.append_records("r", 0, batch(), -1)
        timed_out = await rm.wait_committed(part, r2.last_offset + 1, 0)  # deadline already passed
        return done, timed_out

    assert asyncio.run(scenario()) == (ErrorCode.none, ErrorCode.request_timed_out)


def test_leadership_lost_answers_parked_acks_all_at_once(rm: ReplicaManager) -> None:
    publish(rm, topic("r", reg(ME, (ME, F1))))

    async def scenario() -> ErrorCode:
        part, result = rm.append_records("r", 0, batch(2), -1)
        waiting = asyncio.ensure_future(rm.wait_committed(part, result.last_offset + 1, 10_000))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        publish(rm, topic("r", reg(F1, (ME, F1), (F1,), epoch=1, pepoch=1)))  # F1 leads now (this one follows)
        return await asyncio.wait_for(waiting, 1)  # not the request timeout (10 s)

    assert asyncio.run(scenario()) == ErrorCode.not_leader_or_follower


def test_append_committed_for_coordinators(rm: ReplicaManager) -> None:
    publish(rm, topic("__consumer_offsets", reg(ME, (ME,))), topic("two", reg(ME, (ME, F1))),
            topic("gone", reg(F1, (F1,))))

    async def scenario() -> None:
        r = await rm.append_committed("__consumer_offsets", 0, batch(2), 1000)
        assert (r.base_offset, r.last_offset) == (0, 1)
        assert rm.get_partition("__consumer_offsets", 0).high_watermark == 2
        with pytest.raises(KafkaError) as e:
            await rm.append_committed("gone", 0, batch(), 1000)
        assert e.value.code == ErrorCode.not_leader_or_follower
        with pytest.raises(KafkaError) as e:  # never committed: no follower reports
            await rm.append_committed("two", 0, batch(), 0)
        assert e.value.code == ErrorCode.request_timed_out

    asyncio.run(scenario())


def test_min_insync_from_topic_configs(rm: ReplicaManager) -> None:
    publish(rm, topic("m", reg(ME, (ME,)), configs={"min.insync.replicas": "2"}))
    assert code_of(rm.append_records, "m", 0, batch(), -1) == ErrorCode.not_enough_replicas
    assert code_of(rm.append_records, "m", 0, batch(), 1) == ErrorCode.none


def test_a_deleted_partitions_rename_runs_off_the_event_loop(rm: ReplicaManager,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Topic deletion and a reassignment moving partitions away rename each partition's directory in a worker
    thread (it ran on the event loop, one rename per partition in one loop turn); the partition leaves the
    log table at once, and one recreated meanwhile waits for the rename (a fresh, empty log)."""
    import os
    import threading

    renames: list[int] = []
    real_rename = os.rename

    def recording_rename(src: Any, dst: Any) -> None:
        renames.append(threading.get_ident())
        real_rename(src, dst)

    async def scenario() -> int:
        loop_thread = threading.get_ident()
        publish(rm, topic("gone", *(reg(ME, (ME,)) for _ in range(4))), topic("moved", reg(ME, (ME,))))
        rm.partitions[("gone", 0)].log.append(batch(3))  # type: ignore[union-attr]
        monkeypatch.setattr(os, "rename", recording_rename)
        publish(rm, topic("moved", reg(F1, (F1,))))  # "gone" deleted, "moved" reassigned away
        assert rm.log_manager.get("gone", 0) is None and rm.log_manager.get("moved", 0) is None
        recreated = rm.log_manager.get_or_create("gone", 0)  # waits for the old directory's rename
        assert recreated.log_end_offset == 0
        for _ in range(200):
            if len(renames) >= 5:
                break
            await asyncio.sleep(0.01)
        return loop_thread

    loop_thread = asyncio.run(scenario())
    assert len(renames) == 5
    assert loop_thread not in renames
