"""The share handlers' pure helpers: acknowledgement batches to ranges, batch headers, read_committed's
aborted ranges (kaflite.server.handlers.share)."""

from __future__ import annotations

import struct
from types import SimpleNamespace

from kaflite.server.handlers.share import _aborted_ranges, _ack_ranges, _batches


def batch(first: int, last: int, types: list[int]) -> SimpleNamespace:
    return SimpleNamespace(first_offset=first, last_offset=last, acknowledge_types=types)


def test_ack_ranges_one_type_or_one_per_offset() -> None:
    assert _ack_ranges([batch(0, 4, [1])]) == [(0, 4, 1)]
    # one type per offset: runs of equal type merge, within the batch only
    assert _ack_ranges([batch(0, 4, [1, 1, 0, 3, 3]), batch(5, 6, [3, 3])]) == [
        (0, 1, 1), (2, 2, 0), (3, 4, 3), (5, 6, 3)]


def test_ack_ranges_refuses_malformed_batches_and_renew() -> None:
    assert _ack_ranges([batch(0, 4, [1, 1])]) is None  # neither 1 nor 5 types
    assert _ack_ranges([batch(0, 0, [])]) is None
    assert _ack_ranges([batch(0, 1, [4])]) is None  # RENEW (KIP-1222) is not served


def header(base: int, count: int, attributes: int = 0, producer_id: int = -1) -> bytes:
    """A record batch v2 header and `count` bytes of body (the helpers read the header only)."""
    body = bytes(count)
    length = 49 + len(body)  # bytes after the length field: the rest of the 61-byte header + records
    return (struct.pack(">qiib", base, length, 0, 2) + b"\0\0\0\0" + struct.pack(">h", attributes)
            + struct.pack(">i", count - 1) + bytes(16) + struct.pack(">qh", producer_id, 0)
            + struct.pack(">ii", 0, count) + body)


def test_batches_reads_offsets_attributes_and_producer_and_drops_a_partial_tail() -> None:
    data = header(0, 3) + header(3, 2, attributes=0x10, producer_id=7)
    assert _batches(data) == [(0, 2, 0, -1), (3, 4, 0x10, 7)]
    assert _batches(data + header(5, 1)[:40]) == [(0, 2, 0, -1), (3, 4, 0x10, 7)]


def test_aborted_ranges_archive_markers_and_aborted_transactions_only() -> None:
    txn, ctl = 0x10, 0x30
    batches = [(0, 1, txn, 7), (2, 2, 0, -1), (3, 3, txn, 8), (4, 4, ctl, 7), (5, 5, ctl, 8), (6, 7, txn, 7)]
    # producer 7's transaction from offset 0 was aborted (marker at 4); 8's committed (marker at 5)
    assert _aborted_ranges(batches, [(7, 0)]) == [(0, 1), (4, 4), (5, 5)]
    # producer 7's later transaction (6-7) is not aborted: its marker ended the aborted one
    assert (6, 7) not in _aborted_ranges(batches, [(7, 0)])
