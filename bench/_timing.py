"""Timing helpers the benches share: the CPU a process has spent (from the kernel's accounting), the wall
and CPU time of a block, the best-of-rounds CPU cost of a call, several candidates alternating, and the
in-process broker the handler-level benches time their calls against.

Rules:
- CPU time, not wall time, wherever the work is this process's or a known pid's: the machine is shared,
  and a busy neighbour stretches wall time but not the CPU a piece of work needs;
- candidates are timed in turn within each round (never all rounds of one, then all of the other), so a
  change of machine load during the run falls on both alike; the best round is kept, the one least
  disturbed.
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kaflite.server.broker import Broker

CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> tuple[float, float]:
    """(utime, stime) of process `pid`, all its threads, in seconds (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        # the command name may hold spaces and parentheses: the fields start after its last ")"
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of process `pid`, all its threads, in seconds."""
    user, system = proc_cpu(pid)
    return user + system


@dataclass
class Took:
    """What a `clock()` block took: wall seconds and this process's CPU seconds (set when it ends)."""

    wall: float = 0.0
    cpu: float = 0.0


@contextmanager
def clock() -> Iterator[Took]:
    """Wall and CPU time of the block (both: the machine is shared, CPU is what the work needs), after a
    gc.collect(), so that the set-up's garbage is not collected on the clock."""
    gc.collect()
    took = Took()
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        yield took
    finally:
        took.wall, took.cpu = time.perf_counter() - t0, time.process_time() - c0


def best_cpu_us(
    cases: Sequence[tuple[str, Callable[[], object]]], calls: int, repeat: int
) -> dict[str, float]:
    """Name -> the lowest CPU microseconds (time.process_time) per call of that case over `repeat` rounds
    of `calls` calls each, the cases alternating within each round."""
    if calls < 1 or repeat < 1:
        raise ValueError("calls and repeat must be at least 1")
    best: dict[str, float] = {}
    for _ in range(repeat):
        for name, fn in cases:
            t = time.process_time()
            for _ in range(calls):
                fn()
            per = (time.process_time() - t) / calls * 1e6
            best[name] = min(best.get(name, per), per)
    return best


@asynccontextmanager
async def in_process_broker(prefix: str, dev: bool = True) -> AsyncIterator[Broker]:
    """A started `Broker` (kaflite.server.broker) in this process, on the running event loop, with its data
    in a new temporary directory named `prefix`..., on a loopback port of the kernel's choosing; `dev`: the
    development profile (load_broker_config). Stopped, and its directory removed, when the block ends."""
    # imported here: the other helpers serve benches that never load the broker
    from kaflite.server.broker import Broker
    from kaflite.server.embedded import load_broker_config

    data = tempfile.mkdtemp(prefix=prefix)
    broker = Broker(load_broker_config({"log.dirs": data, "listeners": "PLAINTEXT://127.0.0.1:0"}, dev))
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()
        shutil.rmtree(data, ignore_errors=True)
