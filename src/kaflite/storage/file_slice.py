"""FileSlice: a byte range of a segment file, sent to the client from the file instead of from memory.

Why: a fetch answer used to be read into memory whole (up to `fetch.max.bytes`, 55 MiB) and then sat in
the connection's write buffer until the client read it; 20 clients that fetch and never read held 1.2 GB.
Kafka answers with `FileRecords` (zero-copy from the page cache). A FileSlice is the same idea in Python:
it names (segment, position, length) and is read in bounded chunks by the connection as the socket drains.

Rules:
- the length is fixed when the slice is made (whole batches, found by walking the headers);
- it holds no descriptor of its own (a fetch over 30,000 partitions must not need 30,000 descriptors): it
  reads through the segment's `pread`, which pins the descriptor for the call (the FileCache reopens it if
  it closed it meanwhile, and never closes it during the read: storage/file_cache.py);
- a segment retired since (deleted by retention, replaced by compaction) or a read that comes back short
  (truncated) yields b"", and the caller closes the connection rather than send a frame whose size prefix
  would lie: the client reconnects and fetches again, as after any broken connection.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["FileSlice"]


class _Segment(Protocol):
    def pread(self, n: int, pos: int) -> bytes: ...

    @property
    def retired(self) -> bool: ...


class FileSlice:
    __slots__ = ("_segment", "position", "length")

    def __init__(self, segment: _Segment, position: int, length: int) -> None:
        self._segment: _Segment | None = segment
        self.position = position
        self.length = length

    def __len__(self) -> int:
        return self.length

    def read(self, offset: int, size: int) -> bytes:
        """Bytes [offset, offset + size) of the slice; b"" when the segment is gone."""
        size = max(0, min(size, self.length - offset))
        seg = self._segment
        if seg is None or size == 0 or seg.retired:
            return b""
        try:
            return seg.pread(size, self.position + offset)
        except OSError as e:
            if seg.retired:  # retired between the check and the read: as above
                return b""
            raise e

    def tobytes(self) -> bytes:
        return self.read(0, self.length)

    def close(self) -> None:
        self._segment = None

    def __repr__(self) -> str:
        return f"FileSlice(position={self.position}, length={self.length})"
