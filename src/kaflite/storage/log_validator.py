"""Validation of a client's record set before it is appended (Kafka's LogValidator / analyzeAndValidate),
done on batch headers only: no record is decoded on the hot path (except for compacted topics, which
must refuse records without a key).

Rules, in Kafka's order for each batch:
1. the header and the whole batch are present (else CORRUPT_MESSAGE);
2. magic is 2 (else INVALID_RECORD: produce v3+ carries magic 2 only);
3. a client batch has base offset 0 (else INVALID_RECORD);
4. batch size <= max.message.bytes (else MESSAGE_TOO_LARGE);
5. CRC-32C over [attributes, end) matches (else CORRUPT_MESSAGE); known compression codec;
6. lastOffsetDelta + 1 == record count > 0 (else INVALID_RECORD); no control batch from a client;
7. a batch with a producer id has a sequence (else INVALID_RECORD);
8. per record (KIP-467, Kafka's validateRecord): compacted topics need a key (INVALID_RECORD), CreateTime
   timestamps must lie within message.timestamp.before/after.max.ms of now, each falling back to the
   deprecated message.timestamp.difference.max.ms while at its default (INVALID_TIMESTAMP); every
   refused record of the batch is listed (its index in the batch, why) in a RecordValidationError whose
   code is INVALID_TIMESTAMP when any timestamp is refused, else INVALID_RECORD (Kafka's
   processRecordErrors); records are decoded (compressed batches decompressed) only for a compacted topic
   or a topic that bounds CreateTime timestamps (neither is the default, and neither takes the hot path);
and for the whole set: size <= segment.bytes (else RECORD_LIST_TOO_LARGE).

A replica's record set (batches that already carry the leader's offsets, Kafka's appendAsFollower) keeps
Kafka's follower checks, no size limit (Kafka's ignoreRecordSize): every batch whole (else CORRUPT_MESSAGE),
magic 2 (else INVALID_RECORD), CRC-32C (else CORRUPT_MESSAGE), lastOffsetDelta >= 0 and base offsets at or
after the log end offset and after the previous batch's last offset (else INVALID_RECORD).
`scan_replica_batches` is its hot path: the same checks on the headers (struct.unpack_from, the CRC in C),
header tuples out, no view object; it answers None for any set it would refuse, and
`validate_replica_batches` then raises the precise error.
"""

from __future__ import annotations

import struct

import crc32c as _crc32c_module

from kaflite.protocol.errors import ErrorCode, KafkaError, RecordValidationError
from kaflite.protocol.record_batch import RecordBatchView, decode_records
from kaflite.storage.config import LONG_MAX, LogConfig

__all__ = ["validate_client_batches", "validate_replica_batches", "scan_replica_batches", "fast_single_batch",
           "fast_path_limit"]

_HEADER = struct.Struct(">qiibIhiqqqhii")
_unpack_header = _HEADER.unpack_from
_crc32c = _crc32c_module.crc32c


def fast_path_limit(config: LogConfig) -> int:
    """Largest record set the hot path accepts under `config`, or 0 when the config needs the general
    path (compacted topic: keys must be checked; CreateTime bounds: timestamps must be checked)."""
    if config.compact:
        return 0
    if not config.log_append_time and (
        config.timestamp_before_max_ms != LONG_MAX or config.timestamp_after_max_ms != LONG_MAX
    ):
        return 0
    return min(config.max_message_bytes, config.segment_bytes)


def fast_single_batch(buf: memoryview, limit: int) -> tuple[int, ...] | None:
    """The hot path: the header fields of `buf` when it is exactly ONE valid client batch of at most
    `limit` bytes (see fast_path_limit); None otherwise (the caller then runs validate_client_batches,
    which also produces the precise error). Same rules as validate_client_batches, in straight-line code:
    no view object, no lists. A batch with a producer id is returned too when it has a sequence (rule 7);
    its sequence and epoch are the caller's to check against the producer state (Log._append)."""
    n = len(buf)
    if n < 61 or n > limit:
        return None
    f = _unpack_header(buf, 0)
    # f: base, length, ple, magic, crc, attributes, lod, first_ts, max_ts, pid, epoch, seq, count
    if (
        f[1] + 12 != n
        or f[3] != 2
        or f[0] != 0
        or (f[9] >= 0 and f[11] < 0)
        or f[6] < 0
        or f[6] + 1 != f[12]
        or f[5] & 0x27 > 4  # compression <= zstd, not a control batch
        or f[7] < -1
        or f[8] < -1
        or _crc32c(buf[21:]) != f[4]
    ):
        return None
    return f


def validate_client_batches(buf: memoryview, config: LogConfig, now_ms: int) -> list[RecordBatchView]:
    n = len(buf)
    if n == 0:
        raise KafkaError(ErrorCode.invalid_record, "the record set holds no batch")
    views: list[RecordBatchView] = []
    pos = 0
    max_size = config.max_message_bytes
    create_time = not config.log_append_time
    before = config.timestamp_before_max_ms
    after = config.timestamp_after_max_ms
    # a record's timestamp may lie outside its batch's [first, max] (deltas can be negative), so bounds
    # are checked record by record as Kafka does, and only when a topic sets them (the default is none)
    bounded_time = create_time and (before != LONG_MAX or after != LONG_MAX)
    while pos < n:
        view = RecordBatchView.parse(buf, pos)
        if view.magic == 2 and view.base_offset != 0:
            raise KafkaError(
                ErrorCode.invalid_record,
                f"the base offset of a client record batch must be 0, not {view.base_offset}",
            )
        view.validate(max_size)
        if view.producer_id >= 0 and view.base_sequence < 0:
            raise KafkaError(
                ErrorCode.invalid_record,
                f"batch of producer {view.producer_id} has no sequence number",
            )
        if config.compact or bounded_time:
            _validate_records(view, config, now_ms, create_time)
        views.append(view)
        pos += view.batch_length + 12
    if n > config.segment_bytes:
        raise KafkaError(
            ErrorCode.record_list_too_large,
            f"record set of {n} bytes is larger than segment.bytes={config.segment_bytes}",
        )
    return views


def _validate_records(view: RecordBatchView, config: LogConfig, now_ms: int, create_time: bool) -> None:
    """Kafka's validateRecord over every record of one batch; raises RecordValidationError listing each
    refused record (index in the batch, why) -- one error per record, the key checked first."""
    before = config.timestamp_before_max_ms
    after = config.timestamp_after_max_ms
    errors: list[tuple[int, str | None]] = []
    any_timestamp = False
    for index, rec in enumerate(decode_records(view)):
        if config.compact and rec.key is None:
            errors.append((index, "Compacted topic cannot accept message without key"))
        elif create_time and rec.timestamp >= 0 and (now_ms - rec.timestamp > before or rec.timestamp - now_ms > after):
            any_timestamp = True
            errors.append((index, f"Timestamp {rec.timestamp} of message with offset {rec.offset} is out of "
                                  f"range. The timestamp should be within [{now_ms - before}, {now_ms + after}]"))
    if not errors:
        return
    if any_timestamp:
        raise RecordValidationError(ErrorCode.invalid_timestamp,
                                    "One or more records have been rejected due to invalid timestamp", tuple(errors))
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    raise RecordValidationError(
        ErrorCode.invalid_record,
        f"One or more records have been rejected due to {len(errors)} record errors in total, and only "
        f"showing the first three errors at most: [{shown}]",
        tuple(errors),
    )


def validate_replica_batches(buf: memoryview, next_offset: int) -> list[RecordBatchView]:
    """Batches that already carry offsets (replication, assign_offsets=False): structure, magic, CRC and
    strictly increasing offsets starting at or after the log end offset."""
    views: list[RecordBatchView] = []
    pos = 0
    n = len(buf)
    if n == 0:
        raise KafkaError(ErrorCode.invalid_record, "the record set holds no batch")
    expected = next_offset
    while pos < n:
        view = RecordBatchView.parse(buf, pos)
        if view.magic != 2:
            raise KafkaError(ErrorCode.invalid_record, f"record batch magic {view.magic} is not supported")
        if not view.crc_ok():
            raise KafkaError(ErrorCode.corrupt_message, "record batch CRC-32C mismatch")
        if view.base_offset < expected or view.last_offset_delta < 0:
            raise KafkaError(
                ErrorCode.invalid_record,
                f"offsets are not increasing: batch {view.base_offset}..{view.last_offset} after {expected - 1}",
            )
        expected = view.next_offset
        views.append(view)
        pos += view.size
    return views


def scan_replica_batches(buf: memoryview, next_offset: int) -> list[tuple[int, ...]] | None:
    """The replica hot path: the header fields of every batch of `buf` (same 13 fields as
    fast_single_batch, in order; batch i starts where batch i-1 ends) when the whole set passes
    validate_replica_batches's checks; None otherwise (empty, truncated, wrong magic, CRC mismatch,
    offsets not increasing), and the caller runs validate_replica_batches for the precise error."""
    n = len(buf)
    out: list[tuple[int, ...]] = []
    append = out.append
    pos = 0
    expected = next_offset
    while pos < n:
        if n - pos < 61:
            return None
        f = _unpack_header(buf, pos)
        end = pos + f[1] + 12
        if (
            f[1] < 49  # shorter than the header: RecordBatchView.parse refuses it
            or end > n
            or f[3] != 2
            or f[0] < expected
            or f[6] < 0
            or _crc32c(buf[pos + 21:end]) != f[4]
        ):
            return None
        expected = f[0] + f[6] + 1
        append(f)
        pos = end
    return out or None
