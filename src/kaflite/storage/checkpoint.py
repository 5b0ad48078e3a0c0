"""Checkpoint files in Kafka's text format, written atomically (temp file, fsync, rename, fsync dir).

Per log directory (Kafka's names): `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
`replication-offset-checkpoint` (high watermarks), `cleaner-offset-checkpoint`:

    0                 <- version
    <n>               <- number of entries
    <topic> <partition> <offset>     (n lines)

Per partition directory: `leader-epoch-checkpoint` (see leader_epoch.py), same header then
`<epoch> <start offset>` lines.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "atomic_write",
    "read_offset_checkpoint",
    "write_offset_checkpoint",
    "RECOVERY_POINT_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "HIGH_WATERMARK_CHECKPOINT",
    "CLEANER_CHECKPOINT",
    "CLEAN_SHUTDOWN_FILE",
]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def replace_unsynced(path: Path, data: bytes) -> None:
    """Write `data` to `path` by a rename, without fsync: a crash may leave the file empty or torn, so only
    for files a reader checks and can do without (the producer snapshots written on roll); whoever calls
    this fsyncs the file and its directory later, off the hot path."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def fsync_file(path: Path) -> bool:
    """fsync an existing file; False when it is gone (deleted meanwhile)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


_SMALL_READ = 1 << 16


def read_small_file(path: str | Path) -> bytes:
    """A whole (small) file's bytes through a bare descriptor: a start reads two such files per partition (its
    leader-epoch checkpoint and producer snapshot), and `Path.read_text`'s buffered text object cost more
    than the reads themselves (a third of a 10,000-partition load's CPU went to opening files)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        first = os.read(fd, _SMALL_READ)
        if len(first) < _SMALL_READ:  # a regular file reads short only at its end: no second read to find it
            return first
        chunks = [first]
        while chunk := os.read(fd, _SMALL_READ):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def write_offset_checkpoint(path: Path, offsets: Mapping[tuple[str, int], int]) -> None:
    lines = ["0", str(len(offsets))]
    lines += [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
    atomic_write(path, ("\n".join(lines) + "\n").encode())


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """Read a checkpoint; a missing or malformed file reads as empty (everything is then recovered
    from the segments, which is always safe)."""
    try:
        lines = path.read_text().splitlines()
    except (FileNotFoundError, UnicodeDecodeError):
        return {}
    try:
        if not lines or lines[0].strip() != "0":
            return {}
        n = int(lines[1])
        out: dict[tuple[str, int], int] = {}
        for line in lines[2 : 2 + n]:
            topic, part, off = line.rsplit(" ", 2)
            out[(topic, int(part))] = int(off)
        return out if len(out) == n else {}
    except (ValueError, IndexError):
        return {}
