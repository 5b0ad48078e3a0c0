"""LeaderEpochFileCache: the `leader-epoch-checkpoint` of one partition, (epoch, start offset) pairs.

Rules (Kafka's LeaderEpochFileCache): epochs and start offsets strictly increase; an epoch is added
when a batch with a larger partition leader epoch is appended; truncating the log's end drops epochs
starting at or after the new end; advancing the log start offset drops epochs wholly below it and moves
the first one up. A new leader records its epoch at its log end offset at the election
(`assign_unwritten`, Kafka's `makeLeader`): in memory only, written with the epoch's first batch (or any
earlier write of the file); lost by a crash before that, which loses nothing, since no batch has that epoch
and a restarted broker leads again only under a newer epoch.

`end_offset_for(epoch)` answers OffsetForLeaderEpoch and a Fetch's `last_fetched_epoch` check
(Kafka's `LeaderEpochFileCache.endOffsetFor`): the latest epoch asked: (it, the log end offset); an epoch
between two entries: (the largest epoch below or equal, the start of the next); an epoch older than every
entry: (that epoch, the start of the first entry), the data before it is gone and the asker replicates
from there; an epoch newer than every entry, -1 or no entry at all: (-1, -1) (UNDEFINED_EPOCH_OFFSET).

Durability: an epoch's first batch (`assign`, called by the append under the log's lock, on the event loop
for a leader) changes the entries in memory only and marks the file `pending_write`, like a truncation
(below); the file is written and fsync'd by `write_pending` outside the log's lock, in a worker thread:
by the log's next flush before its recovery point moves (so a flush-before-acknowledge append of the epoch
is answered after the file holding its epoch is durable), or by the housekeeping pass within a second.
Kafka's assign writes and fsyncs the file at once, under its log lock, in the appending request thread;
here that thread is the event loop, which serves every client. A crash before the write loses nothing:
every batch of an entry not written lies past the recovery point, where recovery reads each batch's
partition leader epoch and assigns the epochs again (Kafka's LogLoader does the same).
While the file on disk durably holds no entry (a new partition), `write_pending` replaces it without fsync
and sets `unsynced`, and the log's next flush fsyncs it (`sync`) before its recovery point moves, by the
same argument (10,000 partitions of a new topic: 20,000 fsyncs fewer).

A truncation or a moved log start offset (`persist=False`, Kafka's truncateFromEndAsyncFlush /
truncateFromStartAsyncFlush) changes the entries in memory under the log's lock and marks the file
`pending_write`; `write_pending(lock)` writes it after the log released its lock: the new file is written
and fsync'd outside the lock, and renamed into place under it only if no other change happened meanwhile
(`version`; else written again), so an older state never replaces a newer one. A crash in between leaves
the previous file, whose entries past the log end or below its start the next load drops.
"""

from __future__ import annotations

import os
import threading
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from kaflite.storage.checkpoint import atomic_write, fsync_dir, fsync_file, read_small_file, replace_unsynced

__all__ = ["LeaderEpochFileCache", "LEADER_EPOCH_CHECKPOINT"]

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


class LeaderEpochFileCache:
    def __init__(self, path: Path | str, *, read: bool = True) -> None:
        """`read=False`: the caller knows the file does not exist (a log directory it just created). `path`
        may be a string: it becomes a Path only when a write or a caller needs one (a start opens 10,000 logs
        that only read the file)."""
        self._path = path
        self.entries: list[tuple[int, int]] = self._read() if read else []
        self._durable_empty = not self.entries  # the file on disk holds no entry, durably
        self._unwritten = False  # the last entry is in memory only (a new leader's epoch, no batch yet)
        self.unsynced = False  # written without fsync since (only while _durable_empty)
        self.version = 0  # every change of the entries bumps it (write_pending's check)
        self.pending_write = False  # changed in memory by a truncation, the file not rewritten yet
        self._file_lock = threading.Lock()  # one write_pending at a time

    @property
    def path(self) -> Path:
        p = self._path
        if not isinstance(p, Path):
            p = self._path = Path(p)
        return p

    def _read(self) -> list[tuple[int, int]]:
        try:
            lines = read_small_file(self._path).decode().splitlines()
            if not lines or lines[0].strip() != "0":
                return []
            n = int(lines[1])
            out = [(int(a), int(b)) for a, b in (ln.split() for ln in lines[2 : 2 + n])]
            for i in range(1, len(out)):
                if out[i][0] <= out[i - 1][0] or out[i][1] < out[i - 1][1]:
                    return []
            return out
        except (FileNotFoundError, ValueError, IndexError, UnicodeDecodeError):
            return []

    def _encode(self) -> bytes:
        lines = ["0", str(len(self.entries))] + [f"{e} {o}" for e, o in self.entries]
        return ("\n".join(lines) + "\n").encode()

    def _changed(self, persist: bool) -> None:
        self.version += 1
        if persist:
            self._write()
        else:
            self.pending_write = True

    def write_pending(self, lock: AbstractContextManager[Any]) -> bool:
        """Write the entries a `persist=False` change left in memory (see the module doc); `lock` is the log's
        lock, NOT held by the caller. True when it wrote the file."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        with self._file_lock:
            while True:
                with lock:
                    if not self.pending_write:  # nothing to do, or written meanwhile by a newer change
                        tmp.unlink(missing_ok=True)
                        return False
                    if self._durable_empty:  # no fsync in that mode: written under the lock as always
                        self._write()
                        return True
                    data, version = self._encode(), self.version
                with open(tmp, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                with lock:
                    if self.version != version:
                        continue  # changed meanwhile: write the newer entries
                    os.replace(tmp, self.path)
                    self._unwritten = False
                    self.pending_write = False
                fsync_dir(self.path.parent)
                return True

    def _write(self) -> None:
        self._unwritten = False
        self.pending_write = False
        self.version += 1
        data = self._encode()
        if self._durable_empty:
            replace_unsynced(self.path, data)  # nothing durable to lose: see the module's rules
            self.unsynced = True
        else:
            atomic_write(self.path, data)

    def sync(self) -> bool:
        """fsync the file written without fsync, if any (the caller fsyncs the directory, which holds its
        new name); True when it did. Called by every flush of the log before its recovery point moves."""
        if not self.unsynced:
            return False
        fsync_file(self.path)
        self.unsynced = False
        self._durable_empty = not self.entries
        return True

    def take_unsynced(self) -> Path | None:
        """For a flush that fsyncs outside the log's lock: the path to fsync (marked synced now; call
        `synced` after the fsync, or `mark_unsynced` when it failed), or None."""
        if not self.unsynced:
            return None
        self.unsynced = False
        return self.path

    def synced(self) -> None:
        """The fsync of `take_unsynced` is done: unless the file was replaced since, it durably holds
        the entries."""
        if not self.unsynced:
            self._durable_empty = not self.entries

    def mark_unsynced(self) -> None:
        self.unsynced = True

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else -1

    @property
    def latest_written_epoch(self) -> int:
        """The latest epoch a batch of the log carries or the file holds: the log's next batch of a larger
        epoch assigns it (and so writes an unwritten election entry)."""
        if self._unwritten:
            return self.entries[-2][0] if len(self.entries) > 1 else -1
        return self.latest_epoch

    def assign_unwritten(self, epoch: int, start_offset: int) -> bool:
        """A new leader's epoch at its log end offset, in memory (see the module doc)."""
        if epoch < 0 or (self.entries and (epoch <= self.entries[-1][0] or start_offset < self.entries[-1][1])):
            return False
        self.entries.append((epoch, start_offset))
        self._unwritten = True
        self.version += 1
        return True

    def assign(self, epoch: int, start_offset: int) -> bool:
        """An epoch's first batch (appended or recovered): in memory, the file written later by
        `write_pending` (see the module doc: never on the appending thread)."""
        if self._unwritten and self.entries[-1][0] == epoch and start_offset >= self.entries[-1][1]:
            self._unwritten = False  # the election's entry now describes a batch: it must reach the file
            self._changed(False)
            return True
        if epoch < 0 or (self.entries and (epoch <= self.entries[-1][0] or start_offset < self.entries[-1][1])):
            return False
        self.entries.append((epoch, start_offset))
        self._changed(False)
        return True

    def truncate_from_end(self, end_offset: int, *, persist: bool = True) -> None:
        kept = [e for e in self.entries if e[1] < end_offset]
        if len(kept) != len(self.entries):
            self.entries = kept
            self._changed(persist)

    def truncate_from_start(self, start_offset: int, *, persist: bool = True) -> None:
        if not self.entries:
            return
        # keep the last epoch starting at or below start_offset, moved up to start_offset
        i = 0
        while i + 1 < len(self.entries) and self.entries[i + 1][1] <= start_offset:
            i += 1
        kept = self.entries[i:]
        if kept and kept[0][1] < start_offset:
            kept[0] = (kept[0][0], start_offset)
        if kept != self.entries:
            self.entries = kept
            self._changed(persist)

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch and a fetch's last fetched epoch (see the module doc)."""
        entries = self.entries
        if epoch < 0 or not entries or epoch > entries[-1][0]:
            return -1, -1
        if epoch == entries[-1][0]:
            return epoch, log_end_offset
        if epoch < entries[0][0]:
            return epoch, entries[0][1]
        for i, (e, start) in enumerate(entries):
            if e > epoch:
                return entries[i - 1][0], start
        return -1, -1  # not reached: an entry above `epoch` exists

    def flush(self) -> None:
        """Write the entries durably now (the load, after recovery assigned epochs from the batches)."""
        self._write()
        if self.sync():
            fsync_dir(self.path.parent)

    def clear(self, *, persist: bool = True) -> None:
        self.entries = []
        self._changed(persist)
