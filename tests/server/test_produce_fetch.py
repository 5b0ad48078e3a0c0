"""Produce/Fetch/ListOffsets at the wire level: idempotent retries, acks=0, long poll, offsets."""

from __future__ import annotations

import dataclasses
import datetime
import threading
import time
from pathlib import Path

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kwire import WireClient

from kaflite.protocol.record_batch import build_record_batch
from kaflite.server.embedded import EmbeddedBroker

SECOND = datetime.timedelta(seconds=1)


def _produce(topic: str, records: bytes, acks: int = -1, partition: int = 0) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=5 * SECOND,
        topic_data=(TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=partition, records=records),)),),
    )


def _fetch(topic: str, offset: int, max_wait_ms: int = 0, min_bytes: int = 1) -> FetchRequest:
    return FetchRequest(
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            FetchTopic(
                topic=topic,
                partitions=(FetchPartition(partition=0, fetch_offset=offset, log_start_offset=-1, partition_max_bytes=1 << 20),),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def _list_offsets(topic: str, ts: int) -> ListOffsetsRequest:
    return ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=(ListOffsetsTopic(name=topic, partitions=(ListOffsetsPartition(partition_index=0, timestamp=ts),)),),
    )


def _create(broker: EmbeddedBroker, topic: str) -> None:
    broker.call(broker.server.broker.create_topic, topic, 1, None)


def test_idempotent_retry_is_not_duplicated(broker) -> None:
    _create(broker, "idem-raw")
    with WireClient(broker.bootstrap) as c:
        init = c.request(InitProducerIdRequest(transactional_id=None, transaction_timeout=60 * SECOND))
        assert init.error_code == ErrorCode.none and init.producer_id >= 0 and init.producer_epoch == 0
        pid = init.producer_id
        batch0 = build_record_batch([(None, b"a", []), (None, b"b", [])], producer_id=pid, producer_epoch=0, base_sequence=0)
        batch1 = build_record_batch([(None, b"c", [])], producer_id=pid, producer_epoch=0, base_sequence=2)
        r1 = c.request(_produce("idem-raw", batch0)).responses[0].partition_responses[0]
        retry = c.request(_produce("idem-raw", batch0)).responses[0].partition_responses[0]
        r2 = c.request(_produce("idem-raw", batch1)).responses[0].partition_responses[0]
        assert (r1.error_code, r1.base_offset) == (ErrorCode.none, 0)
        assert (retry.error_code, retry.base_offset) == (ErrorCode.none, 0), "a retried batch answers its original offset"
        assert (r2.error_code, r2.base_offset) == (ErrorCode.none, 2)
        end = c.request(_list_offsets("idem-raw", -1)).topics[0].partitions[0]
        assert end.offset == 3, "the retried batch must not be written twice"
        # a gap in the sequence is refused
        gap = build_record_batch([(None, b"x", [])], producer_id=pid, producer_epoch=0, base_sequence=10)
        r3 = c.request(_produce("idem-raw", gap)).responses[0].partition_responses[0]
        assert r3.error_code == ErrorCode.out_of_order_sequence_number


def test_acks_zero_has_no_response_and_bad_acks_are_refused(broker) -> None:
    _create(broker, "acks-raw")
    with WireClient(broker.bootstrap) as c:
        c.send(_produce("acks-raw", build_record_batch([(None, b"fire", [])]), acks=0))
        bad = c.request(_produce("acks-raw", build_record_batch([(None, b"x", [])]), acks=2))
        # the first response on the wire is the acks=2 one: acks=0 got none
        assert bad.responses[0].partition_responses[0].error_code == ErrorCode.invalid_required_acks
        data = c.request(_fetch("acks-raw", 0)).responses[0].partitions[0]
        assert data.high_watermark == 1 and b"fire" in data.records
        unknown = c.request(_produce("no-such-topic", build_record_batch([(None, b"x", [])]), acks=1))
        assert unknown.responses[0].partition_responses[0].error_code == ErrorCode.unknown_topic_or_partition


def test_fetch_long_poll_woken_by_append_and_out_of_range(broker) -> None:
    _create(broker, "poll-raw")
    with WireClient(broker.bootstrap) as consumer, WireClient(broker.bootstrap) as producer:
        t0 = time.monotonic()
        empty = consumer.request(_fetch("poll-raw", 0, max_wait_ms=300)).responses[0].partitions[0]
        waited = time.monotonic() - t0
        assert empty.records == b"" and empty.high_watermark == 0
        assert 0.25 <= waited < 2.0, f"an empty long poll waits max_wait ({waited:.3f}s)"

        corr = consumer.send(_fetch("poll-raw", 0, max_wait_ms=10_000))
        threading.Timer(0.2, lambda: producer.request(_produce("poll-raw", build_record_batch([(b"k", b"v", [])])))).start()
        t0 = time.monotonic()
        from kwire import decode_response

        woken = decode_response(1, 12, consumer.read_frame(), corr).responses[0].partitions[0]
        assert time.monotonic() - t0 < 2.0, "an append must answer a parked fetch at once"
        assert woken.high_watermark == 1 and woken.log_start_offset == 0 and b"v" in woken.records

        oor = consumer.request(_fetch("poll-raw", 5)).responses[0].partitions[0]
        assert oor.error_code == ErrorCode.offset_out_of_range
        assert oor.high_watermark == 1


def test_list_offsets_specials(broker) -> None:
    _create(broker, "lo-raw")
    base = 1_600_000_000_000
    with WireClient(broker.bootstrap) as c:
        assert c.request(_list_offsets("lo-raw", -1)).topics[0].partitions[0].offset == 0
        assert c.request(_list_offsets("lo-raw", -3)).topics[0].partitions[0].offset == -1
        for i, ts in enumerate((base + 10, base + 30, base + 20)):
            c.request(_produce("lo-raw", build_record_batch([(None, b"%d" % i, [])], timestamp_ms=ts)))
        p = lambda ts: c.request(_list_offsets("lo-raw", ts)).topics[0].partitions[0]  # noqa: E731
        assert (p(-2).offset, p(-2).timestamp) == (0, -1)
        assert (p(-1).offset, p(-1).timestamp) == (3, -1)
        assert (p(-3).offset, p(-3).timestamp) == (1, base + 30)
        assert (p(base + 15).offset, p(base + 15).timestamp) == (1, base + 30)
        assert (p(base + 31).offset, p(base + 31).timestamp) == (-1, -1)
        assert p(base).leader_epoch == 0


def test_topics_and_records_persist_across_restart(tmp_path: Path) -> None:
    with EmbeddedBroker(data_dir=tmp_path) as b:
        b.call(b.server.broker.create_topic, "keep", 3, {"retention.ms": "3600000"})
        with WireClient(b.bootstrap) as c:
            c.request(_produce("keep", build_record_batch([(None, b"one", [])]), partition=2))
        cluster_id = b.server.broker.metadata.cluster_id
    with EmbeddedBroker(data_dir=tmp_path) as b:
        topic = b.server.broker.metadata.topics["keep"]
        assert topic.num_partitions == 3 and topic.configs == {"retention.ms": "3600000"}
        assert b.server.broker.metadata.cluster_id == cluster_id
        with WireClient(b.bootstrap) as c:
            req = dataclasses.replace(
                _fetch("keep", 0),
                topics=(
                    FetchTopic(
                        topic="keep",
                        partitions=(FetchPartition(partition=2, fetch_offset=0, partition_max_bytes=1 << 20),),
                    ),
                ),
            )
            data = c.request(req).responses[0].partitions[0]
            assert data.high_watermark == 1 and b"one" in data.records


def test_kafka_python_infers_a_modern_broker(broker) -> None:
    # kafka-python guesses the broker's Kafka version from the advertised ranges and silently falls back
    # to old message formats when they look old.
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        assert producer.config["api_version"] >= (3, 0)
    finally:
        producer.close()


def test_min_insync_replicas_and_internal_topics(broker) -> None:
    broker.call(broker.server.broker.create_topic, "misr", 1, {"min.insync.replicas": "2"})
    with WireClient(broker.bootstrap) as c:
        batch = build_record_batch([(None, b"x", [])])
        strict = c.request(_produce("misr", batch, acks=-1)).responses[0].partition_responses[0]
        assert strict.error_code == ErrorCode.not_enough_replicas
        assert c.request(_produce("misr", batch, acks=1)).responses[0].partition_responses[0].error_code == ErrorCode.none
        assert c.request(_list_offsets("misr", -1)).topics[0].partitions[0].offset == 1  # the refused one is not written
        internal = c.request(_produce("__consumer_offsets", batch, acks=1)).responses[0].partition_responses[0]
        assert internal.error_code in (ErrorCode.invalid_topic_exception, ErrorCode.unknown_topic_or_partition)


def test_cluster_id_lives_in_meta_properties(tmp_path: Path) -> None:
    import pytest

    with EmbeddedBroker(data_dir=tmp_path) as b:
        generated = b.server.broker.metadata.cluster_id
    props = (tmp_path / "meta.properties").read_text()
    assert f"cluster.id={generated}" in props and "node.id=0" in props
    with EmbeddedBroker(data_dir=tmp_path) as b:
        assert b.server.broker.metadata.cluster_id == generated
    from kaflite.server.config import ConfigError

    with pytest.raises(ConfigError, match="another cluster"):
        EmbeddedBroker(data_dir=tmp_path, overrides={"cluster.id": "someone-elses-cluster"}).start()
    fresh = tmp_path / "fresh"
    with EmbeddedBroker(data_dir=fresh, overrides={"cluster.id": "MkU3OEVBNTcwNTJENDM2Qg"}) as b:
        with WireClient(b.bootstrap) as c:
            from kio.schema.metadata.v12.request import MetadataRequest

            r = c.request(MetadataRequest(topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False))
            assert r.cluster_id == "MkU3OEVBNTcwNTJENDM2Qg"


def test_disk_errors_answer_kafka_storage_error(tmp_path: Path, caplog) -> None:
    """An OSError from the storage (disk full, unreadable segment) is that partition's
    KAFKA_STORAGE_ERROR; the connection and the broker carry on."""
    import logging

    caplog.set_level(logging.ERROR, logger="kaflite")
    with EmbeddedBroker(data_dir=tmp_path) as b:
        b.call(b.server.broker.create_topic, "disk", 1, None)
        plog = b.call(b.server.broker.get_log, "disk", 0)

        def broken(*_args, **_kwargs):
            raise OSError(28, "No space left on device")

        real_append, real_read = plog.append, plog.read
        plog.append, plog.read = broken, broken
        try:
            with WireClient(b.bootstrap) as c:
                r = c.request(_produce("disk", build_record_batch([(None, b"x", [])])))
                assert r.responses[0].partition_responses[0].error_code == ErrorCode.kafka_storage_error
                plog.append = real_append  # the disk "recovers" for writes, reads still fail
                assert c.request(_produce("disk", build_record_batch([(None, b"y", [])]))).responses[0].partition_responses[0].error_code == ErrorCode.none
                f = c.request(_fetch("disk", 0)).responses[0].partitions[0]
                assert f.error_code == ErrorCode.kafka_storage_error
        finally:
            plog.append, plog.read = real_append, real_read
    assert any("No space left" in r.getMessage() for r in caplog.records)


def test_requests_larger_than_the_receive_buffer(broker) -> None:
    """A request over 64 KiB is read into a buffer of its own and handed on uncopied (protocol/framing.py):
    a Produce of it is appended byte for byte, and any other request (here Metadata, decoded by kio from a
    bytes copy) is answered as a small one is; both on the same connection, between small requests."""
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

    _create(broker, "big-raw")
    values = [bytes([i]) * 30_000 for i in range(10)]  # about 300 KB of records in one batch
    batch = build_record_batch([(b"k%d" % i, v, []) for i, v in enumerate(values)])
    names = [f"absent-{i:04d}-" + "n" * 200 for i in range(400)]  # about 85 KB of topic names
    with WireClient(broker.bootstrap) as c:
        small = c.request(_produce("big-raw", build_record_batch([(None, b"first", [])])))
        big = c.request(_produce("big-raw", batch)).responses[0].partition_responses[0]
        assert small.responses[0].partition_responses[0].error_code == ErrorCode.none
        assert (big.error_code, big.base_offset) == (ErrorCode.none, 1)
        meta = c.request(MetadataRequest(
            topics=tuple(MetadataRequestTopic(topic_id=None, name=n) for n in names),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        assert [t.name for t in meta.topics] == names
        assert {t.error_code for t in meta.topics} == {ErrorCode.unknown_topic_or_partition}
        got = bytearray()
        offset = 0
        for _ in range(20):  # the batch's bytes, whatever the fetch splits them into
            data = c.request(_fetch("big-raw", offset)).responses[0].partitions[0]
            got += data.records or b""
            if data.high_watermark == 11 and b"".join(values[-1:]) in got:
                break
            offset = 1
        assert all(v in got for v in values), "the large batch was not stored as sent"
        assert batch[61:] in got, "the records of the large batch changed on their way to the log"
