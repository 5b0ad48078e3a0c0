"""The source's fast path (kaflite's Fetch client + kaflite.spark.batches) against batches written by
confluent-kafka (librdkafka), kafka-python and aiokafka in every codec each supports here, with headers,
tombstones, control batches and aborted transactions: the raw batches the broker returns, decoded whole,
and `read_range` on the fast path give the same rows as the librdkafka path (a `Message` per record).
Uses the Spark tests' embedded broker; no Spark session."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from kaflite.spark.batches import decode_batches
from kaflite.spark.client import read_range
from kaflite.spark.fetch import FetchConnection
from kaflite.spark.offsets import OffsetRange

Row = tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]


def rows(n: int = 60) -> list[Row]:
    out: list[Row] = []
    for i in range(n):
        key = None if i % 3 == 0 else b"key-%d" % i
        value = None if i % 3 == 1 else b"v" * (i * 7 % 300)  # tombstones and empty values too
        headers = [("h1", b"x%d" % i), ("h-two", b"")] if i % 5 == 0 else []
        out.append((key, value, headers))
    return out


def confluent_produce(bootstrap: str, topic: str, codec: str, data: list[Row]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
                  "batch.num.messages": 17})
    for key, value, headers in data:
        p.produce(topic, value, key, partition=0, headers=headers or None)
    assert p.flush(30) == 0


def kafka_python_produce(bootstrap: str, topic: str, codec: str, data: list[Row]) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                      linger_ms=5, batch_size=2048)
    try:
        for key, value, headers in data:
            p.send(topic, value=value, key=key, headers=headers, partition=0)
        p.flush(30)
    finally:
        p.close()


def aiokafka_produce(bootstrap: str, topic: str, codec: str, data: list[Row]) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                             linger_ms=5, max_batch_size=2048)
        await p.start()
        try:
            futures = [await p.send(topic, value=value, key=key, headers=headers, partition=0)
                       for key, value, headers in data]
            await asyncio.gather(*futures)
        finally:
            await p.stop()

    asyncio.run(run())


ALL = ["none", "gzip", "snappy", "lz4", "zstd"]
# kafka-python compresses snappy and zstd only with python-snappy / zstandard, which the venv does not
# hold (kafka.codec.has_snappy() / has_zstd() are False): its other codecs are covered
CASES = (
    [("confluent-kafka", confluent_produce, c) for c in ALL]
    + [("kafka-python", kafka_python_produce, c) for c in ("none", "gzip", "lz4")]
    + [("aiokafka", aiokafka_produce, c) for c in ALL]
)


def table(batches: list[pa.RecordBatch]) -> list[dict[str, Any]]:
    return [row for b in batches for row in b.to_pylist()]


def raw_records(bootstrap: str, topic: str, read_committed: bool) -> tuple[bytes, list[tuple[int, int]]]:
    host, port = bootstrap.rsplit(":", 1)
    conn = FetchConnection(host, int(port), "test", 30)
    try:
        assert conn.supports_fetch_v12()
        part = conn.receive_fetch(conn.send_fetch(topic, 0, 0, 16 << 20, read_committed), topic, 0)
        aborted = list(part.aborted_transactions or ())  # (producer id, first offset)
        return bytes(part.records), aborted
    finally:
        conn.close()


def compare(bootstrap: str, topic: str, end: int, isolation: str, expect: int) -> list[dict[str, Any]]:
    conf = {"bootstrap.servers": bootstrap, "isolation.level": isolation}
    rng = OffsetRange(topic, 0, 0, end)
    slow = table(list(read_range(conf, rng, True, True, 30_000, fast=False)))
    fast = table(list(read_range(conf, rng, True, True, 30_000, fast=True)))
    data, aborted = raw_records(bootstrap, topic, isolation == "read_committed")
    decoded, after = decode_batches(data, topic, 0, 0, end, True,
                                    aborted if isolation == "read_committed" else None)
    assert after == end
    assert len(slow) == expect
    assert fast == slow
    assert table([decoded] if decoded is not None else []) == slow
    return slow


@pytest.mark.parametrize(("client", "produce", "codec"), CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_client_batches_decode_as_librdkafka_reads_them(
    kafka: Any, client: str, produce: Callable[..., None], codec: str
) -> None:
    topic = kafka.topic(f"fast-{client}-{codec}", 1)
    data = rows()
    produce(kafka.bootstrap, topic, codec, data)
    got = compare(kafka.bootstrap, topic, len(data), "read_uncommitted", len(data))
    assert [(r["key"], r["value"]) for r in got] == [(k, v) for k, v, _ in data]
    assert [[(h["key"], h["value"]) for h in r["headers"] or []] for r in got] == [h for _, _, h in data]


@pytest.mark.parametrize("codec", ALL)
def test_transactions_read_committed_and_uncommitted(kafka: Any, codec: str) -> None:
    from confluent_kafka import Producer

    topic = kafka.topic(f"fast-txn-{codec}", 1)
    plain = Producer({"bootstrap.servers": kafka.bootstrap, "compression.type": codec})
    txn = Producer({"bootstrap.servers": kafka.bootstrap, "compression.type": codec,
                    "transactional.id": f"fast-{uuid.uuid4().hex[:8]}"})
    txn.init_transactions(30)
    written = committed = 0
    for round_ in range(3):
        txn.begin_transaction()
        for i in range(5):
            txn.produce(topic, b"txn-%d-%d" % (round_, i), partition=0, headers=[("r", b"%d" % round_)])
        plain.produce(topic, b"plain-%d" % round_, partition=0)
        assert plain.flush(30) == 0
        assert txn.flush(30) == 0  # written before the abort: librdkafka's abort drops what it still holds
        if round_ % 2:
            txn.abort_transaction(30)
        else:
            txn.commit_transaction(30)
            committed += 5
        written += 6
    assert txn.flush(30) == 0
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "x"})
    end = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1]
    c.close()
    assert end == written + 3  # one marker per transaction
    everything = compare(kafka.bootstrap, topic, end, "read_uncommitted", written)
    assert sum(r["value"].startswith(b"txn-1") for r in everything) == 5  # aborted rows shown uncommitted
    visible = compare(kafka.bootstrap, topic, end, "read_committed", committed + 3)
    assert not any(r["value"].startswith(b"txn-1") for r in visible)


def _leader(bootstrap: str) -> Callable[[], tuple[str, int]]:
    host, port = bootstrap.rsplit(":", 1)
    return lambda: (host, int(port))


def test_fetch_range_data_loss_and_end_of_log(kafka: Any) -> None:
    from confluent_kafka import TopicPartition

    from kaflite.spark.fetch import fetch_range

    topic = kafka.topic("fast-loss", 1)
    kafka.produce(topic, [{"value": b"%d" % i, "partition": 0} for i in range(30)])
    admin = kafka.admin()  # kept alive until the future resolves
    admin.delete_records([TopicPartition(topic, 0, 10)])[TopicPartition(topic, 0, 10)].result(30)
    calls: list[tuple[str, int]] = []

    def out_of_range(offset: int) -> int:
        calls.append(("out_of_range", offset))
        return 10  # what read_range answers: the log start offset

    def run(begin: int, until: int) -> tuple[list[int], int | None]:
        gen = fetch_range(_leader(kafka.bootstrap), {}, topic, 0, begin, until, False, 10_000,
                          lambda o: calls.append(("at_end", o)), out_of_range)
        offsets: list[int] = []
        while True:
            try:
                offsets += next(gen).column("offset").to_pylist()
            except StopIteration as stop:
                return offsets, stop.value

    assert run(0, 20) == (list(range(10, 20)), None)
    assert calls == [("out_of_range", 0)]
    calls.clear()
    assert run(25, 40) == (list(range(25, 30)), None)  # the log ends at 30, before the range's end
    assert calls == [("at_end", 30)]


def test_read_range_fast_path_asks_no_watermarks_and_reports_data_loss(
    kafka: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast path learns where the log starts and ends from its Fetch answers: no ListOffsets before the
    first row (a fresh librdkafka consumer's first one sometimes took 0.7 s); data loss is still reported."""
    from confluent_kafka import Consumer, TopicPartition

    import kaflite.spark.client as client
    from kaflite.spark.client import DataLossError

    queries: list[TopicPartition] = []
    made: list[int] = []

    class CountingConsumer(Consumer):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            made.append(1)
            super().__init__(*args, **kwargs)

        def get_watermark_offsets(self, tp: TopicPartition, *args: Any, **kwargs: Any) -> Any:
            queries.append(tp)
            return super().get_watermark_offsets(tp, *args, **kwargs)

    monkeypatch.setattr(client, "Consumer", CountingConsumer)
    topic = kafka.topic("fast-watermarks", 1)
    kafka.produce(topic, [{"value": b"%d" % i, "partition": 0} for i in range(30)])

    def offsets(begin: int, until: int, fail: bool) -> list[int]:
        got = table(list(read_range({"bootstrap.servers": kafka.bootstrap}, OffsetRange(topic, 0, begin, until),
                                    False, fail, 10_000)))
        return [r["offset"] for r in got]

    assert offsets(0, 30, True) == list(range(30))
    assert queries == []  # the whole range read without a watermark query
    assert made == []  # nor a librdkafka consumer: the leader came from kaflite's own Metadata request
    admin = kafka.admin()  # kept alive until the future resolves
    admin.delete_records([TopicPartition(topic, 0, 10)])[TopicPartition(topic, 0, 10)].result(30)
    assert offsets(0, 20, False) == list(range(10, 20))  # below the log start: skipped, with a warning
    with pytest.raises(DataLossError, match="earliest available offset is 10"):
        offsets(0, 20, True)
    assert offsets(25, 40, False) == list(range(25, 30))  # the log ends before the range does
    with pytest.raises(DataLossError, match=r"Offsets \[30, 40\)"):
        offsets(25, 40, True)
    assert offsets(35, 40, False) == []  # wholly past the log's end: over at once, not retried forever
    with pytest.raises(DataLossError, match=r"Offsets \[30, 40\)"):
        offsets(35, 40, True)


def test_many_fetches_into_one_buffer_give_librdkafka_s_rows(kafka: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each answer's records are a view of the connection's one receive buffer, and the next Fetch is sent
    before they are decoded: with a small max.partition.fetch.bytes a range takes dozens of answers, and
    every row still equals librdkafka's."""
    from kaflite.spark.fetch import FetchConnection

    topic = kafka.topic("fast-many-fetches", 1)
    for start in range(0, 3000, 100):  # a flush per call: 30 batches or more
        kafka.produce(topic, [{"key": b"k%d" % i, "value": b"v%05d" % i * (1 + i % 7), "partition": 0,
                               "headers": [("h", b"%d" % i)] if i % 3 == 0 else None}
                              for i in range(start, start + 100)])
    sent: list[int] = []
    send = FetchConnection.send_fetch

    def counting(self: Any, *args: Any) -> int:
        sent.append(args[2])
        return send(self, *args)

    monkeypatch.setattr(FetchConnection, "send_fetch", counting)
    conf = {"bootstrap.servers": kafka.bootstrap, "max.partition.fetch.bytes": "4096"}
    rng = OffsetRange(topic, 0, 0, 3000)
    fast = table(list(read_range(conf, rng, True, True, 30_000, fast=True)))
    assert len(sent) >= 30 and sent == sorted(sent)  # one answer per batch or so, pipelined in order
    assert fast == table(list(read_range(conf, rng, True, True, 30_000, fast=False)))
    assert [r["offset"] for r in fast] == list(range(3000))


def test_find_leader_asks_the_bootstrap_brokers(kafka: Any) -> None:
    import socket

    from kaflite.spark.fetch import find_leader

    topic = kafka.topic("fast-leader", 2)
    host, port = kafka.bootstrap.rsplit(":", 1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # nothing listens there: the next bootstrap broker is asked
    conf = {"bootstrap.servers": f"127.0.0.1:{dead},{kafka.bootstrap}"}
    assert find_leader(conf, topic, 1, 10) == (host, int(port))
    with pytest.raises(ConnectionError, match="no leader"):
        find_leader(conf, topic, 5, 10)  # no such partition
    with pytest.raises(ConnectionError, match="no leader"):
        find_leader(conf, "no-such-topic", 0, 10)  # not created: auto-creation is not asked for
    assert find_leader({"bootstrap.servers": f"127.0.0.1:{dead}"}, topic, 0, 10) is None  # librdkafka's turn


def test_unreachable_leader_times_out(kafka: Any) -> None:
    import socket

    from kaflite.spark.fetch import fetch_range

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there
    gen = fetch_range(lambda: ("127.0.0.1", port), {}, "t", 0, 0, 5, False, 300, lambda o: None, lambda o: o)
    with pytest.raises(TimeoutError, match="pollTimeoutMs=300"):
        next(gen)


def test_settings_the_fast_path_does_not_support_read_through_librdkafka(
    kafka: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kaflite.spark.fetch as fetch
    from kaflite.spark.fetch import fast_path_supported

    assert fast_path_supported({}) and fast_path_supported({"security.protocol": "PLAINTEXT"})
    assert not fast_path_supported({"security.protocol": "SASL_SSL"})
    topic = kafka.topic("fast-fallback", 1)
    kafka.produce(topic, [{"value": b"x", "partition": 0}] * 3)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the fast path was used")

    monkeypatch.setattr(fetch, "fetch_range", refuse)
    monkeypatch.setattr(fetch, "fast_path_supported", lambda conf: False)
    got = table(list(read_range({"bootstrap.servers": kafka.bootstrap}, OffsetRange(topic, 0, 0, 3),
                                False, True, 30_000)))
    assert [r["offset"] for r in got] == [0, 1, 2]


def test_read_range_goes_on_through_librdkafka_where_the_fast_path_stops(
    kafka: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kaflite.spark.fetch as fetch
    from kaflite.spark.fetch import fetch_range

    topic = kafka.topic("fast-handover", 1)
    kafka.produce(topic, [{"value": b"%d" % i, "partition": 0} for i in range(6)])

    def first_two_then_stop(leader: Any, conf: Any, t: str, p: int, begin: int, until: int, *rest: Any) -> Any:
        # as at a message-format-v1 batch at offset 2: the fast path returns where to read on from
        yield from fetch_range(leader, conf, t, p, begin, 2, *rest)
        return 2

    monkeypatch.setattr(fetch, "fetch_range", first_two_then_stop)
    got = table(list(read_range({"bootstrap.servers": kafka.bootstrap}, OffsetRange(topic, 0, 0, 6),
                                False, True, 30_000)))
    assert [r["offset"] for r in got] == list(range(6))
    assert [r["value"] for r in got] == [b"%d" % i for i in range(6)]


def test_kaflite_spark_fast_path_0_reads_through_librdkafka(kafka: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import kaflite.spark.fetch as fetch

    topic = kafka.topic("fast-off", 1)
    kafka.produce(topic, [{"value": b"x", "partition": 0}] * 2)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the fast path was used")

    monkeypatch.setattr(fetch, "fetch_range", refuse)
    monkeypatch.setenv("KAFLITE_SPARK_FAST_PATH", "0")
    got = table(list(read_range({"bootstrap.servers": kafka.bootstrap}, OffsetRange(topic, 0, 0, 2),
                                False, True, 30_000)))
    assert [r["offset"] for r in got] == [0, 1]
    monkeypatch.delenv("KAFLITE_SPARK_FAST_PATH")
    with pytest.raises(AssertionError, match="the fast path was used"):
        list(read_range({"bootstrap.servers": kafka.bootstrap}, OffsetRange(topic, 0, 0, 2), False, True, 30_000))


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_a_compressed_fetch_is_decoded_in_windows(kafka: Any, codec: str) -> None:
    # 30,000 rows of 120 B compress into one fetch; decoded whole, they were one Arrow batch of 3.6 MB
    from confluent_kafka import Producer

    from kaflite.spark.fetch import DECODE_WINDOW_BYTES

    topic = kafka.topic(f"windows-{codec}", 1)
    p = Producer({"bootstrap.servers": kafka.bootstrap, "compression.type": codec, "linger.ms": 50,
                  "batch.num.messages": 1000})
    for i in range(30_000):
        p.produce(topic, b"x" * 100, b"key-%06d" % i, partition=0)
    assert p.flush(30) == 0
    conf = {"bootstrap.servers": kafka.bootstrap}
    rng = OffsetRange(topic, 0, 0, 30_000)
    fast = list(read_range(conf, rng, False, True, 30_000, fast=True))
    assert len(fast) >= 3
    for b in fast:  # a window ends with the librdkafka batch (1,000 records) that fills it
        assert b.column("value").buffers()[2].size <= DECODE_WINDOW_BYTES + 1000 * 100
    assert table(fast) == table(list(read_range(conf, rng, False, True, 30_000, fast=False)))
