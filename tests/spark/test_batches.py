"""kaflite.spark.batches: record batches decoded straight into the source's Arrow columns, checked against
kaflite's record decoder (kaflite.protocol.record_batch.decode_records) on generated batches in every codec
(kaflite's encoder writes the Java client's layouts: xerial-framed snappy, independent-block lz4), and
the edge cases one by one, through the pure decoder and the compiled one (kaflite.spark._decode; skipped
when it is not built, failed under KAFLITE_REQUIRE_ALL=1). Pure: no broker, no Spark."""

from __future__ import annotations

import struct
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import require
from kaflite.protocol.control_record import build_marker_batch
from kaflite.protocol.errors import KafkaError
from kaflite.protocol.record_batch import (
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    build_record_batch,
    decode_records,
    encode_batch,
    iter_batches,
)
from kaflite.spark import batches as decoder
from kaflite.spark.arrow import arrow_schema
from kaflite.spark.batches import UnsupportedBatch, decode_batches, decode_windows


@pytest.fixture(autouse=True, scope="module", params=["pure", "compiled"])
def _decoder(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test here runs through both decoders (module-scoped: hypothesis allows it across examples)."""
    if request.param == "compiled":
        require(decoder.compiled_missing)
    chosen, decoder.DECODER = decoder.DECODER, request.param
    yield
    decoder.DECODER = chosen


def reference(data: bytes, start: int, until: int, include_headers: bool) -> list[dict[str, Any]]:
    """The rows the decoder must give, from kaflite's per-record decoder (read_uncommitted)."""
    rows = []
    for view in iter_batches(data):
        if view.is_control:
            continue
        for r in decode_records(view):
            if not start <= r.offset < until:
                continue
            row = {
                "key": None if r.key is None else bytes(r.key),
                "value": None if r.value is None else bytes(r.value),
                "topic": "t",
                "partition": 3,
                "offset": r.offset,
                "timestamp": r.timestamp,
                "timestampType": view.timestamp_type,
            }
            if include_headers:
                row["headers"] = [{"key": k, "value": v} for k, v in r.headers] or None
            rows.append(row)
    return rows


def rows_of(batch: pa.RecordBatch | None, include_headers: bool) -> list[dict[str, Any]]:
    if batch is None:
        return []
    assert batch.schema == arrow_schema(include_headers)
    batch.validate(full=True)
    out = batch.to_pylist()
    micros = batch.column("timestamp").cast(pa.int64()).to_pylist()
    for row, us in zip(out, micros, strict=True):
        assert us % 1000 == 0
        row["timestamp"] = us // 1000  # back to Kafka's milliseconds, exactly (no float on the way)
    return out


blobs = st.one_of(st.none(), st.binary(max_size=40))
headers = st.lists(st.tuples(st.text(max_size=8), blobs), max_size=3)
record = st.tuples(blobs, blobs, headers, st.integers(0, 3), st.integers(-5, 10_000))  # + offset gap, ts delta


@st.composite
def batches(draw: Any) -> tuple[bytes, int, int]:
    out, offset = [], draw(st.integers(0, 1_000))
    first = offset
    for _ in range(draw(st.integers(1, 5))):
        recs = draw(st.lists(record, min_size=1, max_size=12))
        encoded, delta = [], 0
        for key, value, hdrs, gap, ts_delta in recs:
            encoded.append((delta, ts_delta, key, value, hdrs))
            delta += 1 + gap
        attributes = draw(st.integers(0, 4)) | (TIMESTAMP_TYPE_MASK if draw(st.booleans()) else 0)
        out.append(encode_batch(encoded, base_offset=offset, first_timestamp=draw(st.integers(0, 2**41)),
                                attributes=attributes))
        offset += delta + draw(st.integers(0, 2))
        if draw(st.booleans()):
            out.append(build_marker_batch(7, 0, draw(st.booleans()), 0, 1000, base_offset=offset))
            offset += 1
    start = draw(st.integers(first - 2, offset + 1))
    until = draw(st.integers(start, offset + 2))
    return b"".join(out), start, until


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches(), st.booleans())
def test_decoded_columns_equal_the_record_decoder(case: tuple[bytes, int, int], include_headers: bool) -> None:
    data, start, until = case
    batch, _ = decode_batches(data, "t", 3, start, until, include_headers)
    assert rows_of(batch, include_headers) == reference(data, start, until, include_headers)


@settings(max_examples=50, deadline=None)
@given(batches(), st.integers(1, 200))
def test_a_truncated_tail_is_left_for_the_next_fetch(case: tuple[bytes, int, int], cut: int) -> None:
    data, start, until = case
    last = list(iter_batches(data))[-1]
    cut = min(cut, last.batch_length + 12 - 1)
    whole = data[: last.position]
    batch, after = decode_batches(data[: len(data) - cut], "t", 3, start, until, True)
    assert rows_of(batch, True) == reference(whole, start, until, True)
    assert after == decode_batches(whole, "t", 3, start, until, True)[1]  # the cut batch is fetched again


def test_next_offset_and_range_bounds() -> None:
    data = b"".join(
        build_record_batch([(None, b"v%d" % i, [])] * 3, base_offset=3 * i, timestamp_ms=1_000) for i in range(4)
    )
    batch, after = decode_batches(data, "t", 0, 4, 8, False)
    assert batch is not None and batch.column("offset").to_pylist() == [4, 5, 6, 7]
    assert after == 9  # the batch holding offset 7 was read whole: the next fetch starts after it
    batch, after = decode_batches(data, "t", 0, 20, 30, False)
    assert batch is None and after == 20  # every batch below the start: skipped, nothing decoded
    batch, after = decode_batches(b"", "t", 0, 5, 9, False)
    assert batch is None and after == 5


def test_tombstones_empty_values_and_log_append_time() -> None:
    data = build_record_batch([(b"", None, []), (None, b"", [("h", None)])], timestamps=[5, 9])
    data = bytearray(data)
    # LogAppendTime: every record shows the batch's max timestamp
    struct.pack_into(">h", data, 21, TIMESTAMP_TYPE_MASK)
    data = bytes(data[:17]) + struct.pack(">I", _crc(data[21:])) + bytes(data[21:])
    batch, _ = decode_batches(data, "t", 0, 0, 10, True)
    assert rows_of(batch, True) == [
        {"key": b"", "value": None, "topic": "t", "partition": 0, "offset": 0, "timestamp": 9,
         "timestampType": 1, "headers": None},
        {"key": None, "value": b"", "topic": "t", "partition": 0, "offset": 1, "timestamp": 9,
         "timestampType": 1, "headers": [{"key": "h", "value": None}]},
    ]


def _crc(b: bytes | bytearray) -> int:
    from kaflite.protocol.record_batch import crc32c

    return crc32c(bytes(b))


def test_a_bad_crc_is_corrupt() -> None:
    data = bytearray(build_record_batch([(b"k", b"v", [])], timestamp_ms=1))
    data[-1] ^= 0xFF
    with pytest.raises(KafkaError, match="CRC"):
        decode_batches(bytes(data), "t", 0, 0, 10, False)


def test_records_that_do_not_fill_their_section_are_corrupt() -> None:
    # a correct CRC over records whose declared count leaves bytes over
    good = build_record_batch([(b"k", b"v", []), (b"k", b"w", [])], timestamp_ms=1)
    body = bytearray(good[21:])
    struct.pack_into(">i", body, 57 - 21, 1)  # recordsCount 2 -> 1
    data = good[:17] + struct.pack(">I", _crc(body)) + bytes(body)
    with pytest.raises(KafkaError, match="fill"):
        decode_batches(data, "t", 0, 0, 10, False)


def test_message_format_v1_is_unsupported() -> None:
    good = build_record_batch([(b"k", b"v", [])], timestamp_ms=1, base_offset=4)
    old = bytearray(good)
    old[16] = 1
    with pytest.raises(UnsupportedBatch) as err:
        decode_batches(good + bytes(old), "t", 0, 2, 10, False)
    assert err.value.offset == 2  # nothing of the call was returned: read on from its start


def _txn(pid: int, base: int, values: list[bytes]) -> bytes:
    return build_record_batch([(None, v, []) for v in values], base_offset=base, producer_id=pid,
                              producer_epoch=0, base_sequence=0, is_transactional=True, timestamp_ms=1)


def test_read_committed_drops_aborted_transactions() -> None:
    data = b"".join([
        _txn(1, 0, [b"a0", b"a1"]),                                # producer 1: aborted at 5
        _txn(2, 2, [b"c2"]),                                       # producer 2: committed at 4
        build_record_batch([(None, b"plain3", [])], base_offset=3, timestamp_ms=1),
        build_marker_batch(2, 0, True, 0, 1, base_offset=4),
        build_marker_batch(1, 0, False, 0, 1, base_offset=5),
        _txn(1, 6, [b"c6"]),                                       # producer 1 again, committed
        build_marker_batch(1, 0, True, 0, 1, base_offset=7),
        _txn(2, 8, [b"a8"]),                                       # producer 2: aborted at 9
        build_marker_batch(2, 0, False, 0, 1, base_offset=9),
    ])
    committed, after = decode_batches(data, "t", 0, 0, 10, False, aborted=[(2, 8), (1, 0)])
    assert after == 10
    assert committed is not None and committed.column("value").to_pylist() == [b"c2", b"plain3", b"c6"]
    everything, _ = decode_batches(data, "t", 0, 0, 10, False)
    assert everything is not None
    assert everything.column("value").to_pylist() == [b"a0", b"a1", b"c2", b"plain3", b"c6", b"a8"]
    assert everything.column("offset").to_pylist() == [0, 1, 2, 3, 6, 8]


@pytest.mark.parametrize("codec", [0, 3, 4], ids=["none", "lz4", "zstd"])
def test_windows_cut_the_rows_of_one_call_after_window_bytes(codec: int) -> None:
    # five batches of 20 records of 100 B (about 2.3 KB of records each), compressed: windows of 5,000
    # decompressed bytes end with the third batch and the fifth
    data = b"".join(build_record_batch([(b"k%d" % i, bytes([65 + b]) * 100, []) for i in range(20)],
                                       base_offset=10 + 20 * b, timestamp_ms=1, compression=codec)
                    for b in range(5))
    whole, after = decode_batches(data, "t", 3, 15, 200, True)
    windows = list(decode_windows(data, "t", 3, 15, 200, True, window_bytes=5_000))
    assert [w.num_rows if w is not None else 0 for w, _ in windows] == [55, 40]
    assert [nxt for _, nxt in windows] == [70, after] and after == 110
    assert whole is not None and pa.Table.from_batches([w for w, _ in windows]) == pa.Table.from_batches([whole])
    # no window_bytes: one window, the whole call
    assert len(list(decode_windows(data, "t", 3, 15, 200, True))) == 1
    # a window of only skipped or filtered batches still says where to fetch next
    assert list(decode_windows(data, "t", 3, 105, 106, True, window_bytes=1))[-1][1] == 110


def test_windows_carry_read_committed_state_from_window_to_window() -> None:
    # producer 1 aborts, its ABORT marker in the first window (which a plain batch ends); its next
    # transaction, committed, in the second: a window starting afresh from the aborted list would drop it
    data = b"".join([
        _txn(1, 0, [b"a0", b"a1"]),
        build_marker_batch(1, 0, False, 0, 1, base_offset=2),
        build_record_batch([(None, b"plain3", [])], base_offset=3, timestamp_ms=1),
        _txn(1, 4, [b"c4"]),
        build_marker_batch(1, 0, True, 0, 1, base_offset=5),
    ])
    got = list(decode_windows(data, "t", 0, 0, 10, False, aborted=[(1, 0)], window_bytes=1))
    assert [w.column("value").to_pylist() if w is not None else None for w, _ in got] == [
        [b"plain3"], [b"c4"], None]
    assert [after for _, after in got] == [4, 5, 6]


def test_an_old_format_batch_names_the_start_of_its_window() -> None:
    good = build_record_batch([(b"k", b"v", [])], base_offset=2, timestamp_ms=1)
    old = bytearray(build_record_batch([(b"k", b"v", [])], base_offset=3, timestamp_ms=1))
    old[16] = 1  # magic 1: message format v1
    windows = decode_windows(good + bytes(old), "t", 0, 2, 10, False, window_bytes=1)
    rows, after = next(windows)
    assert rows is not None and rows.num_rows == 1 and after == 3
    with pytest.raises(UnsupportedBatch) as err:
        next(windows)
    assert err.value.offset == 3  # the first window's rows stand; the caller reads on from 3


def test_transactional_flag_alone_does_not_drop_rows() -> None:
    data = build_record_batch([(None, b"x", [])], producer_id=5, producer_epoch=0, base_sequence=0,
                              timestamp_ms=1)
    assert not list(iter_batches(data))[0].attributes & TRANSACTIONAL_MASK
    batch, _ = decode_batches(data, "t", 0, 0, 1, False, aborted=[(5, 0)])
    assert batch is not None and batch.num_rows == 1  # aborted lists name transactional batches only


def test_records_past_arrow_binary_offsets_are_unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    import kaflite.spark.batches as batches

    data = build_record_batch([(b"k", b"v" * 100, [])], timestamp_ms=1, base_offset=3)
    monkeypatch.setattr(batches, "_MAX_BINARY", 64)  # stands for 2 GiB: int32 offsets cannot address more
    with pytest.raises(UnsupportedBatch) as err:
        decode_batches(data, "t", 0, 3, 10, False)
    assert err.value.offset == 3


def _section_batch(section: bytes, count: int) -> bytes:
    """An uncompressed batch around a hand-made records section, with a correct CRC."""
    tail = struct.pack(">hiqqqhii", 0, max(count - 1, 0), 1_000, 1_000, -1, -1, -1, count) + section
    return struct.pack(">qiibI", 0, len(tail) + 9, -1, 2, _crc(tail)) + tail


def test_a_header_length_past_the_fetched_bytes_is_corrupt() -> None:
    # length 8, attributes, ts 0, offset 0, key 0 bytes, value 0 bytes, 1 header of key length 1000
    data = _section_batch(b"\x10\x00\x00\x00\x01\x01\x02\xd0\x0f", 1)
    with pytest.raises(KafkaError, match="headers do not match"):  # an IndexError escaped before
        decode_batches(data, "t", 0, 0, 10, True)


def test_offsets_that_do_not_increase_are_corrupt() -> None:
    # two records of offset delta 0: the range cut (a binary search) needs offsets that grow
    data = _section_batch(b"\x0c\x00\x00\x00\x01\x01\x00" * 2, 2)
    with pytest.raises(KafkaError, match="offsets do not increase"):
        decode_batches(data, "t", 0, 0, 10, False)


def test_without_the_compiled_module_the_pure_decoder_reads() -> None:
    # a machine without a C compiler: the import of kaflite.spark._decode fails (blocked here)
    code = (
        "import logging, sys; logging.basicConfig(level=logging.DEBUG); sys.modules['kaflite.spark._decode'] = None\n"
        "from kaflite.protocol.record_batch import build_record_batch\n"
        "import kaflite.spark.batches as b\n"
        "rows, _ = b.decode_batches(build_record_batch([(b'k', b'v', [])], timestamp_ms=1), 't', 0, 0, 9, True)\n"
        "print(b.DECODER, rows.column('value').to_pylist())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["pure", "[b'v']"]
    assert "fetch decoder: pure (kaflite.spark._decode is not built" in out.stderr
