"""Streaming queries as consumer groups (commitOffsetsToGroup): the option, the committer without a broker,
and real queries whose group shows their lag falling to 0 in `kaflite groups describe` and through
confluent-kafka's AdminClient."""

from __future__ import annotations

import logging
import pickle
import subprocess
import sys
import time
import uuid
from typing import Any

import pytest

from kaflite.console.cluster import SPARK_QUERY_METADATA_PREFIX, is_spark_query
from kaflite.spark.group_commit import (
    QUERY_METADATA_PREFIX,
    GroupCommitter,
    parse_query_metadata,
    query_metadata,
)
from kaflite.spark.options import OptionError, parse_reader_options

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}


# --- the option ---------------------------------------------------------------------------------------
def test_option_off_by_default_and_names_the_group() -> None:
    assert parse_reader_options(BASE, streaming=True).commit_group is None
    opts = {**BASE, "kafka.group.id": "orders-etl", "commitOffsetsToGroup": "TRUE"}
    assert parse_reader_options(opts, streaming=True).commit_group == "orders-etl"
    assert parse_reader_options({**opts, "commitoffsetstogroup": "false"}, streaming=True).commit_group is None


def test_bad_value_names_the_option_and_the_allowed_values() -> None:
    with pytest.raises(OptionError, match=r"option 'commitOffsetsToGroup' must be 'true' or 'false', got 'yes'"):
        parse_reader_options({**BASE, "kafka.group.id": "g", "commitOffsetsToGroup": "yes"}, streaming=True)


def test_needs_a_group_and_a_stream() -> None:
    with pytest.raises(OptionError, match=r"'commitOffsetsToGroup' needs 'kafka.group.id'"):
        parse_reader_options({**BASE, "commitOffsetsToGroup": "true"}, streaming=True)
    with pytest.raises(OptionError, match=r"'commitOffsetsToGroup' applies to streaming queries"):
        parse_reader_options({**BASE, "kafka.group.id": "g", "commitOffsetsToGroup": "true"}, streaming=False)


# --- the committer, with a fake client ----------------------------------------------------------------
class _Answer:
    def __init__(self, topic: str, partition: int, error: Any = None) -> None:
        self.topic, self.partition, self.error = topic, partition, error


class FakeClient:
    def __init__(self, fail: Exception | None = None, refuse: bool = False) -> None:
        self.requests: list[list[Any]] = []
        self.fail, self.refuse, self.closed = fail, refuse, False

    def commit(self, offsets: list[Any], asynchronous: bool) -> list[_Answer]:
        assert asynchronous is False
        if self.fail is not None:
            raise self.fail
        self.requests.append(offsets)
        return [_Answer(tp.topic, tp.partition, "REBALANCE_IN_PROGRESS" if self.refuse else None) for tp in offsets]

    def close(self) -> None:
        self.closed = True


def _committer(client: FakeClient) -> GroupCommitter:
    return GroupCommitter("g", {"bootstrap.servers": "x"}, run_id="r1", client_factory=lambda conf, g: client)


def test_commits_each_new_offset_map_once_with_the_query_metadata() -> None:
    client = FakeClient()
    c = _committer(client)
    assert c.commit({("t", 1): 5, ("t", 0): 7}) is True
    assert c.commit({("t", 0): 7, ("t", 1): 5}) is False  # unchanged: a trigger without new data
    assert c.commit({}) is False
    assert c.commit({("t", 0): 9, ("t", 1): 5}) is True
    assert len(client.requests) == 2
    first, second = client.requests
    assert [(tp.topic, tp.partition, tp.offset) for tp in first] == [("t", 0, 7), ("t", 1, 5)]
    assert {tp.metadata for tp in first} == {query_metadata("r1", 1)}
    assert parse_query_metadata(second[0].metadata) == {"run": "r1", "commit": 2}
    c.close()
    assert client.closed


def test_a_failed_commit_is_logged_never_raised_and_retried(caplog: pytest.LogCaptureFixture) -> None:
    from confluent_kafka import KafkaError, KafkaException

    caplog.set_level(logging.WARNING, "kaflite.spark")
    down = _committer(FakeClient(fail=KafkaException(KafkaError(KafkaError._TRANSPORT))))
    assert down.commit({("t", 0): 1}) is False
    refused = FakeClient(refuse=True)
    c = _committer(refused)
    assert c.commit({("t", 0): 1}) is False
    assert c.commit({("t", 0): 1}) is False and len(refused.requests) == 2  # not marked done: sent again
    assert "committing to group 'g' failed" in caplog.text and "group 'g' refused t-0" in caplog.text


def test_pickles_without_its_client() -> None:
    c = GroupCommitter("g", {"bootstrap.servers": "x"}, run_id="r1")
    c._client = object()
    assert pickle.loads(pickle.dumps(c))._client is None


def test_the_console_recognises_the_metadata() -> None:
    assert QUERY_METADATA_PREFIX + " " == SPARK_QUERY_METADATA_PREFIX
    assert is_spark_query({("t", 0): (3, query_metadata("abc", 4))})
    assert not is_spark_query({("t", 0): (3, "")}) and not is_spark_query({("t", 0): (3, "kaflite.spark")})
    assert parse_query_metadata("kaflite.spark query {broken") is None and parse_query_metadata(None) is None


# --- real queries ---------------------------------------------------------------------------------------
def _committed(kafka: Any, group: str) -> dict[tuple[str, int], tuple[int, str]]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = kafka.admin()
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    return {(tp.topic, tp.partition): (tp.offset, tp.metadata) for tp in res.topic_partitions if tp.offset >= 0}


def _describe(kafka: Any, group: str) -> dict[int, tuple[str, str, str]]:
    """`kaflite groups describe`: partition -> (CURRENT-OFFSET, LOG-END-OFFSET, LAG)."""
    out = subprocess.run(
        [sys.executable, "-m", "kaflite", "groups", "describe", "--group", group, "--bootstrap-server",
         kafka.bootstrap],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout
    rows = [line.split() for line in out.splitlines() if line.startswith(group + " ")]
    return {int(r[2]): (r[3], r[4], r[5]) for r in rows}


def _query(spark: Any, kafka: Any, topic: str, group: str, tmp_path: Any, **trigger: Any) -> Any:
    name = f"gc_{uuid.uuid4().hex[:8]}"
    return (
        spark.readStream.format("kaflite")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "10")
        .option("kafka.group.id", group)
        .option("commitOffsetsToGroup", "true")
        .load()
        .selectExpr("partition", "offset")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(**trigger)
        .start()
    )


@pytest.mark.spark
def test_available_now_query_leaves_its_group_at_the_end_offsets(spark: Any, kafka: Any, tmp_path: Any) -> None:
    topic = kafka.topic("gc-now", 2)
    kafka.produce(topic, [{"value": b"x", "partition": i % 2} for i in range(20)])
    group = f"etl-{uuid.uuid4().hex[:8]}"
    query = _query(spark, kafka, topic, group, tmp_path, availableNow=True)
    assert query.awaitTermination(120), "AvailableNow query did not finish"
    assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [10, 10]
    committed = _committed(kafka, group)
    # the last batch's end included: Spark's own commit(end) hook would leave it out (called one batch late)
    assert {tp: o for tp, (o, _m) in committed.items()} == {(topic, 0): 10, (topic, 1): 10}
    runs = {parse_query_metadata(m)["run"] for _o, m in committed.values()}  # type: ignore[index]
    assert len(runs) == 1
    assert _describe(kafka, group) == {0: ("10", "10", "0"), 1: ("10", "10", "0")}


@pytest.mark.spark
def test_processing_time_query_lag_falls_to_zero(spark: Any, kafka: Any, tmp_path: Any) -> None:
    topic = kafka.topic("gc-live", 2)
    kafka.produce(topic, [{"value": b"x", "partition": i % 2} for i in range(20)])
    group = f"etl-{uuid.uuid4().hex[:8]}"
    query = _query(spark, kafka, topic, group, tmp_path, processingTime="200 milliseconds")
    lags: list[int] = []
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and (not lags or lags[-1] > 0):
            committed = _committed(kafka, group)
            if committed:
                lags.append(20 - sum(o for o, _m in committed.values()))
            time.sleep(0.1)
        assert lags and lags[-1] == 0, lags
        # 10 records a batch: the group's lag was seen above 0 and only ever went down
        assert lags[0] > 0 and all(a >= b for a, b in zip(lags, lags[1:], strict=False)), lags
        # more data: the lag rises and the query brings it back to 0
        kafka.produce(topic, [{"value": b"y", "partition": 0} for _ in range(5)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _committed(kafka, group)[(topic, 0)][0] != 15:
            time.sleep(0.1)
        assert _describe(kafka, group) == {0: ("15", "15", "0"), 1: ("10", "10", "0")}
    finally:
        query.stop()
