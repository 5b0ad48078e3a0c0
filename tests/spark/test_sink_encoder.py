"""The sink's encoder (kaflite.spark.encode) and idempotent producer (kaflite.spark.produce).

Pure: vectorised murmur2 equals the scalar Java-exact one (Kafka's UtilsTest vectors, hypothesis);
placement as the Java client; encoded batches byte for byte equal to kaflite's reference encoder and to
librdkafka's records; every field survives decoding (hypothesis, every codec, batch size limits).
With the Spark tests' embedded broker (no Spark session): rows produced by the fast path read back by
confluent-kafka and kafka-python consumers in every codec they decode here (headers, tombstones, null
keys, empty values); producer id and per-partition sequences on the wire; a resend after a lost
connection deduplicated by the broker."""

from __future__ import annotations

import struct
import subprocess
import sys
import time
import uuid
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import require, vectors_of_kind
from kaflite.assign.murmur2 import murmur2, partition_for_key
from kaflite.protocol.record_batch import build_record_batch, decode_records, iter_batches
from kaflite.spark import encode as encoder
from kaflite.spark.arrow import HEADERS_TYPE
from kaflite.spark.batches import decode_batches
from kaflite.spark.encode import EncodedBatch, encode, murmur2_array, place, seal, topic_indices
from kaflite.spark.fetch import FetchConnection
from kaflite.spark.options import WriterOptions
from kaflite.spark.produce import ArrowProducer, supported
from kaflite.spark.writer import produce_arrow

MURMUR = vectors_of_kind("murmur2")
FOR_KEY = vectors_of_kind("partitioner.partition_for_key")
Row = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]] | None]


# --- murmur2 and placement ------------------------------------------------------------------------

def test_murmur2_array_matches_kafka_vectors() -> None:
    keys = [bytes.fromhex(c["input"]["key_hex"]) for c in MURMUR + FOR_KEY]
    got = murmur2_array(pa.array(keys, pa.binary()))
    assert got.tolist() == [c["expected"]["murmur2"] for c in MURMUR + FOR_KEY]
    assert len(MURMUR) >= 6


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=40)), max_size=60), st.integers(0, 5),
       st.booleans())
def test_murmur2_array_equals_scalar_java_exact(keys: list[bytes | None], skip: int, as_string: bool) -> None:
    column = pa.array(keys, pa.binary())
    if as_string:  # string columns hash their UTF-8 bytes, as Spark's sink does with string keys
        keys = [None if k is None else k.decode("latin-1").encode("utf-8") for k in keys]
        column = pa.array([None if k is None else k.decode("utf-8") for k in keys], pa.string())
    column = column.slice(min(skip, len(keys)))  # sliced arrays (offset != 0) too
    keys = keys[min(skip, len(keys)):]
    got = murmur2_array(column)
    assert [int(h) for h, k in zip(got.tolist(), keys, strict=True) if k is not None] == [
        murmur2(k) for k in keys if k is not None]


def test_placement_as_the_java_client() -> None:
    keyed = [(bytes.fromhex(c["input"]["key_hex"]), c["expected"]["partition_by_num_partitions"])
             for c in FOR_KEY]
    for n in (1, 2, 3, 4, 7, 100):
        cases = [(k, parts[str(n)]) for k, parts in keyed if str(n) in parts]
        if not cases:
            continue
        keys = pa.array([k for k, _ in cases], pa.binary())
        got = place(keys, None, np.full(len(cases), n), np.zeros(len(cases), np.int64))
        assert got.tolist() == [p for _, p in cases] == [partition_for_key(k, n) for k, _ in cases]
    # an explicit partition wins; a null key goes to the sticky partition; a null partition falls back
    keys = pa.array([b"a", None, b"a", None], pa.binary())
    parts = pa.array([None, None, 2, 0], pa.int32())
    got = place(keys, parts, np.full(4, 5), np.full(4, 3))
    assert got.tolist() == [partition_for_key(b"a", 5), 3, 2, 0]
    with pytest.raises(ValueError, match=r"Invalid partition given with record: 5 is not in the range \[0...5\]"):
        place(keys, pa.array([5, None, None, None], pa.int32()), np.full(4, 5), np.zeros(4, np.int64))


def test_topic_column_and_option() -> None:
    names, index = topic_indices(pa.array(["b", "a", "b"]), None)
    assert [names[i] for i in index] == ["b", "a", "b"]
    assert topic_indices(pa.array(["x"]), "opt")[0] == ["opt"]
    with pytest.raises(ValueError, match="null topic present in the data"):
        topic_indices(pa.array(["a", None]), None)


# --- encoding -------------------------------------------------------------------------------------

def _columns(rows: list[Row]) -> tuple[pa.Array, pa.Array, pa.Array]:
    keys = pa.array([r[0] for r in rows], pa.binary())
    values = pa.array([r[1] for r in rows], pa.binary())
    headers = pa.array([None if r[2] is None else [{"key": k, "value": v} for k, v in r[2]] for r in rows],
                       HEADERS_TYPE)
    return keys, values, headers


def _sealed(batch: EncodedBatch, **kw: Any) -> bytes:
    return b"".join(bytes(c) for c in seal(batch, **kw))


row_strategy = st.tuples(
    st.one_of(st.none(), st.binary(max_size=30)),
    st.one_of(st.none(), st.binary(max_size=300)),
    st.one_of(st.none(), st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8))),
                                  max_size=3)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(row_strategy, min_size=1, max_size=80), st.integers(1, 4), st.sampled_from([0, 1, 2, 3, 4]),
       st.integers(50, 4000), st.booleans(), st.booleans())
def test_encoded_batches_decode_to_the_rows(rows: list[Row], n_parts: int, codec: int, max_bytes: int,
                                           stamp: bool, spread_ts: bool) -> None:
    keys, values, headers = _columns(rows)
    partition = np.array([i * 7 % n_parts for i in range(len(rows))], dtype=np.int64)
    ts: np.ndarray | int = (np.arange(len(rows), dtype=np.int64) * 997 % 5000 + 1_700_000_000_000
                            if spread_ts else 1_700_000_000_000)
    extra = ("batch", b"42") if stamp else None
    batches = encode(["t"], np.zeros(len(rows), np.int64), partition, keys, values, headers, ts, extra, max_bytes)
    seen: dict[int, list[Any]] = {}
    for b in batches:
        assert b.topic == "t"
        # a batch holds at most max_bytes of records, unless one record alone is larger
        assert b.count == 1 or len(b.records) <= max_bytes
        wire = _sealed(b, codec=codec, producer_id=7, producer_epoch=1, base_sequence=len(seen.get(b.partition, [])))
        (view,) = list(iter_batches(wire))
        view.validate()  # the broker's checks: CRC, counts, offsets
        assert view.compression == codec and view.producer_id == 7 and view.producer_epoch == 1
        seen.setdefault(b.partition, []).extend(decode_records(view))
        # the source's decoder reads it too (the same bytes a consumer would fetch)
        decoded, _ = decode_batches(wire, "t", b.partition, 0, 1 << 40, True)
        assert decoded is not None and decoded.num_rows == b.count
    for p in range(n_parts):
        want = [i for i in range(len(rows)) if partition[i] == p]
        got = seen.get(p, [])
        assert len(got) == len(want)
        for i, rec in zip(want, got, strict=True):
            key, value, hdrs = rows[i]
            assert (rec.key, rec.value) == (key, value)
            assert rec.headers == list(hdrs or []) + ([extra] if extra else [])
            assert rec.timestamp == (int(ts[i]) if isinstance(ts, np.ndarray) else ts)


@settings(max_examples=40, deadline=None)
@given(st.lists(row_strategy, min_size=1, max_size=40), st.booleans())
def test_encoded_batch_is_byte_for_byte_kaflite_reference_encoder(rows: list[Row], transactional: bool) -> None:
    keys, values, headers = _columns(rows)
    ts = np.arange(len(rows), dtype=np.int64) * 3 + 1_000
    (batch,) = encode(["t"], np.zeros(len(rows), np.int64), np.zeros(len(rows), np.int64), keys, values,
                      headers, ts, None, 1 << 30)
    ours = _sealed(batch, codec=0, producer_id=11, producer_epoch=2, base_sequence=5, transactional=transactional)
    reference = build_record_batch([(k, v, list(h or [])) for k, v, h in rows], timestamps=ts.tolist(),
                                   producer_id=11, producer_epoch=2, base_sequence=5,
                                   is_transactional=transactional)
    assert ours == reference


def _compiled_encoder() -> None:
    require(encoder.compiled_missing)


plain_row = st.tuples(st.one_of(st.none(), st.binary(max_size=30)), st.one_of(st.none(), st.binary(max_size=300)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(plain_row, min_size=1, max_size=120), st.integers(1, 2), st.integers(1, 4), st.integers(30, 3000),
       st.sampled_from(["one", "spread", "wide"]), st.booleans(), st.integers(0, 3), st.booleans(), st.booleans())
def test_compiled_encoder_writes_the_pure_encoders_bytes(rows: list[tuple[bytes | None, bytes | None]],
                                                        n_topics: int, n_parts: int, max_bytes: int, ts_kind: str,
                                                        stamp: bool, skip: int, as_string: bool,
                                                        headers_column: bool) -> None:
    """Same batches (topic, partition, count, timestamps, records bytes) from both paths: cuts, varints of
    every width (timestamp deltas past 2^35 with "wide"), null and empty keys and values, sliced and string
    columns, the batch-id header, a headers column holding only nulls."""
    _compiled_encoder()
    if as_string:
        rows = [(None if k is None else k.decode("latin-1").encode("utf-8"),
                 None if v is None else v.decode("latin-1").encode("utf-8")) for k, v in rows]
    n = len(rows) - min(skip, len(rows) - 1)
    pad = [(b"pad", b"pad")] * (len(rows) - n)  # the slice drops these
    keys = pa.array([r[0] for r in pad + rows[-n:]], pa.binary())
    values = pa.array([r[1] for r in pad + rows[-n:]], pa.binary())
    if as_string:
        keys, values = keys.cast(pa.string()), values.cast(pa.string())
    keys, values = keys.slice(len(pad)), values.slice(len(pad))
    topic_index = np.array([i % n_topics for i in range(n)], dtype=np.int64)
    partition = np.array([(i * 5 + i // 3) % n_parts for i in range(n)], dtype=np.int64)
    ts: np.ndarray | int = {"one": 1_700_000_000_000,
                            "spread": np.arange(n, dtype=np.int64) * 997 % 5000 + 1_700_000_000_000,
                            "wide": (np.arange(n, dtype=np.int64) % 3 - 1) * (1 << 36) + 1_700_000_000_000}[ts_kind]
    headers = pa.nulls(n, HEADERS_TYPE) if headers_column else None
    extra = ("batch", b"42") if stamp else None
    args = (["t0", "t1"][:n_topics], topic_index, partition, keys, values, headers, ts, extra, max_bytes)
    pure, compiled = encode(*args, pure=True), encode(*args, pure=False)
    assert [(b.topic, b.partition, b.count, b.base_timestamp, b.max_timestamp, bytes(b.records)) for b in compiled] \
        == [(b.topic, b.partition, b.count, b.base_timestamp, b.max_timestamp, bytes(b.records)) for b in pure]
    assert sum(b.count for b in compiled) == n


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=40)), max_size=60), st.integers(0, 5))
def test_compiled_murmur2_equals_the_pure_one(keys: list[bytes | None], skip: int) -> None:
    _compiled_encoder()
    column = pa.array(keys, pa.binary()).slice(min(skip, len(keys)))
    valid = [k is not None for k in keys[min(skip, len(keys)):]]
    pure, compiled = murmur2_array(column, pure=True), murmur2_array(column, pure=False)
    assert [h for h, v in zip(compiled.tolist(), valid, strict=True) if v] == [
        h for h, v in zip(pure.tolist(), valid, strict=True) if v]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from([0, 1, 2, 5, 300, 20_000, 70_000])), max_size=50))
def test_rows_are_grouped_in_a_stable_topic_partition_order(pairs: list[tuple[int, int]]) -> None:
    """The 16-bit radix shortcut and the int64 sort it stands for give the same order (both branches)."""
    topic_index = np.array([t for t, _ in pairs], dtype=np.int64)
    partition = np.array([p for _, p in pairs], dtype=np.int64)
    group = topic_index * np.int64(1 << 32) + partition
    assert encoder._group_order(topic_index, partition, group).tolist() == np.argsort(group, kind="stable").tolist()


def test_compiled_encoder_matches_the_reference_encoder_and_is_the_default() -> None:
    """Without the pure path in the comparison: the compiled batch is kaflite's reference encoder's."""
    _compiled_encoder()
    assert encoder.ENCODER == "compiled"
    rows = [(b"k%d" % i if i % 3 else None, None if i % 7 == 0 else b"v" * (i * 37 % 300)) for i in range(200)]
    ts = np.arange(200, dtype=np.int64) * 1_000_003 + 1_000
    (batch,) = encode(["t"], np.zeros(200, np.int64), np.zeros(200, np.int64), pa.array([r[0] for r in rows]),
                      pa.array([r[1] for r in rows], pa.binary()), None, ts, None, 1 << 30, pure=False)
    reference = build_record_batch([(k, v, []) for k, v in rows], timestamps=ts.tolist(), producer_id=3,
                                   producer_epoch=0, base_sequence=0)
    assert _sealed(batch, producer_id=3, producer_epoch=0, base_sequence=0) == reference


def test_without_the_compiled_module_the_pure_encoder_writes() -> None:
    # a machine without a C compiler: the import of kaflite.spark._decode fails (blocked here)
    code = (
        "import sys; sys.modules['kaflite.spark._decode'] = None\n"
        "import numpy as np, pyarrow as pa\n"
        "import kaflite.spark.encode as e\n"
        "(b,) = e.encode(['t'], np.zeros(2, np.int64), np.zeros(2, np.int64), pa.array([b'k', None]),\n"
        "                pa.array([b'v', b'w']), None, 5)\n"
        "print(e.ENCODER, b.count, e.murmur2_array(pa.array([b'k'])).tolist())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["pure", "2", str([murmur2(b"k")])]


def test_large_values_and_string_columns() -> None:
    keys = pa.array(["k\u00e9", None, ""], pa.string())
    values = pa.array(["x" * 200_000, "", None], pa.large_string())
    (b,) = encode(["t"], np.zeros(3, np.int64), np.zeros(3, np.int64), keys, values, None, 5)
    recs = decode_records(next(iter_batches(_sealed(b))))
    assert [(r.key, r.value) for r in recs] == [("k\u00e9".encode(), b"x" * 200_000), (None, b""), (b"", None)]
    # a record larger than the batch limit gets a batch of its own
    out = encode(["t"], np.zeros(3, np.int64), np.zeros(3, np.int64), keys, values, None, 5, None, 1000)
    assert [x.count for x in out] == [1, 2]


def test_records_byte_for_byte_as_librdkafka_writes_them(kafka: Any) -> None:
    """The records section of a batch confluent-kafka wrote equals ours for the same rows and timestamps."""
    from confluent_kafka import Producer

    topic = kafka.topic("enc-rdkafka", 1)
    rows: list[Row] = [(None if i % 4 == 0 else b"k%d" % i, None if i % 5 == 1 else b"v" * (i * 13 % 90),
                        [("h", b"%d" % i), ("e", b"")] if i % 3 == 0 else None) for i in range(50)]
    p = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 50, "batch.num.messages": 1000,
                  "enable.idempotence": False, "compression.type": "none"})
    for key, value, hdrs in rows:
        p.produce(topic, value, key, partition=0, headers=hdrs, timestamp=1_700_000_000_000 + len(hdrs or []))
    assert p.flush(30) == 0
    raw = _fetch(kafka.bootstrap, topic, 0)
    views = list(iter_batches(raw))
    done = 0
    for view in views:
        recs = decode_records(view)
        chunk = rows[done : done + len(recs)]
        keys, values, headers = _columns(chunk)
        ts = np.array([r.timestamp for r in recs], dtype=np.int64)
        (ours,) = encode([topic], np.zeros(len(chunk), np.int64), np.zeros(len(chunk), np.int64), keys, values,
                         headers, ts, None, 1 << 30)
        assert bytes(ours.records) == bytes(view.buffer[61:])
        done += len(recs)
    assert done == len(rows)


# --- the producer against a real broker ----------------------------------------------------------

def _fetch(bootstrap: str, topic: str, partition: int) -> bytes:
    host, port = bootstrap.rsplit(":", 1)
    conn = FetchConnection(host, int(port), "test", 30)
    try:
        part = conn.receive_fetch(conn.send_fetch(topic, partition, 0, 64 << 20, False), topic, partition)
        return bytes(part.records or b"")
    finally:
        conn.close()


def _rows_batch(rows: list[Row], partitions: list[int | None] | None = None) -> pa.RecordBatch:
    keys, values, headers = _columns(rows)
    arrays = [keys, values, headers]
    names = ["key", "value", "headers"]
    if partitions is not None:
        arrays.append(pa.array(partitions, pa.int32()))
        names.append("partition")
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _sample_rows(n: int) -> list[Row]:
    return [(None if i % 3 == 0 else b"key-%d" % i, None if i % 4 == 1 else b"v" * (i * 7 % 120),
             [("h1", b"x%d" % i), ("h2", None), ("h3", b"")] if i % 5 == 0 else None) for i in range(n)]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_fast_sink_rows_read_back_by_confluent_and_kafka_python(kafka: Any, codec: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    topic = kafka.topic(f"enc-{codec}", 3)
    rows = _sample_rows(120)
    conf = {"bootstrap.servers": kafka.bootstrap, "compression.type": codec}
    options = WriterOptions(bootstrap_servers=kafka.bootstrap, topic=topic, client_config=conf)
    with ArrowProducer(conf).start() as producer:
        assert produce_arrow(producer, options, iter([_rows_batch(rows[:70]), _rows_batch(rows[70:])]), None) == 120
    want = {}
    for key, value, hdrs in rows:
        if key is not None:
            want.setdefault(partition_for_key(key, 3), []).append((key, value, list(hdrs or [])))
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": f"g-{uuid.uuid4()}", "enable.auto.commit": False})
    got: dict[int, list[Any]] = {}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(3)])
        deadline = time.monotonic() + 30
        while sum(map(len, got.values())) < 120 and time.monotonic() < deadline:
            for m in c.consume(200, 0.5):
                assert m.error() is None, m.error()
                got.setdefault(m.partition(), []).append((m.key(), m.value(), list(m.headers() or [])))
    finally:
        c.close()
    assert sum(map(len, got.values())) == 120
    for p, recs in want.items():  # keyed rows where Java puts them, in order
        assert [r for r in got[p] if r[0] is not None] == recs
    null_keyed = [(None, v, list(h or [])) for k, v, h in rows if k is None]
    assert sorted((r for rs in got.values() for r in rs if r[0] is None), key=repr) == sorted(null_keyed, key=repr)
    if codec in ("none", "gzip", "lz4"):  # kafka-python decodes snappy / zstd only with extra packages
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KTP

        kc = KafkaConsumer(bootstrap_servers=kafka.bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000)
        try:
            kc.assign([KTP(topic, p) for p in range(3)])
            kc.seek_to_beginning()
            back: dict[int, list[Any]] = {}
            for m in kc:
                back.setdefault(m.partition, []).append((m.key, m.value, [tuple(h) for h in m.headers]))
                if sum(map(len, back.values())) == 120:
                    break
        finally:
            kc.close()
        assert back == got


def test_explicit_partitions_and_batch_id_header(kafka: Any) -> None:
    topic = kafka.topic("enc-parts", 2)
    conf = {"bootstrap.servers": kafka.bootstrap}
    options = WriterOptions(bootstrap_servers=kafka.bootstrap, topic=topic, client_config=conf,
                            batch_id_header="spark-batch")
    rows: list[Row] = [(b"a", b"1", None), (None, b"2", [("h", b"x")]), (b"b", None, None)]
    with ArrowProducer(conf).start() as producer:
        produce_arrow(producer, options, iter([_rows_batch(rows, [1, 0, None])]), 9)
    recs = {p: decode_records(next(iter_batches(_fetch(kafka.bootstrap, topic, p)))) for p in range(2)}
    by_value = {r.value: (p, r.key, r.headers) for p, rs in recs.items() for r in rs}
    assert by_value == {
        b"1": (1, b"a", [("spark-batch", b"9")]),
        b"2": (0, None, [("h", b"x"), ("spark-batch", b"9")]),
        None: (partition_for_key(b"b", 2), b"b", [("spark-batch", b"9")]),
    }


def test_idempotent_sequences_on_the_wire(kafka: Any) -> None:
    topic = kafka.topic("enc-seq", 2)
    conf = {"bootstrap.servers": kafka.bootstrap, "batch.size": "2000"}
    options = WriterOptions(bootstrap_servers=kafka.bootstrap, topic=topic, client_config=conf)
    rows: list[Row] = [(b"k%d" % i, b"v" * 50, None) for i in range(300)]
    with ArrowProducer(conf).start() as producer:
        produce_arrow(producer, options, iter([_rows_batch(rows[:100]), _rows_batch(rows[100:])]), None)
        pid, epoch = producer.producer_id, producer.producer_epoch
    assert pid >= 0 and epoch >= 0
    total = 0
    for p in range(2):
        views = list(iter_batches(_fetch(kafka.bootstrap, topic, p)))
        assert len(views) > 2  # batch.size cut the rows into several batches
        expected_seq = 0
        for v in views:
            assert (v.producer_id, v.producer_epoch, v.base_sequence) == (pid, epoch, expected_seq)
            assert len(v.buffer) - 61 <= 2000 or v.records_count == 1
            expected_seq += v.records_count
            total += v.records_count
    assert total == 300


def test_resend_after_a_lost_connection_is_deduplicated(kafka: Any) -> None:
    """The broker has the batches but the answers are lost with the connection: the producer sends them
    again with the same sequences and the log holds every row once."""
    from confluent_kafka import Consumer, TopicPartition

    topic = kafka.topic("enc-dup", 1)
    conf = {"bootstrap.servers": kafka.bootstrap}
    keys = pa.array([b"k%d" % i for i in range(500)], pa.binary())
    values = pa.array([b"v%d" % i for i in range(500)], pa.binary())
    batches = encode([topic], np.zeros(500, np.int64), np.zeros(500, np.int64), keys, values, None,
                     int(time.time() * 1000), None, 1500)
    assert len(batches) >= 5
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": f"g-{uuid.uuid4()}"})
    try:
        with ArrowProducer(conf).start() as producer:
            producer.partition_count(topic)
            producer.send(batches)  # sent, answers not read yet
            deadline = time.monotonic() + 30
            while c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1] < 500:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            (conn,) = producer.conns.values()
            conn.sock.close()  # the answers are lost; the batches are in the log
            assert producer.flush() == 500
            assert len(producer.conns) == 1 and next(iter(producer.conns.values())) is not conn  # reconnected
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1] == 500
    finally:
        c.close()
    views = list(iter_batches(_fetch(kafka.bootstrap, topic, 0)))
    assert [r.value for v in views for r in decode_records(v)] == [b"v%d" % i for i in range(500)]


def test_null_keys_stick_to_one_partition_per_call_round_robin() -> None:
    producer = ArrowProducer({"bootstrap.servers": "127.0.0.1:1"})
    producer.partition_counts["t"] = 3
    first = producer.sticky_partition("t")
    assert [producer.sticky_partition("t") for _ in range(4)] == [(first + i) % 3 for i in range(1, 5)]


def test_settings_the_fast_path_leaves_to_librdkafka() -> None:
    assert supported({"bootstrap.servers": "x", "compression.type": "lz4", "acks": "all"})
    assert supported({"bootstrap.servers": "x", "acks": "-1", "compression.codec": "zstd"})
    assert not supported({"bootstrap.servers": "x", "security.protocol": "SASL_SSL"})
    assert not supported({"bootstrap.servers": "x", "acks": "1"})
    assert not supported({"bootstrap.servers": "x", "transactional.id": "t"})
    assert not supported({"bootstrap.servers": "x", "compression.type": "brotli"})


def test_produce_request_frame_is_what_kio_reads() -> None:
    """The hand-written Produce v9 request decodes with kio's schema to the same topic, partitions and
    record bytes."""
    from kio.schema.produce.v9.request import ProduceRequest
    from kio.schema.request_header.v2.header import RequestHeader
    from kio.serial import entity_reader

    from kaflite.spark.produce import ProducerConnection

    sent: list[bytes] = []

    class FakeSock:
        def sendall(self, data: Any) -> None:
            sent.append(bytes(data))

    conn = ProducerConnection.__new__(ProducerConnection)
    conn.sock = FakeSock()  # type: ignore[assignment]
    conn.client_id, conn.correlation = "cid", 0
    parts = [("tp", 3, [b"head", b"payload"]), ("tp", 0, [b"x"]), ("other", 1, [b"yz"])]
    corr = conn.send_produce(parts, 1234)
    frame = b"".join(sent)
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    header, off = entity_reader(RequestHeader)(memoryview(frame[4:]), 0)
    assert (int(header.request_api_key), int(header.request_api_version), int(header.correlation_id),
            header.client_id) == (0, 9, corr, "cid")
    req, end = entity_reader(ProduceRequest)(memoryview(frame[4:]), off)
    assert off + end == len(frame) - 4  # kio answers the bytes it read
    assert int(req.acks) == -1 and req.transactional_id is None
    got = [(str(t.name), int(p.index), bytes(p.records)) for t in req.topic_data for p in t.partition_data]
    assert got == [("tp", 3, b"headpayload"), ("tp", 0, b"x"), ("other", 1, b"yz")]
    # the exactly-once sink's requests carry the transactional id
    sent.clear()
    conn.send_produce(parts[:1], 1234, "eos-prefix-7")
    frame = b"".join(sent)
    header, off = entity_reader(RequestHeader)(memoryview(frame[4:]), 0)
    req, end = entity_reader(ProduceRequest)(memoryview(frame[4:]), off)
    assert off + end == len(frame) - 4 and req.transactional_id == "eos-prefix-7"
    assert [bytes(p.records) for t in req.topic_data for p in t.partition_data] == [b"headpayload"]


def test_spark_sink_writes_through_the_fast_path(spark: Any, kafka: Any) -> None:
    """A Spark batch write goes through the encoder and the idempotent producer: the batches in the log
    carry a producer id and contiguous sequences (librdkafka's producer, not idempotent by default, writes
    producer id -1), and the rows read back are the rows written."""
    topic = kafka.topic("enc-spark", 2)
    rows = [(None if i % 7 == 0 else f"k{i}", f"v{i}") for i in range(3000)]
    (spark.createDataFrame(rows, "key STRING, value STRING").repartition(2).write.format("kaflite")
     .option("kafka.bootstrap.servers", kafka.bootstrap).option("topic", topic).mode("append").save())
    got = []
    producers = set()
    for p in range(2):
        sequences: dict[int, int] = {}
        for v in iter_batches(_fetch(kafka.bootstrap, topic, p)):
            assert v.producer_id >= 0
            assert v.base_sequence == sequences.get(v.producer_id, 0)  # each task's producer starts at 0
            sequences[v.producer_id] = v.base_sequence + v.records_count
            producers.add(v.producer_id)
            for r in decode_records(v):
                got.append((None if r.key is None else r.key.decode(), r.value.decode() if r.value else None))
                if r.key is not None:
                    assert partition_for_key(r.key, 2) == p
    assert len(producers) == 2  # one producer per task
    assert sorted(got, key=repr) == sorted(rows, key=repr)


class _FakeBroker:
    """Answers Produce requests in order; `errors` maps the n-th request to the error code of each of its
    partitions (0 otherwise). Records every (partition, base sequence) sent."""

    def __init__(self, errors: dict[int, int]) -> None:
        self.errors = errors
        self.sent: list[list[tuple[int, int]]] = []
        self.queue: list[Any] = []

    def connection(self) -> Any:
        broker = self

        class Conn:
            def send_produce(self, parts: Any, timeout_ms: int, transactional_id: str | None = None) -> int:
                n = len(broker.sent)
                seqs = [(p, struct.unpack_from(">i", bytes(chunks[0]), 53)[0]) for _, p, chunks in parts]
                broker.sent.append(seqs)
                code = broker.errors.get(n, 0)
                broker.queue.append(SimpleNamespace(responses=[SimpleNamespace(
                    name=parts[0][0], partition_responses=[SimpleNamespace(index=p, error_code=code)
                                                           for _, p, _ in parts])]))
                return n

            def receive_produce(self, correlation: int) -> Any:
                return broker.queue.pop(0)

            def close(self) -> None:
                pass

        return Conn()


def test_retriable_errors_resend_in_sequence_order_without_sockets() -> None:
    """4 requests in flight; NOT_LEADER_OR_FOLLOWER (6) for the 2nd, OUT_OF_ORDER_SEQUENCE_NUMBER (45) for
    the two sent behind it: the three are sent again with their own sequences, in order; another error
    fails the task."""
    broker = _FakeBroker({1: 6, 2: 45, 3: 45})
    producer = ArrowProducer({"bootstrap.servers": "127.0.0.1:1"})
    producer.producer_id, producer.producer_epoch = 3, 0
    producer.brokers = {0: ("h", 1)}
    producer.leaders = {("t", 0): 0}
    producer._connect = lambda host, port: broker.connection()  # type: ignore[method-assign,assignment]
    producer._refresh = lambda topics: []  # type: ignore[method-assign]
    batches = [EncodedBatch("t", 0, 10, memoryview(b""), 0, 0) for _ in range(4)]
    producer.send(batches)
    assert producer.flush() == 40
    sent = [s for req in broker.sent for s in req]
    assert sent == [(0, 0), (0, 10), (0, 20), (0, 30), (0, 10), (0, 20), (0, 30)]
    # OUT_OF_ORDER_SEQUENCE_NUMBER with no earlier failure, or a fatal code: the task fails with its name
    for errors in ({0: 45}, {0: 87}):
        bad = ArrowProducer({"bootstrap.servers": "127.0.0.1:1"})
        bad.producer_id, bad.producer_epoch, bad.brokers, bad.leaders = 3, 0, {0: ("h", 1)}, {("t", 0): 0}
        fake = _FakeBroker(errors)
        bad._connect = lambda host, port, fake=fake: fake.connection()  # type: ignore[method-assign,misc]
        bad.send(batches[:1])
        with pytest.raises(RuntimeError, match="OUT_OF_ORDER_SEQUENCE_NUMBER|INVALID_RECORD"):
            bad.flush()


def test_value_only_rows_go_to_the_sticky_partition() -> None:
    """No key column (the most common Spark write): every row null-keyed, to the call's sticky partition."""
    values = pa.array(["a", "bb", None])
    assert place(None, None, np.full(3, 4), np.full(3, 2)).tolist() == [2, 2, 2]
    (b,) = encode(["t"], np.zeros(3, np.int64), np.full(3, 2), None, values, None, 7)
    assert b.partition == 2
    assert [(r.key, r.value) for r in decode_records(next(iter_batches(_sealed(b))))] == [
        (None, b"a"), (None, b"bb"), (None, None)]


def test_fast_sink_refuses_a_misspelt_setting_by_name() -> None:
    from kaflite.spark.options import OptionError
    from kaflite.spark.writer import check_settings

    check_settings({"bootstrap.servers": "127.0.0.1:1", "linger.ms": "5", "compression.type": "lz4"})
    with pytest.raises(OptionError, match="lnger.ms"):
        check_settings({"bootstrap.servers": "127.0.0.1:1", "lnger.ms": "5"})
    with pytest.raises(OptionError, match="batch.size"):
        check_settings({"bootstrap.servers": "127.0.0.1:1", "batch.size": "many"})
