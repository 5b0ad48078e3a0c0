"""FileCache: a bounded set of open segment files, sized from the process's open-file limit.

Why: a segment kept its `.log` descriptor open for its whole life, so open files grew with partitions and
segments, not with use: a second topic of 10,000 partitions took the broker to 19,999 of 20,000 open files,
after which a CreateTopics dropped the client's connection and housekeeping failed every second. Kafka
has the same exposure and asks operators to raise the limit; kaflite instead closes the files of idle
segments and reopens them on use, so 100,000 partitions fit a default limit.

Rules:
- capacity: half of RLIMIT_NOFILE's soft limit (at least 16), leaving the other half to client
  connections, transient opens (index writes, checkpoints, snapshots) and FileSlices of answers in flight;
- eviction is CLOCK (second chance): a segment used since the last sweep gets another round, so the hot
  segments (active, being fetched) stay open and the sweep costs O(1) amortised per open;
- closing a segment's descriptor loses nothing: writes are positional, a later fdatasync on a new
  descriptor flushes the same inode's pages, and a FileSlice holds its own duplicate;
- `open_file` retries once after shedding half the cache when the process is out of descriptors (EMFILE),
  so other users of descriptors (new connections, a topic being created) get room.
"""

from __future__ import annotations

import errno
import os
import resource
from collections import OrderedDict
from typing import Protocol

__all__ = ["FileCache", "file_cache", "open_file", "default_capacity"]


class CachedFile(Protocol):
    _used: bool

    def _evict_fd(self) -> None: ...


def default_capacity() -> int:
    try:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):  # pragma: no cover - not on POSIX
        return 512
    if soft == resource.RLIM_INFINITY or soft <= 0:
        soft = 1 << 20
    return max(16, soft // 2)


class FileCache:
    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = capacity if capacity is not None else default_capacity()
        self._open: OrderedDict[CachedFile, None] = OrderedDict()
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._open)

    def opened(self, f: CachedFile) -> None:
        """`f` just opened its descriptor (it is never the one closed to make room)."""
        self._open[f] = None
        if len(self._open) > self.capacity:
            self.shed(len(self._open) - self.capacity + max(1, self.capacity // 16), keep=f)

    def closed(self, f: CachedFile) -> None:
        self._open.pop(f, None)

    def shed(self, n: int, keep: CachedFile | None = None) -> int:
        """Close up to `n` descriptors of the least recently used files (second chance), never `keep`'s;
        returns how many were closed."""
        closed = 0
        budget = 2 * len(self._open) + 1  # every file is looked at at most twice
        while closed < n and self._open and budget > 0:
            budget -= 1
            f = next(iter(self._open))
            if f is keep or f._used:  # noqa: SLF001 - used since the last sweep: second chance
                f._used = False  # noqa: SLF001
                self._open.move_to_end(f)
                continue
            del self._open[f]
            f._evict_fd()  # noqa: SLF001
            closed += 1
        self.evictions += closed
        return closed


file_cache = FileCache()


def open_file(path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
    """os.open, retried once after closing half the cached descriptors when the process has none left."""
    try:
        return os.open(path, flags, mode)
    except OSError as e:
        if e.errno not in (errno.EMFILE, errno.ENFILE) or not len(file_cache):
            raise
        file_cache.shed(max(1, len(file_cache) // 2))
        return os.open(path, flags, mode)
