"""Where the exactly-once sink keeps each task's progress (kaflite.spark.writer.produce_exactly_once,
called directly: no Spark job): a group offset of partition 0 of the output topic, a partition that
exists, so the commit is one real Kafka accepts too; and the progress a checkpoint of the layout before
left under (`<prefix>.sink-progress`, task) in the group `<prefix>` is still honoured."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest

from helpers import read_to_end
from kaflite.spark.options import parse_writer_options
from kaflite.spark.writer import legacy_progress_location, produce_exactly_once, progress_location

pytestmark = pytest.mark.spark


def _rows(*values: bytes) -> list[pa.RecordBatch]:
    return [pa.RecordBatch.from_pydict({"value": pa.array(list(values), pa.binary())})]


def _read_committed(bootstrap: str, topic: str, partitions: int, want: int) -> Counter[bytes]:
    """To each partition's last stable offset, and at least `want` records: anything more (a duplicate) up
    to there is counted too (helpers.read_to_end; a second's idle wait after the expected ones before)."""
    return Counter(read_to_end(bootstrap, topic, partitions, at_least=want))


def _committed(bootstrap: str, group: str, topic: str, partition: int) -> tuple[int, str | None]:
    import confluent_kafka as ck

    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                     "enable.auto.commit": False})
    try:
        tp = c.committed([ck.TopicPartition(topic, partition)], timeout=30)[0]
        return tp.offset, tp.metadata
    finally:
        c.close()


def test_progress_is_a_group_offset_of_the_output_topic(kafka: Any) -> None:
    out = kafka.topic("eos-progress-out", 2)
    prefix = f"eosp-{uuid.uuid4().hex[:6]}"
    options = parse_writer_options({"kafka.bootstrap.servers": kafka.bootstrap, "topic": out,
                                    "exactlyOnce": "true", "transactionalIdPrefix": prefix})
    assert progress_location(options, 1) == (f"{prefix}-1", out, 0)
    assert produce_exactly_once(options, iter(_rows(b"a", b"b")), 3, 1) == 2
    assert _committed(kafka.bootstrap, f"{prefix}-1", out, 0) == (4, "kaflite spark sink: micro-batch 3 committed")
    assert produce_exactly_once(options, iter(_rows(b"a", b"b")), 3, 1) == 0  # replayed: already committed
    assert produce_exactly_once(options, iter(_rows(b"c")), 3, 0) == 1  # another task: its own progress
    assert produce_exactly_once(options, iter(_rows(b"d")), 4, 1) == 1
    assert _read_committed(kafka.bootstrap, out, 2, 4) == Counter({b"a": 1, b"b": 1, b"c": 1, b"d": 1})
    assert _committed(kafka.bootstrap, f"{prefix}-1", out, 0)[0] == 5
    assert _committed(kafka.bootstrap, f"{prefix}-0", out, 0)[0] == 4


def test_a_checkpoint_of_the_legacy_layout_keeps_its_progress(kafka: Any) -> None:
    """Progress committed by the sink before (group `<prefix>`, (`<prefix>.sink-progress`, task)): made
    here with that topic created, since a broker now refuses the offsets of a topic that does not exist
    (a broker upgraded from an older kaflite still holds them in __consumer_offsets)."""
    import confluent_kafka as ck

    out = kafka.topic("eos-legacy-out", 1)
    prefix = f"eosl-{uuid.uuid4().hex[:6]}"
    group, old_topic, old_partition = legacy_progress_location(prefix, 1)
    assert (group, old_topic, old_partition) == (prefix, f"{prefix}.sink-progress", 1)
    admin = kafka.admin()  # kept alive until the future resolves
    admin.create_topics([ck.admin.NewTopic(old_topic, 2, 1)])[old_topic].result(30)
    c = ck.Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        deadline = time.monotonic() + 30
        while True:  # the new topic's metadata may lag its creation by a moment
            try:
                c.commit(offsets=[ck.TopicPartition(old_topic, old_partition, 6)], asynchronous=False)
                break
            except ck.KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        c.close()
    options = parse_writer_options({"kafka.bootstrap.servers": kafka.bootstrap, "topic": out,
                                    "exactlyOnce": "true", "transactionalIdPrefix": prefix})
    assert produce_exactly_once(options, iter(_rows(b"old")), 5, 1) == 0  # batch 5 was committed before
    assert produce_exactly_once(options, iter(_rows(b"x")), 5, 0) == 1  # task 0 had no legacy progress
    assert produce_exactly_once(options, iter(_rows(b"new")), 6, 1) == 1
    assert _committed(kafka.bootstrap, f"{prefix}-1", out, 0)[0] == 7
    assert produce_exactly_once(options, iter(_rows(b"new")), 6, 1) == 0  # now from its own progress
    assert _read_committed(kafka.bootstrap, out, 1, 2) == Counter({b"x": 1, b"new": 1})
