"""Every client works unchanged: produce (acks 0/1/all, keys, headers, every codec) and consume by assign
(earliest, latest, timestamp) with confluent-kafka, kafka-python, aiokafka and kcat against one broker."""

from __future__ import annotations

import asyncio
import subprocess
import time

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from helpers import missing_program, require

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def _create(broker, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=10)


def _consume_all(broker, topic: str, partitions: int, expected: int, timeout: float = 20.0) -> list:
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "assign-only", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < expected and time.monotonic() < deadline:
        for m in consumer.consume(500, 0.5):
            assert m.error() is None, m.error()
            out.append(m)
    consumer.close()
    return out


def _end_offsets(broker, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "assign-only"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
    finally:
        consumer.close()


# -- confluent-kafka (librdkafka) ------------------------------------------------------------------
def test_confluent_acks_codecs_keys_headers(broker) -> None:
    topic = "cf-matrix"
    _create(broker, topic, 3)
    sent = []
    for acks in ("0", "1", "all"):
        for codec in CODECS:
            producer = Producer(
                {
                    "bootstrap.servers": broker.bootstrap,
                    "acks": acks,
                    "compression.type": codec,
                    "linger.ms": 5,
                    "enable.idempotence": False,
                }
            )
            for i in range(40):
                key = f"{acks}-{codec}-{i}".encode() if i % 2 == 0 else None
                value = f"value {acks} {codec} {i}".encode() * 3
                headers = [("h", f"{i}".encode()), ("codec", codec.encode())]
                producer.produce(topic, key=key, value=value, headers=headers)
                sent.append((key, value, headers))
            assert producer.flush(20) == 0
    got = _consume_all(broker, topic, 3, len(sent))
    assert len(got) == len(sent)
    assert sorted((m.key() or b"", m.value(), m.headers()) for m in got) == sorted(
        (k or b"", v, h) for k, v, h in sent
    ), "records, keys and headers must come back unchanged"
    assert sum(_end_offsets(broker, topic, 3)) == len(sent)
    # keyed records land where the Java client's murmur2 partitioner... librdkafka's default is
    # consistent_random (CRC32): only check that the same key always landed in one partition.
    by_key: dict[bytes, set[int]] = {}
    for m in got:
        if m.key() is not None:
            by_key.setdefault(m.key(), set()).add(m.partition())
    assert all(len(ps) == 1 for ps in by_key.values())


def test_confluent_idempotent_producer(broker) -> None:
    topic = "cf-idem"
    _create(broker, topic, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 2})
    for i in range(500):
        producer.produce(topic, value=b"%d" % i)
    assert producer.flush(20) == 0
    got = _consume_all(broker, topic, 1, 500)
    assert [m.value() for m in got] == [b"%d" % i for i in range(500)]
    assert [m.offset() for m in got] == list(range(500))


def test_confluent_offsets_by_timestamp_earliest_latest(broker) -> None:
    topic = "cf-time"
    _create(broker, topic, 1)
    base = 1_700_000_000_000
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(10):
        producer.produce(topic, value=b"%d" % i, timestamp=base + i * 1000)
        producer.flush(10)  # one batch per record: timestamps are looked up per batch index entry
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "assign-only"})
    try:
        found = consumer.offsets_for_times([TopicPartition(topic, 0, base + 3500)], timeout=10)
        assert found[0].offset == 4
        none = consumer.offsets_for_times([TopicPartition(topic, 0, base + 60_000)], timeout=10)
        assert none[0].offset == -1  # no record that late: Kafka answers -1
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 10)
        consumer.assign([TopicPartition(topic, 0, 4)])
        first = None
        deadline = time.monotonic() + 10
        while first is None and time.monotonic() < deadline:
            first = consumer.poll(0.5)
        assert first is not None and first.value() == b"4" and first.timestamp()[1] == base + 4000
        # latest: only what is produced after the assignment
        consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
        # "end" is resolved asynchronously: keep producing until the consumer sees a new record; what it
        # must never see is one of the 10 records that existed before the assignment
        late = None
        deadline = time.monotonic() + 20
        i = 0
        while late is None and time.monotonic() < deadline:
            producer.produce(topic, value=b"late-%d" % i)
            producer.flush(10)
            i += 1
            late = consumer.poll(0.5)
        assert late is not None and late.value().startswith(b"late-") and late.offset() >= 10
    finally:
        consumer.close()


def test_fetch_long_poll_is_woken_by_append(broker) -> None:
    topic = "cf-wake"
    _create(broker, topic, 1)
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "assign-only", "fetch.wait.max.ms": 5000}
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    consumer.poll(1.0)  # connect and park a long poll
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    producer.produce(topic, value=b"wake")
    producer.flush(10)
    t0 = time.monotonic()
    m = None
    while m is None and time.monotonic() - t0 < 10:
        m = consumer.poll(0.1)
    elapsed = time.monotonic() - t0
    consumer.close()
    assert m is not None and m.value() == b"wake"
    assert elapsed < 2.5, f"a parked fetch must be answered by the append, not its 5 s max wait ({elapsed:.2f}s)"


# -- kafka-python ----------------------------------------------------------------------------------
def test_kafka_python_produce_consume(broker) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    topic = "kp-topic"
    _create(broker, topic, 2)
    sent = 0
    for acks in (0, 1, "all"):
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=acks, compression_type="gzip", linger_ms=5)
        for i in range(30):
            producer.send(topic, key=b"k%d" % i if i % 2 else None, value=b"v%d" % i, headers=[("h", b"x")])
            sent += 1
        producer.flush(20)
        producer.close()
    # kafka-python's producer is idempotent by default (InitProducerId)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
    tps = [KTP(topic, 0), KTP(topic, 1)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    got = []
    deadline = time.monotonic() + 20
    while len(got) < sent and time.monotonic() < deadline:
        for recs in consumer.poll(timeout_ms=500).values():
            got.extend(recs)
    assert len(got) == sent
    assert all(r.headers == [("h", b"x")] for r in got)
    assert sum(consumer.end_offsets(tps).values()) == sent
    assert consumer.beginning_offsets(tps) == {tp: 0 for tp in tps}
    ts = consumer.offsets_for_times({KTP(topic, 0): 0})
    assert ts[KTP(topic, 0)].offset == 0
    consumer.close()

    # by timestamp and from latest, on a fresh single-partition topic
    ttopic = "kp-time"
    _create(broker, ttopic, 1)
    base = 1_650_000_000_000
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
    for i in range(6):
        producer.send(ttopic, value=b"t%d" % i, timestamp_ms=base + i * 1000).get(10)
    tp = KTP(ttopic, 0)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    consumer.assign([tp])
    found = consumer.offsets_for_times({tp: base + 2500})[tp]
    assert (found.offset, found.timestamp) == (3, base + 3000)
    assert consumer.offsets_for_times({tp: base + 99_000})[tp] is None  # Kafka's -1: none that late
    consumer.seek(tp, found.offset)
    first = []
    deadline = time.monotonic() + 10
    while not first and time.monotonic() < deadline:
        first = consumer.poll(timeout_ms=500).get(tp, [])
    assert first[0].value == b"t3"
    consumer.seek_to_end(tp)
    assert consumer.position(tp) == 6
    producer.send(ttopic, value=b"late").get(10)
    late = []
    deadline = time.monotonic() + 10
    while not late and time.monotonic() < deadline:
        late = consumer.poll(timeout_ms=500).get(tp, [])
    assert [r.value for r in late] == [b"late"]
    producer.close()
    consumer.close()


# -- aiokafka --------------------------------------------------------------------------------------
def test_aiokafka_produce_consume(broker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as ATP

    topic = "aio-topic"
    _create(broker, topic, 1)

    async def run() -> None:
        sent = 0
        for acks in (0, 1, "all"):
            producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks=acks, compression_type="gzip")
            await producer.start()
            try:
                for i in range(25):
                    await producer.send(topic, key=b"k" if i % 2 else None, value=b"v%d" % i, headers=[("h", b"1")])
                    sent += 1
                await producer.flush()
            finally:
                await producer.stop()
        idem = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True)
        await idem.start()
        try:
            for i in range(25):
                await idem.send_and_wait(topic, value=b"i%d" % i)
                sent += 1
        finally:
            await idem.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tp = ATP(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got = []
            deadline = time.monotonic() + 20
            while len(got) < sent and time.monotonic() < deadline:
                batch = await consumer.getmany(tp, timeout_ms=500)
                got.extend(batch.get(tp, []))
            assert len(got) == sent
            assert (await consumer.end_offsets([tp]))[tp] == sent
            ts = await consumer.offsets_for_times({tp: 0})
            assert ts[tp].offset == 0
            # by timestamp: records carrying explicit timestamps later than everything above
            base = int(time.time() * 1000) + 86_400_000
            stamped = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
            await stamped.start()
            try:
                for i in range(4):
                    await stamped.send_and_wait(topic, value=b"s%d" % i, timestamp_ms=base + i * 1000)
                    sent += 1
                found = (await consumer.offsets_for_times({tp: base + 1500}))[tp]
                assert (found.offset, found.timestamp) == (sent - 2, base + 2000)
                consumer.seek(tp, found.offset)
                msg = await asyncio.wait_for(consumer.getone(tp), 10)
                assert msg.value == b"s2"
                # latest: only what is produced after seeking to the end
                await consumer.seek_to_end(tp)
                assert await consumer.position(tp) == sent  # "end" resolved before producing
                await stamped.send_and_wait(topic, value=b"late")
                msg = await asyncio.wait_for(consumer.getone(tp), 10)
                assert msg.value == b"late" and msg.offset == sent
            finally:
                await stamped.stop()
        finally:
            await consumer.stop()

    asyncio.run(run())


# -- kcat ------------------------------------------------------------------------------------------
def test_kcat_produce_consume(broker) -> None:
    require(missing_program("kcat"))
    topic = "kcat-topic"
    _create(broker, topic, 1)
    lines = "".join(f"key{i}:value{i}\n" for i in range(20))
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        out = subprocess.run(
            ["kcat", "-P", "-b", broker.bootstrap, "-t", topic, "-K:", "-H", "src=kcat", "-z", codec],
            input=lines,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert out.returncode == 0, out.stderr
    out = subprocess.run(
        ["kcat", "-C", "-b", broker.bootstrap, "-t", topic, "-o", "beginning", "-e", "-f", "%k=%s|%h\n"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    rows = out.stdout.splitlines()
    assert rows == [f"key{i}=value{i}|src=kcat" for i in range(20)] * 5
    meta = subprocess.run(["kcat", "-L", "-b", broker.bootstrap, "-t", topic], capture_output=True, text=True, timeout=20)
    assert f'topic "{topic}" with 1 partitions' in meta.stdout

    # by timestamp (-Q and -o s@ts) and from the end (-o end)
    ttopic = "kcat-time"
    _create(broker, ttopic, 1)
    base = 1_650_000_000_000
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(5):
        producer.produce(ttopic, value=b"t%d" % i, timestamp=base + i * 1000)
        producer.flush(10)
    q = subprocess.run(
        ["kcat", "-Q", "-b", broker.bootstrap, "-t", f"{ttopic}:0:{base + 2500}"], capture_output=True, text=True, timeout=20
    )
    assert q.returncode == 0 and f"{ttopic} [0] offset 3" in q.stdout, q.stdout + q.stderr
    out = subprocess.run(
        ["kcat", "-C", "-b", broker.bootstrap, "-t", ttopic, "-o", f"s@{base + 2500}", "-e", "-f", "%s\n"],
        capture_output=True, text=True, timeout=20,
    )
    assert out.stdout.split() == ["t3", "t4"]
    end = subprocess.run(
        ["kcat", "-C", "-b", broker.bootstrap, "-t", ttopic, "-o", "end", "-e", "-f", "%s\n"],
        capture_output=True, text=True, timeout=20,
    )
    assert end.returncode == 0 and end.stdout.split() == []
