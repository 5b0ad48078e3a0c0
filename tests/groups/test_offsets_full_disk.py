"""The same acceptance on a real full disk: the broker's data directory is a 16 MiB tmpfs filled with a
ballast file. A commit that needs new pages cannot be written: it is answered NOT_COORDINATOR (Kafka's
answer to KAFKA_STORAGE_ERROR), librdkafka's committed() still reports the last offsets really written,
the group's state equals its log, and once space is freed the group commits again."""

from __future__ import annotations

import errno
import subprocess
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import confluent_kafka.admin as cka
import pytest
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.static.primitive import i32, i64

from groups.coord_wire import live_and_log
from kaflite.protocol.errors import ErrorCode
from kaflite.server.embedded import EmbeddedBroker
from server.kwire import WireClient

PARTITIONS = 10
METADATA = "m" * 4000  # a commit of 10 partitions is ~40 KiB: it needs pages a full disk no longer has


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a 16 MiB tmpfs here (needs root / CAP_SYS_ADMIN): {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(path: Path) -> int:
    """Write `path` until the filesystem is full; returns the bytes written."""
    written = 0
    with open(path, "wb", buffering=0) as f:
        for chunk in (1 << 20, 1 << 12):
            for _ in range(100_000):
                try:
                    written += f.write(b"\0" * chunk)
                except OSError as e:
                    assert e.errno == errno.ENOSPC, e
                    break
    return written


def commit_all(client: WireClient, group: str, topic: str, offset: int) -> set[ErrorCode]:
    req = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=i32(-1), member_id="",
                              group_instance_id=None, topics=(OffsetCommitRequestTopic(name=topic, partitions=tuple(
                                  OffsetCommitRequestPartition(partition_index=i32(p), committed_offset=i64(offset),
                                                               committed_leader_epoch=i32(-1),
                                                               committed_metadata=METADATA)
                                  for p in range(PARTITIONS))),))
    return {ErrorCode(p.error_code) for p in client.request(req).topics[0].partitions}


def committed(bootstrap: str, group: str, topic: str) -> list[int]:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = consumer.committed([ck.TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=15)
    finally:
        consumer.close()
    return [tp.offset for tp in tps]


def test_commit_on_a_full_disk_fails_and_the_group_stays_what_was_written(small_disk: Path) -> None:
    group, topic = "full-disk-group", "t"
    with EmbeddedBroker(data_dir=small_disk / "data", overrides={"offsets.topic.num.partitions": "1"}) as broker:
        admin = cka.AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([cka.NewTopic(topic, PARTITIONS, 1)])[topic].result(15)
        with WireClient(broker.bootstrap) as c:
            assert commit_all(c, group, topic, 1) == {ErrorCode.none}
            ballast = small_disk / "ballast"
            assert fill(ballast) > 0
            try:
                assert commit_all(c, group, topic, 2) == {ErrorCode.not_coordinator}
                assert committed(broker.bootstrap, group, topic) == [1] * PARTITIONS
                live, logged = live_and_log(broker, group)
                assert live == logged
                assert {offset for offset, _ in logged["offsets"][group].values()} == {1}
            finally:
                ballast.unlink()
            assert commit_all(c, group, topic, 3) == {ErrorCode.none}
            assert committed(broker.bootstrap, group, topic) == [3] * PARTITIONS
            live, logged = live_and_log(broker, group)
            assert live == logged
