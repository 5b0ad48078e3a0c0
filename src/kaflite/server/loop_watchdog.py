"""The event loop's stall watchdog: how late the loop runs its timers, measured all the time, and a stack
sample of the loop thread when it stops for longer than `stall_ms`.

Why: every request, fetch answer and timer of the broker runs on one asyncio loop; one call that blocks it
(an fsync, a whole-log scan, a ZooKeeper call) delays every client at once, and nothing said which call.

Rules:
- a timer on the loop fires every `interval_s` and records its lateness (time it ran minus time it was
  due, in ms): one `call_at` and one clock read per tick, nothing else on the loop;
- `LagWindows` keeps the latenesses of the current window and of the previous one (`window_s` each) and
  reports their max and 99th percentile (the metric `kaflite_eventloop_lag_{max,p99}_ms`) over both, so a
  scrape always covers at least the last whole window; the sort happens when read (at scrape), not per tick;
- a watcher thread sleeps until the moment the loop's next tick would be `stall_ms` overdue (its last tick
  + `interval_s` + `stall_ms`; `StallDetector.next_look`) and looks then: if the loop has ticked since, it
  sleeps until the new moment, else it logs, once per stall, a warning with the loop thread's current
  stack (sys._current_frames): the call that blocks, while it blocks. A healthy loop so wakes the thread
  every 100-150 ms, not every `interval_s / 2` (its wake-ups, each taking the GIL from the loop, were about
  half of an idle broker's CPU);
- the tick that ends a stall of more than `stall_ms` counts it (`kaflite_eventloop_stalls_total`) and logs
  how long it lasted;
- `StallDetector` (the watcher's decisions) and `LagWindows` are pure, with the clock passed in.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable

__all__ = ["LagWindows", "StallDetector", "LoopWatchdog", "STALL_MS"]

log = logging.getLogger("kaflite.server")

STALL_MS = 100.0  # a loop blocked for longer than this is a stall: logged with a stack sample
INTERVAL_S = 0.05


class LagWindows:
    """Latenesses (ms) of the current and the previous window."""

    def __init__(self, window_s: float, now: float) -> None:
        self.window_s = window_s
        self._start = now
        self._current: list[float] = []
        self._previous: list[float] = []

    def add(self, lateness_ms: float, now: float) -> None:
        if now - self._start >= self.window_s:
            # a window passed (two or more: the previous one saw nothing)
            self._previous = self._current if now - self._start < 2 * self.window_s else []
            self._current = []
            self._start = now
        self._current.append(lateness_ms)

    def stats(self) -> tuple[float, float]:
        """(max, p99) of the latenesses of the previous and current windows; (0, 0) when there are none."""
        samples = sorted(self._previous + self._current)
        if not samples:
            return 0.0, 0.0
        # nearest rank: the smallest sample with at least 99% of the samples at or below it
        rank = max(0, -(-99 * len(samples) // 100) - 1)
        return samples[-1], samples[rank]


class StallDetector:
    """The watcher thread's decision: sample the loop's stack once per stall."""

    def __init__(self, interval_s: float, stall_ms: float, now: float) -> None:
        self.interval_s = interval_s
        self.stall_s = stall_ms / 1000.0
        self.last_tick = now
        self.reported = False

    def ticked(self, now: float) -> None:
        self.last_tick = now
        self.reported = False

    def next_look(self, now: float) -> float:
        """Seconds until a stall could be seen: when the next tick is stall_ms overdue (at least 1 ms). Once
        a stall was sampled, the interval: nothing more is due before the loop ticks again."""
        if self.reported:
            return self.interval_s
        return max(0.001, self.last_tick + self.interval_s + self.stall_s - now)

    def should_sample(self, now: float) -> bool:
        """True once when the next tick is more than stall_ms overdue."""
        if self.reported or now - (self.last_tick + self.interval_s) <= self.stall_s:
            return False
        self.reported = True
        return True


class LoopWatchdog:
    """Measures the loop's lateness and samples its stack on a stall. `start` on the loop, `stop` anywhere."""

    def __init__(self, interval_s: float = INTERVAL_S, stall_ms: float = STALL_MS, window_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self.stall_ms = stall_ms
        self.clock = clock
        now = clock()
        self.windows = LagWindows(window_s, now)
        self.detector = StallDetector(interval_s, stall_ms, now)
        self.stalls = 0
        self.last_stack = ""  # the last stack sampled (for tests and the console)
        self.looks = 0  # times the watcher thread woke up to look (tests)
        self._due = now
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._timer: asyncio.TimerHandle | None = None
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None

    def start(self) -> None:
        """Called on the loop's thread, from a coroutine or callback of the loop."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        now = self.clock()
        self.detector.ticked(now)
        self._schedule(now)
        self._watcher = threading.Thread(target=self._watch, name="kaflite-loop-watchdog", daemon=True)
        self._watcher.start()

    def stop(self) -> None:
        self._stop.set()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(timeout=2)
        self._watcher = None

    def stats(self) -> tuple[float, float]:
        return self.windows.stats()

    # -- on the loop -----------------------------------------------------------------------------------
    def _schedule(self, now: float) -> None:
        assert self._loop is not None
        self._due = now + self.interval_s
        self._timer = self._loop.call_later(self.interval_s, self._tick)

    def _tick(self) -> None:
        now = self.clock()
        lateness_ms = max(0.0, (now - self._due) * 1000.0)
        self.windows.add(lateness_ms, now)
        self.detector.ticked(now)
        if lateness_ms > self.stall_ms:
            self.stalls += 1
            log.warning("event loop stalled: timers ran %.0f ms late (a call blocked the loop; the stack "
                        "sampled while it blocked was logged above)", lateness_ms)
        if not self._stop.is_set():
            self._schedule(now)

    # -- on the watcher thread -------------------------------------------------------------------------
    def _watch(self) -> None:
        detector = self.detector
        delay = detector.next_look(self.clock())
        while not self._stop.wait(delay):
            self.looks += 1
            loop = self._loop
            if loop is None or loop.is_closed():
                return
            # a loop that is not running (stopping, or between run_until_complete calls) runs no timers:
            # no stall to see, and a look every interval (not at a moment long past, over and over)
            if not loop.is_running():
                delay = self.interval_s
                continue
            now = self.clock()
            if detector.should_sample(now):
                self._sample()
            delay = detector.next_look(now)

    def _sample(self) -> None:
        frame = sys._current_frames().get(self._loop_thread)  # noqa: SLF001 - the documented way to sample
        stack = "".join(traceback.format_stack(frame)) if frame is not None else "(loop thread not found)\n"
        self.last_stack = stack
        log.warning("event loop blocked for more than %.0f ms; the loop thread is at:\n%s", self.stall_ms,
                    stack.rstrip())
