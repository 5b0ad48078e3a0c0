"""The sink's encoder: Arrow columns turned into Kafka record batches (magic 2) per partition, without a
Python object per record (pure: no I/O).

Rules:
- placement of a row (`place`): an explicit partition (not null) wins and must be in [0, n); else a
  non-null key goes to toPositive(murmur2(key)) % n over all n partitions of its topic (Kafka's
  BuiltInPartitioner.partitionForKey; `murmur2_array` equals kaflite.assign.murmur2 bit for bit); else
  (null key) the row goes to the topic's sticky partition for this call, given by the caller: every
  null-key row of one call to one partition, as the Java client's sticky partitioner fills one batch at a
  time (the producer moves the sticky partition on round-robin from call to call);
- rows keep their input order within a partition; a partition's rows are cut into batches whose records
  section holds at most `max_batch_bytes` before compression (a single larger record gets a batch alone);
- a record has attributes 0, offset delta = its rank in its batch, timestamp delta = its timestamp minus
  the batch's base timestamp (its first record's); maxTimestamp is the largest timestamp of the batch;
- a null key, value or header value is written with length -1; an empty one with length 0; a row's
  headers keep their order, followed by the `extra_header` when one is given (every row gets it);
- `seal` gives a batch its header: base offset 0, partition leader epoch -1 (the broker assigns both),
  producer id / epoch / base sequence of the caller, the transactional bit when asked, the codec bits, and
  the CRC-32C over [attributes, end) computed after compression.
- the compiled path (kaflite.spark._decode's `records` and `murmur2`, built from _decode.c) and the pure
  path give the same bytes and the same batch cuts for the same call (tests/spark/test_sink_encoder.py,
  hypothesis); the compiled path takes the calls whose rows have no headers of their own (the batch-id
  `extra_header` is fine), the pure path the others, and every call when the module is not built or the
  environment has KAFLITE_PURE_ENCODER=1 when this module is imported (`ENCODER` names the default,
  `pure=` picks one per call).
How (pure): every varint of every record is computed for all records at once with numpy (widths, then
one byte column at a time); each record is a chain of pieces (the small varint pieces, the key bytes, the
value bytes, the header entries), and one Arrow `take` over all pieces, in the order partition by
partition, lays the records sections out back to back (one memcpy per piece, in C).
How (compiled): numpy groups the rows by partition (one stable argsort), then one C pass per call cuts
the batches and sizes the records, and a second writes them into one buffer (varints and memcpys); no
intermediate column. A sink task of 1M rows of 100 B (bench/spark_bench.py's rows) spent 0.57-0.92 CPU-s
with the pure path, 0.18-0.22 with the compiled one (docs/spark.md, "The sink's compiled encoder").
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from kaflite.protocol.compression import compress
from kaflite.protocol.record_batch import MAGIC_V2, TRANSACTIONAL_MASK, crc32c
from kaflite.spark.batches import _load_compiled

__all__ = ["ENCODER", "EncodedBatch", "compiled_missing", "encode", "murmur2_array", "place", "seal"]

PURE_ENCODER_ENV = "KAFLITE_PURE_ENCODER"
# the decoder's extension module holds the encoder's C half too (one module to build, stamp and require)
_compiled, compiled_missing = _load_compiled()
ENCODER = ("compiled" if _compiled is not None and os.environ.get(PURE_ENCODER_ENV, "") in ("", "0")
           else "pure")

_SEED = np.uint32(0x9747B28C)
_M = np.uint32(0x5BD1E995)
_MAX_PIECES_BYTES = 2**31 - 1  # Arrow binary offsets are int32
_TAIL = struct.Struct(">hiqqqhii")
_HEAD = struct.Struct(">qiibI")
DEFAULT_MAX_BATCH_BYTES = 1_000_000  # under the broker's default max.message.bytes (1 MiB + 12)


@dataclass(frozen=True, slots=True)
class EncodedBatch:
    """The records section of one batch (uncompressed), before `seal` gives it a header."""

    topic: str
    partition: int
    count: int
    records: memoryview
    base_timestamp: int
    max_timestamp: int


def _binary(column: pa.Array) -> pa.Array:
    """A string / binary column as plain `binary` (int32 offsets; strings re-typed without copying)."""
    if pa.types.is_string(column.type):
        return column.view(pa.binary())
    if pa.types.is_binary(column.type):
        return column
    if pa.types.is_large_string(column.type) or pa.types.is_large_binary(column.type):
        return column.cast(pa.binary())
    raise TypeError(f"expected a string or binary column, got {column.type}")


def _offsets_and_data(column: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(n + 1 int64 offsets into data, data as uint8) of a `binary` array (slices honoured)."""
    bufs = column.buffers()
    n = len(column)
    offsets = np.frombuffer(bufs[1], dtype=np.int32)[column.offset : column.offset + n + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return offsets, data


def _lengths(column: pa.Array) -> np.ndarray:
    """Byte length of every value, -1 for a null (int64)."""
    offsets, _ = _offsets_and_data(column)
    lengths = np.diff(offsets)
    if column.null_count:
        lengths[~_valid(column)] = -1
    return lengths


def _valid(column: pa.Array) -> np.ndarray:
    if column.null_count == 0:
        return np.ones(len(column), dtype=bool)
    return np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _pure(pure: bool | None) -> bool:
    if pure is None:
        return ENCODER == "pure"
    if not pure and _compiled is None:
        raise RuntimeError(f"the compiled encoder is not available: {compiled_missing}")
    return pure


def murmur2_array(column: pa.Array, pure: bool | None = None) -> np.ndarray:
    """Kafka's murmur2 of every value of a string / binary column, as int32 (nulls give 0: not used).

    Compiled: one C loop over the values. Pure: block mixing is done for all keys at once; the chain over
    a key's 4-byte blocks runs one block index at a time over the keys that have that many blocks (keys
    sorted by length, so a prefix)."""
    col = _binary(column)
    n = len(col)
    offsets, data = _offsets_and_data(col)
    if not _pure(pure):
        assert _compiled is not None
        return np.frombuffer(_compiled.murmur2(offsets, data), dtype=np.int32)
    lengths = np.diff(offsets)
    h = _SEED ^ lengths.astype(np.uint32)
    blocks = lengths // 4
    order = np.argsort(-blocks, kind="stable")
    sorted_blocks = blocks[order]
    starts = offsets[order]
    hs = h[order]
    if n and sorted_blocks[0] > 0:
        # number of keys with more than j blocks, for every j: a prefix of `order`
        active_counts = np.searchsorted(-sorted_blocks, -np.arange(int(sorted_blocks[0])), side="left")
        for j, count in enumerate(active_counts.tolist()):
            at = starts[:count] + 4 * j
            k = (data[at].astype(np.uint32) | (data[at + 1].astype(np.uint32) << np.uint32(8))
                 | (data[at + 2].astype(np.uint32) << np.uint32(16))
                 | (data[at + 3].astype(np.uint32) << np.uint32(24)))
            k *= _M
            k ^= k >> np.uint32(24)
            k *= _M
            head = hs[:count]
            head *= _M
            head ^= k
    h[order] = hs
    tail = lengths % 4
    base = offsets[:-1] + (lengths & ~3)
    for size, shift in ((3, 16), (2, 8)):
        sel = np.flatnonzero(tail >= size)
        if sel.size:
            h[sel] ^= data[base[sel] + size - 1].astype(np.uint32) << np.uint32(shift)
    sel = np.flatnonzero(tail >= 1)
    if sel.size:
        h[sel] ^= data[base[sel]].astype(np.uint32)
        h[sel] *= _M
    h ^= h >> np.uint32(13)
    h *= _M
    h ^= h >> np.uint32(15)
    return h.view(np.int32)


def place(
    keys: pa.Array | None,
    partitions: pa.Array | None,
    num_partitions: np.ndarray,
    sticky: np.ndarray,
    pure: bool | None = None,
) -> np.ndarray:
    """The partition of every row (int64). `num_partitions` and `sticky` hold, per row, its topic's
    partition count and its topic's sticky partition for null keys. Raises ValueError for an explicit
    partition outside [0, n), as the Java producer does."""
    n = len(num_partitions)
    if keys is not None and keys.null_count == 0 and n:
        # every row keyed (the usual keyed write): no masks, no copy of `sticky`
        out = (murmur2_array(keys, pure).view(np.uint32) & np.uint32(0x7FFFFFFF)).astype(np.int64)
        out %= num_partitions
    else:
        out = sticky.astype(np.int64, copy=True)
    if keys is not None and 0 < keys.null_count < n:
        keyed = _valid(keys)
        hashed = (murmur2_array(keys, pure).view(np.uint32) & np.uint32(0x7FFFFFFF)).astype(np.int64)
        out[keyed] = hashed[keyed] % num_partitions[keyed]
    if partitions is not None and partitions.null_count < n:
        given = _valid(partitions)
        values = np.asarray(partitions.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
        bad = given & ((values < 0) | (values >= num_partitions))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"Invalid partition given with record: {values[i]} is not in the range "
                f"[0...{int(num_partitions[i])}]."
            )
        out[given] = values[given]
    return out


def _zigzag(values: np.ndarray) -> np.ndarray:
    v = values.astype(np.int64, copy=False)
    return ((v << np.int64(1)) ^ (v >> np.int64(63))).view(np.uint64)


def _width(u: np.ndarray) -> np.ndarray:
    """Bytes of the unsigned varint of every value (1..10)."""
    w = np.ones(len(u), dtype=np.int64)
    top = int(u.max()) if len(u) else 0
    for t in range(1, (top.bit_length() + 6) // 7):
        w += u >= np.uint64(1 << (7 * t))
    return w


def _pieces(fields: Sequence[np.ndarray], widths: Sequence[np.ndarray] | None = None) -> tuple[pa.Array, np.ndarray]:
    """A binary array whose value i is the varints of fields[0][i], fields[1][i], ... (each field
    already zigzagged, uint64), and the byte size of every value.

    Each field is written one byte position at a time: all rows at once for the first byte (and for
    every byte of a field of one width), only the rows whose varint is that long for the others."""
    n = len(fields[0])
    if widths is None:
        widths = [_width(u) for u in fields]
    total = np.sum(widths, axis=0) if len(widths) > 1 else widths[0]
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(total, out=offsets[1:])
    out = np.empty(int(offsets[-1]), dtype=np.uint8)
    at = offsets[:-1].copy()
    for u, w in zip(fields, widths, strict=True):
        most = int(w.max()) if n else 1
        least = int(w.min()) if n else 1
        rest = u
        for j in range(most):
            if j < least:  # every row has this byte
                byte = rest & np.uint64(0x7F)
                if j + 1 < least:
                    byte |= np.uint64(0x80)
                elif j + 1 < most:
                    byte |= (w > j + 1).astype(np.uint64) << np.uint64(7)
                out[at + j] = byte
                rest = rest >> np.uint64(7)
            else:
                idx = np.flatnonzero(w > j)
                byte = rest[idx] & np.uint64(0x7F)
                byte |= (w[idx] > j + 1).astype(np.uint64) << np.uint64(7)
                out[at[idx] + j] = byte
                rest[idx] >>= np.uint64(7)
        at += w
    array = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                    pa.py_buffer(out)])
    return array, total


def _group_order(topic_index: np.ndarray, partition: np.ndarray, group: np.ndarray) -> np.ndarray:
    """The stable order of the rows by (topic, partition). When the pairs fit 16 bits as topic * (largest
    partition + 1) + partition (a code that orders them alike), numpy sorts those codes by radix, in
    linear time (its stable sort of int64 is a merge sort, the largest numpy cost of a call)."""
    n = len(group)
    if n:
        width = int(partition.max()) + 1
        topics = int(topic_index.max()) + 1
        if topics * width <= 1 << 16 and int(partition.min()) >= 0:
            codes = (topic_index.astype(np.int64) * width + partition).astype(np.uint16)
            return np.argsort(codes, kind="stable")
    return np.argsort(group, kind="stable")


def _constant(raw: bytes, n: int) -> pa.Array:
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(len(raw))
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])


def _header_entry(key: str, value: bytes | None) -> bytes:
    k = key.encode("utf-8")
    out = bytearray(_varint_bytes(len(k)))
    out += k
    out += _varint_bytes(-1 if value is None else len(value))
    if value is not None:
        out += value
    return bytes(out)


def _varint_bytes(n: int) -> bytes:
    v = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _no_nulls(column: pa.Array, lengths: np.ndarray) -> pa.Array:
    """`column` with its null slots emptied, so its data holds exactly the non-null values' bytes."""
    if column.null_count == 0:
        return column
    if (np.diff(_offsets_and_data(column)[0])[lengths < 0] == 0).all():
        return column  # null slots are already empty (what Arrow builders write)
    return column.fill_null(b"")


def encode(
    topics: Sequence[str],
    topic_index: np.ndarray,
    partition: np.ndarray,
    keys: pa.Array | None,
    values: pa.Array,
    headers: pa.Array | None = None,
    timestamps: np.ndarray | int = 0,
    extra_header: tuple[str, bytes | None] | None = None,
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
    pure: bool | None = None,
) -> list[EncodedBatch]:
    """The rows as record batches, partition by partition (topics in `topics` order, partitions
    ascending). `topic_index[i]` and `partition[i]` say where row i goes; `keys` / `values` are string or
    binary columns (keys None: all null); `headers` a list<struct<key: string, value: binary>> column;
    `timestamps` ms per row, or one value for all; `pure`: None for `ENCODER`, True / False for the pure /
    compiled path (the compiled one still hands rows with headers of their own to the pure one)."""
    n = len(values)
    if n == 0:
        return []
    pure = _pure(pure)
    values = _binary(values)
    keys = _binary(keys) if keys is not None else pa.nulls(n, pa.binary())
    key_len, value_len = _lengths(keys), _lengths(values)
    if np.isscalar(timestamps) or np.ndim(timestamps) == 0:
        ts = np.full(n, int(timestamps), dtype=np.int64)  # type: ignore[arg-type]
        constant_ts = True
    else:
        ts = np.asarray(timestamps, dtype=np.int64)
        constant_ts = bool((ts == ts[0]).all())

    # header entries, flattened (row of each entry known from the list offsets)
    if headers is not None and headers.null_count < n:
        counts = np.asarray(headers.value_lengths().fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
        entries = headers.flatten()
        hkeys, hvalues = entries.flatten()
        if hkeys.null_count:
            raise ValueError("a header key is null")
        hkeys, hvalues = _binary(hkeys), _binary(hvalues)
        hk_len, hv_len = _lengths(hkeys), _lengths(hvalues)
        hvalues = _no_nulls(hvalues, hv_len)
    else:
        counts = np.zeros(n, dtype=np.int64)
        hkeys = hvalues = None
        hk_len = hv_len = np.zeros(0, dtype=np.int64)
    n_entries = int(counts.sum())
    extra = _header_entry(*extra_header) if extra_header is not None else b""
    # rows grouped by (topic, partition), input order kept inside a group
    group = topic_index.astype(np.int64) * np.int64(1 << 32) + partition.astype(np.int64)
    order = _group_order(topic_index, partition, group)
    g_sorted = group[order]
    cut = np.flatnonzero(np.diff(g_sorted)) + 1
    group_start = np.concatenate(([0], cut))
    group_end = np.concatenate((cut, [n]))
    if not pure and n_entries == 0:
        laid_out = _encode_compiled(topics, keys, values, key_len, value_len, ts, constant_ts, extra,
                                    max_batch_bytes, order, g_sorted, group_end)
        if laid_out is not None:
            return laid_out
        half = n // 2  # over the pure path's size limit: split as it does
        if half == 0:
            raise ValueError("a single record larger than 1 GiB")
        return _split(topics, topic_index, partition, keys, values, headers, timestamps, extra_header,
                      max_batch_bytes, half, pure)
    keys, values = _no_nulls(keys, key_len), _no_nulls(values, value_len)
    if n_entries:
        hk_pieces, hk_w = _pieces([_zigzag(hk_len)])
        hv_pieces, hv_w = _pieces([_zigzag(hv_len)])
        entry_size = hk_w + hk_len + hv_w + np.maximum(hv_len, 0)
        entry_cum = np.zeros(n_entries + 1, dtype=np.int64)
        np.cumsum(entry_size, out=entry_cum[1:])
        row_entry_end = np.cumsum(counts)
        row_header_bytes = entry_cum[row_entry_end] - entry_cum[row_entry_end - counts]
    else:
        row_header_bytes = np.zeros(n, dtype=np.int64)
    header_count = counts + (1 if extra_header is not None else 0)

    # upper bound of every record's size (offset delta = rank in its group, timestamp delta <= 10 bytes)
    rank_in_group = np.arange(n, dtype=np.int64) - np.repeat(group_start, group_end - group_start)
    kl, vl = key_len[order], value_len[order]
    z_kl, z_vl, z_hc = _zigzag(kl), _zigzag(vl), _zigzag(header_count[order])
    w_kl, w_vl, w_hc = _width(z_kl), _width(z_vl), _width(z_hc)
    fixed = 1 + w_kl + np.maximum(kl, 0) + w_vl + np.maximum(vl, 0) + w_hc + row_header_bytes[order] + len(extra)
    ts_bound = 1 if constant_ts else 10
    body_bound = fixed + ts_bound + _width(_zigzag(rank_in_group))
    size_bound = body_bound + _width(_zigzag(body_bound))

    # batches: cut each group where its records would pass max_batch_bytes
    batch_start: list[int] = []
    for s, e in zip(group_start.tolist(), group_end.tolist(), strict=True):
        csum = np.cumsum(size_bound[s:e])
        at, base = 0, 0
        while at < e - s:
            batch_start.append(s + at)
            stop = int(np.searchsorted(csum, base + max_batch_bytes, side="right"))
            stop = max(stop, at + 1)
            base = int(csum[stop - 1])
            at = stop
    starts_arr = np.array(batch_start, dtype=np.int64)
    batch_len = np.diff(np.append(starts_arr, n))
    batch_of = np.repeat(np.arange(len(starts_arr)), batch_len)
    offset_delta = np.arange(n, dtype=np.int64) - starts_arr[batch_of]
    ts_sorted = ts[order]
    base_ts = ts_sorted[starts_arr]
    ts_delta = ts_sorted - base_ts[batch_of]
    z_ts, z_off = _zigzag(ts_delta), _zigzag(offset_delta)
    w_ts, w_off = _width(z_ts), _width(z_off)
    body = fixed + w_ts + w_off
    z_body = _zigzag(body)
    w_body = _width(z_body)

    # the pieces of every record, in sorted order: A = length, attributes, ts delta, offset delta, key
    # length; K = key; B = value length; V = value; H = header count; entries; extra header
    zero = np.zeros(n, np.uint64)
    a_pieces, _ = _pieces([z_body, zero, z_ts, z_off, z_kl], [w_body, np.ones(n, np.int64), w_ts, w_off, w_kl])
    b_pieces, _ = _pieces([z_vl], [w_vl])
    h_pieces, _ = _pieces([z_hc], [w_hc])
    record_size = body + w_body
    sources: list[pa.Array] = [a_pieces, keys, b_pieces, values, h_pieces]
    per_record = 5
    if n_entries:
        assert hkeys is not None and hvalues is not None
        sources += [hk_pieces, hkeys, hv_pieces, hvalues]
    if extra_header is not None:
        sources.append(_constant(extra, n))
        per_record += 1
    # take indices: record r (sorted position) of row order[r]: its pieces are A[r], K[order[r]], B[r],
    # V[order[r]], H[r], then its entries (4 pieces each), then the extra header
    counts_sorted = counts[order]
    pieces_of = per_record + 4 * counts_sorted
    first = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(pieces_of, out=first[1:])
    idx = np.empty(int(first[-1]), dtype=np.int64)
    piece_at = first[:-1]
    r = np.arange(n, dtype=np.int64)
    idx[piece_at] = r
    idx[piece_at + 1] = n + order
    idx[piece_at + 2] = 2 * n + r
    idx[piece_at + 3] = 3 * n + order
    idx[piece_at + 4] = 4 * n + r
    if n_entries:
        entry_first = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=entry_first[1:])
        e = _entry_ids(entry_first, order, counts_sorted)
        slot = np.repeat(piece_at + 5, counts_sorted) + 4 * (np.arange(n_entries) - np.repeat(
            np.cumsum(counts_sorted) - counts_sorted, counts_sorted))
        base_e = 5 * n
        idx[slot] = base_e + e
        idx[slot + 1] = base_e + n_entries + e
        idx[slot + 2] = base_e + 2 * n_entries + e
        idx[slot + 3] = base_e + 3 * n_entries + e
    if extra_header is not None:
        idx[first[1:] - 1] = (5 * n + 4 * n_entries) + r
    total_bytes = int(record_size.sum())
    if total_bytes > _MAX_PIECES_BYTES // 2:
        # int32 offsets: encode the halves separately (only for batches of more than 1 GiB)
        half = n // 2
        if half == 0:
            raise ValueError("a single record larger than 1 GiB")
        return _split(topics, topic_index, partition, keys, values, headers, timestamps, extra_header,
                      max_batch_bytes, half, pure)
    laid = pa.concat_arrays(sources).take(pa.array(idx))
    data = laid.buffers()[2]
    raw = memoryview(data) if data is not None else memoryview(b"")
    if len(raw) < total_bytes:
        raise AssertionError(f"encoded {len(raw)} bytes, expected {total_bytes}")
    ends = np.cumsum(record_size)
    out: list[EncodedBatch] = []
    for b, s in enumerate(starts_arr.tolist()):
        e = s + int(batch_len[b])
        lo = int(ends[s - 1]) if s else 0
        hi = int(ends[e - 1])
        g = int(g_sorted[s])
        out.append(EncodedBatch(
            topic=topics[g >> 32], partition=g & 0xFFFFFFFF, count=e - s, records=raw[lo:hi],
            base_timestamp=int(base_ts[b]), max_timestamp=int(ts_sorted[s:e].max()),
        ))
    return out


def _encode_compiled(topics: Sequence[str], keys: pa.Array, values: pa.Array, key_len: np.ndarray,
                     value_len: np.ndarray, ts: np.ndarray, constant_ts: bool, extra: bytes,
                     max_batch_bytes: int, order: np.ndarray, g_sorted: np.ndarray,
                     group_end: np.ndarray) -> list[EncodedBatch] | None:
    """`encode` of rows without headers of their own through the C pass (module rules); None when the
    records would pass the pure path's size limit (the caller splits the rows)."""
    assert _compiled is not None
    k_off, k_data = _offsets_and_data(keys)
    v_off, v_data = _offsets_and_data(values)
    got = _compiled.records(
        np.ascontiguousarray(order, dtype=np.int64), np.ascontiguousarray(group_end, dtype=np.int64),
        np.ascontiguousarray(k_off[:-1]), np.ascontiguousarray(key_len, dtype=np.int64), k_data,
        np.ascontiguousarray(v_off[:-1]), np.ascontiguousarray(value_len, dtype=np.int64), v_data,
        np.ascontiguousarray(ts, dtype=np.int64), constant_ts, extra, max_batch_bytes)
    if got is None:
        return None
    data, starts, ends, base_ts, max_ts = got
    raw = memoryview(data)
    first = np.frombuffer(starts, np.int64).tolist()
    out: list[EncodedBatch] = []
    lo = 0
    for s, e, hi, b_ts, m_ts in zip(first, first[1:] + [len(order)], np.frombuffer(ends, np.int64).tolist(),
                                    np.frombuffer(base_ts, np.int64).tolist(),
                                    np.frombuffer(max_ts, np.int64).tolist(), strict=True):
        g = int(g_sorted[s])
        out.append(EncodedBatch(topic=topics[g >> 32], partition=g & 0xFFFFFFFF, count=e - s,
                                records=raw[lo:hi], base_timestamp=b_ts, max_timestamp=m_ts))
        lo = hi
    return out


def _entry_ids(entry_first: np.ndarray, order: np.ndarray, counts_sorted: np.ndarray) -> np.ndarray:
    """The flattened entry index of every entry, records in sorted order."""
    total = int(counts_sorted.sum())
    starts = np.repeat(entry_first[order], counts_sorted)
    within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts_sorted) - counts_sorted, counts_sorted)
    return starts + within


def _split(topics: Sequence[str], topic_index: np.ndarray, partition: np.ndarray, keys: pa.Array,
           values: pa.Array, headers: pa.Array | None, timestamps: np.ndarray | int,
           extra_header: tuple[str, bytes | None] | None, max_batch_bytes: int, half: int,
           pure: bool) -> list[EncodedBatch]:
    out: list[EncodedBatch] = []
    for lo, hi in ((0, half), (half, len(values))):
        ts = timestamps if np.ndim(timestamps) == 0 else np.asarray(timestamps)[lo:hi]
        out += encode(topics, topic_index[lo:hi], partition[lo:hi], keys.slice(lo, hi - lo),
                      values.slice(lo, hi - lo), headers.slice(lo, hi - lo) if headers is not None else None,
                      ts, extra_header, max_batch_bytes, pure)
    return out


def seal(
    batch: EncodedBatch,
    codec: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> list[bytes | memoryview]:
    """The batch on the wire, as [header, payload] (written one after the other; not joined, to avoid a
    copy of the records)."""
    payload: bytes | memoryview = compress(codec, batch.records) if codec else batch.records
    attributes = (codec & 0x07) | (TRANSACTIONAL_MASK if transactional else 0)
    tail = _TAIL.pack(attributes, batch.count - 1, batch.base_timestamp, batch.max_timestamp, producer_id,
                      producer_epoch, base_sequence, batch.count)
    crc = crc32c(payload, crc32c(tail))
    head = _HEAD.pack(0, len(tail) + len(payload) + 9, -1, MAGIC_V2, crc)
    return [head + tail, payload]


def topic_indices(topic_column: pa.Array | None, topic: str | None) -> tuple[list[str], np.ndarray]:
    """(distinct topics, index of every row's topic): the `topic` option wins over the column."""
    if topic is not None:
        return [topic], np.zeros(0, dtype=np.int64)
    assert topic_column is not None
    if topic_column.null_count:
        raise ValueError("null topic present in the data. Use the topic option for setting a default topic.")
    encoded = topic_column.dictionary_encode()
    names = [str(t) for t in encoded.dictionary.to_pylist()]
    return names, np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)


PartitionCount = Callable[[str], int]
