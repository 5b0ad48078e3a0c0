"""The FileCache under concurrency: a shed from one thread never closes a descriptor another thread is
reading or appending through (storage/file_cache.py's rules), so no call reads or writes another file's
bytes, or fails with EBADF, when the number is reused by the next open."""

from __future__ import annotations

import errno
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kaflite.storage.file_cache import file_cache
from kaflite.storage.file_slice import FileSlice
from kaflite.storage.segment import LogSegment

CHUNK = 512


@pytest.fixture
def tiny_cache() -> Iterator[None]:
    """A cache of 4 descriptors, and thread switches as often as the interpreter allows, so the window
    between taking a descriptor and using it is crossed by the other threads thousands of times."""
    old_capacity, old_switch = file_cache.capacity, sys.getswitchinterval()
    file_cache.capacity = 4
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old_switch)
        file_cache.capacity = old_capacity


def _segment(d: Path, i: int) -> LogSegment:
    return LogSegment(d, i * 1000, index_interval_bytes=1 << 20, max_index_size=1 << 16, created_ms=0)


def _fill(i: int) -> bytes:
    return bytes([i + 1]) * CHUNK  # every byte of segment i's file is i + 1: a wrong file's bytes show


def test_a_shed_never_closes_a_descriptor_in_use(tmp_path: Path, tiny_cache: None) -> None:
    segs = [_segment(tmp_path, i) for i in range(24)]
    for i, seg in enumerate(segs):
        seg.append([_fill(i)], [(CHUNK, seg.base_offset, 0, seg.base_offset)])
    writers, readers = range(0, 12), range(12, 24)
    errors: list[str] = []
    stop = threading.Event()

    def guard(fn: object) -> object:
        def run() -> None:
            try:
                fn()  # type: ignore[operator]
            except Exception as e:  # noqa: BLE001 - reported by the test
                errors.append(f"{type(e).__name__}: {e}")
                stop.set()
        return run

    def write() -> None:  # appends to segments 0-11 and reads them back
        n = 0
        while not stop.is_set() and n < 400:
            for i in writers:
                seg = segs[i]
                seg.append([_fill(i)], [(CHUNK, seg.base_offset, 0, seg.base_offset)])
                data = seg.read_all()
                if data.count(i + 1) != len(data):
                    errors.append(f"segment {i} read bytes of another file")
                    stop.set()
            n += 1

    def read() -> None:  # reads segments 12-23, whole and through FileSlices
        while not stop.is_set():
            for i in readers:
                seg = segs[i]
                data = seg.read_all() + FileSlice(seg, 0, CHUNK).tobytes()
                if data.count(i + 1) != len(data):
                    errors.append(f"segment {i} read bytes of another file")
                    stop.set()

    def shed() -> None:
        while not stop.is_set():
            file_cache.shed(len(file_cache))
            time.sleep(0)

    threads = [threading.Thread(target=guard(f)) for f in (write, read, shed)]  # type: ignore[arg-type]
    for t in threads:
        t.start()
    threads[0].join(timeout=120)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    assert not errors, errors[:5]
    # and on disk: every file holds its own bytes only, appended whole
    for i, seg in enumerate(segs):
        with open(seg.log_path, "rb") as f:
            data = f.read()
        expected = CHUNK * (401 if i in writers else 1)
        assert len(data) == expected and data.count(i + 1) == len(data), (i, len(data))
    for seg in segs:
        seg.close()


def test_retire_while_pinned_defers_the_close(tmp_path: Path) -> None:
    seg = _segment(tmp_path, 0)
    fd = file_cache.acquire(seg)  # a read in flight
    seg.retire_fd()
    assert seg.retired and seg not in file_cache._open  # noqa: SLF001
    os.fstat(fd)  # still open: the read in flight completes on its own file
    file_cache.release(seg)
    with pytest.raises(OSError):
        os.fstat(fd)
    assert FileSlice(seg, 0, 10).tobytes() == b""
    seg.index.close()
    seg.time_index.close()


def test_shed_skips_a_pinned_descriptor(tmp_path: Path) -> None:
    a, b = _segment(tmp_path, 0), _segment(tmp_path, 1)
    a._used = b._used = False  # noqa: SLF001
    fd = file_cache.acquire(a)
    a._used = False  # noqa: SLF001 - pinned only: a shed would otherwise take it first
    before = file_cache.evictions
    file_cache.shed(len(file_cache) * 2)
    os.fstat(fd)  # a's descriptor survived the shed
    assert file_cache.evictions > before and b._fd == -1  # noqa: SLF001 - b was closed
    file_cache.release(a)
    a.close()
    b.close()


def test_call_pins_for_the_call_only_and_reopens_a_shed_descriptor(tmp_path: Path) -> None:
    seg = _segment(tmp_path, 0)
    seg.append([_fill(0)], [(CHUNK, 0, 0, 0)])
    file_cache.shed(len(file_cache) * 2)  # closed by the cache: the call reopens it
    assert seg._fd == -1  # noqa: SLF001
    seen: list[tuple[int, int]] = []

    def during(fd: int, n: int, pos: int) -> bytes:
        seen.append((seg._pins, fd))  # noqa: SLF001
        seg._used = False  # noqa: SLF001 - pinned only: a shed would otherwise take it first
        file_cache.shed(len(file_cache) * 2)  # another thread's shed: skips the pinned descriptor
        return os.pread(fd, n, pos)

    assert file_cache.call(seg, during, 10, 0) == _fill(0)[:10]
    assert seen and seen[0][0] == 1 and seen[0][1] >= 0
    assert seg._pins == 0 and seg._fd == seen[0][1]  # noqa: SLF001 - unpinned, still open

    def failing(fd: int, a: int, b: int) -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        file_cache.call(seg, failing, 0, 0)
    assert seg._pins == 0  # noqa: SLF001 - a failed call unpins too
    seg.close()


def test_call_on_a_file_retired_meanwhile_closes_it_at_its_end(tmp_path: Path) -> None:
    from kaflite.storage.file_cache import FileRetired

    seg = _segment(tmp_path, 0)
    fds: list[int] = []

    def retire_during(fd: int, a: int, b: int) -> int:
        fds.append(fd)
        seg.retire_fd()  # a close or delete from another thread while the call is in flight
        return os.fstat(fd).st_size  # the descriptor stays open for this call

    assert file_cache.call(seg, retire_during, 0, 0) == 0
    with pytest.raises(OSError):  # closed by the call's end, the last user
        os.fstat(fds[0])
    assert seg._fd == -1 and seg._pins == 0  # noqa: SLF001
    with pytest.raises(FileRetired) as e:  # nothing reopens a retired file, nothing is left pinned
        file_cache.call(seg, retire_during, 0, 0)
    assert e.value.errno == errno.EBADF and seg._pins == 0 and len(fds) == 1  # noqa: SLF001
    seg.index.close()
    seg.time_index.close()
