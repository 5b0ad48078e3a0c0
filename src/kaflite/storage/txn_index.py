"""TransactionIndex: the aborted transactions whose ABORT marker lies in one segment (`<base>.txnindex`).

Kafka's layout (TransactionIndex / AbortedTxn): fixed 34-byte big-endian entries
    version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64 | lastStableOffset int64
appended in marker order, where lastOffset is the ABORT marker's offset and lastStableOffset the
partition's last stable offset right after the marker (the first offset of the earliest transaction
still open then, or the marker's offset + 1).

Rules:
- an entry is appended when an ABORT marker is written, never rewritten; a partial trailing entry (a torn
  write) is dropped on load;
- truncation to offset o removes the entries whose lastOffset >= o (their marker is gone);
- a read_committed fetch of [fetch_offset, upper) needs every aborted transaction with
  lastOffset >= fetch_offset and firstOffset < upper; the search over segments (Log) stops at the first
  entry whose lastStableOffset >= upper, as Kafka's collectAbortedTxns: every transaction aborted later
  began at or after it.
The entries are few (one per aborted transaction in the segment), so they are kept in memory.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ABORTED_TXN_SIZE", "AbortedTxn", "TransactionIndex"]

_ENTRY = struct.Struct(">hqqqq")
ABORTED_TXN_SIZE = _ENTRY.size  # 34
CURRENT_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(CURRENT_VERSION, self.producer_id, self.first_offset, self.last_offset,
                           self.last_stable_offset)


class TransactionIndex:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []
        self._dirty = False  # written since the last fsync
        self._load()

    def _load(self) -> None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        whole = len(data) - len(data) % ABORTED_TXN_SIZE
        for pos in range(0, whole, ABORTED_TXN_SIZE):
            _v, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
            self.entries.append(AbortedTxn(pid, first, last, lso))
        if whole != len(data):  # a torn entry: keep the whole ones
            self._rewrite()

    @property
    def last_offset(self) -> int:
        return self.entries[-1].last_offset if self.entries else -1

    def append(self, txn: AbortedTxn) -> None:
        if txn.last_offset <= self.last_offset:
            raise ValueError(f"{self.path.name}: aborted transaction ending at {txn.last_offset} is not after "
                             f"the last one ({self.last_offset})")
        self.entries.append(txn)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, txn.encode())
            self._dirty = True
        finally:
            os.close(fd)

    def truncate_to(self, offset: int) -> None:
        keep = [e for e in self.entries if e.last_offset < offset]
        if len(keep) != len(self.entries):
            self.entries = keep
            self._rewrite()

    def _rewrite(self) -> None:
        if not self.entries:
            self.path.unlink(missing_ok=True)
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(b"".join(e.encode() for e in self.entries))
        os.replace(tmp, self.path)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """(the entries overlapping [fetch_offset, upper_bound), whether the search is complete)."""
        out: list[AbortedTxn] = []
        for e in self.entries:
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
                out.append(e)
            if e.last_stable_offset >= upper_bound:
                return out, True
        return out, False

    def take_unsynced(self) -> Path | None:
        """The path to fsync, marked synced now (see OffsetIndex.take_unsynced), or None."""
        if not self._dirty:
            return None
        self._dirty = False
        return self.path

    def mark_unsynced(self) -> None:
        self._dirty = True

    def flush(self) -> None:
        if self._dirty and self.path.exists():
            self._dirty = False
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def delete(self) -> None:
        self.entries = []
        self.path.unlink(missing_ok=True)
