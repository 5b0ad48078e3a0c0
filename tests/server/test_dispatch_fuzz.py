"""Any frame either gets a response (or none, for acks=0) or closes its connection: never another
exception. Random bodies behind valid headers for every served (api key, version), through the real
dispatcher on a real broker (in-process, no socket).

A request that does not answer within the bound is a failure (a hang), unless it is one Kafka lets wait:
a Fetch with a positive max_wait (long poll), a JoinGroup or SyncGroup (parked until the group settles).
A request that returns no response is a failure too, unless it is a Produce with acks=0, which Kafka never
answers (and which must then get no response: it is answered by silence, or by a closed connection when a
partition failed).

The broker runs its transaction coordinator from the start (as it does once any client used
transactions), so a transactional Produce meets the transaction check: main 4d8347e failed there.
"""

from __future__ import annotations

import asyncio
import struct
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import kio_served_versions
from kaflite.coordinator.runtime import ShardState
from kaflite.protocol.errors import ProtocolError
from kaflite.protocol.messages import decode_request, parse_request_header
from kaflite.server.app import KafkaServer
from kaflite.server.coordinators.transactions import TransactionService
from kaflite.server.dispatcher import CloseConnection
from kaflite.server.embedded import load_broker_config
from kaflite.server.handlers import admin

PARKED_S = 0.5  # how long a request that may legitimately wait is given before it counts as parked
ANSWER_S = 20.0  # any other request must be answered (or refused) within this, even on a loaded machine


def _kind(frame: bytes) -> tuple[bool, bool | None]:
    """(whether Kafka lets this request wait for an event: long-poll Fetch, JoinGroup, SyncGroup;
    whether it is answered: False for Produce acks=0, None when it does not decode)."""
    try:
        header, offset = parse_request_header(frame)
        request = decode_request(header, frame, offset)
    except ProtocolError:
        return False, None  # the dispatcher refuses it at once
    if header.api_key == 0:  # Produce: Kafka never answers acks=0
        return False, request.acks != 0
    if header.api_key == 1:  # Fetch
        return request.max_wait.total_seconds() > 0, True
    return header.api_key in (11, 14), True  # JoinGroup, SyncGroup


async def _dispatch_bounded(srv: KafkaServer, frame: bytes) -> None:
    waits, answered = _kind(frame)
    try:
        out = await asyncio.wait_for(srv.dispatcher.dispatch(frame), PARKED_S if waits else ANSWER_S)
    except CloseConnection:
        return
    except TimeoutError:
        assert waits, f"no answer within {ANSWER_S} s to a request that may not wait: {frame!r}"
        return
    assert answered is not None, f"a request that does not decode was handled: {frame!r}"
    if answered:
        assert out is not None, f"no response (and the connection kept) for a request Kafka answers: {frame!r}"
    else:
        assert out is None, f"a response to a Produce with acks=0 (Kafka sends none): {frame!r}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    loop = asyncio.new_event_loop()
    data: Path = tmp_path_factory.mktemp("fuzz")
    cfg = load_broker_config({"log.dirs": str(data), "listeners": "PLAINTEXT://127.0.0.1:0"}, True)
    srv = KafkaServer(cfg)
    loop.run_until_complete(srv.start())
    srv.broker.create_topic("fuzz", 2)
    _start_transaction_coordinator(loop, srv)
    yield loop, srv
    loop.run_until_complete(srv.stop())
    loop.close()


def _start_transaction_coordinator(loop: asyncio.AbstractEventLoop, srv: KafkaServer) -> None:
    """Start the transaction coordinator and wait until it coordinates every transactional id (bounded)."""

    async def loaded() -> None:
        svc = TransactionService.of(srv.broker)
        for _ in range(500):
            if all(svc.runtime.state(p) is ShardState.ACTIVE for p in range(svc.config.num_partitions)):
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the transaction coordinator did not load within 5 s")

    loop.run_until_complete(loaded())


def _apis(server_registry) -> list[tuple[int, int]]:
    return [(k, v) for k, lo, hi in server_registry.ranges() for v in range(lo, hi + 1)]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_bodies_never_raise_anything_but_close(server, data) -> None:
    loop, srv = server
    api_key, version = data.draw(st.sampled_from(_apis(srv.registry)))
    body = data.draw(st.binary(max_size=64))
    header = struct.pack(">hhih", api_key, version, 7, 1) + b"f"
    from kaflite.protocol.messages import request_schema

    schema = request_schema(api_key, version)  # None for Produce v0-v2 (decoded by hand, never flexible)
    if schema is not None and schema.__flexible__:
        header += b"\x00"

    loop.run_until_complete(_dispatch_bounded(srv, header + body))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_well_formed_requests_with_odd_values_get_an_answer(server, data, monkeypatch: pytest.MonkeyPatch) -> None:
    """Decodable requests with arbitrary field values (negative partitions, empty names, huge offsets):
    the handler answers with error codes, never an exception."""
    import io

    from kio.serial import entity_writer
    from kio.static.primitive import Records

    from kaflite.protocol.messages import request_schema
    from kaflite.protocol.record_batch import build_record_batch

    st.register_type_strategy(
        Records,
        st.one_of(st.binary(max_size=80), st.just(build_record_batch([(b"k", b"v", [])]))).map(Records),
    )
    # keep generated CreateTopics small (the guard itself is the same); restored after the test
    monkeypatch.setattr(admin, "MAX_PARTITIONS_PER_TOPIC", 16)
    loop, srv = server
    mine = {0, 1, 2, 3, 18, 19, 20, 21, 22, 32, 33, 35, 37, 44, 60}
    api_key, version = data.draw(st.sampled_from([a for a in kio_served_versions(srv.registry.ranges())
                                                  if a[0] in mine]))
    schema = request_schema(api_key, version)
    request = data.draw(st.from_type(schema))
    buf = io.BytesIO()
    entity_writer(schema)(buf, request)
    header = struct.pack(">hhih", api_key, version, 7, 1) + b"f" + (b"\x00" if schema.__flexible__ else b"")

    loop.run_until_complete(_dispatch_bounded(srv, header + buf.getvalue()))


# Produce inputs the hypothesis test found (the first failed main 4d8347e: the transaction check read the
# null records of a partition that does not exist, a TypeError instead of an answer), and their
# neighbours: (version, transactional id, acks, topic, partition, records, the partition's expected error
# code, or "closed" for an acks=0 request whose partition failed, or "silent" for one that succeeded)
_INVALID_RECORD, _UNKNOWN_TOPIC = 87, 3
PRODUCE_CASES = [
    pytest.param(3, "", 0, "", 0, None, "closed", id="found-on-main-v3-txn-acks0-unknown-topic-null-records"),
    pytest.param(8, "\x83\x8aæÍ\U00035d23\x1cØ÷çm\x17\U00069e60\U000ee865×\x89", 0, "\x85?\x7fá", 4102, None,
                 "closed", id="found-v8-txn-acks0-unknown-partition-null-records"),
    pytest.param(3, "", 1, "", 0, None, _UNKNOWN_TOPIC, id="txn-unknown-topic-null-records"),
    pytest.param(8, "tx", -1, "fuzz", 7, None, _UNKNOWN_TOPIC, id="txn-unknown-partition-null-records"),
    pytest.param(3, "", 1, "fuzz", 0, None, _INVALID_RECORD, id="txn-null-records"),
    pytest.param(11, "tx", -1, "fuzz", 1, b"", _INVALID_RECORD, id="txn-empty-records"),
    pytest.param(9, None, 1, "fuzz", 0, None, _INVALID_RECORD, id="null-records"),
    pytest.param(3, "", 0, "fuzz", 0, None, "closed", id="txn-acks0-null-records"),
    pytest.param(3, None, 0, "fuzz", 1, "batch", "silent", id="acks0-appended"),
]


@pytest.mark.parametrize(("version", "txn_id", "acks", "topic", "partition", "records", "expected"), PRODUCE_CASES)
def test_found_produce_inputs_get_kafkas_answer(server, version: int, txn_id: str | None, acks: int, topic: str,
                                                partition: int, records: bytes | str | None,
                                                expected: int | str) -> None:
    import io

    from kio.serial import entity_writer
    from kwire import decode_response

    from kaflite.protocol.messages import request_schema
    from kaflite.protocol.record_batch import build_record_batch

    loop, srv = server
    schema = request_schema(0, version)
    module = __import__(schema.__module__, fromlist=["TopicProduceData", "PartitionProduceData"])
    data = build_record_batch([(b"k", b"v", [])]) if records == "batch" else records
    request = schema(transactional_id=txn_id, acks=acks, timeout=timedelta(0), topic_data=(
        module.TopicProduceData(name=topic, partition_data=(
            module.PartitionProduceData(index=partition, records=data),)),))
    buf = io.BytesIO()
    entity_writer(schema)(buf, request)
    frame = struct.pack(">hhih", 0, version, 7, 1) + b"f" + (b"\x00" if schema.__flexible__ else b"") + buf.getvalue()
    loop.run_until_complete(_dispatch_bounded(srv, frame))  # the hypothesis test's own check first

    try:
        out = loop.run_until_complete(asyncio.wait_for(srv.dispatcher.dispatch(frame), ANSWER_S))
    except CloseConnection as e:
        assert expected == "closed", f"connection closed ({e}) where Kafka answers {expected}"
        assert "acks=0 produce failed" in str(e)
        return
    if expected == "silent":
        assert out is None
        return
    assert out is not None and expected != "closed", out
    response = decode_response(0, version, b"".join(bytes(p) for p in out)[4:], 7)
    [topic_response] = response.responses
    [part] = topic_response.partition_responses
    assert (topic_response.name, part.index, part.error_code) == (topic, partition, expected)
    if expected == _INVALID_RECORD and version >= 8:
        assert part.error_message == (f"Produce requests with version {version} must have at least one record "
                                      "batch per partition")
