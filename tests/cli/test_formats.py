"""Pure output formats: kafka-topics.sh --describe lines and the console consumer's record layout."""

from __future__ import annotations

from dataclasses import dataclass, field

from kaflite.cli.console import format_record
from kaflite.cli.topics import PartitionFilter, PartitionInfo, TopicInfo, describe_lines


def test_describe_lines_match_kafka_topics() -> None:
    info = TopicInfo(
        "abc",
        "7fY0nBpUS2mnYw7kPc1h5Q",
        [PartitionInfo(1, 0, [0], [0]), PartitionInfo(0, 0, [0], [0])],
        {"cleanup.policy": "compact", "retention.ms": "1000"},
    )
    assert describe_lines(info) == [
        "Topic: abc\tTopicId: 7fY0nBpUS2mnYw7kPc1h5Q\tPartitionCount: 2\tReplicationFactor: 1"
        "\tConfigs: cleanup.policy=compact,retention.ms=1000",
        "\tTopic: abc\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0",
        "\tTopic: abc\tPartition: 1\tLeader: 0\tReplicas: 0\tIsr: 0",
    ]


def test_describe_lines_without_id_leader_or_isr() -> None:
    info = TopicInfo("t", None, [PartitionInfo(0, -1, [1, 2, 3], [])], {})
    assert describe_lines(info) == [
        "Topic: t\tPartitionCount: 1\tReplicationFactor: 3\tConfigs: ",
        "\tTopic: t\tPartition: 0\tLeader: none\tReplicas: 1,2,3\tIsr: ",
    ]
    # Kafka leaves out the all-zero topic id
    assert describe_lines(TopicInfo("t", "AAAAAAAAAAAAAAAAAAAAAA", [], {}))[0].startswith(
        "Topic: t\tPartitionCount: 0"
    )


def test_describe_lines_of_a_partition_being_reassigned() -> None:
    # [1, 2] -> [2, 3]: RS 2,3,1 while 3 catches up; kafka-topics.sh adds the moving replicas, and its
    # replication factor (and "under-replicated") counts the replica set less the replicas being added
    moving = PartitionInfo(0, 1, [2, 3, 1], [1, 2], adding=[3], removing=[1])
    info = TopicInfo("t", None, [moving, PartitionInfo(1, 2, [2, 3], [2, 3])], {})
    assert describe_lines(info) == [
        "Topic: t\tPartitionCount: 2\tReplicationFactor: 2\tConfigs: ",
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 2,3,1\tIsr: 1,2\tAdding Replicas: 3\tRemoving Replicas: 1",
        "\tTopic: t\tPartition: 1\tLeader: 2\tReplicas: 2,3\tIsr: 2,3",
    ]
    assert describe_lines(info, PartitionFilter(under_replicated=True)) == []  # 2 in sync of RF 2
    # a move that finished between the two requests (its replicas no longer in the set): the set counts
    done = PartitionInfo(0, 2, [2, 3], [2], adding=[4], removing=[1])
    assert done.replication_factor == 2


def test_partition_reports_as_kafka_topics() -> None:
    # p0 in sync; p1 under-replicated, at min ISR; p2 led by a dead broker; p3 offline; p4 ISR below min
    info = TopicInfo("t", None, [
        PartitionInfo(0, 1, [1, 2, 3], [1, 2, 3]),
        PartitionInfo(1, 2, [2, 3, 1], [2, 3]),
        PartitionInfo(2, 9, [9, 1, 2], [9, 1, 2]),
        PartitionInfo(3, -1, [3, 1, 2], [3]),
        PartitionInfo(4, 1, [1, 2, 3], [1]),
    ], {}, min_isr=2)
    live = frozenset({1, 2, 3})

    def shown(only: PartitionFilter) -> list[int]:
        lines = describe_lines(info, only)
        assert all(line.startswith("\tTopic: t\tPartition: ") for line in lines)  # no topic line
        return [int(line.split("Partition: ")[1].split("\t")[0]) for line in lines]

    assert shown(PartitionFilter(under_replicated=True)) == [1, 3, 4]
    assert shown(PartitionFilter(unavailable=True, live_brokers=live)) == [2, 3]
    assert shown(PartitionFilter(under_min_isr=True)) == [3, 4]  # no leader counts as under min ISR
    assert shown(PartitionFilter(at_min_isr=True)) == [1]
    assert shown(PartitionFilter(under_replicated=True, unavailable=True, live_brokers=live)) == [1, 2, 3, 4]
    assert describe_lines(info, PartitionFilter(under_replicated=True))[0] == (
        "\tTopic: t\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,3")
    assert len(describe_lines(info, PartitionFilter())) == 6  # no report: the topic line and every partition


@dataclass
class Record:
    """A stand-in for confluent_kafka.Message's accessors (a value object, not a broker)."""

    _value: bytes | None
    _key: bytes | None = None
    _headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    _partition: int = 0
    _offset: int = 0
    _timestamp: tuple[int, int] = (1, 1700000000000)

    def value(self) -> bytes | None:
        return self._value

    def key(self) -> bytes | None:
        return self._key

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self._headers or None

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return self._timestamp


def test_value_only_by_default() -> None:
    assert format_record(Record(b"hello", b"k")) == "hello"
    assert format_record(Record(None)) == "null"


def test_all_fields_in_default_message_formatter_order() -> None:
    rec = Record(b"v", b"k", [("a", b"1"), ("b", None)], 3, 42, (1, 1700000000123))
    line = format_record(
        rec, print_timestamp=True, print_partition=True, print_offset=True, print_headers=True, print_key=True
    )
    assert line == "CreateTime:1700000000123\tPartition:3\tOffset:42\ta:1,b:null\tk\tv"


def test_log_append_time_no_headers_null_key_custom_separator() -> None:
    rec = Record(b"v", None, [], 0, 0, (2, 5))
    assert (
        format_record(rec, print_timestamp=True, print_headers=True, print_key=True, separator=" | ")
        == "LogAppendTime:5 | NO_HEADERS | null | v"
    )
    assert format_record(Record(b"v", _timestamp=(0, -1)), print_timestamp=True) == "NO_TIMESTAMP\tv"


def test_undecodable_bytes_do_not_crash() -> None:
    assert format_record(Record(b"\xff\xfeok")) == "\ufffd\ufffdok"
