"""The console's background sampler: every `interval` seconds it reads the log end offsets of every
partition and each group's committed offsets, into a `LagHistory` (rates, lag charts, time to drain).

It is the console's only background activity; it reads over the wire like every page, bounded by the
cluster view's timeout, and stops within one interval of `stop()`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kaflite.console.cluster import ClusterView, ConsoleError, is_spark_query
from kaflite.console.lag import LagHistory

__all__ = ["Sampler"]

log = logging.getLogger("kaflite.console")

MAX_GROUPS = 1000


class Sampler:
    def __init__(self, view: ClusterView, history: LagHistory, interval: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.view = view
        self.history = history
        self.interval = interval
        self.clock = clock
        self.last_error = ""
        self.samples = 0
        self.group_lag: dict[str, int | None] = {}
        # groups whose committed offsets a kaflite.spark streaming query wrote (commitOffsetsToGroup)
        self.spark_queries: set[str] = set()
        # the last round's offsets and sizes, for pages that list every partition (the topics list)
        self.earliest: dict[tuple[str, int], int] = {}
        self.latest: dict[tuple[str, int], int] = {}
        self.sizes: dict[tuple[int, str, int], int] | None = None
        self.sampled_at: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def sample_once(self) -> None:
        """One round: end offsets of every partition, then the committed offsets of every group."""
        with self._lock:
            md = self.view.metadata()
            tps = [(name, p) for name, t in md.topics.items() for p in t.partitions]
            ends = self.view.latest_offsets(tps)
            now = self.clock()
            self.history.record_ends(now, ends)
            earliest = self.view.offsets(tps, "earliest")
            _cid, brokers = self.view.cluster()
            self.sizes = self.view.log_dir_sizes(brokers)
            self.earliest, self.latest, self.sampled_at = earliest, ends, now
            # no share groups: they have no committed offsets (their progress is their share partitions')
            groups = self.view.list_groups(include_share=False)[:MAX_GROUPS]
            seen = set()
            for gid, _gtype, _state, _simple in groups:
                seen.add(gid)
                try:
                    entries = self.view.committed_with_metadata(gid)
                except ConsoleError:
                    continue
                committed = {tp: offset for tp, (offset, _meta) in entries.items()}
                if is_spark_query(entries):
                    self.spark_queries.add(gid)
                else:
                    self.spark_queries.discard(gid)
                self.history.record_group(now, gid, committed, ends)
                self.group_lag[gid] = self.history.group_total_lag(gid)
            for gid in list(self.group_lag):
                if gid not in seen:
                    self.group_lag.pop(gid, None)
                    self.spark_queries.discard(gid)
                    self.history.forget_group(gid)
            self.samples += 1

    def cached_offsets(self, max_age: float) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]] | None:
        """(earliest, latest) of the last round when it is at most `max_age` seconds old."""
        if self.sampled_at is None or self.clock() - self.sampled_at > max_age:
            return None
        return self.earliest, self.latest

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample_once()
                self.last_error = ""
            except ConsoleError as err:
                self.last_error = str(err)
            except Exception as err:  # the sampler must outlive any one bad answer
                self.last_error = f"{type(err).__name__}: {err}"
                log.debug("sample failed", exc_info=True)
            self._stop.wait(self.interval)

    def start(self) -> None:
        if self._thread is None and self.interval > 0:
            self._thread = threading.Thread(target=self._run, name="kaflite-console-sampler", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.view.timeout + self.interval)
            self._thread = None
