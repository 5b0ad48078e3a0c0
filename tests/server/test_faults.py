"""Fault injection (server/faults.py, server/faults_response.py): the injected error answers are well-formed
responses of every version kaflite serves, the rules fire as told (times, rate with a seed, topic, client
id), and clients of the real libraries go through injected faults the way they go through real ones."""

from __future__ import annotations

import dataclasses
import struct
import time
import typing
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from helpers import free_port, iterate_values, kio_served_versions, produce_numbered
from kaflite.protocol.encoders import encode_produce_response
from kaflite.protocol.errors import ErrorCode
from kaflite.protocol.messages import _reader, encode_body, request_schema, response_schema
from kaflite.server.embedded import EmbeddedBroker
from kaflite.server.faults import FaultInjector, request_topics
from kaflite.server.faults_response import BUILDERS, error_response
from kaflite.server.handlers import load_registry

NLOF = ErrorCode.not_leader_or_follower


def _sample(cls: Any) -> Any:
    """A request entity with one item in every collection (topic "t", partition 0, group "g", ...)."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        tp = f.type
        is_collection = "tuple" in str(tp)
        if not is_collection and (f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING):
            continue
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if args and typing.get_origin(tp) is not tuple:
            tp = args[0]
        if typing.get_origin(tp) is tuple:
            inner = typing.get_args(tp)[0]
            values[f.name] = (_sample(inner),) if dataclasses.is_dataclass(inner) else (_scalar(inner, f),)
        elif dataclasses.is_dataclass(tp):
            values[f.name] = _sample(tp)
        else:
            values[f.name] = _scalar(tp, f)
    return cls(**values)


def _scalar(tp: Any, f: dataclasses.Field[Any]) -> Any:
    kafka_type = f.metadata.get("kafka_type", "")
    if kafka_type == "string" or tp is str or (isinstance(tp, type) and issubclass(tp, str)):
        return tp("t") if isinstance(tp, type) else "t"
    if kafka_type == "uuid":
        return uuid.UUID(int=7)
    if kafka_type == "bool":
        return False
    if kafka_type in ("bytes", "records"):
        return b""
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        import datetime

        return datetime.timedelta(0)
    return tp(0)


def _error_codes(entity: Any) -> list[Any]:
    out = []
    for f in dataclasses.fields(entity):
        v = getattr(entity, f.name)
        if f.metadata.get("kafka_type") == "error_code":
            out.append(v)
        elif isinstance(v, tuple):
            out.extend(c for item in v if dataclasses.is_dataclass(item) for c in _error_codes(item))
        elif dataclasses.is_dataclass(v):
            out.extend(_error_codes(v))
    return out


def _versions() -> list[tuple[int, int]]:
    # Produce v0-v2 (no kio schema): test_injected_error_answers_legacy_produce
    return [(k, v) for k, v in kio_served_versions(load_registry().ranges()) if k in BUILDERS]


@pytest.mark.parametrize(("api_key", "version"), _versions())
def test_injected_error_answer_is_a_well_formed_response_of_that_version(api_key: int, version: int) -> None:
    request = _sample(request_schema(api_key, version))
    answer = error_response(api_key, version, request, NLOF)
    assert type(answer) is response_schema(api_key, version)
    decoded, _size = _reader(type(answer))(encode_body(answer), 0)  # what a client parses
    codes = _error_codes(decoded)
    assert codes and all(c == NLOF for c in codes), codes
    # the topics (partitions, groups) the request names are answered, each with the error
    nested = [c for f in dataclasses.fields(decoded) if isinstance(getattr(decoded, f.name), tuple)
              for item in getattr(decoded, f.name) if dataclasses.is_dataclass(item) for c in _error_codes(item)]
    if request_topics(request) or (api_key, version >= 4) == (10, True) or (api_key, version >= 3) == (13, True) or api_key == 15:
        assert nested, f"no per-item error in {type(answer).__name__} v{version}: {decoded}"


def test_injected_error_answers_legacy_produce() -> None:
    from kaflite.protocol.produce_request import decode_request

    ms = b"\x00" * 12 + b"junk"  # the answer does not look at the records
    body = struct.pack(">hii", 1, 1000, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">iii", 1, 5, len(ms)) + ms
    for version in (0, 1, 2):
        answer = error_response(0, version, decode_request(body, 0, version), NLOF)
        expected = encode_produce_response(version, 0, [("t", [(5, NLOF.value, -1, -1, -1, None, ())])])
        assert answer.parts == [expected]
    assert struct.unpack_from(">h", expected, 4 + 3 + 4 + 4)[0] == NLOF.value  # topic count, name, count, index


def test_unsupported_api_is_refused_when_the_rule_is_added() -> None:
    with pytest.raises(ValueError, match="not supported for CreateTopics"):
        FaultInjector().fail(api="CreateTopics", error="NOT_CONTROLLER")
    with pytest.raises(ValueError, match="unknown api"):
        FaultInjector().fail(api="Prodce", error="NOT_CONTROLLER")
    with pytest.raises(ValueError, match="unknown error"):
        FaultInjector().fail(api="Produce", error="NOT_A_LEADER")


def test_rules_fire_n_times_per_topic_and_client_id() -> None:
    faults = FaultInjector()
    produce = _sample(request_schema(0, 9))  # one topic named "t"
    faults.fail(api="Produce", error="NOT_LEADER_OR_FOLLOWER", times=2, topic="t", client_id="app")
    assert faults.match(0, "other", produce) is None
    assert faults.match(1, "app", produce) is None
    assert faults.match(0, "app", produce) is not None
    assert faults.match(0, "app", produce) is not None
    assert faults.match(0, "app", produce) is None  # used up and removed
    assert faults.rules() == []
    faults.fail(api="Produce", error="NOT_LEADER_OR_FOLLOWER", topic="u")
    assert faults.match(0, "app", produce) is None  # request names topic t only
    assert faults.counts == {("error", "Produce", "NOT_LEADER_OR_FOLLOWER"): 2}


def test_rate_is_deterministic_with_a_seed() -> None:
    def pattern() -> list[bool]:
        faults = FaultInjector()
        faults.delay(api="Fetch", ms=1, rate=0.3, seed=42)
        return [faults.match(1, None, None) is not None for _ in range(200)]

    first = pattern()
    assert first == pattern()
    assert 30 < sum(first) < 90  # about 60 of 200


# --- against a broker, with the client libraries ------------------------------------------------------
@pytest.fixture(scope="module")
def faulty() -> Iterator[EmbeddedBroker]:
    metrics_port = free_port()
    with EmbeddedBroker(overrides={"kaflite.faults.enable": "true",
                                   "metrics.listener": f"http://127.0.0.1:{metrics_port}"}) as b:
        b.metrics_port = metrics_port  # type: ignore[attr-defined]
        yield b


@pytest.fixture
def faults(faulty: EmbeddedBroker) -> Iterator[FaultInjector]:
    yield faulty.faults
    faulty.faults.clear()


def _topic(broker: EmbeddedBroker) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"f-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(broker.confluent_config())
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(10)
    return name


def test_faults_are_off_unless_enabled() -> None:
    with EmbeddedBroker() as b:
        assert b.server.broker.faults is None
        with pytest.raises(RuntimeError, match="kaflite.faults.enable"):
            b.faults.fail(api="Produce", error="NOT_LEADER_OR_FOLLOWER")


def test_idempotent_producer_retries_through_injected_not_leader_errors_without_duplicates(
        faulty: EmbeddedBroker, faults: FaultInjector) -> None:
    topic = _topic(faulty)
    faults.fail(api="Produce", error="NOT_LEADER_OR_FOLLOWER", times=3, topic=topic)
    p = Producer({**faulty.confluent_config(), "enable.idempotence": True, "linger.ms": 0,
                  "retry.backoff.ms": 10})
    errors: list[str] = []
    for i in range(20):
        p.produce(topic, str(i).encode(), on_delivery=lambda err, msg: errors.append(str(err)) if err else None)
    assert p.flush(30) == 0
    assert errors == []
    assert faults.total("error") == 3  # all three were answered with the error, and retried
    c = Consumer({**faulty.confluent_config(), "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(got) < 21:
        m = c.poll(0.3)
        if m is not None and m.error() is None:
            got.append(m.value())
        elif len(got) == 20 and m is None:
            break
    c.close()
    assert got == [str(i).encode() for i in range(20)]  # every record once, in order
    body = urllib.request.urlopen(f"http://127.0.0.1:{faulty.metrics_port}/metrics", timeout=10).read().decode()  # type: ignore[attr-defined]
    assert 'kaflite_faults_injected_total{error="NOT_LEADER_OR_FOLLOWER",kind="error",request="Produce"} 3.0' in body


def test_kafka_python_consumer_keeps_consuming_across_injected_fetch_error_and_delay(
        faulty: EmbeddedBroker, faults: FaultInjector) -> None:
    from kafka import KafkaConsumer

    topic = _topic(faulty)
    p = Producer(faulty.confluent_config())
    first = produce_numbered(p, topic, "a", timeout=10)
    consumer = KafkaConsumer(topic, **faulty.kafka_python_config(), auto_offset_reset="earliest",
                             consumer_timeout_ms=20000, client_id="kp-under-test")
    got: list[bytes] = []
    iterate_values(consumer, got, 5)
    faults.fail(api="Fetch", error="NOT_LEADER_OR_FOLLOWER", times=2, client_id="kp-under-test")
    faults.delay(api="Fetch", ms=300, times=3, client_id="kp-under-test")
    second = produce_numbered(p, topic, "b", timeout=10)
    iterate_values(consumer, got, 20)
    consumer.close()
    assert got == first + second
    # the consumer went through both errors and at least one delay (more once it polls again)
    assert faults.counts[("error", "Fetch", "NOT_LEADER_OR_FOLLOWER")] == 2
    assert faults.counts[("delay", "Fetch", "")] >= 1


def test_dropped_connection_is_reopened_by_the_client(faulty: EmbeddedBroker, faults: FaultInjector) -> None:
    topic = _topic(faulty)
    faults.drop_connections(api="Produce", times=1, topic=topic)
    p = Producer({**faulty.confluent_config(), "enable.idempotence": True})
    p.produce(topic, b"x")
    assert p.flush(30) == 0
    assert faults.total("drop") == 1


def test_cli_adds_lists_and_clears_rules_on_a_running_broker(faulty: EmbeddedBroker, faults: FaultInjector) -> None:
    import json

    from typer.testing import CliRunner

    from kaflite.cli.main import app

    runner = CliRunner()
    b = ["--bootstrap-server", faulty.bootstrap]
    topic = _topic(faulty)
    added = runner.invoke(app, ["faults", "add", "--api", "Produce", "--error", "NOT_LEADER_OR_FOLLOWER",
                                "--times", "2", "--topic", topic, *b])
    assert added.exit_code == 0, added.output
    rule = json.loads(added.output.strip())
    assert rule["api"] == "Produce" and rule["error"] == "NOT_LEADER_OR_FOLLOWER" and rule["times"] == 2
    assert faults.rules() == [rule]  # the broker holds it
    p = Producer({**faulty.confluent_config(), "enable.idempotence": True})
    p.produce(topic, b"x")
    assert p.flush(30) == 0
    assert faults.counts[("error", "Produce", "NOT_LEADER_OR_FOLLOWER")] >= 2

    runner.invoke(app, ["faults", "add", "--api", "Fetch", "--delay-ms", "5", "--rate", "0.5", "--seed", "3", *b])
    throttled = runner.invoke(app, ["faults", "add", "--api", "JoinGroup", "--throttle-ms", "250", *b])
    half = runner.invoke(app, ["faults", "add", "--api", "SyncGroup", "--half-close", "--times", "1", *b])
    assert throttled.exit_code == 0 and half.exit_code == 0, throttled.output + half.output
    two = runner.invoke(app, ["faults", "add", "--api", "Fetch", "--drop", "--half-close", *b])
    assert two.exit_code == 2 and "exactly one of" in two.output
    listed = runner.invoke(app, ["faults", "list", *b])
    assert listed.exit_code == 0, listed.output
    rules = [json.loads(line) for line in listed.output.splitlines()]
    assert [(r["api"], r["kind"]) for r in rules] == [  # Produce's used up
        ("Fetch", "delay"), ("JoinGroup", "throttle"), ("SyncGroup", "half_close")]
    assert rules[1]["ms"] == 250 and rules[2]["times"] == 1
    refused = runner.invoke(app, ["faults", "add", "--api", "CreateTopics", "--error", "NOT_CONTROLLER", *b])
    assert refused.exit_code == 1 and "not supported for CreateTopics" in refused.output
    cleared = runner.invoke(app, ["faults", "clear", *b])
    assert cleared.exit_code == 0 and "removed 3 fault rule(s)" in cleared.output
    assert faults.rules() == []


def test_cli_against_a_broker_without_fault_injection() -> None:
    from typer.testing import CliRunner

    from kaflite.cli.main import app

    with EmbeddedBroker() as b:
        out = CliRunner().invoke(app, ["faults", "list", "--bootstrap-server", b.bootstrap])
    assert out.exit_code == 1
    assert "kaflite.faults.enable=true" in out.output


# --- throttle and half-close faults (issue 31) ---------------------------------------------------------
def _api_versions_frame(correlation_id: int, version: int = 1) -> bytes:
    client = b"raw"
    body = struct.pack(">hhih", 18, version, correlation_id, len(client)) + client  # header v1, empty body
    return struct.pack(">i", len(body)) + body


def _read_frame(sock: Any) -> bytes:
    def exactly(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise EOFError(f"EOF after {len(out)} of {n} bytes")
            out += chunk
        return out

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def test_throttle_and_half_close_rules_from_their_descriptions() -> None:
    faults = FaultInjector()
    throttled = faults.add({"kind": "throttle", "api": "Produce", "ms": 250, "times": 1})
    assert throttled.describe() == {"id": 1, "kind": "throttle", "api": "Produce", "ms": 250, "times": 1, "fired": 0}
    half = faults.add({"kind": "half_close", "api": "Fetch", "client_id": "c"})
    assert half.describe() == {"id": 2, "kind": "half_close", "api": "Fetch", "client_id": "c", "fired": 0}
    with pytest.raises(ValueError, match="ms must be >= 1"):
        faults.throttle(api="Produce", ms=0)
    assert faults.match(0, None, None) is throttled
    assert faults.match(1, "c", None) is half
    assert faults.counts == {("throttle", "Produce", ""): 1, ("half_close", "Fetch", ""): 1}


def test_throttle_fault_answers_with_the_throttle_time_and_mutes_the_connection(
        faulty: EmbeddedBroker, faults: FaultInjector) -> None:
    import socket

    before = faults.total("throttle")
    faults.throttle(api="ApiVersions", ms=600, times=1)
    host, port = faulty.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(_api_versions_frame(1) + _api_versions_frame(2))  # pipelined
        started = time.monotonic()
        first = _read_frame(sock)
        first_at = time.monotonic() - started
        second = _read_frame(sock)
        second_at = time.monotonic() - started
    # ApiVersions v1 response: correlation id, error code, api keys array, then throttle_time_ms
    (correlation, error, n) = struct.unpack(">ihi", first[:10])
    (throttle_ms,) = struct.unpack(">i", first[10 + 6 * n:14 + 6 * n])
    assert (correlation, error, throttle_ms) == (1, 0, 600)  # answered normally, with the throttle time
    (second_throttle,) = struct.unpack(">i", second[10 + 6 * n:14 + 6 * n])
    assert struct.unpack(">i", second[:4]) == (2,) and second_throttle == 0
    # KIP-219: the pipelined second request is read only once the mute that began after the first answer
    # ends (without it both answers come together); a gap, not absolute times, so a loaded machine passes
    assert second_at - first_at >= 0.5
    assert faults.total("throttle") == before + 1


def test_confluent_producer_reports_an_injected_throttle(faulty: EmbeddedBroker, faults: FaultInjector) -> None:
    topic = _topic(faulty)
    before = faults.total("throttle")  # counts are the module broker's, across tests
    faults.throttle(api="Produce", ms=300, times=1, topic=topic)
    events: list[Any] = []
    p = Producer({**faulty.confluent_config(), "linger.ms": 0, "throttle_cb": events.append})
    p.produce(topic, b"x")
    assert p.flush(30) == 0
    deadline = time.monotonic() + 5
    while not events and time.monotonic() < deadline:  # the callback is served by poll
        p.poll(0.1)
    assert [round(e.throttle_time, 3) for e in events] == [0.3]  # seconds, from the produce response
    assert faults.total("throttle") == before + 1


def test_half_closed_connection_gives_eof_and_stays_open_on_the_broker(
        faulty: EmbeddedBroker, faults: FaultInjector) -> None:
    import socket

    before = faults.total("half_close")
    faults.half_close(api="ApiVersions", times=1)
    host, port = faulty.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(_api_versions_frame(1))
        assert sock.recv(100) == b""  # EOF, no answer
        # the broker's end still reads: a fully closed socket would answer these writes with a reset
        for i in range(3):
            sock.sendall(_api_versions_frame(2 + i))
            time.sleep(0.1)
        sock.sendall(_api_versions_frame(9))
    assert faults.total("half_close") == before + 1


def test_confluent_producer_reconnects_after_a_half_closed_connection(
        faulty: EmbeddedBroker, faults: FaultInjector) -> None:
    topic = _topic(faulty)
    before = faults.total("half_close")
    faults.half_close(api="Produce", times=2, topic=topic)
    p = Producer({**faulty.confluent_config(), "enable.idempotence": True, "linger.ms": 0,
                  "reconnect.backoff.ms": 10})
    for i in range(5):
        p.produce(topic, str(i).encode())
    assert p.flush(30) == 0
    assert faults.total("half_close") == before + 2
    c = Consumer({**faulty.confluent_config(), "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(got) < 5:
        m = c.poll(0.3)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    assert got == [str(i).encode() for i in range(5)]  # each once: the unanswered produce was not appended
