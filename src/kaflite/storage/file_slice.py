"""FileSlice: a byte range of a segment file, sent to the client from the file instead of from memory.

Why: a fetch answer used to be read into memory whole (up to `fetch.max.bytes`, 55 MiB) and then sat in
the connection's write buffer until the client read it; 20 clients that fetch and never read held 1.2 GB.
Kafka answers with `FileRecords` (zero-copy from the page cache). A FileSlice is the same idea in Python:
it names (file, position, length), holds its own duplicate descriptor (so retention, truncation or the
descriptor cache closing the segment's own descriptor cannot pull the file from under a response in
flight), and is read in bounded chunks by the connection as the socket drains.

Rules: the length is fixed when the slice is made (whole batches, found by walking the headers); a read
that comes back short (the file was truncated since) is reported to the caller, which closes the
connection rather than send a frame whose size prefix would lie; the duplicate descriptor is closed by
`close()` or when the slice is garbage-collected.
"""

from __future__ import annotations

import os

__all__ = ["FileSlice"]


class FileSlice:
    __slots__ = ("_fd", "position", "length")

    def __init__(self, fd: int, position: int, length: int) -> None:
        self._fd = os.dup(fd)
        self.position = position
        self.length = length

    def __len__(self) -> int:
        return self.length

    def read(self, offset: int, size: int) -> bytes:
        """Bytes [offset, offset + size) of the slice (fewer when the file was truncated meanwhile)."""
        size = max(0, min(size, self.length - offset))
        if self._fd < 0 or size == 0:
            return b""
        return os.pread(self._fd, size, self.position + offset)

    def tobytes(self) -> bytes:
        return self.read(0, self.length)

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def __del__(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FileSlice(position={self.position}, length={self.length})"
