"""Sans-IO view of Kafka's magic-2 RecordBatch, plus an encoder and a record decoder.

The broker never decodes records on the hot path: it reads the 61-byte batch header (one
`struct.unpack_from`), checks the CRC-32C over the right byte range and patches the base offset and the
partition leader epoch in place. Record decoding (`decode_records`) exists for the few places that need
keys and values: log compaction, offset-for-timestamp inside one batch, and tests.

On-wire layout of a magic-2 batch (all big-endian), byte offsets into the batch:

    0  baseOffset            int64      \
    8  batchLength           int32       |  not covered by the CRC: the broker rewrites these
    12 partitionLeaderEpoch  int32       |
    16 magic                 int8       /
    17 crc                   uint32     CRC-32C of bytes [21, end)
    21 attributes            int16      bits 0-2 compression, 3 timestamp type, 4 transactional,
                                        5 control, 6 delete-horizon set
    23 lastOffsetDelta       int32
    27 baseTimestamp         int64
    35 maxTimestamp          int64
    43 producerId            int64
    51 producerEpoch         int16
    53 baseSequence          int32
    57 recordsCount          int32
    61 records...            (compressed as a whole when compression != 0)

`batchLength` counts the bytes after itself, so a batch occupies `batchLength + 12` bytes.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import crc32c as _crc32c

from kaflite.protocol.compression import compress, decompress
from kaflite.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "BATCH_HEADER_SIZE",
    "LOG_OVERHEAD",
    "RECORD_BATCH_OVERHEAD",
    "MAGIC_V2",
    "Record",
    "RecordBatchView",
    "build_record_batch",
    "decode_records",
    "iter_batches",
    "crc32c",
]

_HEADER = struct.Struct(">qiibIhiqqqhii")
BATCH_HEADER_SIZE = _HEADER.size  # 61
# the header in the two parts the CRC separates: [base offset, length, leader epoch, magic, crc] and the
# [attributes .. records count] the CRC covers with the records
_HEAD = struct.Struct(">qiibI")
_TAIL = struct.Struct(">hiqqqhii")
RECORD_BATCH_OVERHEAD = BATCH_HEADER_SIZE
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part of the header that batchLength does not count
MAGIC_V2 = 2
CRC_START = 21  # the CRC covers [attributes, end)
MAX_TIMESTAMP_OFFSET = 35
PARTITION_LEADER_EPOCH_OFFSET = 12
ATTRIBUTES_OFFSET = 21

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4
COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1

_pack_q = struct.Struct(">q").pack
_pack_i = struct.Struct(">i").pack
_pack_I = struct.Struct(">I").pack


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC-32C (Castagnoli) as Kafka computes it for magic-2 batches."""
    return int(_crc32c.crc32c(data, value))


class RecordBatchView:
    """The header fields of one magic-2 batch lying at `buf[pos:pos+size]`; records are left undecoded.

    Built by `iter_batches` or `RecordBatchView.parse`. `buffer` is a memoryview of exactly this batch
    (no copy).
    """

    __slots__ = (
        "base_offset",
        "batch_length",
        "partition_leader_epoch",
        "magic",
        "crc",
        "attributes",
        "last_offset_delta",
        "first_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "records_count",
        "buffer",
        "position",
    )

    def __init__(self, buf: memoryview, pos: int, fields: tuple[int, ...]) -> None:
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.first_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.records_count,
        ) = fields
        self.position = pos
        self.buffer = buf[pos : pos + self.batch_length + LOG_OVERHEAD]

    @classmethod
    def parse(cls, buf: bytes | bytearray | memoryview, pos: int = 0) -> RecordBatchView:
        """Parse the header at `pos`; raises CORRUPT_MESSAGE if the header or the batch is truncated."""
        mv = buf if isinstance(buf, memoryview) else memoryview(buf)
        if len(mv) - pos < BATCH_HEADER_SIZE:
            raise KafkaError(
                ErrorCode.corrupt_message,
                f"record batch header truncated: {len(mv) - pos} bytes, need {BATCH_HEADER_SIZE}",
            )
        fields = _HEADER.unpack_from(mv, pos)
        length = fields[1]
        if length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
            raise KafkaError(
                ErrorCode.corrupt_message,
                f"record batch length {length} is smaller than the minimum {BATCH_HEADER_SIZE - LOG_OVERHEAD}",
            )
        if len(mv) - pos < length + LOG_OVERHEAD:
            raise KafkaError(
                ErrorCode.corrupt_message,
                f"record batch truncated: batchLength says {length + LOG_OVERHEAD} bytes, "
                f"only {len(mv) - pos} present",
            )
        return cls(mv, pos, fields)

    # --- derived properties -------------------------------------------------------------------
    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & 0x07

    @property
    def compression_type(self) -> str:
        return COMPRESSION_NAMES.get(self.attributes & 0x07, f"unknown({self.attributes & 0x07})")

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record (wraps past Int32.MAX to 0, as Kafka's DefaultRecordBatch does)."""
        if self.base_sequence < 0:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF

    def compute_crc(self) -> int:
        return crc32c(self.buffer[CRC_START:])

    def crc_ok(self) -> bool:
        return self.compute_crc() == self.crc

    def validate(self, max_size: int | None = None) -> None:
        """Header-level validation of a batch written by a client (Kafka's LogValidator rules that do
        not need to decode records). Raises KafkaError with Kafka's error code."""
        if self.magic != MAGIC_V2:
            raise KafkaError(
                ErrorCode.invalid_record,
                f"record batch magic {self.magic} is not supported (only magic 2; produce v3+)",
            )
        size = self.batch_length + LOG_OVERHEAD
        if max_size is not None and size > max_size:
            raise KafkaError(
                ErrorCode.message_too_large,
                f"record batch of {size} bytes exceeds max.message.bytes={max_size}",
            )
        if crc32c(self.buffer[CRC_START:]) != self.crc:
            raise KafkaError(ErrorCode.corrupt_message, "record batch CRC-32C mismatch")
        if self.attributes & 0x07 > COMPRESSION_ZSTD:
            raise KafkaError(ErrorCode.corrupt_message, f"unknown compression type {self.attributes & 7}")
        if self.last_offset_delta < 0:
            raise KafkaError(ErrorCode.invalid_record, "record batch has an invalid offset range")
        if self.records_count <= 0:
            raise KafkaError(
                ErrorCode.invalid_record, f"invalid reported record count {self.records_count}"
            )
        if self.last_offset_delta + 1 != self.records_count:
            raise KafkaError(
                ErrorCode.invalid_record,
                f"inconsistent batch offset range and record count: lastOffsetDelta "
                f"{self.last_offset_delta} but {self.records_count} records",
            )
        if self.first_timestamp < NO_TIMESTAMP or self.max_timestamp < NO_TIMESTAMP:
            raise KafkaError(ErrorCode.invalid_timestamp, "record batch has a negative timestamp")
        if self.is_control:
            raise KafkaError(ErrorCode.invalid_record, "clients are not allowed to write control records")

    def __repr__(self) -> str:
        return (
            f"RecordBatchView(base_offset={self.base_offset}, size={self.size}, "
            f"last_offset_delta={self.last_offset_delta}, count={self.records_count}, "
            f"pid={self.producer_id}, epoch={self.producer_epoch}, seq={self.base_sequence}, "
            f"max_ts={self.max_timestamp}, compression={self.compression_type})"
        )


def iter_batches(buf: bytes | bytearray | memoryview) -> Iterator[RecordBatchView]:
    """Walk concatenated batches. Raises CORRUPT_MESSAGE on a truncated header or batch."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    pos = 0
    end = len(mv)
    while pos < end:
        view = RecordBatchView.parse(mv, pos)
        yield view
        pos += view.batch_length + LOG_OVERHEAD


# --- varints (zigzag, as Kafka's ByteUtils) ---------------------------------------------------------


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def write_varint(out: bytearray, n: int) -> None:
    """Append the zigzag varint/varlong encoding of `n`."""
    v = _zigzag(n) & 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Decode a zigzag varint at `pos`; returns (value, new position)."""
    shift = 0
    result = 0
    while True:
        if pos >= len(buf):
            raise KafkaError(ErrorCode.corrupt_message, "varint runs past the end of the record")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise KafkaError(ErrorCode.corrupt_message, "varint is too long")
    return (result >> 1) ^ -(result & 1), pos


# --- records --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    attributes: int = 0


def _encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]],
) -> None:
    body = bytearray()
    body.append(0)  # record attributes (unused)
    write_varint(body, timestamp_delta)
    write_varint(body, offset_delta)
    if key is None:
        write_varint(body, -1)
    else:
        write_varint(body, len(key))
        body += key
    if value is None:
        write_varint(body, -1)
    else:
        write_varint(body, len(value))
        body += value
    write_varint(body, len(headers))
    for hkey, hval in headers:
        hk = hkey.encode("utf-8")
        write_varint(body, len(hk))
        body += hk
        if hval is None:
            write_varint(body, -1)
        else:
            write_varint(body, len(hval))
            body += hval
    write_varint(out, len(body))
    out += body


def decode_records(batch: RecordBatchView) -> list[Record]:
    """Decode every record of a batch (decompressing it first). Raises CORRUPT_MESSAGE on malformed records.

    With LogAppendTime every record's timestamp is the batch's max timestamp, as Kafka reports it.
    """
    data = decompress(batch.compression, batch.buffer[BATCH_HEADER_SIZE:])
    out: list[Record] = []
    pos = 0
    log_append = batch.timestamp_type == 1
    for _ in range(batch.records_count):
        length, pos = read_varint(data, pos)
        end = pos + length
        if length < 0 or end > len(data):
            raise KafkaError(ErrorCode.corrupt_message, "record length runs past the end of the batch")
        attrs = data[pos]
        p = pos + 1
        ts_delta, p = read_varint(data, p)
        off_delta, p = read_varint(data, p)
        klen, p = read_varint(data, p)
        key = None if klen < 0 else data[p : p + klen]
        p += max(klen, 0)
        vlen, p = read_varint(data, p)
        value = None if vlen < 0 else data[p : p + vlen]
        p += max(vlen, 0)
        hcount, p = read_varint(data, p)
        headers: list[tuple[str, bytes | None]] = []
        for _h in range(hcount):
            hklen, p = read_varint(data, p)
            hk = data[p : p + hklen].decode("utf-8", errors="replace")
            p += hklen
            hvlen, p = read_varint(data, p)
            hv = None if hvlen < 0 else data[p : p + hvlen]
            p += max(hvlen, 0)
            headers.append((hk, hv))
        if p != end:
            raise KafkaError(ErrorCode.corrupt_message, "record fields do not match the record length")
        ts = batch.max_timestamp if log_append else batch.first_timestamp + ts_delta
        out.append(Record(batch.base_offset + off_delta, ts, key, value, headers, attrs))
        pos = end
    if pos != len(data):
        raise KafkaError(
            ErrorCode.corrupt_message,
            f"{len(data) - pos} bytes left after the {batch.records_count} records the batch declares",
        )
    return out


def encode_batch(
    records: Sequence[tuple[int, int, bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]],
    *,
    base_offset: int,
    last_offset_delta: int | None = None,
    first_timestamp: int,
    max_timestamp: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    attributes: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """Low-level encoder: records are (offset_delta, timestamp_delta, key, value, headers).

    `last_offset_delta` may exceed the last record's delta (a compacted batch keeps its original
    offset range); `max_timestamp` defaults to the largest record timestamp.
    """
    body = bytearray()
    for off_delta, ts_delta, key, value, headers in records:
        _encode_record(body, off_delta, ts_delta, key, value, headers)
    payload = compress(attributes & 0x07, bytes(body))
    if last_offset_delta is None:
        last_offset_delta = records[-1][0] if records else 0
    if max_timestamp is None:
        max_timestamp = max((first_timestamp + r[1] for r in records), default=first_timestamp)
    tail = bytearray()
    tail += struct.pack(
        ">hiqqqhii",
        attributes,
        last_offset_delta,
        first_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    tail += payload
    crc = crc32c(tail)
    head = struct.pack(">qiibI", base_offset, len(tail) + 9, partition_leader_epoch, MAGIC_V2, crc)
    return head + bytes(tail)


def build_record_batch(
    records: Sequence[tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]],
    *,
    base_offset: int = 0,
    timestamp_ms: int | None = None,
    timestamps: Sequence[int] | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    compression: int = COMPRESSION_NONE,
    is_transactional: bool = False,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A correct magic-2 batch holding `records` = [(key, value, headers), ...].

    All records get `timestamp_ms` (default: now) unless `timestamps` gives one per record.
    Compression: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd (see kaflite.protocol.compression).
    """
    if not records:
        raise ValueError("build_record_batch: records must hold at least one (key, value, headers)")
    if timestamps is not None and len(timestamps) != len(records):
        raise ValueError("build_record_batch: timestamps must have one entry per record")
    if timestamp_ms is None:
        timestamp_ms = int(time.time() * 1000)
    ts_list = list(timestamps) if timestamps is not None else [timestamp_ms] * len(records)
    first_ts = ts_list[0]
    encoded = [
        (i, ts_list[i] - first_ts, key, value, headers) for i, (key, value, headers) in enumerate(records)
    ]
    attributes = compression & 0x07
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    return encode_batch(
        encoded,
        base_offset=base_offset,
        first_timestamp=first_ts,
        max_timestamp=max(ts_list),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        attributes=attributes,
        partition_leader_epoch=partition_leader_epoch,
    )


def patch_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int, leader_epoch: int) -> None:
    """Rewrite baseOffset and partitionLeaderEpoch in place (outside the CRC range, so no CRC change)."""
    struct.pack_into(">q", buf, pos, base_offset)
    struct.pack_into(">i", buf, pos + PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)


def recompress_batches(buf: bytes | memoryview, codec: int) -> bytes | memoryview:
    """The batches of a produce request re-encoded in `codec` (a topic's `compression.type`), as Kafka's
    LogValidator does when the topic's codec differs from the producer's. Batches already in `codec` are
    copied as they are; `buf` itself is returned when every batch is (the common case costs one header
    walk). A batch is validated (CRC, header) before it is rewritten, so corrupt input is refused rather
    than given a fresh CRC.

    A v2 batch's records section is the same bytes compressed or not (the codec applies to the section as a
    whole), so a batch is rewritten without decoding a record: its section is decompressed, compressed in
    `codec`, and the header is kept but for the codec bits, the length and the CRC. Every record keeps its
    exact bytes (offset and timestamp deltas, attributes, headers), and the header its producer id, epoch,
    sequence, timestamps, timestamp type and transactional flag. The records are then checked by the log's
    validation of the rewritten batch exactly as a batch that needed no rewrite (storage.log_validator)."""
    try:
        views = list(iter_batches(buf))
    except KafkaError:
        return buf  # truncated: let the log's validation answer with its error
    if all(v.compression == codec for v in views):
        return buf
    out = bytearray()
    for v in views:
        if v.compression == codec:
            out += v.buffer
            continue
        v.validate()
        section = compress(codec, decompress(v.compression, v.buffer[BATCH_HEADER_SIZE:]))
        tail = _TAIL.pack((v.attributes & ~0x07) | codec, v.last_offset_delta, v.first_timestamp,
                          v.max_timestamp, v.producer_id, v.producer_epoch, v.base_sequence,
                          v.records_count) + section
        out += _HEAD.pack(v.base_offset, len(tail) + _HEAD.size - LOG_OVERHEAD, v.partition_leader_epoch,
                          v.magic, crc32c(tail))
        out += tail
    return bytes(out)
