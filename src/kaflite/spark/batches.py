"""Kafka record batches (magic 2) decoded straight into the source's Arrow columns, without a Python object
per record (pure: no I/O).

Rules:
- the input is the `records` bytes of one partition of a Fetch response: concatenated batches, the last one
  possibly cut short by the fetch size (a truncated tail is ignored, as every consumer does);
- a batch whose magic byte is not 2 (message format v0/v1), or records inflating past 2 GiB (Arrow's
  int32 binary offsets), raise `UnsupportedBatch(start)`: no row of the call is returned, and the caller
  reads on from `start` another way;
- a batch whose CRC-32C does not match, or whose records do not fill its records section exactly, raises
  CORRUPT_MESSAGE (Kafka's consumers check CRCs too, with `check.crcs=true`);
- records whose offsets do not increase strictly (over the whole call) raise CORRUPT_MESSAGE;
- rows are the records with `start <= offset < until`, in log order; batches wholly below `start` are
  skipped without being decompressed (a fetch returns whole batches, from before the fetch offset too);
- control batches (transaction markers) give no row; with `aborted` (read_committed: the fetch response's
  aborted transactions, (producer id, first offset)), a transactional batch of a producer whose aborted
  transaction began at or before the batch's last offset gives no row, until that producer's ABORT marker
  (Kafka's consumer Fetcher does the same);
- a record's timestamp is the batch's max timestamp when the batch says LogAppendTime, else the batch's
  base timestamp plus the record's delta; `timestampType` is the batch's (0 CreateTime, 1 LogAppendTime);
- a key, value or header value of length -1 is null; a record without headers has a null `headers`;
- `next_offset` is where the next fetch starts: one past the last batch read whole (skipped ones included),
  `start` when none was;
- `decode_windows` cuts the same rows into windows, each ending with the batch that takes its decompressed
  records to `window_bytes` (the fetch path's DECODE_WINDOW_BYTES, 1 MiB), the read_committed state carried from window to window; each
  window comes with the offset to fetch next after it.
Every codec goes through kaflite.protocol.compression (one bulk decompression per batch, its output read
in place); the records of a window are then parsed together, by one of two decoders giving the same columns and raising on the same
corrupt records (tests/spark/test_batches_compiled.py):
- compiled (kaflite.spark._decode, built from _decode.c when a C compiler is there at install): one C step
  per record fills the column buffers, which pyarrow wraps without copying them;
- pure (no compiler, or KAFLITE_PURE_DECODER=1 in the environment when this module is imported): one
  Python step per record to find where each starts (their lengths chain them), everything else as numpy
  operations over all records at once, and the key and value columns gathered from the records' bytes by
  Arrow's `take` (one memcpy per value, in C).
`DECODER` names the one `decode_batches` uses (logged at debug on import); `pure=` picks one per call.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable, Iterator
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa

from kaflite.protocol.compression import decompress_view
from kaflite.protocol.control_record import ABORT, parse_marker
from kaflite.protocol.errors import ErrorCode, KafkaError
from kaflite.protocol.record_batch import (
    BATCH_HEADER_SIZE,
    CONTROL_MASK,
    CRC_START,
    LOG_OVERHEAD,
    MAGIC_V2,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    RecordBatchView,
    crc32c,
)
from kaflite.spark.arrow import HEADERS_TYPE, arrow_schema

__all__ = ["DECODER", "PURE_DECODER_ENV", "UnsupportedBatch", "compiled_missing", "decode_batches", "decode_windows"]

log = logging.getLogger(__name__)

PURE_DECODER_ENV = "KAFLITE_PURE_DECODER"


def _load_compiled() -> tuple[ModuleType | None, str | None]:
    """(the compiled decoder module or None, why it is not there)."""
    try:
        import kaflite.spark._decode as _decode
    except ImportError as exc:
        # installed without a C compiler (the extension is optional): the pure decoder reads everything
        return None, f"kaflite.spark._decode is not built ({exc})"
    return _decode, None


_compiled, compiled_missing = _load_compiled()
DECODER = "compiled" if _compiled is not None and os.environ.get(PURE_DECODER_ENV, "") in ("", "0") else "pure"
log.debug("fetch decoder: %s%s", DECODER,
          f" ({compiled_missing})" if compiled_missing else f" ({PURE_DECODER_ENV}=1)" if DECODER == "pure" else "")

_HEADER = struct.Struct(">qiibIhiqqqhii")
_MAGIC_AT = 16
_MAX_BINARY = 2**31 - 1
_PAD = 16  # zero bytes after the records so vectorised varint reads never index past the buffer


class UnsupportedBatch(Exception):
    """A batch this decoder does not read (message format v0/v1) starts at `offset`."""

    def __init__(self, offset: int, why: str) -> None:
        super().__init__(f"offset {offset}: {why}")
        self.offset = offset


def _corrupt(why: str) -> KafkaError:
    return KafkaError(ErrorCode.corrupt_message, why)


def _uvarint_at(buf: bytes, p: int) -> tuple[int, int]:
    """(raw unsigned value, position after it) of the varint at `p`."""
    shift = result = 0
    while True:
        b = buf[p]
        p += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, p
        shift += 7
        if shift > 63:
            raise _corrupt("varint is too long")


def _varint_at(buf: bytes, p: int) -> tuple[int, int]:
    """(zigzag-decoded value, position after it) of the varint at `p`."""
    raw, p = _uvarint_at(buf, p)
    return (raw >> 1) ^ -(raw & 1), p


def _record_ends(buf: bytes, count: int) -> list[int]:
    """Where each of `count` records laid end to end from position 0 ends (length varint included).

    The one per-record Python loop (a record's position depends on every length before it), kept to the
    least: lengths of one or two varint bytes inline, each record one list append. A negative length
    (an odd zigzag) is caught afterwards, when the lengths are decoded again, vectorised."""
    ends: list[int] = []
    append = ends.append
    p = 0
    try:
        for _ in range(count):
            b = buf[p]
            if b < 0x80:
                p += 1 + (b >> 1)
            else:
                b2 = buf[p + 1]
                if b2 < 0x80:
                    p += 2 + (((b & 0x7F) | (b2 << 7)) >> 1)
                else:
                    raw, p = _uvarint_at(buf, p)
                    p += raw >> 1
            append(p)
    except IndexError:
        raise _corrupt("records run past the end of the batch") from None
    return ends


def _vvarint(u8: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints at every position of `pos` at once: (values, positions after them)."""
    raw = u8[pos].astype(np.uint64)
    more = np.flatnonzero(raw >= 0x80)
    after = pos + 1
    if more.size:
        raw &= np.uint64(0x7F)
        shift = 7
        while more.size:
            if shift > 63:
                raise _corrupt("varint is too long")
            b = u8[after[more]].astype(np.uint64)
            raw[more] |= (b & np.uint64(0x7F)) << np.uint64(shift)
            after[more] += 1
            more = more[b >= 0x80]
            shift += 7
    values = (raw >> np.uint64(1)).view(np.int64) ^ -(raw & np.uint64(1)).view(np.int64)
    return values, after


def _binary_column(buf: pa.Buffer, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A binary array of buf[starts[i] : starts[i] + lengths[i]], null where lengths[i] == -1.

    The values lie in `buf` with gaps between them: an array over the values *and* the gaps (offsets
    start0, end0, start1, end1, ...) is valid Arrow, and taking its even elements packs the values."""
    n = len(starts)
    if n == 0:
        return pa.array([], pa.binary())
    valid = lengths >= 0
    sizes = np.where(valid, lengths, 0)
    bounds = np.empty(2 * n + 1, dtype=np.int32)
    bounds[0:-1:2] = starts
    bounds[1::2] = starts + sizes
    bounds[-1] = bounds[-2]
    spread = pa.Array.from_buffers(pa.binary(), 2 * n, [None, pa.py_buffer(bounds), buf])
    packed = spread.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int64)))
    if valid.all():
        return packed
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    _, offsets, data = packed.buffers()
    return pa.Array.from_buffers(pa.binary(), n, [bitmap, offsets, data], null_count=int(n - valid.sum()))


def _headers(buf: bytes, at: np.ndarray, counts: np.ndarray, ends: np.ndarray) -> pa.Array:
    """The headers column: parsed in Python, only for the records that have headers."""
    try:
        return _header_rows(buf, at, counts, ends)
    except IndexError:
        # a header length pointing past the fetched bytes: as corrupt as one ending inside them
        raise _corrupt("record headers do not match the record length") from None


def _header_rows(buf: bytes, at: np.ndarray, counts: np.ndarray, ends: np.ndarray) -> pa.Array:
    rows: list[Any] = [None] * len(at)
    for i in np.flatnonzero(counts).tolist():
        p = int(at[i])
        items = []
        for _ in range(int(counts[i])):
            klen, p = _varint_at(buf, p)
            if klen < 0:
                raise _corrupt("null header key")
            key = buf[p : p + klen].decode("utf-8", errors="replace")
            p += klen
            vlen, p = _varint_at(buf, p)
            value = None if vlen < 0 else buf[p : p + vlen]
            p += max(vlen, 0)
            items.append({"key": key, "value": value})
        if p != ends[i]:
            raise _corrupt("record headers do not match the record length")
        rows[i] = items
    return pa.array(rows, HEADERS_TYPE)


def _repeated_string(text: str, n: int) -> pa.Array:
    raw = text.encode("utf-8")
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(len(raw))
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])


class _Aborted:
    """read_committed bookkeeping over the fetch response's aborted transactions (Kafka's Fetcher)."""

    def __init__(self, aborted: Iterable[tuple[int, int]]) -> None:
        self.pending = sorted(aborted, key=lambda a: a[1])
        self.producers: set[int] = set()

    def skip(self, view: RecordBatchView, last_offset: int) -> bool:
        """True when the batch is part of an aborted transaction (its rows are dropped)."""
        while self.pending and self.pending[0][1] <= last_offset:
            self.producers.add(self.pending.pop(0)[0])
        if view.attributes & CONTROL_MASK:
            marker = parse_marker(view)
            if marker is not None and marker.type == ABORT:
                self.producers.discard(view.producer_id)
            return True
        return bool(view.attributes & TRANSACTIONAL_MASK) and view.producer_id in self.producers


def decode_batches(
    data: bytes | bytearray | memoryview,
    topic: str,
    partition: int,
    start: int,
    until: int,
    include_headers: bool,
    aborted: Iterable[tuple[int, int]] | None = None,
    *,
    pure: bool | None = None,
) -> tuple[pa.RecordBatch | None, int]:
    """(the rows of `data` in [start, until) as one Arrow batch of the source schema or None when there
    are none, the offset to fetch next). `aborted`: None under read_uncommitted, else the fetch response's
    (producer id, first offset) pairs. `pure`: None for `DECODER`, True for the pure decoder, False for the
    compiled one (ImportError when it is not built)."""
    ((rows, next_offset),) = decode_windows(data, topic, partition, start, until, include_headers, aborted,
                                            pure=pure)
    return rows, next_offset


def decode_windows(
    data: bytes | bytearray | memoryview,
    topic: str,
    partition: int,
    start: int,
    until: int,
    include_headers: bool,
    aborted: Iterable[tuple[int, int]] | None = None,
    *,
    window_bytes: int | None = None,
    pure: bool | None = None,
) -> Iterator[tuple[pa.RecordBatch | None, int]]:
    """`decode_batches` one window at a time: (rows or None, the offset to fetch next after them) for
    every run of batches whose records sections (decompressed) add up to `window_bytes` or more, the
    batch that reaches it included, then once for the rest (rows or None, the final offset to fetch
    next). None: one window, the whole of `data`.

    Why: a compressed fetch inflates many times over (bench/spark_bench.py's rows: one 4 MiB fetch held a
    whole partition, about 40 MB of records), and decoding it in one call made buffers of tens of MB, page
    faulted in afresh every call (27,000 minor faults per million rows; 9,500-18,600 with 1 MiB windows,
    bench/spark_codec_bench.py) and out of cache by the time they were read. A window decodes what was just decompressed
    while it is still in cache, into buffers the allocator reuses. An UnsupportedBatch
    names the start of the window it occurs in: the rows of the windows before it stand."""
    mv = memoryview(data)
    end = len(mv)
    pos = 0
    next_offset = window_start = start
    txn = _Aborted(aborted) if aborted is not None else None  # one state over every window
    sections: list[bytes | memoryview] = []
    meta: list[tuple[int, int, int, int, int]] = []  # base offset, count, base ts, max ts, log-append
    inflated = 0
    while end - pos >= BATCH_HEADER_SIZE:
        if mv[pos + _MAGIC_AT] != MAGIC_V2:
            # no row of this window is returned: the caller reads all of [window_start, ...) another way
            raise UnsupportedBatch(window_start, f"message format magic {mv[pos + _MAGIC_AT]}")
        fields = _HEADER.unpack_from(mv, pos)
        base, length = fields[0], fields[1]
        if length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
            raise _corrupt(f"record batch length {length}")
        size = length + LOG_OVERHEAD
        if pos + size > end:
            break  # cut short by the fetch size: the next fetch starts at it
        batch_at = pos
        pos += size
        last = base + fields[6]
        if last < next_offset:
            continue
        if base >= until:
            next_offset = max(next_offset, base)  # nothing of [start, until) is left: the range is done
            break
        if crc32c(mv[batch_at + CRC_START : batch_at + size]) != fields[4]:
            raise _corrupt(f"CRC mismatch in the batch at offset {base}")
        next_offset = last + 1
        attributes = fields[5]
        if txn is not None and fields[9] >= 0:
            if txn.skip(RecordBatchView(mv, batch_at, fields), last):
                continue
        if attributes & CONTROL_MASK:
            continue
        count = fields[12]
        if count <= 0:
            continue
        body = mv[batch_at + BATCH_HEADER_SIZE : batch_at + size]
        codec = attributes & 0x07
        section = decompress_view(codec, body) if codec else body
        sections.append(section)
        meta.append((base, count, fields[7], fields[8], 1 if attributes & TIMESTAMP_TYPE_MASK else 0))
        inflated += len(section)
        if window_bytes is not None and inflated >= window_bytes:
            yield _pick(pure)(sections, meta, topic, partition, window_start, until, include_headers), next_offset
            sections, meta, inflated, window_start = [], [], 0, next_offset
    if not meta:
        yield None, next_offset
        return
    yield _pick(pure)(sections, meta, topic, partition, window_start, until, include_headers), next_offset


def _pick(pure: bool | None) -> Any:
    """The columns function of the decoder `pure` asks for (decode_batches's docstring)."""
    if pure is None:
        pure = DECODER == "pure"
    if not pure and _compiled is None:
        raise ImportError(compiled_missing)
    return _columns if pure else _compiled_columns


def _check_size(sections: list[bytes | memoryview], start: int) -> None:
    if sum(len(s) for s in sections) + _PAD > _MAX_BINARY:
        # Arrow's binary offsets are int32: a fetch that inflates past 2 GiB is read another way
        raise UnsupportedBatch(start, "records inflate past 2 GiB")


def _compiled_columns(
    sections: list[bytes | memoryview],
    meta: list[tuple[int, int, int, int, int]],
    topic: str,
    partition: int,
    start: int,
    until: int,
    include_headers: bool,
) -> pa.RecordBatch | None:
    """`_columns` through kaflite.spark._decode: the same columns, the same corrupt records refused."""
    assert _compiled is not None
    _check_size(sections, start)
    try:
        out = _compiled.columns(sections, meta, start, until, include_headers)
    except _compiled.Corrupt as exc:
        raise _corrupt(str(exc)) from None
    if out is None:
        return None
    n, offsets, micros, types, key_off, key_data, key_valid, key_nulls = out[:8]
    value_off, value_data, value_valid, value_nulls, headers = out[8:]
    buf = pa.py_buffer  # each wraps the bytes object the C code filled: no copy
    columns: list[Any] = [
        _binary_of(n, key_off, key_data, key_valid, key_nulls),
        _binary_of(n, value_off, value_data, value_valid, value_nulls),
        _repeated_string(topic, n),
        pa.array(np.full(n, partition, dtype=np.int32)),
        pa.Array.from_buffers(pa.int64(), n, [None, buf(offsets)]),
        pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), n, [None, buf(micros)]),
        pa.Array.from_buffers(pa.int32(), n, [None, buf(types)]),
    ]
    if include_headers:
        if headers is None:
            columns.append(pa.nulls(n, HEADERS_TYPE))
        else:
            list_off, list_valid, list_nulls, entries, hkey_off, hkey_data, hval_off, hval_data = headers[:8]
            hval_valid, hval_nulls = headers[8:]
            keys = pa.Array.from_buffers(pa.string(), entries, [None, buf(hkey_off), buf(hkey_data)])
            values = _binary_of(entries, hval_off, hval_data, hval_valid, hval_nulls)
            item_type = HEADERS_TYPE.value_type
            items = pa.StructArray.from_arrays([keys, values], fields=[item_type.field(0), item_type.field(1)])
            columns.append(pa.Array.from_buffers(HEADERS_TYPE, n, [buf(list_valid) if list_nulls else None,
                                                                   buf(list_off)],
                                                 null_count=list_nulls, children=[items]))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))


def _binary_of(n: int, off: bytes, data: bytes, valid: bytes | None, nulls: int) -> pa.Array:
    bitmap = pa.py_buffer(valid) if valid is not None and nulls else None
    return pa.Array.from_buffers(pa.binary(), n, [bitmap, pa.py_buffer(off), pa.py_buffer(data)], null_count=nulls)


def _columns(
    sections: list[bytes | memoryview],
    meta: list[tuple[int, int, int, int, int]],
    topic: str,
    partition: int,
    start: int,
    until: int,
    include_headers: bool,
) -> pa.RecordBatch | None:
    sizes = np.fromiter((len(s) for s in sections), dtype=np.int64, count=len(sections))
    _check_size(sections, start)
    sections.append(bytes(_PAD))
    buf = b"".join(sections)
    bases, counts, base_ts, max_ts, log_append = (np.array(col, dtype=np.int64) for col in zip(*meta, strict=True))
    total = int(counts.sum())
    ends = np.array(_record_ends(buf, total), dtype=np.int64)
    # every batch's records must fill its section exactly
    if ends[-1] > len(buf) - _PAD or not np.array_equal(ends[np.cumsum(counts) - 1], np.cumsum(sizes)):
        raise _corrupt("a batch's records do not fill its records section")
    u8 = np.frombuffer(buf, dtype=np.uint8)
    batch_of = np.repeat(np.arange(len(meta)), counts)
    try:
        heads = np.empty(total, dtype=np.int64)
        heads[0] = 0
        heads[1:] = ends[:-1]
        lengths, starts = _vvarint(u8, heads)
        if (lengths < 0).any() or not np.array_equal(starts + lengths, ends):
            raise _corrupt("negative record length")
        ts_delta, p = _vvarint(u8, starts + 1)  # after the attributes byte
        off_delta, p = _vvarint(u8, p)
        offsets = bases[batch_of] + off_delta
        if (np.diff(offsets) <= 0).any():
            # a log's offsets only grow: the range cut below (a binary search) relies on it
            raise _corrupt("record offsets do not increase")
        lo, hi = np.searchsorted(offsets, [start, until])
        if lo >= hi:
            return None
        if lo > 0 or hi < total:
            starts, ends, p = starts[lo:hi], ends[lo:hi], p[lo:hi]
            ts_delta, offsets, batch_of = ts_delta[lo:hi], offsets[lo:hi], batch_of[lo:hi]
        key_len, key_at = _vvarint(u8, p)
        value_len, value_at = _vvarint(u8, key_at + np.maximum(key_len, 0))
        header_count, header_at = _vvarint(u8, value_at + np.maximum(value_len, 0))
    except IndexError:
        raise _corrupt("record fields run past the end of the batch") from None
    if (key_len < -1).any() or (value_len < -1).any() or (header_count < 0).any():
        raise _corrupt("negative record field length")
    if (header_at > ends).any() or ((header_count == 0) & (header_at != ends)).any():
        raise _corrupt("record fields do not match the record length")
    n = len(offsets)
    appended = log_append[batch_of].astype(bool)
    millis = np.where(appended, max_ts[batch_of], base_ts[batch_of] + ts_delta)
    data = pa.py_buffer(buf)
    columns: list[Any] = [
        _binary_column(data, key_at, key_len),
        _binary_column(data, value_at, value_len),
        _repeated_string(topic, n),
        pa.array(np.full(n, partition, dtype=np.int32)),
        pa.array(offsets),
        # Kafka timestamps are milliseconds; Spark's TimestampType is microseconds
        pa.array(millis * 1000, pa.timestamp("us", tz="UTC")),
        pa.array(appended.astype(np.int32)),
    ]
    if include_headers:
        if header_count.any():
            columns.append(_headers(buf, header_at, header_count, ends))
        else:
            columns.append(pa.nulls(n, HEADERS_TYPE))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))
