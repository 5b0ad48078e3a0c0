"""bench/make_data_dir.py (the 10,000-partition, 10 GiB start-up measurement's data directory): a small one,
made in-process, is a cleanly stopped broker's directory that a LogManager loads without recovery, with the
offsets, leader epochs, producer state and records the plan says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import load_bench, missing_module, require
from kaflite.protocol.record_batch import decode_records, iter_batches
from kaflite.storage.checkpoint import CLEAN_SHUTDOWN_FILE, HIGH_WATERMARK_CHECKPOINT, read_offset_checkpoint
from kaflite.storage.file_slice import FileSlice
from kaflite.storage.log import Log
from kaflite.storage.manager import LogManager

mdd = load_bench("make_data_dir")


def _read_all(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record, read segment by segment as a fetch does."""
    out: list[tuple[int, bytes | None, bytes | None]] = []
    while len(out) < log.log_end_offset:
        info = log.read(len(out), 64 * 2**20)
        raw = b"".join(r.tobytes() if isinstance(r, FileSlice) else bytes(r) for r in info.records)
        batches = list(iter_batches(raw))
        assert batches and batches[0].base_offset == len(out)
        for batch in batches:
            out += [(r.offset, r.key, r.value) for r in decode_records(batch)]
    return out


def test_sizes_and_the_plan() -> None:
    assert mdd.parse_size("10GiB") == 10 * 2**30 and mdd.parse_size("16MiB") == 2**24
    assert mdd.parse_size("10MB") == 10**7 and mdd.parse_size("1000") == 1000
    with pytest.raises(ValueError):
        mdd.parse_size("ten")
    plan = mdd.Plan(250, 250 * 2**20, per_topic=100, hot_partitions=5, hot_share=0.5)
    assert plan.topics == {"t0000": 100, "t0001": 100, "t0002": 50}
    hot = [i for i in range(250) if plan.hot(i)]
    assert len(hot) == 5 and hot == [0, 50, 100, 150, 200]
    # the hot ones hold half of the bytes, the others the other half, in records of --value-bytes
    assert sum(plan.records(i) for i in hot) * plan.value_bytes == pytest.approx(125 * 2**20, rel=1e-2)
    assert sum(plan.records(i) for i in range(250)) * plan.value_bytes == pytest.approx(250 * 2**20, rel=1e-2)
    assert plan.batch_sizes(40) == [16, 16, 8]


@pytest.mark.timeout(30)  # about 2 s, 1.4 s of it importing the broker
def test_a_small_directory_loads_clean_with_what_was_written(tmp_path: Path) -> None:
    """20 partitions x 1 MiB in 1 MiB segments (so a few roll): the broker's files, a clean load."""
    plan = mdd.Plan(
        20,
        20 * 2**20,
        per_topic=8,
        batch_bytes=128 * 1024,
        value_bytes=8 * 1024,
        idempotent_every=2,
        hot_partitions=2,
        hot_share=0.3,
        segment_bytes=2**20,
    )
    data = tmp_path / "data"
    made = mdd.make_data_dir(data, plan, threads=3)
    assert made.partitions == 20 and made.idempotent_partitions == 10
    assert made.records == sum(plan.records(i) for i in range(20))

    meta = json.loads((data / "kaflite-metadata.json").read_text())
    assert {t: v["num_partitions"] for t, v in meta["topics"].items()} == plan.topics
    assert all(v["configs"] == {"segment.bytes": str(2**20)} for v in meta["topics"].values())
    assert (data / "meta.properties").exists() and (data / CLEAN_SHUTDOWN_FILE).exists()
    keys = plan.keys()
    hws = read_offset_checkpoint(data / HIGH_WATERMARK_CHECKPOINT)
    assert hws == {k: plan.records(i) for i, k in enumerate(keys)}

    manager = LogManager([data])
    try:
        manager.load()
        value = mdd.value_of(plan.value_bytes)
        rolled = 0
        for i, (topic, partition) in enumerate(keys):
            log = manager.get(topic, partition)
            assert log is not None
            want = plan.records(i)
            assert (log.log_end_offset, log.high_watermark, log.recovery_point) == (want, want, want)
            assert (
                not log.recovered and log.lazy_at_open == log.segment_count
            )  # a clean load reads no segment
            assert log.leader_epoch_cache.entries == [(0, 0)]
            assert log.snapshot_offsets()[-1] == want  # the stop's producer snapshot, at the log end offset
            rolled += log.segment_count > 1
            producers = log.producer_state.producers
            if plan.idempotent(partition):
                ((_pid, entry),) = producers.items()
                assert entry.last_seq == want - 1 and entry.producer_epoch == 0
            else:
                assert not producers
            if i in (0, 1):  # the records themselves: a hot idempotent partition, a plain one
                assert _read_all(log) == [(o, None, value) for o in range(want)]
        assert rolled >= 2  # the hot partitions hold more than a segment
    finally:
        manager.close()


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_check_reads_back_through_a_broker_process_and_refuses_an_unclean_load(tmp_path: Path) -> None:
    """`--check`: `kaflite serve` on the directory, its load line, kafka-python reading partitions back (about
    10 s: two broker processes)."""
    require(missing_module("kafka"))
    plan = mdd.Plan(
        6, 6 * 2**18, per_topic=3, batch_bytes=32 * 1024, value_bytes=4 * 1024, idempotent_every=2
    )
    data = tmp_path / "data"
    mdd.make_data_dir(data, plan, threads=2)
    lines = mdd.check(data, plan, 3)
    assert "clean shutdown; 6 of 6 segments opened lazily" in lines[0]
    assert [line.split(":")[0] for line in lines[1:]] == [
        "t0000-0 (idempotent)",
        "t0001-2 (idempotent)",
        "t0000-2 (idempotent)",
    ]
    assert all("64 records read back" in line for line in lines[1:])
    assert (data / CLEAN_SHUTDOWN_FILE).exists()  # the check's broker stopped cleanly too
    (data / CLEAN_SHUTDOWN_FILE).unlink()  # as after a crash: the load recovers, which the check refuses
    with pytest.raises(RuntimeError, match="not a clean load"):
        mdd.check(data, plan, 1)
