"""Option parsing and validation, against the rules and messages of Spark's KafkaSourceProvider."""

from __future__ import annotations

import pytest

from kaflite.spark.options import (
    OptionError,
    parse_duration_ms,
    parse_reader_options,
    parse_writer_options,
)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_subscribe_splits_and_trims_topics_and_is_case_insensitive() -> None:
    o = parse_reader_options(BASE | {"SubScribe": " a, b ,,c "}, streaming=True)
    assert o.strategy == "subscribe"
    assert o.topics == ("a", "b", "c")
    assert o.matches("b") and not o.matches("d")


def test_defaults_follow_spark_streaming_latest_batch_earliest() -> None:
    s = parse_reader_options(BASE | {"subscribe": "a"}, streaming=True)
    b = parse_reader_options(BASE | {"subscribe": "a"}, streaming=False)
    assert s.starting.kind == "latest"
    assert b.starting.kind == "earliest" and b.ending.kind == "latest"
    assert s.fail_on_data_loss is True and s.include_headers is False
    assert s.max_trigger_delay_ms == 15 * 60 * 1000


@pytest.mark.parametrize(
    "extra, message",
    [
        ({}, "One of the following options must be specified"),
        ({"subscribe": "a", "assign": '{"a":[0]}'}, "Only one of the following options"),
        ({"subscribe": " , "}, "No topics to subscribe to"),
        ({"subscribePattern": "  "}, "Pattern to subscribe is empty"),
        ({"subscribePattern": "a["}, "not a valid regular expression"),
        ({"assign": "a"}, "No topicpartitions to assign"),
        ({"assign": '{"a": "0"}'}, "list of partition numbers"),
    ],
)
def test_strategy_errors(extra: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_reader_options(BASE | extra, streaming=True)


@pytest.mark.parametrize(
    "key, message",
    [
        ("kafka.auto.offset.reset", "auto.offset.reset' is not supported"),
        ("kafka.key.deserializer", "key.deserializer' is not supported"),
        ("kafka.value.deserializer", "value.deserializer' is not supported"),
        ("kafka.enable.auto.commit", "enable.auto.commit' is not supported"),
        ("kafka.interceptor.classes", "interceptor.classes' is not supported"),
    ],
)
def test_rejects_the_consumer_settings_spark_rejects(key: str, message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_reader_options(BASE | {"subscribe": "a", key: "x"}, streaming=True)


def test_bootstrap_servers_required() -> None:
    with pytest.raises(OptionError, match="kafka.bootstrap.servers' must be specified"):
        parse_reader_options({"subscribe": "a"}, streaming=True)


def test_kafka_prefixed_options_reach_the_client_without_prefix() -> None:
    o = parse_reader_options(BASE | {"subscribe": "a", "kafka.client.id": "me", "other": "x"}, streaming=True)
    assert o.client_config == {"bootstrap.servers": "127.0.0.1:9092", "client.id": "me"}


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"startingOffsets": "latest"}, "starting offset can't be latest for batch"),
        (
            {"startingOffsets": '{"a":{"0":-1}}', "endingOffsets": '{"a":{"0":-1}}'},
            "can't be latest for batch",
        ),
        ({"endingOffsets": "earliest"}, "ending offset can't be earliest"),
        ({"endingOffsets": '{"a":{"0":-2}}'}, "can't be earliest for batch"),
        (
            {"startingOffsets": '{"a":{"0":5}}', "endingOffsets": '{"a":{"0":3}}'},
            "greater than the ending offset",
        ),
        ({"startingOffsets": '{"a":{"0":1}}', "endingOffsets": '{"a":{"1":3}}'}, "same topic partitions"),
        ({"startingOffsets": "{bad json"}, "expects JSON"),
        ({"startingOffsets": '{"a":{"0":"x"}}'}, "is not an integer"),
        ({"startingTimestamp": "soon"}, "Expected a single long value"),
        ({"minPartitions": "0"}, "minPartitions must be positive"),
        ({"minPartitions": "two"}, "must be an integer"),
        ({"failOnDataLoss": "maybe"}, "'failOnDataLoss' must be 'true' or 'false'"),
    ],
)
def test_batch_offset_errors(extra: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_reader_options(BASE | {"subscribe": "a"} | extra, streaming=False)


@pytest.mark.parametrize("key", ["endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"])
def test_ending_options_are_refused_in_streaming(key: str) -> None:
    with pytest.raises(OptionError, match="not valid in streaming queries"):
        parse_reader_options(BASE | {"subscribe": "a", key: "1"}, streaming=True)


def test_min_above_max_offsets_per_trigger_refused() -> None:
    with pytest.raises(
        OptionError, match=r"minOffsetPerTrigger\(10\) is higher than the maxOffsetsPerTrigger\(5\)"
    ):
        parse_reader_options(
            BASE | {"subscribe": "a", "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"},
            streaming=True,
        )


def test_offset_spec_precedence_global_timestamp_then_per_partition_then_offsets() -> None:
    both = {
        "startingTimestamp": "1000",
        "startingOffsetsByTimestamp": '{"a":{"0":5}}',
        "startingOffsets": "earliest",
    }
    o = parse_reader_options(BASE | {"subscribe": "a"} | both, streaming=True)
    assert o.starting.kind == "timestamp" and o.starting.timestamp == 1000
    del both["startingTimestamp"]
    o = parse_reader_options(BASE | {"subscribe": "a"} | both, streaming=True)
    assert o.starting.kind == "timestamps" and o.starting.offsets == {("a", 0): 5}
    o = parse_reader_options(
        BASE | {"subscribe": "a", "startingOffsets": '{"a":{"0":7,"1":-2}}'}, streaming=True
    )
    assert o.starting.kind == "offsets" and o.starting.offsets == {("a", 0): 7, ("a", 1): -2}


def test_assign_lists_topic_partitions() -> None:
    o = parse_reader_options(BASE | {"assign": '{"a":[0,2],"b":[1]}'}, streaming=True)
    assert o.assigned == (("a", 0), ("a", 2), ("b", 1))


@pytest.mark.parametrize(
    "raw, ms", [("15m", 900_000), ("30s", 30_000), ("250ms", 250), ("2h", 7_200_000), ("40", 40)]
)
def test_durations(raw: str, ms: int) -> None:
    assert parse_duration_ms(raw, "maxTriggerDelay") == ms


def test_duration_error_names_the_option() -> None:
    with pytest.raises(OptionError, match="maxTriggerDelay"):
        parse_duration_ms("soon", "maxTriggerDelay")


def test_writer_options_topic_trimmed_and_serializers_refused() -> None:
    w = parse_writer_options(BASE | {"topic": " out ", "kafka.linger.ms": "1"})
    assert w.topic == "out" and w.client_config["linger.ms"] == "1"
    with pytest.raises(OptionError, match="key.serializer' is not supported"):
        parse_writer_options(BASE | {"kafka.key.serializer": "x"})


def test_writer_exactly_once_options() -> None:
    w = parse_writer_options(BASE | {"topic": "out", "exactlyOnce": "true", "transactionalIdPrefix": " q1 "})
    assert w.exactly_once and w.transactional_id_prefix == "q1"
    assert not parse_writer_options(BASE | {"topic": "out"}).exactly_once
    with pytest.raises(OptionError, match="needs 'transactionalIdPrefix'"):
        parse_writer_options(BASE | {"topic": "out", "exactlyOnce": "true"})
    with pytest.raises(OptionError, match="'exactlyOnce' must be 'true' or 'false'"):
        parse_writer_options(BASE | {"topic": "out", "exactlyOnce": "yes", "transactionalIdPrefix": "q"})
    with pytest.raises(OptionError, match="kafka.transactional.id' cannot be set"):
        parse_writer_options(BASE | {"topic": "out", "exactlyOnce": "true", "transactionalIdPrefix": "q",
                                     "kafka.transactional.id": "x"})
    # the progress is a group offset of partition 0 of an existing topic: the output topic by default
    assert w.progress_topic == "out"
    assert parse_writer_options(BASE | {"topic": "out", "exactlyOnce": "true", "transactionalIdPrefix": "q",
                                        "progressTopic": " marks "}).progress_topic == "marks"
    assert parse_writer_options(BASE | {"exactlyOnce": "true", "transactionalIdPrefix": "q",
                                        "progressTopic": "marks"}).progress_topic == "marks"
    with pytest.raises(OptionError, match="needs the 'topic' option or 'progressTopic'"):
        parse_writer_options(BASE | {"exactlyOnce": "true", "transactionalIdPrefix": "q"})


def test_java_only_client_settings_are_accepted_and_not_passed_to_librdkafka() -> None:
    o = parse_reader_options(BASE | {"subscribe": "a", "kafka.max.poll.records": "500"}, streaming=True)
    assert "max.poll.records" not in o.client_config
