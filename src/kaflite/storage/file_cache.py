"""FileCache: a bounded set of open segment files, sized from the process's open-file limit.

Why: a segment kept its `.log` descriptor open for its whole life, so open files grew with partitions and
segments, not with use: a second topic of 10,000 partitions took the broker to 19,999 of 20,000 open files,
after which a CreateTopics dropped the client's connection and housekeeping failed every second. Kafka
has the same exposure and asks operators to raise the limit; kaflite instead closes the files of idle
segments and reopens them on use, so 100,000 partitions fit a default limit.

Why a lock and pins: the cache is shared by the event loop, the housekeeping thread and whoever sends a
FileSlice, and a segment's Log lock does not cover it (opening a segment of log A sheds one of log B). A
shed used to close a descriptor between another thread's `seg.fd` and its `os.pread`/`os.pwritev`; the
number, reused by the next open, then read or appended another file's bytes (or failed with EBADF).

Rules:
- capacity: half of RLIMIT_NOFILE's soft limit (at least 16), leaving the other half to client
  connections, transient opens (index writes, checkpoints, snapshots) and the answers in flight;
- every use of a cached descriptor is pinned: `acquire` (open if closed, pin) and `release` (unpin) under
  the cache's lock, with the system call between them; `shed` never closes a pinned descriptor, and
  `retire` of a pinned file defers the close to the last `release` (tests/storage/test_file_cache.py);
- pins are taken and dropped here only, by `acquire`/`release` and by `call` (acquire, the system call,
  release: a segment's every pread and pwritev, one per partition read or appended), which inlines their
  usual case (an open descriptor, not retired: one lock round trip each way, no further call) and calls
  them for the rest;
- the cache's structures (`_open`, each file's `_fd`, `_pins`, `_used`, `_retired`) change only under
  `lock` (reentrant: `open_file` sheds under it when the process is out of descriptors);
- eviction is CLOCK (second chance): a segment used since the last sweep gets another round, so the hot
  segments (active, being fetched) stay open and the sweep costs O(1) amortised per open;
- closing a segment's descriptor loses nothing: writes are positional, a later fdatasync on a new
  descriptor flushes the same inode's pages;
- `open_file` retries once after shedding half the cache when the process is out of descriptors (EMFILE),
  so other users of descriptors (new connections, a topic being created) get room.
"""

from __future__ import annotations

import errno
import os
import resource
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol, TypeVar

__all__ = ["FileCache", "FileRetired", "file_cache", "open_file", "default_capacity", "CachedFile"]


_A = TypeVar("_A")
_B = TypeVar("_B")
_T = TypeVar("_T")


class FileRetired(OSError):
    """A read or write on a file closed or deleted for good (EBADF, as the closed descriptor was)."""


class CachedFile(Protocol):
    """What the cache keeps per file; the fields belong to the cache (changed under its lock)."""

    _fd: int
    _pins: int
    _used: bool
    _retired: bool

    def _open_fd(self) -> int: ...


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
        self.lock = threading.RLock()

    def __len__(self) -> int:
        return len(self._open)

    def add(self, f: CachedFile, fd: int) -> None:
        """`f` was just opened on `fd` outside `acquire` (its constructor); it becomes evictable."""
        with self.lock:
            f._fd = fd  # noqa: SLF001
            f._used = True  # noqa: SLF001
            self._admit(f)

    def acquire(self, f: CachedFile) -> int:
        """`f`'s descriptor, opened if the cache closed it, pinned until `release`; FileRetired (nothing
        pinned) when `f` is retired."""
        with self.lock:
            fd = f._fd  # noqa: SLF001
            if fd < 0:
                if f._retired:  # noqa: SLF001
                    raise FileRetired(errno.EBADF, f"{f!r} is closed or deleted")
                fd = f._fd = f._open_fd()  # noqa: SLF001
                self._admit(f)
            f._pins += 1  # noqa: SLF001
            f._used = True  # noqa: SLF001
            return fd

    def release(self, f: CachedFile) -> None:
        """Unpin `f`'s descriptor; the last release of a file retired while it was in use closes it."""
        with self.lock:
            pins = f._pins = f._pins - 1  # noqa: SLF001
            if not pins and f._retired:  # noqa: SLF001
                self._close_retired(f)

    def call(self, f: CachedFile, fn: Callable[[int, _A, _B], _T], a: _A, b: _B) -> _T:
        """`fn(fd, a, b)` on `f`'s descriptor pinned for the call (`acquire`, `fn`, `release`), with their
        usual case inlined (module rules). Two arguments, not `*args`: a call of exact arity is the one
        CPython 3.11 specialises (a `*args` form measured about 200 ns more per append)."""
        lock = self.lock
        with lock:
            fd = f._fd  # noqa: SLF001
            if fd >= 0:
                f._pins += 1  # noqa: SLF001
                f._used = True  # noqa: SLF001
        if fd < 0:
            fd = self.acquire(f)  # closed by a shed (reopened) or retired (FileRetired)
        try:
            return fn(fd, a, b)
        finally:
            with lock:
                pins = f._pins = f._pins - 1  # noqa: SLF001
                last_of_retired = not pins and f._retired  # noqa: SLF001
            if last_of_retired:
                self._close_retired(f)

    def _close_retired(self, f: CachedFile) -> None:
        """Close the descriptor of a retired file nothing uses any more (at its retire, or at the last
        release of a file retired while in use)."""
        with self.lock:
            if f._pins == 0 and f._retired and f._fd >= 0:  # noqa: SLF001
                fd, f._fd = f._fd, -1  # noqa: SLF001
                os.close(fd)

    def retire(self, f: CachedFile) -> None:
        """Close `f`'s descriptor for good (now, or at the last `release` if a call is using it)."""
        with self.lock:
            f._retired = True  # noqa: SLF001
            self._open.pop(f, None)
            self._close_retired(f)

    def _admit(self, f: CachedFile) -> None:
        self._open[f] = None
        if len(self._open) > self.capacity:
            self.shed(len(self._open) - self.capacity + max(1, self.capacity // 16), keep=f)

    def shed(self, n: int, keep: CachedFile | None = None) -> int:
        """Close up to `n` descriptors of the least recently used files (second chance), never `keep`'s
        nor one in use (pinned); returns how many were closed."""
        closed = 0
        with self.lock:
            budget = 2 * len(self._open) + 1  # every file is looked at at most twice
            while closed < n and self._open and budget > 0:
                budget -= 1
                f = next(iter(self._open))
                if f is keep or f._used or f._pins:  # noqa: SLF001 - recently used or in use: second chance
                    f._used = False  # noqa: SLF001
                    self._open.move_to_end(f)
                    continue
                del self._open[f]
                fd, f._fd = f._fd, -1  # noqa: SLF001
                if fd >= 0:
                    os.close(fd)
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
