"""Nothing from client input reaches a traceback: a null where the schema allows none is refused as Kafka's
parser refuses it (the connection is closed); refused connections are logged at DEBUG and summarised at
INFO once per interval."""

from __future__ import annotations

import logging
import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "server"))

from kwire import WireClient  # noqa: E402

from kaflite.protocol.guard import check_request_lengths  # noqa: E402
from kaflite.protocol.messages import ProtocolError, request_schema  # noqa: E402
from kaflite.server.connection import RefusalCounter  # noqa: E402
from kaflite.server.embedded import EmbeddedBroker  # noqa: E402


def _frame(api_key: int, version: int, body: bytes, flexible: bool) -> bytes:
    head = struct.pack(">hhih", api_key, version, 1, 2) + b"id" + (b"\x00" if flexible else b"")
    return struct.pack(">i", len(head) + len(body)) + head + body


# CreateTopics v4 (non-flexible): topics = null (-1), timeout, validate_only
NULL_TOPICS_V4 = struct.pack(">iib", -1, 1000, 0)
# DeleteTopics v6 (flexible): topics compact array null (varint 0), timeout, tagged fields
NULL_TOPICS_V6 = b"\x00" + struct.pack(">i", 1000) + b"\x00"
# ListOffsets v1: replica id, topics = [name = null string]
NULL_NAME_V1 = struct.pack(">ii", -1, 1) + struct.pack(">h", -1) + struct.pack(">i", 0)


def test_guard_refuses_null_in_non_nullable_fields() -> None:
    for key, version, body in ((19, 4, NULL_TOPICS_V4), (20, 6, NULL_TOPICS_V6), (2, 1, NULL_NAME_V1)):
        with pytest.raises(ProtocolError, match="null"):
            check_request_lengths(request_schema(key, version), body, 0)
    # Metadata v12: topics is nullable (null = all topics): accepted
    check_request_lengths(request_schema(3, 12), b"\x00\x00\x00\x00", 0)


def test_null_fields_close_the_connection_without_a_traceback(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="kaflite")
    with EmbeddedBroker(data_dir=tmp_path) as broker:
        for key, version, body, flexible in ((19, 4, NULL_TOPICS_V4, False), (20, 6, NULL_TOPICS_V6, True),
                                             (2, 1, NULL_NAME_V1, False)):
            with WireClient(broker.bootstrap) as bad:
                bad.send_raw(_frame(key, version, body, flexible))
                assert bad.is_closed(wait=5)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info], caplog.text
    closed = [r for r in caplog.records if "closing connection" in r.getMessage()]
    assert len(closed) == 3 and all(r.levelno == logging.DEBUG for r in closed)


def test_refusal_summary_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kaflite.server")
    now = [0.0]
    counter = RefusalCounter(60.0, clock=lambda: now[0])
    for i in range(1000):
        now[0] = i * 0.1  # 100 s of bad inputs, 10 a second
        counter.note(f"bad request header: attempt {i}" if i % 2 else "framing error: size -5")
    lines = [r.getMessage() for r in caplog.records if r.name == "kaflite.server"]
    assert len(lines) == 1, lines
    assert lines[0].startswith("closed 601 connections in the last 60 s for protocol violations")
    assert "bad request header x300" in lines[0] and "framing error x301" in lines[0]
    assert len(counter.reasons) <= 20


def test_elect_leaders_with_an_unknown_election_type_is_answered(tmp_path: Path) -> None:
    """Found by the fuzz test: election type -128 raised in the handler; Kafka answers an error."""
    from kio.schema.elect_leaders.v1.request import ElectLeadersRequest, TopicPartitions
    from kio.schema.errors import ErrorCode
    from kio.static.primitive import i8, i32

    with EmbeddedBroker(data_dir=tmp_path) as broker, WireClient(broker.bootstrap) as c:
        r = c.request(ElectLeadersRequest(
            election_type=i8(-128), topic_partitions=(TopicPartitions(topic="t", partitions=(i32(0),)),),
            timeout=__import__("datetime").timedelta(seconds=5)))
        assert r.error_code == ErrorCode.invalid_request
        assert r.replica_election_results[0].partition_result[0].error_code == ErrorCode.invalid_request
