"""A full disk under the index writes (storage/index.py rules): a write of pending entries that is short or
fails with ENOSPC halfway leaves the file holding whole entries only, the ones it counts as written; the
retry writes each later entry once; a load never trusts an entry shifted by a torn one; a flush whose
index write failed forgets nothing it had already marked clean (storage/log.py's flush rules); and a stop
that could not write the active segment's indexes leaves no clean-shutdown marker vouching for them.

The disk is `FullDisk`: writes to index files go through it (os.write and os.pwrite, whichever the code
uses) and get what room is left, as the kernel answers on a full disk: a short count, then ENOSPC."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kaflite.storage import Log, LogConfig
from kaflite.storage import log as log_module
from kaflite.storage.index import OffsetIndex, TimeIndex
from kaflite.storage.manager import LogManager
from storage.storage_util import batch, every_batch_range

_REAL_WRITE = os.write
_REAL_PWRITE = os.pwrite


class FullDisk:
    """Room left for index files (bytes): None means plenty. `spared` index files (by name) and writes to
    other files pass untouched."""

    def __init__(self) -> None:
        self.room: int | None = None
        self.spared: set[str] = set()

    def _take(self, fd: int, n: int) -> int:
        name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
        if self.room is None or not name.endswith((".index", ".timeindex")) or name in self.spared:
            return n
        got = min(n, self.room)
        if got == 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= got
        return got

    def write(self, fd: int, data: bytes) -> int:
        return _REAL_WRITE(fd, memoryview(data)[: self._take(fd, len(data))])

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        return _REAL_PWRITE(fd, memoryview(data)[: self._take(fd, len(data))], offset)


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[FullDisk]:
    if not os.path.exists("/proc/self/fd"):
        pytest.skip("needs /proc/self/fd to tell index files from the others")
    d = FullDisk()
    monkeypatch.setattr(os, "write", d.write)
    monkeypatch.setattr(os, "pwrite", d.pwrite)
    yield d


def _time_index(path: Path, n: int, first: int = 0) -> TimeIndex:
    idx = TimeIndex(path, 100, 1 << 16)
    for i in range(first, first + n):
        idx.maybe_append(1_000 + i, 100 + i)
    return idx


def _entries_on_disk(path: Path, cls: type[TimeIndex] | type[OffsetIndex]) -> list[tuple[int, int]]:
    fresh = cls(path, 100, 1 << 16)
    if isinstance(fresh, OffsetIndex):
        fresh.load(1 << 30)
    else:
        fresh.load()
    return list(zip(fresh._keys, fresh._values, strict=True))  # noqa: SLF001


def test_a_short_write_keeps_the_whole_entries_and_the_retry_writes_each_later_entry_once(
    tmp_path: Path, disk: FullDisk
) -> None:
    path = tmp_path / "00000000000000000100.timeindex"
    idx = _time_index(path, 3)  # 36 bytes pending
    disk.room = 20  # one entry and 8 bytes of the next fit
    with pytest.raises(OSError) as e:
        idx.write_pending()
    assert e.value.errno == errno.ENOSPC
    assert path.stat().st_size == 12  # the torn entry was cut off: one whole entry, the one counted
    assert _entries_on_disk(path, TimeIndex) == [(1_000, 0)]
    disk.room = None  # space again (a topic deleted)
    idx.maybe_append(1_003, 103)
    idx.write_pending()
    assert _entries_on_disk(path, TimeIndex) == [(1_000 + i, i) for i in range(4)]
    idx.write_pending()  # nothing pending: nothing written again
    assert path.stat().st_size == 4 * 12


def test_torn_writes_never_leave_a_shifted_entry_a_load_would_trust(tmp_path: Path, disk: FullDisk) -> None:
    """Two writes torn at half an entry each add up to a whole number of entries: had the file kept them, a
    load would pass its size check and read a relative offset as a file position."""
    path = tmp_path / "00000000000000000100.index"
    idx = OffsetIndex(path, 100, 1 << 16)
    idx.append(110, 1_000)
    idx.append(120, 2_000)
    for extra in ((130, 3_000), (140, 4_000)):
        disk.room = 4
        with pytest.raises(OSError):
            idx.write_pending()
        idx.append(*extra)
    disk.room = None
    idx.write_pending()
    assert path.stat().st_size == 4 * 8
    assert _entries_on_disk(path, OffsetIndex) == [(10, 1_000), (20, 2_000), (30, 3_000), (40, 4_000)]
    fresh = OffsetIndex(path, 100, 1 << 16)
    fresh.load(5_000)
    assert fresh.lookup(125) == 2_000 and fresh.lookup(145) == 4_000


def test_a_failed_cut_is_made_by_the_next_write(
    tmp_path: Path, disk: FullDisk, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "00000000000000000100.timeindex"
    idx = _time_index(path, 2)
    disk.room = 18
    real_ftruncate = os.ftruncate
    cuts: list[int] = []

    def failing_ftruncate(fd: int, length: int) -> None:
        cuts.append(length)
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "ftruncate", failing_ftruncate)
    with pytest.raises(OSError):
        idx.write_pending()
    assert cuts == [12] and path.stat().st_size == 18  # torn, and the cut failed
    monkeypatch.setattr(os, "ftruncate", real_ftruncate)
    disk.room = None
    idx.write_pending()  # cuts first, then writes the second entry once
    assert _entries_on_disk(path, TimeIndex) == [(1_000, 0), (1_001, 1)]


def test_a_truncation_after_a_torn_write_leaves_whole_entries(tmp_path: Path, disk: FullDisk) -> None:
    path = tmp_path / "00000000000000000100.timeindex"
    idx = _time_index(path, 3)
    idx.write_pending()
    for i in range(3, 6):
        idx.maybe_append(1_000 + i, 100 + i)
    disk.room = 14  # the 4th entry and 2 bytes of the 5th
    with pytest.raises(OSError):
        idx.write_pending()
    idx.truncate_to_offset(102)  # keeps 2 entries: the file is cut to them
    assert _entries_on_disk(path, TimeIndex) == [(1_000, 0), (1_001, 1)]
    disk.room = None
    idx.maybe_append(1_010, 110)
    idx.write_pending()
    assert _entries_on_disk(path, TimeIndex) == [(1_000, 0), (1_001, 1), (1_010, 10)]


CFG = LogConfig(segment_bytes=500, index_interval_bytes=50, retention_ms=-1)


def test_a_recovery_on_a_full_disk_opens_the_log_and_a_failed_flush_forgets_no_segment_it_marked_clean(
    tmp_path: Path, disk: FullDisk, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recovery on a full disk rebuilds the indexes in memory only, and the log opens all the same (its
    recovery point stays). The next flush writes a sealed segment's pending index entries in its plan; when
    one of those writes fails, every segment the flush had already marked clean is marked dirty again, so
    the flush after it fsyncs them before the recovery point moves past them."""
    d = tmp_path / "t-0"
    log = Log(d, CFG)
    for _ in range(40):
        log.append(batch(1, value=b"x" * 40))
    expected = every_batch_range(log)
    assert log.segment_count > 4
    del log  # never closed (kill -9): the next open rescans every segment
    disk.room = 0
    log = Log(d, CFG)
    assert log.recovered and log.recovery_point == 0 and every_batch_range(log) == expected
    segs = log.segments
    synced: list[str] = []
    real = log_module._fdatasync_path  # noqa: SLF001

    def recording(path: Path) -> None:
        synced.append(Path(path).name)
        real(path)

    monkeypatch.setattr(log_module, "_fdatasync_path", recording)
    # the open fsync'd segment 0's data, then failed on its index: segments 1 on are still dirty. Now
    # there is room for the indexes of segments 0 and 1, not 2: the plan marks 1 and 2 before it fails
    disk.spared = {p.name for s in segs[:2] for p in (s.index.path, s.time_index.path)}
    assert [s.dirty for s in segs[:3]] == [False, True, True]
    with pytest.raises(OSError):
        log.flush_up_to(log.log_end_offset)
    assert log.recovery_point == 0 and synced == [] and [s.dirty for s in segs[:3]] == [False, True, True]
    disk.room = None
    log.flush_up_to(log.log_end_offset)
    assert log.recovery_point == log.log_end_offset
    assert synced == [s.log_path.name for s in segs[1:]]  # every segment not fsync'd yet, 1 and 2 too
    log.close()
    log = Log(d, CFG, had_clean_shutdown=True, recovery_point=expected[-1][1] + 1)
    assert every_batch_range(log) == expected
    assert all(s.load_problem == "" for s in log.segments)  # every index loaded as written, none rebuilt
    log.close()


def test_a_stop_that_could_not_write_the_active_segments_indexes_leaves_no_clean_shutdown_marker(
    tmp_path: Path, disk: FullDisk
) -> None:
    """A start after a clean stop loads the active segment's index files as they are (its final time index
    entry gives the segment's max timestamp). When the stop could not write them (a full disk), it must not
    vouch for them: no marker, so the next start rescans that segment and rebuilds its indexes."""
    m = LogManager([tmp_path], CFG)
    m.load()
    log = m.get_or_create("t", 0)
    for i in range(4):  # one segment (of 500 bytes): its index entries are all pending until the stop
        log.append(batch(1, value=b"x" * 40, ts=1_700_000_000_000 + i))
    log.update_high_watermark(log.log_end_offset)
    expected = every_batch_range(log)
    disk.room = 0
    m.close()
    assert any("index of segment 0" in p for p in m.close_problems)
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    disk.room = None
    m = LogManager([tmp_path], CFG)
    m.load()
    log = m.get_or_create("t", 0)
    assert log.recovered and every_batch_range(log) == expected
    assert log.segment_count == 1 and log.active_segment.max_timestamp == 1_700_000_000_003
    m.close()
    assert m.close_problems == [] and (tmp_path / ".kafka_cleanshutdown").exists()
