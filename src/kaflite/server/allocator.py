"""glibc's malloc set for a broker's own process: freed memory kept for reuse instead of given back to the
kernel at each free.

Why: a Fetch answer leaves the broker as chunks of up to `connection.SEND_CHUNK` (256 KiB) read from the
segment files, each a new bytes object, several alive at a time. With glibc's defaults the heap was
trimmed back as soon as they were freed (its trim threshold follows its mmap threshold, at most a few
MiB here): every page of every chunk was faulted in and zeroed again, 16,000-61,000 minor faults and
0.063-0.103 CPU-s in the broker per million 100-byte records fetched, against none and 0.053-0.060 with
the settings below (bench/spark_codec_bench.py --codec none --rows 3000000; docs/spark.md, "The source at
10M rows: no copy, no librdkafka, no page faults"). The thresholds must cover the largest blocks the
broker reuses: with the mmap threshold at 1 MiB, Produce frames just over it were mapped afresh each time
(244 faults per MB produced, the broker's CPU per row produced nearly doubled; bench/sink_append_bench.py).

Rules:
- `tune_allocator()` is called by `run_broker` only (`kaflite serve`, `python -m kaflite.server`): an
  embedded broker leaves its host process's allocator as it is;
- on glibc only (its `gnu_get_libc_version` resolves), and only when the user has not set glibc's own
  knobs (`MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`, or a `malloc.` tunable in `GLIBC_TUNABLES`):
  theirs stand;
- M_MMAP_THRESHOLD = 32 MiB, the most glibc's own adjustment would raise it to (blocks below it come from
  the heap, whose freed memory is reused), and M_TRIM_THRESHOLD = 64 MiB (the heap keeps up to 64 MiB
  free at its top instead of giving it back); setting either ends glibc's adjustment of both, which is
  why both are set.
"""

from __future__ import annotations

import ctypes
import logging
import os

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "tune_allocator"]

log = logging.getLogger("kaflite.server")

MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 64 << 20
_M_TRIM_THRESHOLD = -1  # glibc's malloc.h
_M_MMAP_THRESHOLD = -3
_USER_KNOBS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def tune_allocator() -> bool:
    """Set glibc's mmap and trim thresholds for this process (module rules); True when both were set."""
    if any(k in os.environ for k in _USER_KNOBS) or "malloc." in os.environ.get("GLIBC_TUNABLES", ""):
        log.debug("malloc thresholds left as the environment sets them")
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - glibc only: other C libraries number mallopt's knobs otherwise
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # mallopt answers 1 on success, 0 on error
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
