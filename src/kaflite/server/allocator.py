"""glibc's malloc set for a broker's own process: freed memory kept for reuse instead of given back to the
kernel at each free.

Why: a Fetch answer leaves the broker as chunks of up to `connection.SEND_CHUNK` (256 KiB) read from the
segment files, each a new bytes object, a few alive at a time. With glibc's defaults each chunk got
memory of its own from the kernel (a chunk over the 128 KiB mmap threshold), or the heap was trimmed
back as soon as a few chunks were freed (the 128 KiB trim threshold): every page of every chunk was
faulted in and zeroed again, and the broker spent 0.079-0.088 CPU-s per million 100-byte records fetched
where it spends 0.051-0.062 with the settings below (docs/spark.md, "The source at 10M rows: the
broker's fetch path"). Produce frames of up to 1 MiB are served from the same reused memory.

Rules:
- `tune_allocator()` is called by `run_broker` only (`kaflite serve`, `python -m kaflite.server`): an
  embedded broker leaves its host process's allocator as it is;
- on glibc only (its `gnu_get_libc_version` resolves), and only when the user has not set glibc's own
  knobs (`MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`, or a `malloc.` tunable in `GLIBC_TUNABLES`):
  theirs stand;
- M_MMAP_THRESHOLD = 1 MiB (blocks below it come from the heap, whose freed memory is reused) and
  M_TRIM_THRESHOLD = 16 MiB (the heap keeps up to 16 MiB free at its top instead of trimming it);
  setting them also ends glibc's own adjustment of the two (which raised the mmap threshold but then
  trimmed the heap under the chunks anyway).
"""

from __future__ import annotations

import ctypes
import logging
import os

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "tune_allocator"]

log = logging.getLogger("kaflite.server")

MMAP_THRESHOLD = 1 << 20
TRIM_THRESHOLD = 16 << 20
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
