"""Cross-implementation checks of the magic-2 batch format against kafka-python's own encoder/decoder
(an independent implementation of Kafka's DefaultRecordBatch), and through the Log: batches written
by a real client library are accepted, stored verbatim (apart from the base offset) and read back."""

from __future__ import annotations

from pathlib import Path

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kaflite.protocol.record_batch import RecordBatchView, build_record_batch, decode_records, iter_batches
from kaflite.storage import Log, LogConfig


def _kafka_python_batch(codec: int = 0, pid: int = -1, epoch: int = -1, seq: int = -1) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20)
    for i in range(5):
        b.append(i, timestamp=1_700_000_000_000 + i, key=b"key%d" % i, value=b"value%d" % i * 10,
                 headers=[("h", b"x%d" % i)])
    return bytes(b.build())


def test_kafka_python_batches_parse_and_decode_here() -> None:
    for codec in (0, 1):
        raw = _kafka_python_batch(codec)
        v = RecordBatchView.parse(raw)
        v.validate()
        assert (v.records_count, v.last_offset_delta, v.compression) == (5, 4, codec)
        recs = decode_records(v)
        assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs] == [
            (i, 1_700_000_000_000 + i, b"key%d" % i, b"value%d" % i * 10, [("h", b"x%d" % i)]) for i in range(5)
        ]


def test_our_batches_parse_in_kafka_python() -> None:
    for codec in (0, 1):
        raw = build_record_batch([(b"k%d" % i, b"v%d" % i, [("h", b"y")]) for i in range(4)], base_offset=10,
                                 timestamp_ms=1234, producer_id=9, producer_epoch=2, base_sequence=7,
                                 compression=codec)
        kb = DefaultRecordBatch(bytearray(raw))
        assert kb.validate_crc()
        assert (kb.base_offset, kb.last_offset_delta, kb.producer_id, kb.producer_epoch, kb.base_sequence) == (
            10, 3, 9, 2, 7)
        got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in kb]
        assert got == [(10 + i, 1234, b"k%d" % i, b"v%d" % i, [("h", b"y")]) for i in range(4)]


def test_log_stores_client_batches_verbatim_and_they_stay_valid_for_clients(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(message_timestamp_type="CreateTime"))
    raws = [_kafka_python_batch(), _kafka_python_batch(1), _kafka_python_batch(0, pid=3, epoch=0, seq=0)]
    for raw in raws:
        log.append(raw, leader_epoch=2)
    stored = [v for buf in log.read(0, 1 << 20).records for v in iter_batches(buf)]
    assert [v.base_offset for v in stored] == [0, 5, 10]
    for raw, v in zip(raws, stored, strict=True):
        assert bytes(v.buffer)[16:] == raw[16:]  # only baseOffset, length (same) and leader epoch differ
        kb = DefaultRecordBatch(bytearray(v.buffer))
        assert kb.validate_crc() and kb.leader_epoch == 2 and kb.base_offset == v.base_offset
        assert [r.offset for r in kb] == list(range(v.base_offset, v.base_offset + 5))


def test_log_append_time_batches_are_valid_for_clients(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"), now_ms=lambda: 42_000)
    log.append(_kafka_python_batch(1))
    kb = DefaultRecordBatch(bytearray(log.read(0, 1 << 20).records[0]))
    assert kb.validate_crc() and kb.timestamp_type == 1 and kb.max_timestamp == 42_000
    assert {r.timestamp for r in kb} == {42_000}
